package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/superstep/superstep/internal/mototest"
	"github.com/superstep/superstep/pkg/agent"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/store/dynamo"
	"github.com/superstep/superstep/pkg/store/sqlite"
)

type lookupIn struct {
	OrderID string `json:"order_id" jsonschema:"the order's id, like A-1001"`
}

type refundIn struct {
	OrderID string `json:"order_id"`
	Cents   int    `json:"cents"`
}

// calls counts the tool calls by tool and argument.
type calls struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *calls) add(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[k]++
}

func (c *calls) get(k string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[k]
}

func toolCall(id, name, input string) agent.Block {
	return agent.Block{ToolCall: &agent.ToolCall{ID: id, Name: name, Input: json.RawMessage(input)}}
}

func answer(blocks ...agent.Block) agent.Response {
	return agent.Response{Message: agent.Message{Content: blocks}, Usage: agent.Usage{InputTokens: 10, OutputTokens: 2, TotalTokens: 12}}
}

func lookupTool(t testing.TB, c *calls, block func(ctx context.Context, id string) error) agent.Tool {
	tool, err := agent.NewTool("lookup_order", "Looks up an order", func(ctx context.Context, in lookupIn) (map[string]string, error) {
		if block != nil {
			if err := block(ctx, in.OrderID); err != nil {
				return nil, err
			}
		}
		c.add("lookup:" + in.OrderID)
		return map[string]string{"order_id": in.OrderID, "status": "shipped"}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

func refundTool(t testing.TB, c *calls) agent.Tool {
	tool, err := agent.NewTool("refund", "Refunds an order", func(ctx context.Context, in refundIn) (string, error) {
		c.add(fmt.Sprintf("refund:%s:%d", in.OrderID, in.Cents))
		return fmt.Sprintf("refunded %d cents on %s", in.Cents, in.OrderID), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

func decode(t testing.TB, res *pregel.Result) agent.State {
	t.Helper()
	var st agent.State
	if err := res.Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// toolResults returns the tool results of the conversation by call id.
func toolResults(st agent.State) map[string]agent.ToolResult {
	out := map[string]agent.ToolResult{}
	for _, m := range st.Messages {
		for _, b := range m.Content {
			if b.ToolResult != nil {
				out[b.ToolResult.ToolCallID] = *b.ToolResult
			}
		}
	}
	return out
}

func TestAgentLoopStreamsAndSumsUsage(t *testing.T) {
	var c calls
	model := agent.ScriptedTurns(
		answer(agent.Block{Text: "Let me look. "}, toolCall("t1", "lookup_order", `{"order_id":"A-1"}`)),
		answer(agent.Block{Text: "Your order A-1 has shipped."}),
	)
	g, err := agent.New(agent.Config{Model: model, Tools: []agent.Tool{lookupTool(t, &c, nil)}})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var events []pregel.Event
	res, err := g.Run(context.Background(), agent.State{Messages: []agent.Message{agent.UserText("where is A-1?")}},
		pregel.WithObserver(func(e pregel.Event) { mu.Lock(); events = append(events, e); mu.Unlock() }))
	if err != nil || res.Status != pregel.RunCompleted {
		t.Fatalf("run: %v %v", res.Status, err)
	}
	st := decode(t, res)
	if n := len(st.Messages); n != 4 {
		t.Fatalf("want user, assistant, tool, assistant; got %d messages: %+v", n, st.Messages)
	}
	if got := st.Messages[3].Text(); got != "Your order A-1 has shipped." {
		t.Fatalf("final answer %q", got)
	}
	if r := toolResults(st)["t1"]; r.Error || !strings.Contains(r.Content, `"status":"shipped"`) {
		t.Fatalf("tool result %+v", r)
	}
	want := agent.Usage{InputTokens: 20, OutputTokens: 4, TotalTokens: 24}
	if st.Usage.Total != want || st.Usage.ByNode[agent.ModelNode] != want {
		t.Fatalf("usage %+v, want %+v in total and for the model node", st.Usage, want)
	}
	// The graph declares its usage channel: servers read the same sums.
	if u, err := g.Usage(res.Values); err != nil || u == nil || u.Total != want || u.ByNode[agent.ModelNode] != want {
		t.Fatalf("g.Usage = %+v, %v; want %+v in total and for the model node", u, err, want)
	}
	// The deltas of the last model turn come in order, between the
	// node's start and finish, and spell its answer.
	var text strings.Builder
	var started, finished bool
	last := st.Messages[3].ID
	for _, e := range events {
		switch {
		case e.Type == pregel.EventNodeStarted && e.Node == agent.ModelNode && "msg-"+e.TaskID == last:
			started = true
		case e.Type == pregel.EventCustom && e.Name == agent.EventMessageDelta:
			var d agent.MessageDelta
			if err := json.Unmarshal(e.Payload, &d); err != nil {
				t.Fatal(err)
			}
			if d.MessageID != last {
				continue
			}
			if !started || finished {
				t.Fatalf("delta %q outside the node's run (started %v, finished %v)", d.Text, started, finished)
			}
			text.WriteString(d.Text)
		case e.Type == pregel.EventNodeFinished && "msg-"+e.TaskID == last:
			finished = true
		}
	}
	if text.String() != "Your order A-1 has shipped." || !finished {
		t.Fatalf("deltas spell %q (finished %v)", text.String(), finished)
	}
	// The tool node reports the call starting, then finishing, and the
	// tool call itself streamed from the first model turn.
	var progress []string
	var callStreamed bool
	for _, e := range events {
		if e.Type == pregel.EventCustom && e.Name == agent.EventToolCall {
			var p agent.ToolProgress
			if err := json.Unmarshal(e.Payload, &p); err != nil {
				t.Fatal(err)
			}
			progress = append(progress, p.ToolCallID+":"+p.Name+":"+p.Status)
		}
		if e.Type == pregel.EventCustom && e.Name == agent.EventMessageDelta {
			var d agent.MessageDelta
			_ = json.Unmarshal(e.Payload, &d)
			callStreamed = callStreamed || (d.ToolCallID == "t1" && d.ToolName == "lookup_order")
		}
	}
	if strings.Join(progress, " ") != "t1:lookup_order:started t1:lookup_order:finished" || !callStreamed {
		t.Fatalf("tool progress %v, call streamed %v", progress, callStreamed)
	}
}

// crashAfter cancels the run once n tool results are recorded: the process
// "dies" with the rest of the step unrecorded.
type crashAfter struct {
	pregel.Checkpointer
	n       int32
	seen    atomic.Int32
	control *pregel.Control
}

func (c *crashAfter) RecordTask(ctx context.Context, runID string, step int, r pregel.TaskResult) (pregel.TaskResult, error) {
	stored, err := c.Checkpointer.RecordTask(ctx, runID, step, r)
	if err == nil && r.Node == agent.ToolsNode && r.Final() && c.seen.Add(1) == c.n {
		c.control.Cancel()
	}
	return stored, err
}

func TestCrashAfterSecondToolCallResumesOnlyTheThird(t *testing.T) {
	stores := map[string]func(t *testing.T) pregel.Checkpointer{
		"memory": func(*testing.T) pregel.Checkpointer { return pregel.NewMemoryStore() },
		// The store of the serverless runtime, on the moto emulator.
		"dynamo": func(t *testing.T) pregel.Checkpointer {
			srv := mototest.Start(t)
			client := dynamodb.NewFromConfig(srv.Config)
			if err := dynamo.CreateTable(t.Context(), client, "agent-crash"); err != nil {
				t.Fatal(err)
			}
			return dynamo.New(client, "agent-crash")
		},
		"sqlite": func(t *testing.T) pregel.Checkpointer {
			s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "agent.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			store := open(t)
			var c calls
			var crashing atomic.Bool
			crashing.Store(true)
			// C-3 waits, in the first process, until the process dies.
			block := func(ctx context.Context, id string) error {
				if id == "C-3" && crashing.Load() {
					<-ctx.Done()
					return ctx.Err()
				}
				return nil
			}
			model := agent.ScriptedTurns(
				answer(toolCall("t1", "lookup_order", `{"order_id":"A-1"}`), toolCall("t2", "lookup_order", `{"order_id":"B-2"}`), toolCall("t3", "lookup_order", `{"order_id":"C-3"}`)),
				answer(agent.Block{Text: "All three have shipped."}),
			)
			g, err := agent.New(agent.Config{Model: model, Tools: []agent.Tool{lookupTool(t, &c, block)}})
			if err != nil {
				t.Fatal(err)
			}
			ctl := &pregel.Control{}
			res, err := g.Run(ctx, agent.State{Messages: []agent.Message{agent.UserText("check my orders")}},
				pregel.WithRunID("r1"), pregel.WithStore(&crashAfter{Checkpointer: store, n: 2, control: ctl}), pregel.WithControl(ctl))
			if err != nil || res.Status != pregel.RunCancelled {
				t.Fatalf("first process: %v %v, want cancelled", res.Status, err)
			}
			if c.get("lookup:A-1") != 1 || c.get("lookup:B-2") != 1 || c.get("lookup:C-3") != 0 {
				t.Fatalf("before the crash: %v", c.n)
			}
			crashing.Store(false)
			res, err = g.Resume(ctx, "r1", pregel.WithStore(store))
			if err != nil || res.Status != pregel.RunCompleted {
				t.Fatalf("resume: %v %v", res.Status, err)
			}
			for _, k := range []string{"lookup:A-1", "lookup:B-2", "lookup:C-3"} {
				if c.get(k) != 1 {
					t.Fatalf("%s called %d times, want once: %v", k, c.get(k), c.n)
				}
			}
			st := decode(t, res)
			if got := toolResults(st); len(got) != 3 || got["t3"].Error {
				t.Fatalf("tool results %+v", got)
			}
			// The three results come in the order of the calls.
			for i, id := range []string{"t1", "t2", "t3"} {
				if r := st.Messages[2+i].Content[0].ToolResult; r == nil || r.ToolCallID != id {
					t.Fatalf("message %d is %+v, want the result of %s", 2+i, st.Messages[2+i], id)
				}
			}
		})
	}
}

func TestApproval(t *testing.T) {
	tests := []struct {
		name       string
		answer     any
		wantCall   string // the refund call made, "" for none
		wantResult string
		wantError  bool
	}{
		{"approve", agent.Approval{Decision: agent.Approve}, "refund:A-1:500", "refunded 500 cents on A-1", false},
		{"edit", agent.Approval{Decision: agent.Edit, Input: json.RawMessage(`{"order_id":"A-1","cents":200}`)}, "refund:A-1:200", "refunded 200 cents on A-1", false},
		{"reject", agent.Approval{Decision: agent.Reject, Message: "refunds over 1 dollar need a manager"}, "", "the user rejected this call: refunds over 1 dollar need a manager", true},
		{"plain text approve", json.RawMessage(`"approve"`), "refund:A-1:500", "refunded 500 cents on A-1", false},
		{"plain text reason rejects", json.RawMessage(`"not without a receipt"`), "", "the user rejected this call: not without a receipt", true},
		{"decision in capitals", json.RawMessage(`{"decision":"APPROVE"}`), "refund:A-1:500", "refunded 500 cents on A-1", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			var c calls
			model := agent.ScriptedTurns(
				answer(toolCall("t1", "lookup_order", `{"order_id":"A-1"}`), toolCall("t2", "refund", `{"order_id":"A-1","cents":500}`)),
				answer(agent.Block{Text: "Done."}),
			)
			g, err := agent.New(agent.Config{Model: model, Tools: []agent.Tool{lookupTool(t, &c, nil), refundTool(t, &c)}, Approve: []string{"refund"}})
			if err != nil {
				t.Fatal(err)
			}
			store := pregel.NewMemoryStore()
			res, err := g.Run(ctx, agent.State{Messages: []agent.Message{agent.UserText("refund A-1")}}, pregel.WithRunID("r"), pregel.WithStore(store))
			if err != nil || res.Status != pregel.RunInterrupted || len(res.Interrupts) != 1 {
				t.Fatalf("run: %v %v %+v", res.Status, err, res.Interrupts)
			}
			var req agent.ApprovalRequest
			if err := json.Unmarshal(res.Interrupts[0].Value, &req); err != nil || req.Kind != "tool_approval" || req.ToolCall.ID != "t2" {
				t.Fatalf("interrupt value %s (%v)", res.Interrupts[0].Value, err)
			}
			if !strings.Contains(req.Question, `tool refund with arguments {"order_id":"A-1","cents":500}`) || !strings.Contains(req.Question, `"decision":"edit"`) {
				t.Fatalf("question %q does not show the call and how to answer", req.Question)
			}
			if c.get("lookup:A-1") != 1 || len(c.n) != 1 {
				t.Fatalf("before approval: %v", c.n)
			}
			res, err = g.Resume(ctx, "r", pregel.WithStore(store), pregel.WithResume(tt.answer))
			if err != nil || res.Status != pregel.RunCompleted {
				t.Fatalf("resume: %v %v", res.Status, err)
			}
			if c.get("lookup:A-1") != 1 {
				t.Fatalf("the lookup ran again on resume: %v", c.n)
			}
			refunds := 0
			for k, n := range c.n {
				if strings.HasPrefix(k, "refund:") {
					refunds += n
					if k != tt.wantCall {
						t.Fatalf("refund call %s, want %q", k, tt.wantCall)
					}
				}
			}
			if (tt.wantCall == "") != (refunds == 0) || refunds > 1 {
				t.Fatalf("refund calls %v, want %q", c.n, tt.wantCall)
			}
			r := toolResults(decode(t, res))["t2"]
			if r.Error != tt.wantError || !strings.Contains(r.Content, tt.wantResult) {
				t.Fatalf("result %+v, want error=%v containing %q", r, tt.wantError, tt.wantResult)
			}
			if a, ok := tt.answer.(agent.Approval); ok && a.Decision == agent.Edit && string(r.EditedInput) != string(a.Input) {
				t.Fatalf("edited input %s, want %s", r.EditedInput, a.Input)
			}
		})
	}
}

// An answer of the wrong shape is not taken for a decision: the run asks
// the same question again with the reason, nothing is called, and a good
// answer then goes through.
func TestApprovalBadAnswersAskAgain(t *testing.T) {
	tests := []struct {
		name   string
		answer json.RawMessage
		reason string
	}{
		{"number", json.RawMessage(`42`), "not text or an object"},
		{"array", json.RawMessage(`["approve"]`), "not text or an object"},
		{"empty text", json.RawMessage(`"  "`), "the answer is empty"},
		{"edit as text", json.RawMessage(`"edit"`), "an edit needs the new arguments"},
		{"unknown decision", json.RawMessage(`{"decision":"maybe"}`), `the decision "maybe" is not approve, edit or reject`},
		{"no decision", json.RawMessage(`{"approved":true}`), `unknown field "approved"`},
		{"edit without input", json.RawMessage(`{"decision":"edit"}`), `an edit needs "input"`},
		{"edit with text input", json.RawMessage(`{"decision":"edit","input":"500 cents"}`), `an edit needs "input"`},
		{"message of the wrong type", json.RawMessage(`{"decision":"reject","message":7}`), `field "message" must be a string, not a number`},
		{"decision of the wrong type", json.RawMessage(`{"decision":1}`), `field "decision" must be a string, not a number`},
		// Edited arguments are checked against the tool's schema when
		// the answer comes, not when the tool runs: a mistyped edit is
		// asked again, it does not end the approval.
		{"edit of the wrong type", json.RawMessage(`{"decision":"edit","input":{"order_id":"A-1001","cents":"all"}}`), `does not fit tool refund's input schema: field "cents": type: all has type "string", want "integer"`},
		{"edit missing an argument", json.RawMessage(`{"decision":"edit","input":{"order_id":"A-1"}}`), `cents`},
		{"edit with an unknown argument", json.RawMessage(`{"decision":"edit","input":{"order_id":"A-1","cents":5,"note":"x"}}`), `note`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			var c calls
			model := agent.ScriptedTurns(
				answer(toolCall("t1", "lookup_order", `{"order_id":"A-1"}`), toolCall("t2", "refund", `{"order_id":"A-1","cents":500}`)),
				answer(agent.Block{Text: "Done."}),
			)
			g, err := agent.New(agent.Config{Model: model, Tools: []agent.Tool{lookupTool(t, &c, nil), refundTool(t, &c)}, Approve: []string{"refund"}})
			if err != nil {
				t.Fatal(err)
			}
			store := pregel.NewMemoryStore()
			res, err := g.Run(ctx, agent.TextInput("refund A-1"), pregel.WithRunID("r"), pregel.WithStore(store))
			if err != nil || res.Status != pregel.RunInterrupted || len(res.Interrupts) != 1 {
				t.Fatalf("run: %v %v %+v", res.Status, err, res.Interrupts)
			}
			first := res.Interrupts[0]
			res, err = g.Resume(ctx, "r", pregel.WithStore(store), pregel.WithResume(tt.answer))
			if err != nil || res.Status != pregel.RunInterrupted || len(res.Interrupts) != 1 {
				t.Fatalf("resume with %s: %v %v %+v, want the question asked again", tt.answer, res.Status, err, res.Interrupts)
			}
			again := res.Interrupts[0]
			if again.ID != first.ID || string(again.Value) != string(first.Value) || !strings.Contains(again.Error, tt.reason) {
				t.Fatalf("asked again %+v, want interrupt %s with a reason containing %q", again, first.ID, tt.reason)
			}
			for _, goWords := range []string{"Go struct", "Go value", "agent.", "unmarshal", "json:"} {
				if strings.Contains(again.Error, goWords) {
					t.Fatalf("the reason speaks Go (%q): %s", goWords, again.Error)
				}
			}
			if c.get("lookup:A-1") != 1 || len(c.n) != 1 {
				t.Fatalf("calls after a bad answer: %v", c.n)
			}
			if testing.Verbose() {
				t.Log(again.Error)
			}
			res, err = g.Resume(ctx, "r", pregel.WithStore(store), pregel.WithResume("approve"))
			if err != nil || res.Status != pregel.RunCompleted {
				t.Fatalf("resume with approve: %v %v", res.Status, err)
			}
			if c.get("lookup:A-1") != 1 || c.get("refund:A-1:500") != 1 || len(c.n) != 2 {
				t.Fatalf("calls %v, want the lookup and the refund once", c.n)
			}
		})
	}
}

func TestBadInputReachesTheModel(t *testing.T) {
	var c calls
	var flaky atomic.Int32
	flakyTool := agent.MustTool("flaky", "Fails until its third attempt", func(ctx context.Context, in struct{}) (string, error) {
		if flaky.Add(1) < 3 {
			return "", errors.New("backend unavailable")
		}
		return "ok", nil
	})
	broken := agent.MustTool("broken", "Always fails", func(ctx context.Context, in struct{}) (string, error) {
		return "", errors.New("disk on fire")
	})
	panicky := agent.MustTool("panicky", "Panics", func(ctx context.Context, in struct{}) (string, error) {
		panic("boom")
	})
	model := agent.ScriptedTurns(
		answer(
			toolCall("t1", "lookup_order", `{"order_id":42}`), // wrong type
			toolCall("t2", "lookup_order", `{}`),              // missing field
			toolCall("t3", "cancel_order", `{"order_id":"A-1"}`),
			toolCall("t4", "lookup_order", `not json`),
			toolCall("t5", "flaky", `{}`),
			toolCall("t6", "broken", `{}`),
			toolCall("t7", "panicky", `{}`),
		),
		answer(agent.Block{Text: "Sorry about that."}),
	)
	g, err := agent.New(agent.Config{Model: model, Tools: []agent.Tool{lookupTool(t, &c, nil), flakyTool, broken, panicky},
		ToolRetry: pregel.RetryPolicy{MaxAttempts: 3, InitialInterval: 1}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := g.Run(context.Background(), agent.State{Messages: []agent.Message{agent.UserText("hi")}})
	if err != nil || res.Status != pregel.RunCompleted {
		t.Fatalf("run: %v %v", res.Status, err)
	}
	got := toolResults(decode(t, res))
	want := map[string]string{
		"t1": "invalid arguments",
		"t2": "invalid arguments",
		"t3": `there is no tool named "cancel_order"; the tools are: broken, flaky, lookup_order, panicky`,
		"t4": "invalid arguments",
		"t6": `tool "broken" failed: disk on fire`,
		"t7": "panicked: boom",
	}
	for id, w := range want {
		if !got[id].Error || !strings.Contains(got[id].Content, w) {
			t.Errorf("%s: %+v, want an error containing %q", id, got[id], w)
		}
	}
	if r := got["t5"]; r.Error || r.Content != "ok" || flaky.Load() != 3 {
		t.Errorf("flaky: %+v after %d attempts, want ok after 3", r, flaky.Load())
	}
	if len(c.n) != 0 {
		t.Errorf("the lookup ran with bad arguments: %v", c.n)
	}
}

func TestModelFailures(t *testing.T) {
	t.Run("empty answer fails the run clearly", func(t *testing.T) {
		g, err := agent.New(agent.Config{Model: agent.ScriptedTurns(agent.Response{})})
		if err != nil {
			t.Fatal(err)
		}
		res, err := g.Run(context.Background(), agent.State{Messages: []agent.Message{agent.UserText("hi")}})
		if err == nil || res.Status != pregel.RunFailed || !strings.Contains(err.Error(), "the model returned an empty answer") {
			t.Fatalf("got %v %v", res.Status, err)
		}
	})
	t.Run("empty conversation fails the run clearly", func(t *testing.T) {
		g, err := agent.New(agent.Config{Model: agent.ScriptedTurns(answer(agent.Block{Text: "x"}))})
		if err != nil {
			t.Fatal(err)
		}
		res, err := g.Run(context.Background(), agent.State{})
		if err == nil || res.Status != pregel.RunFailed || !strings.Contains(err.Error(), "start the run with at least one user message") {
			t.Fatalf("got %v %v", res.Status, err)
		}
	})
	t.Run("retryable model errors are retried", func(t *testing.T) {
		var n atomic.Int32
		model := &agent.Scripted{Reply: func(ctx context.Context, req *agent.Request) (*agent.Response, error) {
			if n.Add(1) == 1 {
				return nil, &agent.ModelError{Code: "ThrottlingException", Retryable: true}
			}
			r := answer(agent.Block{Text: "hello"})
			return &r, nil
		}}
		g, err := agent.New(agent.Config{Model: model, ModelRetry: &pregel.RetryPolicy{MaxAttempts: 2, InitialInterval: 1, RetryIf: agent.IsRetryable}})
		if err != nil {
			t.Fatal(err)
		}
		res, err := g.Run(context.Background(), agent.State{Messages: []agent.Message{agent.UserText("hi")}})
		if err != nil || res.Status != pregel.RunCompleted || n.Load() != 2 {
			t.Fatalf("got %v %v after %d calls", res.Status, err, n.Load())
		}
	})
	t.Run("a model that never stops hits the turn limit", func(t *testing.T) {
		model := &agent.Scripted{Reply: func(ctx context.Context, req *agent.Request) (*agent.Response, error) {
			r := answer(toolCall(fmt.Sprint("t", len(req.Messages)), "lookup_order", `{"order_id":"A"}`))
			return &r, nil
		}}
		var c calls
		g, err := agent.New(agent.Config{Model: model, Tools: []agent.Tool{lookupTool(t, &c, nil)}, MaxTurns: 3})
		if err != nil {
			t.Fatal(err)
		}
		res, err := g.Run(context.Background(), agent.State{Messages: []agent.Message{agent.UserText("hi")}})
		if !errors.Is(err, pregel.ErrStepLimit) || res.Status != pregel.RunFailed || c.get("lookup:A") != 3 {
			t.Fatalf("got %v %v after %d calls", res.Status, err, c.get("lookup:A"))
		}
	})
}

func TestConfigErrors(t *testing.T) {
	var c calls
	model := agent.ScriptedTurns()
	for _, cfg := range []agent.Config{
		{},
		{Model: model, Tools: []agent.Tool{lookupTool(t, &c, nil), lookupTool(t, &c, nil)}},
		{Model: model, Approve: []string{"nope"}},
		{Model: model, Tools: []agent.Tool{nil}},
		{Model: model, Tools: []agent.Tool{agent.MustTool("look up", "", func(context.Context, struct{}) (string, error) { return "", nil })}},
	} {
		if _, err := agent.New(cfg); err == nil {
			t.Errorf("config %+v accepted", cfg)
		}
	}
	if _, err := agent.NewTool("bad", "", func(ctx context.Context, in string) (string, error) { return in, nil }); err == nil {
		t.Error("a tool whose argument is not a struct was accepted")
	}
}

// Two calls needing approval in one turn wait together; each is answered
// by its interrupt id.
func TestTwoApprovalsAnsweredByID(t *testing.T) {
	ctx := context.Background()
	var c calls
	model := agent.ScriptedTurns(
		answer(toolCall("t1", "refund", `{"order_id":"A-1","cents":100}`), toolCall("t2", "refund", `{"order_id":"B-2","cents":200}`)),
		answer(agent.Block{Text: "Done."}),
	)
	g, err := agent.New(agent.Config{Model: model, Tools: []agent.Tool{refundTool(t, &c)}, Approve: []string{"refund"}})
	if err != nil {
		t.Fatal(err)
	}
	store := pregel.NewMemoryStore()
	res, err := g.Run(ctx, agent.TextInput("refund both"), pregel.WithRunID("r"), pregel.WithStore(store))
	if err != nil || res.Status != pregel.RunInterrupted || len(res.Interrupts) != 2 {
		t.Fatalf("run: %v %v %+v", res.Status, err, res.Interrupts)
	}
	answers := map[string]any{}
	for _, in := range res.Interrupts {
		var req agent.ApprovalRequest
		if err := json.Unmarshal(in.Value, &req); err != nil {
			t.Fatal(err)
		}
		answers[in.ID] = agent.Approval{Decision: agent.Approve}
		if req.ToolCall.ID == "t2" {
			answers[in.ID] = agent.Approval{Decision: agent.Reject, Message: "too much"}
		}
	}
	res, err = g.Resume(ctx, "r", pregel.WithStore(store), pregel.WithResumeByID(answers))
	if err != nil || res.Status != pregel.RunCompleted {
		t.Fatalf("resume: %v %v", res.Status, err)
	}
	got := toolResults(decode(t, res))
	if got["t1"].Error || got["t1"].Content != "refunded 100 cents on A-1" || !got["t2"].Error || c.get("refund:A-1:100") != 1 || len(c.n) != 1 {
		t.Fatalf("results %+v, calls %v", got, c.n)
	}
}

func TestAgentTakesText(t *testing.T) {
	g, err := agent.New(agent.Config{Model: agent.ScriptedTurns(answer(agent.Block{Text: "Hello!"}))})
	if err != nil {
		t.Fatal(err)
	}
	if g.TextChannel() != agent.MessagesChannel || g.UsageChannel() != agent.UsageChannel {
		t.Fatalf("declared: text %q, usage %q", g.TextChannel(), g.UsageChannel())
	}
	in, err := g.InputFromText("hi there")
	if err != nil {
		t.Fatal(err)
	}
	if string(in) != string(agent.TextInput("hi there")) {
		t.Fatalf("input from text %s, want %s", in, agent.TextInput("hi there"))
	}
	res, err := g.Run(context.Background(), in)
	if err != nil || res.Status != pregel.RunCompleted {
		t.Fatalf("run: %v %v", res.Status, err)
	}
	st := decode(t, res)
	if len(st.Messages) != 2 || st.Messages[0].Role != agent.RoleUser || st.Messages[0].Text() != "hi there" || st.Messages[1].Text() != "Hello!" {
		t.Fatalf("messages %+v", st.Messages)
	}
}
