package tracing_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/superstep/superstep/pkg/agent"
	"github.com/superstep/superstep/pkg/embedded"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/store/sqlite"
	"github.com/superstep/superstep/pkg/tracing"
)

// bedrockModel is a scripted model that names itself as a Bedrock model
// for traces, as the Bedrock adapter does.
type bedrockModel struct{ *agent.Scripted }

func (bedrockModel) GenAIModel() (string, string) { return "aws.bedrock", "test.model-v1" }

// agentGraph is the prebuilt agent with two tools, one of which waits
// for approval; its model calls both tools in its first turn and answers
// in its second.
func agentGraph(t *testing.T) *pregel.Graph {
	t.Helper()
	lookup := agent.MustTool("lookup", "Looks an order up", func(_ context.Context, in struct {
		Order string `json:"order"`
	}) (string, error) {
		return "order " + in.Order + ": paid twice", nil
	})
	refund := agent.MustTool("refund", "Refunds an order", func(_ context.Context, in struct {
		Order string `json:"order"`
	}) (string, error) {
		return "refunded " + in.Order, nil
	})
	call := func(id, name string) agent.Block {
		return agent.Block{ToolCall: &agent.ToolCall{ID: id, Name: name, Input: json.RawMessage(`{"order": "A-1"}`)}}
	}
	model := bedrockModel{agent.ScriptedTurns(
		agent.Response{Message: agent.Message{Role: agent.RoleAssistant, Content: []agent.Block{call("call-1", "lookup"), call("call-2", "refund")}},
			StopReason: agent.StopToolUse, Usage: agent.Usage{InputTokens: 100, OutputTokens: 20}},
		agent.Response{Message: agent.AssistantText("Refunded."), StopReason: agent.StopEndTurn, Usage: agent.Usage{InputTokens: 150, OutputTokens: 5}},
	)}
	g, err := agent.New(agent.Config{Name: "support-agent", Model: model, Tools: []agent.Tool{lookup, refund}, Approve: []string{"refund"}, Generate: true})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// failing, draining and cancelling graphs for the outcomes.
// gate holds the slow graph's node: entered receives when it starts,
// release lets it finish.
type gate struct{ entered, release chan struct{} }

func newGate() gate { return gate{entered: make(chan struct{}, 8), release: make(chan struct{})} }

// in waits until the slow node has started, so a drain or cancel lands
// while it runs and not before its step began.
func (g gate) in(t *testing.T) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow node did not start within 10s")
	}
}

// open lets the slow node finish.
func (g gate) open(t *testing.T) {
	t.Helper()
	select {
	case g.release <- struct{}{}:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow node did not wait for its release within 10s")
	}
}

func outcomeGraphs(t *testing.T, gt *gate) []*pregel.Graph {
	t.Helper()
	type S struct {
		N int `json:"n"`
	}
	fail := pregel.NewGraph[S]("fails")
	fail.AddFunc("boom", func(context.Context, S) (S, error) { return S{}, errors.New("the disk is full") })
	fail.AddEdge(pregel.Start, "boom").AddEdge("boom", pregel.End)
	slow := pregel.NewGraph[S]("slow")
	slow.AddFunc("wait", func(ctx context.Context, s S) (S, error) {
		if gt == nil {
			return S{}, errors.New("no gate")
		}
		gt.entered <- struct{}{}
		select {
		case <-gt.release:
		case <-ctx.Done():
			return S{}, ctx.Err()
		}
		return S{N: s.N + 1}, nil
	})
	slow.AddEdge(pregel.Start, "wait").AddEdge("wait", "wait2")
	slow.AddFunc("wait2", func(_ context.Context, s S) (S, error) { return S{N: s.N + 1}, nil })
	slow.AddEdge("wait2", pregel.End)
	var out []*pregel.Graph
	for _, b := range []*pregel.Builder[S]{fail, slow} {
		g, err := b.Compile()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, g)
	}
	return append(out, agentGraph(t))
}

type stores struct {
	runs runs.Store
	cps  pregel.Checkpointer
}

func storesFor(t *testing.T, kind string) stores {
	t.Helper()
	if kind == "memory" {
		m := runs.NewMemoryStore()
		return stores{m, pregel.NewMemoryStore()}
	}
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return stores{st, st}
}

// service is the embedded runtime as `superstep dev` wires it, traced by
// r (with the graphs, so that agents are told apart).
func service(t *testing.T, r recorder, kind string, graphs []*pregel.Graph) *runs.Service {
	t.Helper()
	svc, _ := serviceAndScheduler(t, r, kind, graphs)
	return svc
}

