package serverless_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/superstep/superstep/pkg/agent"
	"github.com/superstep/superstep/pkg/agent/memorytools"
	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/pregel"
)

// memoryAgent is an agent with memory tools in users/{user_id}: told "I
// like X" it calls remember, asked anything else it calls recall, and
// after a tool's result it answers with the result.
func memoryAgent(t *testing.T) *pregel.Graph {
	t.Helper()
	tools, err := memorytools.New(memorytools.Config{Namespace: "users/{user_id}/memories"})
	if err != nil {
		t.Fatal(err)
	}
	model := &agent.Scripted{Reply: func(_ context.Context, req *agent.Request) (*agent.Response, error) {
		var user string
		var result *agent.ToolResult
		for _, m := range req.Messages {
			for _, b := range m.Content {
				switch {
				case m.Role == agent.RoleUser && b.Text != "":
					user, result = b.Text, nil
				case b.ToolResult != nil:
					result = b.ToolResult
				}
			}
		}
		call := func(name string, input map[string]string) *agent.Response {
			in, _ := json.Marshal(input)
			return &agent.Response{Message: agent.Message{Content: []agent.Block{{ToolCall: &agent.ToolCall{ID: name + "-1", Name: name, Input: in}}}}}
		}
		switch {
		case result != nil:
			return &agent.Response{Message: agent.AssistantText("tool said: " + result.Content)}, nil
		case strings.HasPrefix(user, "I like "):
			return call("remember", map[string]string{"key": "favorite", "memory": "likes " + strings.TrimPrefix(user, "I like ")}), nil
		default:
			return call("recall", map[string]string{"query": user}), nil
		}
	}}
	g, err := agent.New(agent.Config{Name: "memory-assistant", Model: model, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestMemoryAcrossThreads: through the serverless handlers (API, tick and
// node functions on moto), a preference remembered in one thread is in
// the table's long-term store and recalled in another thread of the same
// user.
func TestMemoryAcrossThreads(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{graphs: []*pregel.Graph{memoryAgent(t)}})
	say := func(thread, text string) string {
		t.Helper()
		var r api.Run
		if code := s.do("POST", "/v1/threads/"+thread+"/runs", map[string]any{"graph": "memory-assistant", "input": agent.TextInput(text)}, &r); code != http.StatusAccepted {
			t.Fatalf("run on %s: %d", thread, code)
		}
		s.waitStatus(r.RunID, pregel.RunCompleted)
		var st struct {
			Values struct {
				Messages []agent.Message `json:"messages"`
			} `json:"values"`
		}
		if code := s.do("GET", "/v1/threads/"+thread+"/state", nil, &st); code != http.StatusOK || len(st.Values.Messages) == 0 {
			t.Fatalf("state of %s: %d", thread, code)
		}
		return st.Values.Messages[len(st.Values.Messages)-1].Text()
	}
	for _, th := range []string{"mon", "fri"} {
		if code := s.do("POST", "/v1/threads", map[string]any{"thread_id": th, "metadata": map[string]string{"user_id": "u-42"}}, nil); code != http.StatusCreated {
			t.Fatalf("create thread %s: %d", th, code)
		}
	}
	if got := say("mon", "I like jasmine tea"); !strings.Contains(got, "remembered as") {
		t.Errorf("first thread: %q", got)
	}
	var it struct{ Value json.RawMessage }
	if code := s.do("GET", "/v1/store/items?namespace=users/u-42/memories&key=favorite", nil, &it); code != http.StatusOK || !strings.Contains(string(it.Value), "jasmine") {
		t.Errorf("GET /v1/store/items: %d %s", code, it.Value)
	}
	if got := say("fri", "What do I drink?"); !strings.Contains(got, "likes jasmine tea") {
		t.Errorf("another thread of the user answered %q, want the remembered preference", got)
	}
}
