package serverless_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/superstep/superstep/pkg/agent"
	"github.com/superstep/superstep/pkg/internal/sqsqueue"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/serverless"
)

// killKey holds, in the context of a handler invocation, the function
// that kills it.
type killKey struct{}

// killable gives each invocation of a handler a context that a tool can
// cancel, as if the Lambda's process died there: the handler's writes
// after that point fail, it reports the message as failed, and SQS
// delivers it again after the visibility timeout.
func killable(h sqsqueue.Handler) sqsqueue.Handler {
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		ctx, kill := context.WithCancel(ctx)
		defer kill()
		return h(context.WithValue(ctx, killKey{}, kill), ev)
	}
}

// shippingTools is a lookup_order tool that counts, by order id, the
// calls it finished (side effects done) and the calls it began. The first
// call for C-3 waits until the results of the two other calls of its step
// are recorded in the table, then kills the invocation running it.
type shippingTools struct {
	s        *stack
	mu       sync.Mutex
	began    map[string]int
	finished map[string]int
	killed   atomic.Bool
}

func (st *shippingTools) count(m map[string]int, id string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	m[id]++
}

func (st *shippingTools) get(m map[string]int, id string) int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return m[id]
}

func (st *shippingTools) tool(t *testing.T) agent.Tool {
	tool, err := agent.NewTool("lookup_order", "Looks up an order", func(ctx context.Context, in struct {
		OrderID string `json:"order_id"`
	}) (map[string]string, error) {
		st.count(st.began, in.OrderID)
		if in.OrderID == "C-3" && st.killed.CompareAndSwap(false, true) {
			info, _ := pregel.TaskFrom(ctx)
			st.awaitRecorded(ctx, info.RunID, info.Step, 2)
			kill, _ := ctx.Value(killKey{}).(context.CancelFunc)
			if kill == nil {
				t.Error("the tool runs outside a killable invocation")
				return nil, context.Canceled
			}
			kill()
			<-ctx.Done()
			return nil, ctx.Err()
		}
		st.count(st.finished, in.OrderID)
		return map[string]string{"order_id": in.OrderID, "status": "shipped"}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

// awaitRecorded waits until n final results of the tools node are
// recorded for the run's open step.
func (st *shippingTools) awaitRecorded(ctx context.Context, runID string, step, n int) {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		pending, err := st.s.app.Store.PendingTasks(ctx, runID, step)
		got := 0
		for _, r := range pending {
			if r.Node == agent.ToolsNode && r.Final() {
				got++
			}
		}
		if err == nil && got >= n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	st.s.t.Errorf("run %s step %d: %d tool results were not recorded within 20s", runID, step, n)
}

// The prebuilt agent on the serverless path: the run is created through
// the api function's handler with plain text, its model turns run in the
// tick function, and its three tool calls in the tick function (inline)
// or one per node-function invocation (RemoteTools). The invocation
// running the third call dies once the first two are recorded; when SQS
// delivers its message again, only the third call runs; the run completes
// with the model's answer and its token usage on the run record.
func TestAgentCrashAfterSecondToolCall(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		remote, invoke bool
	}{
		{"inline", false, false},
		{"remote", true, false},
		// The node tasks start by asynchronous invocations: the dead
		// invocation is retried by Lambda, finds the task leased,
		// hands it to the node-task queue, whose redelivery runs it.
		{"remote-invoke", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tools := &shippingTools{began: map[string]int{}, finished: map[string]int{}}
			turn := agent.Usage{InputTokens: 100, OutputTokens: 20, TotalTokens: 120}
			model := agent.ScriptedTurns(
				agent.Response{Message: agent.Message{Content: []agent.Block{
					{Text: "Let me check all three."},
					{ToolCall: &agent.ToolCall{ID: "t1", Name: "lookup_order", Input: json.RawMessage(`{"order_id":"A-1"}`)}},
					{ToolCall: &agent.ToolCall{ID: "t2", Name: "lookup_order", Input: json.RawMessage(`{"order_id":"B-2"}`)}},
					{ToolCall: &agent.ToolCall{ID: "t3", Name: "lookup_order", Input: json.RawMessage(`{"order_id":"C-3"}`)}},
				}}, StopReason: agent.StopToolUse, Usage: turn},
				agent.Response{Message: agent.AssistantText("All three have shipped."), StopReason: agent.StopEndTurn, Usage: turn},
			)
			name := "agent-" + strings.TrimSuffix(tc.name, "-invoke")
			g, err := agent.New(agent.Config{Name: name, Model: model, Tools: []agent.Tool{tools.tool(t)}, RemoteTools: tc.remote})
			if err != nil {
				t.Fatal(err)
			}
			// A short visibility timeout brings the dead invocation's
			// message back soon; the task lease is half of it.
			o := stackOptions{visibility: 4 * time.Second, graphs: []*pregel.Graph{g}, wrapTick: killable, wrapNode: killable,
				invoke: tc.invoke, wrapInvoke: killableInvoke}
			if tc.invoke {
				// Lambda's retries (200 ms apart here, minutes in AWS)
				// come while the dead invocation's lease still runs (15
				// minutes in AWS): a lease longer than the test's
				// timings, so that they find it held.
				o.config = func(c *serverless.Config) { c.Lease = 8 * time.Second }
			}
			s := newStack(t, o)
			tools.s = s

			body, _ := json.Marshal(map[string]any{"run_id": "orders", "input": "Where are my orders A-1, B-2 and C-3?"})
			raw, _ := json.Marshal(events.APIGatewayV2HTTPRequest{
				Version: "2.0", RawPath: "/v1/graphs/" + name + "/runs", Body: string(body),
				Headers: map[string]string{"content-type": "application/json"},
				RequestContext: events.APIGatewayV2HTTPRequestContext{
					HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/v1/graphs/" + name + "/runs"},
				},
			})
			out, err := s.app.HandleAPI(t.Context(), raw)
			if resp, ok := out.(events.APIGatewayV2HTTPResponse); err != nil || !ok || resp.StatusCode != http.StatusAccepted {
				t.Fatalf("the api function: %+v, %v", out, err)
			}

			r := s.waitStatus("orders", pregel.RunCompleted)
			if tc.invoke {
				// The dead invocation was retried by Lambda; the retry
				// found the lease held and handed the task to the
				// node-task queue; nothing reached the dead letters.
				st := s.lambda.Stats()
				if st.Retried == 0 || st.Failed != 0 || !strings.Contains(s.logs.String(), "handed to the node-task queue") {
					t.Errorf("Lambda stand-in %+v: want the dead invocation retried, its task handed to the node-task queue, nothing given up", st)
				}
			}
			if !tools.killed.Load() {
				t.Fatal("the invocation running C-3 was never killed")
			}
			for _, id := range []string{"A-1", "B-2", "C-3"} {
				if n := tools.get(tools.finished, id); n != 1 {
					t.Errorf("lookup of %s done %d times, want once", id, n)
				}
			}
			// A-1 and B-2 ran once; C-3 began in the dead invocation and
			// again after the redelivery.
			if a, b, c := tools.get(tools.began, "A-1"), tools.get(tools.began, "B-2"), tools.get(tools.began, "C-3"); a != 1 || b != 1 || c != 2 {
				t.Errorf("calls begun: A-1 %d, B-2 %d, C-3 %d; want 1, 1, 2", a, b, c)
			}
			msgs := values[[]agent.Message](t, r, agent.MessagesChannel)
			if len(msgs) != 6 || msgs[0].Text() != "Where are my orders A-1, B-2 and C-3?" || msgs[5].Text() != "All three have shipped." {
				t.Fatalf("conversation %+v; want the question, the calls, three results and the answer", msgs)
			}
			for i, id := range []string{"t1", "t2", "t3"} {
				res := msgs[2+i].Content[0].ToolResult
				if res == nil || res.ToolCallID != id || res.Error || !strings.Contains(res.Content, `"status":"shipped"`) {
					t.Errorf("message %d is %+v, want the result of %s", 2+i, msgs[2+i], id)
				}
			}
			// Two model turns: on the run record, in total and by node.
			want := agent.Usage{InputTokens: 200, OutputTokens: 40, TotalTokens: 240}
			if r.Usage == nil || r.Usage.Total != want || r.Usage.ByNode[agent.ModelNode] != want {
				t.Errorf("usage on the run record %+v, want %+v in total and for node model", r.Usage, want)
			}
			// model, tools, model: the last turn ends the run in its own
			// superstep.
			if r.Step != 3 {
				t.Errorf("the run ended at step %d, want 3", r.Step)
			}
			if tc.remote && s.nodeCalls.Load() < 4 {
				t.Errorf("the node function ran %d times, want the three calls and the redelivery", s.nodeCalls.Load())
			}
			if !tc.remote && s.nodeCalls.Load() != 0 {
				t.Errorf("the node function ran %d times for inline tools", s.nodeCalls.Load())
			}
		})
	}
}

// a2aCall sends a JSON-RPC request to a graph's A2A endpoint and returns
// the task of the answer.
func (s *stack) a2aCall(graph string, message map[string]any) a2aTask {
	s.t.Helper()
	req := map[string]any{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": map[string]any{"message": message}}
	var resp struct {
		Result a2aTask `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if st := s.do("POST", "/a2a/"+graph, req, &resp); st != http.StatusOK || resp.Error != nil {
		s.t.Fatalf("message/send: status %d, error %+v", st, resp.Error)
	}
	return resp.Result
}

// a2aTask is the part of an A2A 0.3 task the tests read.
type a2aTask struct {
	ID        string `json:"id"`
	ContextID string `json:"contextId"`
	Status    struct {
		State   string `json:"state"`
		Message struct {
			Parts []struct {
				Kind string `json:"kind"`
				Text string `json:"text"`
				Data any    `json:"data"`
			} `json:"parts"`
		} `json:"message"`
	} `json:"status"`
}

func (t a2aTask) text() string {
	var b strings.Builder
	for _, p := range t.Status.Message.Parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// Approval over A2A on the serverless path, the tool node remote: the
// api function answers message/send with the input-required task once
// the node function's refund task asks; the answer (approve, edit, reject,
// after a refused one) resumes that task in the node function.
func TestAgentApprovalOverServerlessA2A(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	refunds := map[string]string{} // run -> the refund made
	refund, err := agent.NewTool("refund", "Refunds an order", func(ctx context.Context, in struct {
		OrderID string `json:"order_id"`
		Cents   int    `json:"cents"`
	}) (string, error) {
		info, _ := pregel.TaskFrom(ctx)
		mu.Lock()
		defer mu.Unlock()
		refunds[info.RunID] += fmt.Sprintf("%s:%d;", in.OrderID, in.Cents)
		return fmt.Sprintf("refunded %d cents on %s", in.Cents, in.OrderID), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	model := &agent.Scripted{Reply: func(_ context.Context, req *agent.Request) (*agent.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == agent.RoleUser {
			return &agent.Response{Message: agent.Message{Content: []agent.Block{{ToolCall: &agent.ToolCall{ID: "r1", Name: "refund", Input: json.RawMessage(`{"order_id":"A-1","cents":500}`)}}}}}, nil
		}
		res := last.Content[0].ToolResult
		return &agent.Response{Message: agent.AssistantText(fmt.Sprintf("Result: %s (error %v)", res.Content, res.Error))}, nil
	}}
	g, err := agent.New(agent.Config{Name: "refunder", Model: model, Tools: []agent.Tool{refund}, Approve: []string{"refund"}, RemoteTools: true})
	if err != nil {
		t.Fatal(err)
	}
	s := newStack(t, stackOptions{graphs: []*pregel.Graph{g}})
	for _, tc := range []struct {
		name    string
		answers []map[string]any // parts; all but the last are refused
		refund  string
		reply   string
	}{
		{"approve", []map[string]any{{"kind": "text", "text": "approve"}}, "A-1:500;", "Result: refunded 500 cents on A-1 (error false)"},
		{"edit after a refused answer", []map[string]any{
			{"kind": "data", "data": map[string]any{"decision": "edit"}},
			{"kind": "data", "data": map[string]any{"decision": "edit", "input": map[string]any{"order_id": "A-1", "cents": 200}}},
		}, "A-1:200;", "Result: refunded 200 cents on A-1 (error false)"},
		{"reject", []map[string]any{{"kind": "data", "data": map[string]any{"decision": "reject", "message": "needs a manager"}}}, "",
			"Result: the user rejected this call: needs a manager (error true)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := func(part map[string]any, extra map[string]any) map[string]any {
				m := map[string]any{"kind": "message", "role": "user", "messageId": fmt.Sprint(time.Now().UnixNano()), "parts": []any{part}}
				for k, v := range extra {
					m[k] = v
				}
				return m
			}
			task := s.a2aCall("refunder", msg(map[string]any{"kind": "text", "text": "refund A-1"}, nil))
			if task.Status.State != "input-required" || !strings.Contains(task.text(), "Approve the call of tool refund") {
				t.Fatalf("task %s is %s (%q), want input-required with the question", task.ID, task.Status.State, task.text())
			}
			follow := map[string]any{"taskId": task.ID, "contextId": task.ContextID}
			for _, bad := range tc.answers[:len(tc.answers)-1] {
				again := s.a2aCall("refunder", msg(bad, follow))
				if again.Status.State != "input-required" || !strings.HasPrefix(again.text(), "Your last answer was not accepted: ") {
					t.Fatalf("after %v: %s (%q), want the question asked again with the reason", bad, again.Status.State, again.text())
				}
			}
			done := s.a2aCall("refunder", msg(tc.answers[len(tc.answers)-1], follow))
			if done.ID != task.ID || done.Status.State != "completed" {
				t.Fatalf("after the answer: task %s is %s (%q)", done.ID, done.Status.State, done.text())
			}
			r := s.get(task.ID)
			msgs := values[[]agent.Message](t, r, agent.MessagesChannel)
			if got := msgs[len(msgs)-1].Text(); got != tc.reply {
				t.Errorf("final answer %q, want %q", got, tc.reply)
			}
			mu.Lock()
			got := refunds[task.ID]
			mu.Unlock()
			if got != tc.refund {
				t.Errorf("refunds made %q, want %q", got, tc.refund)
			}
		})
	}
	if s.nodeCalls.Load() == 0 {
		t.Error("the node function never ran: the tools were not remote")
	}
}