func serviceAndScheduler(t *testing.T, r recorder, kind string, graphs []*pregel.Graph) (*runs.Service, *embedded.Scheduler) {
	t.Helper()
	reg, err := runs.NewRegistry(graphs...)
	if err != nil {
		t.Fatal(err)
	}
	tr := r.Tracer.WithGraphs(reg.Get)
	st := storesFor(t, kind)
	svc := &runs.Service{Graphs: reg, Runs: st.runs, Checkpoints: st.cps, Tracer: tr}
	if ts, ok := st.runs.(runs.ThreadStore); ok {
		svc.Threads = ts
	}
	sched := embedded.NewScheduler(embedded.SchedulerConfig{Graphs: reg, Runs: st.runs, Checkpoints: st.cps, Tracer: tr, OnStop: svc.RunStopped, StartThreadRun: svc.StartThreadRun})
	svc.Dispatcher = sched
	if err := sched.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sched.Shutdown(context.Background(), time.Second) })
	return svc, sched
}

// caller starts a span as a traced client's request would be.
func caller(r recorder, name string) (context.Context, trace.Span) {
	return r.Tracer.Tracer().Start(context.Background(), name, trace.WithSpanKind(trace.SpanKindServer))
}

func spansNamed(spans []sdktrace.ReadOnlySpan, prefix string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if strings.HasPrefix(s.Name(), prefix) {
			out = append(out, s)
		}
	}
	return out
}

func wantAttrs(t *testing.T, s sdktrace.ReadOnlySpan, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got := attr(s, k); got != v {
			t.Errorf("span %q: %s = %q, want %q", s.Name(), k, got, v)
		}
	}
}

