package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/agent"
	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/embedded"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// newChatEnv serves the API over the embedded Scheduler with an agent
// graph ("chat", answering "Hello!" at a cost of 12 tokens) and echo.
func newChatEnv(t *testing.T) *env {
	t.Helper()
	chat, err := agent.New(agent.Config{Name: "chat", Model: agent.ScriptedTurns(agent.Response{
		Message: agent.AssistantText("Hello!"),
		Usage:   agent.Usage{InputTokens: 9, OutputTokens: 3, TotalTokens: 12},
	})})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := runs.NewRegistry(chat, echoGraph(t))
	if err != nil {
		t.Fatal(err)
	}
	store, cps := runs.NewMemoryStore(), pregel.NewMemoryStore()
	sched := embedded.NewScheduler(embedded.SchedulerConfig{Graphs: reg, Runs: store, Checkpoints: cps, Logger: testLogger(t)})
	if err := sched.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := sched.Shutdown(ctx, 100*time.Millisecond); err != nil {
			t.Error(err)
		}
	})
	svc := &runs.Service{Graphs: reg, Runs: store, Checkpoints: cps, Dispatcher: sched, Logger: testLogger(t)}
	return startEnv(t, svc, cps)
}

func TestPlainTextBecomesAUserMessage(t *testing.T) {
	e := newChatEnv(t)
	var run api.Run
	e.do("POST", "/v1/graphs/chat/runs", `{"input": "  hi there  "}`).ok(t, http.StatusAccepted, &run)
	var in agent.State
	if err := json.Unmarshal(run.Input, &in); err != nil {
		t.Fatalf("input %s: %v", run.Input, err)
	}
	if len(in.Messages) != 1 || in.Messages[0].Role != agent.RoleUser || in.Messages[0].Text() != "  hi there  " {
		t.Fatalf("the run's input is %s; want one user message with the text as sent", run.Input)
	}
	d := e.await(run.RunID, pregel.RunCompleted)
	var st agent.State
	if err := json.Unmarshal(d.Values["messages"], &st.Messages); err != nil {
		t.Fatal(err)
	}
	if len(st.Messages) != 2 || st.Messages[1].Text() != "Hello!" {
		t.Fatalf("messages %s", d.Values["messages"])
	}
	want := agent.Usage{InputTokens: 9, OutputTokens: 3, TotalTokens: 12}
	if d.Usage == nil || d.Usage.Total != want || d.Usage.ByNode[agent.ModelNode] != want {
		t.Fatalf("usage in GET /v1/runs/{id} = %+v, want %+v in total and for node model", d.Usage, want)
	}

	// The graph listing says which graphs take text.
	var list api.GraphList
	e.do("GET", "/v1/graphs", nil).ok(t, http.StatusOK, &list)
	for _, g := range list.Graphs {
		want := map[string]string{"chat": "messages", "echo": ""}[g.Name]
		if g.TextChannel != want {
			t.Errorf("graph %s: text_channel %q, want %q", g.Name, g.TextChannel, want)
		}
	}
}

func TestPlainTextToAGraphWithoutMessages(t *testing.T) {
	e := newChatEnv(t)
	e.do("POST", "/v1/graphs/echo/runs", `{"input": "hi"}`).problem(t, http.StatusBadRequest,
		`graph "echo" takes no text input`, "JSON object of channel values")
	// An object still works for both.
	e.do("POST", "/v1/graphs/echo/runs", `{"input": {"text": "hi"}}`).ok(t, http.StatusAccepted, nil)
	e.do("POST", "/v1/graphs/chat/runs", map[string]any{"input": agent.TextInput("hi")}).ok(t, http.StatusAccepted, nil)
	// Neither takes other JSON that is not an object.
	e.do("POST", "/v1/graphs/chat/runs", `{"input": [1]}`).problem(t, http.StatusBadRequest, "JSON object")
}

// TestPlainTextOnAThread: a chat client sends plain text turn after turn
// to one thread; each run continues the conversation.
func TestPlainTextOnAThread(t *testing.T) {
	chat, err := agent.New(agent.Config{Name: "chat", Model: agent.ScriptedTurns(
		agent.Response{Message: agent.AssistantText("Hello!")},
		agent.Response{Message: agent.AssistantText("You are welcome.")},
	)})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := runs.NewRegistry(chat, echoGraph(t))
	if err != nil {
		t.Fatal(err)
	}
	store, cps := runs.NewMemoryStore(), pregel.NewMemoryStore()
	svc := &runs.Service{Graphs: reg, Runs: store, Checkpoints: cps, Threads: store, Logger: testLogger(t)}
	sched := embedded.NewScheduler(embedded.SchedulerConfig{Graphs: reg, Runs: store, Checkpoints: cps, Logger: testLogger(t), OnStop: svc.RunStopped, StartThreadRun: svc.StartThreadRun})
	svc.Dispatcher = sched
	if err := sched.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = sched.Shutdown(ctx, 100*time.Millisecond)
	})
	e := startEnv(t, svc, cps)
	e.do("POST", "/v1/threads", map[string]any{"thread_id": "chat-7"}).ok(t, http.StatusCreated, nil)
	e.do("POST", "/v1/threads", map[string]any{"thread_id": "chat-8"}).ok(t, http.StatusCreated, nil)

	for _, text := range []string{"hi", "thanks"} {
		var run api.Run
		e.do("POST", "/v1/threads/chat-7/runs", map[string]any{"graph": "chat", "input": text}).ok(t, http.StatusAccepted, &run)
		e.await(run.RunID, pregel.RunCompleted)
	}
	var st runs.ThreadState
	e.do("GET", "/v1/threads/chat-7/state", nil).ok(t, http.StatusOK, &st)
	var msgs []agent.Message
	if err := json.Unmarshal(st.Values["messages"], &msgs); err != nil {
		t.Fatalf("thread messages %s: %v", st.Values["messages"], err)
	}
	var got []string
	for _, m := range msgs {
		got = append(got, string(m.Role)+":"+m.Text())
	}
	want := []string{"user:hi", "assistant:Hello!", "user:thanks", "assistant:You are welcome."}
	if len(got) != len(want) {
		t.Fatalf("thread conversation %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("thread conversation %q, want %q", got, want)
		}
	}
	// Text to a thread run of a graph that takes none says so.
	e.do("POST", "/v1/threads/chat-8/runs", map[string]any{"graph": "echo", "input": "hi"}).problem(t, http.StatusBadRequest, `graph "echo" takes no text input`)
}
