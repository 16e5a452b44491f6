package mcpserver_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/superstep/superstep/pkg/agent"
	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/embedded"
	"github.com/superstep/superstep/pkg/mcpserver"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

type countState struct {
	N  int `json:"n"`
	To int `json:"to"`
}

// countGraph counts to "to", a step at a time.
func countGraph(t *testing.T) *pregel.Graph {
	b := pregel.NewGraph[countState]("count").Describe("Counts to a number, slowly")
	b.AddFunc("inc", func(ctx context.Context, s countState) (countState, error) {
		time.Sleep(30 * time.Millisecond)
		return countState{N: s.N + 1}, nil
	})
	b.AddEdge(pregel.Start, "inc")
	b.AddConditionalEdges("inc", func(_ context.Context, s countState) ([]string, error) {
		if s.N >= s.To {
			return []string{pregel.End}, nil
		}
		return []string{"inc"}, nil
	}, "inc", pregel.End)
	g, err := b.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// assistant is an agent whose refund tool needs approval.
func assistant(t *testing.T) *pregel.Graph {
	refund := agent.MustTool("refund", "Refunds an order", func(_ context.Context, in struct {
		OrderID string `json:"order_id"`
	}) (string, error) {
		return "refunded " + in.OrderID, nil
	})
	model := &agent.Scripted{Reply: func(_ context.Context, req *agent.Request) (*agent.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == agent.RoleUser {
			if strings.Contains(last.Text(), "refund") {
				return &agent.Response{Message: agent.Message{Content: []agent.Block{{ToolCall: &agent.ToolCall{ID: "c1", Name: "refund", Input: json.RawMessage(`{"order_id":"A-1"}`)}}}}}, nil
			}
			return &agent.Response{Message: agent.Message{Content: []agent.Block{{Text: "You said: " + last.Text()}}}}, nil
		}
		r := last.Content[0].ToolResult
		return &agent.Response{Message: agent.Message{Content: []agent.Block{{Text: "Tool said: " + r.Content}}}}, nil
	}}
	g, err := agent.New(agent.Config{Name: "assistant", Description: "The shop's assistant", Model: model,
		Tools: []agent.Tool{refund}, Approve: []string{"refund"}})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// serve starts the API with /mcp mounted, as `superstep dev` does.
func serve(t *testing.T, token string) string {
	t.Helper()
	reg, err := runs.NewRegistry(countGraph(t), assistant(t))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	records := runs.NewMemoryStore()
	cps := pregel.NewMemoryStore()
	svc := &runs.Service{Graphs: reg, Runs: records, Checkpoints: cps, Logger: log, Threads: records}
	sched := embedded.NewScheduler(embedded.SchedulerConfig{Graphs: reg, Runs: records, Checkpoints: cps, Logger: log, OnStop: svc.RunStopped, StartThreadRun: svc.StartThreadRun})
	svc.Dispatcher = sched
	ctx, stop := context.WithCancel(context.Background())
	if err := sched.Start(ctx); err != nil {
		t.Fatal(err)
	}
	h, err := api.New(api.Config{Service: svc, Logger: log, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	m, err := mcpserver.New(mcpserver.Config{Service: svc, Logger: log, Poll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	h.Handle(mcpserver.Pattern, m)
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = sched.Shutdown(sctx, 0)
		stop()
	})
	return srv.URL + mcpserver.Pattern
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func connect(t *testing.T, url, token string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	hc := &http.Client{}
	if token != "" {
		hc.Transport = bearer{token}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, opts)
	s, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func text(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func TestGraphsAreTools(t *testing.T) {
	url := serve(t, "tok")
	s := connect(t, url, "tok", nil)
	res, err := s.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]*mcp.Tool{}
	for _, tl := range res.Tools {
		tools[tl.Name] = tl
	}
	if tools["count"] == nil || tools["assistant"] == nil || tools[mcpserver.AnswerTool] == nil || len(tools) != 3 {
		t.Fatalf("tools %v", tools)
	}
	schema, _ := json.Marshal(tools["count"].InputSchema)
	if !strings.Contains(string(schema), `"to"`) || !strings.Contains(string(schema), `"n"`) || strings.Contains(string(schema), `"text"`) {
		t.Fatalf("count's schema %s", schema)
	}
	// Each channel typed from the state struct's field (google/jsonschema-go).
	var countSchema struct {
		Properties map[string]struct {
			Type string `json:"type"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(schema, &countSchema); err != nil || countSchema.Properties["to"].Type != "integer" || countSchema.Properties["n"].Type != "integer" {
		t.Fatalf("count's channels are not typed: %v %s", err, schema)
	}
	bad, err := s.CallTool(t.Context(), &mcp.CallToolParams{Name: "count", Arguments: map[string]any{"to": "three"}})
	if err == nil && (bad == nil || !bad.IsError) {
		t.Fatalf("count {to: \"three\"} was accepted: %+v", bad)
	}
	schema, _ = json.Marshal(tools["assistant"].InputSchema)
	if !strings.Contains(string(schema), `"text"`) || !strings.Contains(tools["assistant"].Description, "The shop's assistant") {
		t.Fatalf("assistant's schema %s, description %q", schema, tools["assistant"].Description)
	}
}

func TestAuthIsTheAPIs(t *testing.T) {
	url := serve(t, "tok")
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	_, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{"wrong"}}}, nil)
	if err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Fatalf("a wrong token: %v", err)
	}
}

func TestRunWithProgress(t *testing.T) {
	url := serve(t, "")
	var mu sync.Mutex
	var progress []string
	s := connect(t, url, "", &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		mu.Lock()
		defer mu.Unlock()
		progress = append(progress, r.Params.Message)
	}})
	p := &mcp.CallToolParams{Name: "count", Arguments: map[string]any{"to": 4}}
	p.SetProgressToken("p1")
	res, err := s.CallTool(t.Context(), p)
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	var state map[string]any
	if err := json.Unmarshal([]byte(text(t, res)), &state); err != nil || state["n"] != float64(4) {
		t.Fatalf("result %q: %v", text(t, res), err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(progress) < 2 {
		t.Fatalf("progress %v, want one per step", progress)
	}
	// Bad input: a key that is not a channel.
	res, err = s.CallTool(t.Context(), &mcp.CallToolParams{Name: "count", Arguments: map[string]any{"too": 4}})
	if err != nil || !res.IsError || !strings.Contains(text(t, res), `"too" is not a channel of graph count`) {
		t.Fatalf("a wrong channel: %v %+v", err, res)
	}
}

func TestAgentAnswersText(t *testing.T) {
	s := connect(t, serve(t, ""), "", nil)
	res, err := s.CallTool(t.Context(), &mcp.CallToolParams{Name: "assistant", Arguments: map[string]any{"text": "hello", "thread_id": "th-1"}})
	if err != nil || res.IsError || text(t, res) != "You said: hello" {
		t.Fatalf("call: %v %q", err, text(t, res))
	}
	// The thread goes on.
	res, err = s.CallTool(t.Context(), &mcp.CallToolParams{Name: "assistant", Arguments: map[string]any{"text": "again", "thread_id": "th-1"}})
	if err != nil || res.IsError || text(t, res) != "You said: again" {
		t.Fatalf("second turn: %v %q", err, text(t, res))
	}
	sc, _ := json.Marshal(res.StructuredContent)
	if !strings.Contains(string(sc), "You said: hello") {
		t.Fatalf("the thread's state lost the first turn: %s", sc)
	}
}

// TestInterruptAsElicitation: the approval is asked through the client; a
// wrong answer is refused and asked again with the reason.
func TestInterruptAsElicitation(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	answers := []string{"edit", "approve"}
	s := connect(t, serve(t, ""), "", &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, r.Params.Message)
		a := answers[0]
		answers = answers[1:]
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": a}}, nil
	}})
	res, err := s.CallTool(t.Context(), &mcp.CallToolParams{Name: "assistant", Arguments: map[string]any{"text": "please refund"}})
	if err != nil || res.IsError || text(t, res) != "Tool said: refunded A-1" {
		t.Fatalf("call: %v %q", err, text(t, res))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 2 || !strings.Contains(asked[0], "Approve the call of tool refund") ||
		!strings.Contains(asked[1], "refused: an edit needs the new arguments") {
		t.Fatalf("questions %q", asked)
	}
}

// TestInterruptWithoutElicitation: a client without elicitation gets a
// result saying how to answer, and answers with answer_run.
func TestInterruptWithoutElicitation(t *testing.T) {
	s := connect(t, serve(t, ""), "", nil)
	res, err := s.CallTool(t.Context(), &mcp.CallToolParams{Name: "assistant", Arguments: map[string]any{"text": "please refund"}})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	msg := text(t, res)
	var sc struct {
		RunID string `json:"run_id"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &sc)
	if !strings.Contains(msg, "waits for an answer") || !strings.Contains(msg, "Approve the call of tool refund") || !strings.Contains(msg, mcpserver.AnswerTool) || sc.RunID == "" {
		t.Fatalf("result %q %s", msg, b)
	}
	res, err = s.CallTool(t.Context(), &mcp.CallToolParams{Name: mcpserver.AnswerTool, Arguments: map[string]any{"run_id": sc.RunID, "answer": "not today"}})
	if err != nil || res.IsError || text(t, res) != "Tool said: the user rejected this call: not today" {
		t.Fatalf("answer: %v %q", err, text(t, res))
	}
	res, err = s.CallTool(t.Context(), &mcp.CallToolParams{Name: mcpserver.AnswerTool, Arguments: map[string]any{"run_id": sc.RunID, "answer": "approve"}})
	if err != nil || !res.IsError || !strings.Contains(text(t, res), "waits for no answer") {
		t.Fatalf("answer a finished run: %v %q", err, text(t, res))
	}
	res, err = s.CallTool(t.Context(), &mcp.CallToolParams{Name: mcpserver.AnswerTool, Arguments: map[string]any{"run_id": "nope"}})
	if err != nil || !res.IsError {
		t.Fatalf("an unknown run: %v %q", err, text(t, res))
	}
}