// An agent run on a thread, on the embedded runtime (memory and SQLite):
// the request that creates it (a traced caller's) is the parent of its
// invoke_agent root, and everything the run does, before and after the
// approval, is in that one trace: a chat span per model call with the
// model, provider, token usage and finish reason; an execute_tool span
// per tool call, the approved one saying so; the step after the resume
// linked to the resume request; an end span for the interrupt and one
// for the completion.
func TestAgentThreadRunTrace(t *testing.T) {
	for _, kind := range []string{"memory", "sqlite"} {
		t.Run(kind, func(t *testing.T) {
			r := newRecorder()
			svc := service(t, r, kind, outcomeGraphs(t, nil))
			ctx := t.Context()
			if _, _, err := svc.CreateThread(ctx, runs.CreateThreadRequest{ThreadID: "th-1"}); err != nil {
				t.Fatal(err)
			}
			reqCtx, reqSpan := caller(r, "POST /v1/threads/{thread_id}/runs")
			run, _, err := svc.CreateOnThread(reqCtx, "th-1", runs.ThreadRunRequest{Graph: "support-agent", RunID: "ag-1", Input: agent.TextInput("refund A-1")})
			reqSpan.End()
			if err != nil {
				t.Fatal(err)
			}
			waitRun(t, svc, run.ID, pregel.RunInterrupted)
			resCtx, resSpan := caller(r, "POST /v1/runs/{run_id}/resume")
			if _, err := svc.Resume(resCtx, run.ID, runs.ResumeRequest{Value: json.RawMessage(`"approve"`)}); err != nil {
				t.Fatal(err)
			}
			resSpan.End()
			waitRun(t, svc, run.ID, pregel.RunCompleted)

			var spans []sdktrace.ReadOnlySpan
			for _, s := range r.rec.Ended() {
				if s.SpanContext().SpanID() != resSpan.SpanContext().SpanID() {
					spans = append(spans, s)
				}
			}
			got := tree(t, spans, "superstep.step", "superstep.node.status", "superstep.run.status", "gen_ai.tool.name", "superstep.tool.approval")
			want := `POST /v1/threads/{thread_id}/runs
  invoke_agent support-agent
    superstep step=1
      node model step=1 node.status=completed
        chat test.model-v1
    superstep step=2
      node tools step=2 node.status=completed
        execute_tool lookup gen_ai.tool.name=lookup
      node tools step=2 node.status=interrupted
    superstep step=2
      node tools step=2 node.status=completed
        execute_tool refund gen_ai.tool.name=refund tool.approval=approve
    superstep step=3
      node model step=3 node.status=completed
        chat test.model-v1
    end support-agent step=1 run.status=interrupted
    end support-agent step=3 run.status=completed
`
			if got != want {
				t.Errorf("span tree:\n%s\nwant:\n%s", got, want)
			}
			root := spansNamed(spans, "invoke_agent")[0]
			wantAttrs(t, root, map[string]string{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support-agent", "gen_ai.conversation.id": "th-1", "superstep.run.id": "ag-1"})
			chats := spansNamed(spans, "chat ")
			if len(chats) != 2 {
				t.Fatalf("%d chat spans, want 2", len(chats))
			}
			for i, want := range []map[string]string{
				{"gen_ai.usage.input_tokens": "100", "gen_ai.usage.output_tokens": "20", "gen_ai.response.finish_reasons": `["tool_use"]`},
				{"gen_ai.usage.input_tokens": "150", "gen_ai.usage.output_tokens": "5", "gen_ai.response.finish_reasons": `["end_turn"]`},
			} {
				want["gen_ai.operation.name"], want["gen_ai.provider.name"], want["gen_ai.request.model"] = "chat", "aws.bedrock", "test.model-v1"
				wantAttrs(t, chats[i], want)
				if chats[i].SpanKind() != trace.SpanKindClient {
					t.Errorf("chat span kind %v, want client", chats[i].SpanKind())
				}
				if attr(chats[i], "gen_ai.input.messages") != "" {
					t.Errorf("chat span carries the conversation without %s", agent.CaptureContentEnv)
				}
			}
			for _, s := range spansNamed(spans, "execute_tool ") {
				wantAttrs(t, s, map[string]string{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.type": "function"})
				if id := attr(s, "gen_ai.tool.call.id"); id != "call-1" && id != "call-2" {
					t.Errorf("execute_tool span %q: gen_ai.tool.call.id %q", s.Name(), id)
				}
			}
			// The step the resume continues links to the resume request.
			linked := 0
			for _, s := range spansNamed(spans, "superstep") {
				for _, l := range s.Links() {
					if l.SpanContext.SpanID() == resSpan.SpanContext().SpanID() {
						linked++
						if attr(s, "superstep.step") != "2" {
							t.Errorf("superstep step=%s links to the resume request; want step 2", attr(s, "superstep.step"))
						}
					}
				}
			}
			if linked != 1 {
				t.Errorf("%d superstep spans link to the resume request, want 1", linked)
			}
		})
	}
}

// Failed, drained and cancelled runs say so on the embedded runtime: the
// end span carries the status (and, for a failure, error.type, the
// failing node and status Error), the step and node spans of a failure
// are errors too.
func TestRunOutcomes(t *testing.T) {
	for _, kind := range []string{"memory", "sqlite"} {
		t.Run(kind, func(t *testing.T) {
			r := newRecorder()
			g := newGate()
			svc := service(t, r, kind, outcomeGraphs(t, &g))
			ctx := t.Context()

			if _, _, err := svc.Create(ctx, "fails", runs.CreateRequest{RunID: "f-1"}); err != nil {
				t.Fatal(err)
			}
			waitRun(t, svc, "f-1", pregel.RunFailed)
			if _, _, err := svc.Create(ctx, "slow", runs.CreateRequest{RunID: "d-1"}); err != nil {
				t.Fatal(err)
			}
			g.in(t)
			if _, err := svc.Drain(ctx, "d-1", "deploy v2"); err != nil {
				t.Fatal(err)
			}
			g.open(t)
			waitRun(t, svc, "d-1", pregel.RunDrained)
			// A paused run cancelled: no execution ends it, the service does.
			if _, err := svc.Cancel(ctx, "d-1"); err != nil {
				t.Fatal(err)
			}
			if _, _, err := svc.Create(ctx, "slow", runs.CreateRequest{RunID: "c-1"}); err != nil {
				t.Fatal(err)
			}
			g.in(t)
			if _, err := svc.Cancel(ctx, "c-1"); err != nil {
				t.Fatal(err)
			}
			waitRun(t, svc, "c-1", pregel.RunCancelled)

			ends := map[string][]string{}
			for _, s := range spansNamed(r.rec.Ended(), tracing.SpanEnd+" ") {
				ends[attr(s, "superstep.run.id")] = append(ends[attr(s, "superstep.run.id")], attr(s, "superstep.run.status"))
				switch attr(s, "superstep.run.id") + "/" + attr(s, "superstep.run.status") {
				case "f-1/failed":
					wantAttrs(t, s, map[string]string{"error.type": "node_failed", "superstep.run.failed_node": "boom"})
					if s.Status().Code.String() != "Error" {
						t.Errorf("end span of a failed run: status %v, want Error", s.Status())
					}
				case "d-1/drained":
					wantAttrs(t, s, map[string]string{"superstep.drain.reason": "deploy v2", "error.type": ""})
				}
				if root := rootOf(r.rec.Ended(), s); root == nil || !strings.HasPrefix(root.Name(), tracing.SpanRun+" ") || attr(root, "superstep.run.id") != attr(s, "superstep.run.id") {
					t.Errorf("end span of %s is not in its run's trace under the root", attr(s, "superstep.run.id"))
				}
			}
			for id, want := range map[string][]string{"f-1": {"failed"}, "d-1": {"drained", "cancelled"}, "c-1": {"cancelled"}} {
				if !slices.Equal(ends[id], want) {
					t.Errorf("run %s: end spans say %v, want %v", id, ends[id], want)
				}
			}
			for _, s := range r.rec.Ended() {
				if attr(s, "superstep.run.id") == "f-1" && (s.Name() == "node boom" || s.Name() == tracing.SpanStep) {
					wantAttrs(t, s, map[string]string{"error.type": "node_failed"})
				}
			}
		})
	}
}

// rootOf follows s's parents among spans up to the top.
func rootOf(spans []sdktrace.ReadOnlySpan, s sdktrace.ReadOnlySpan) sdktrace.ReadOnlySpan {
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, x := range spans {
		byID[x.SpanContext().SpanID()] = x
	}
	for s.Parent().IsValid() {
		p, ok := byID[s.Parent().SpanID()]
		if !ok {
			return nil
		}
		s = p
	}
	return s
}
