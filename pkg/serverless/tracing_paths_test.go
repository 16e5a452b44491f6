package serverless_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/superstep/superstep/examples/loop"
	"github.com/superstep/superstep/pkg/agent"
	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/tracing"
)

// spanTree renders spans as an outline: name, the attributes in keys
// (short names), and "link>NAME" for each link to a span among them;
// children after their parent, ordered by start time.
func spanTree(spans []sdktrace.ReadOnlySpan, keys ...string) string {
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	children := map[trace.SpanID][]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byID[s.SpanContext().SpanID()] = s
	}
	var roots []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if _, ok := byID[s.Parent().SpanID()]; !ok {
			roots = append(roots, s)
			continue
		}
		children[s.Parent().SpanID()] = append(children[s.Parent().SpanID()], s)
	}
	var b strings.Builder
	var walk func(s sdktrace.ReadOnlySpan, depth int)
	order := func(l []sdktrace.ReadOnlySpan) {
		slices.SortStableFunc(l, func(x, y sdktrace.ReadOnlySpan) int {
			return cmp.Compare(x.StartTime().UnixNano(), y.StartTime().UnixNano())
		})
	}
	walk = func(s sdktrace.ReadOnlySpan, depth int) {
		fmt.Fprintf(&b, "%s%s", strings.Repeat("  ", depth), s.Name())
		for _, k := range keys {
			if v := attrOf(s, k); v != "" {
				fmt.Fprintf(&b, " %s=%s", k[strings.LastIndexByte(k, '.')+1:], v)
			}
		}
		for _, l := range s.Links() {
			if t, ok := byID[l.SpanContext.SpanID()]; ok {
				fmt.Fprintf(&b, " link>%s", t.Name())
			}
		}
		b.WriteString("\n")
		c := children[s.SpanContext().SpanID()]
		order(c)
		for _, x := range c {
			walk(x, depth+1)
		}
	}
	order(roots)
	for _, r := range roots {
		walk(r, 0)
	}
	return b.String()
}

// tracedDo sends an API request with the trace context of a caller's
// span ctx (traceparent), and decodes the answer into out.
func (s *stack) tracedDo(ctx context.Context, tr *tracing.Tracer, method, path string, body, out any) int {
	s.t.Helper()
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(s.t.Context(), method, s.url+path, bytes.NewReader(b))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range tr.MessageAttributes(ctx) {
		req.Header.Set(k, *v.StringValue)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			s.t.Fatalf("%s %s: %v\n%s", method, path, err, raw)
		}
	}
	return resp.StatusCode
}

// runSpans are the spans of one run (its superstep.run.id), with the
// server spans of the requests that made it and the caller's span.
func runSpans(all []sdktrace.ReadOnlySpan, runID string, trace trace.TraceID) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range all {
		if attrOf(s, "superstep.run.id") == runID || s.SpanContext().TraceID() == trace {
			out = append(out, s)
		}
	}
	return out
}

var pathKeys = []string{"superstep.step", "superstep.step.tasks", "superstep.step.outcome", "superstep.node.status", "superstep.run.status"}

// The serverless path (api, tick and node handlers against moto) traces
// every kind of run as one trace, with step spans that say what each
// handler did: a plain run with remote nodes, interrupted and resumed; a
// thread run created by a traced caller; an agent's A2A task (tools in
// the node function, one call approved); a failed and a cancelled run.
func TestTracingServerlessPaths(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tr := tracing.New(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	type S struct {
		N int `json:"n"`
	}
	fb := pregel.NewGraph[S]("fails")
	fb.AddFunc("boom", func(context.Context, S) (S, error) { return S{}, fmt.Errorf("the disk is full") })
	fb.AddEdge(pregel.Start, "boom").AddEdge("boom", pregel.End)
	fails, err := fb.Compile()
	if err != nil {
		t.Fatal(err)
	}
	s := newStack(t, stackOptions{tracer: tr, graphs: []*pregel.Graph{fails, tracedAgent(t)}})
	caller := func(name string) (context.Context, trace.Span) {
		return tr.Tracer().Start(context.Background(), name, trace.WithSpanKind(trace.SpanKindClient))
	}

	t.Run("remote nodes, interrupted and resumed", func(t *testing.T) {
		const id = "paths-remote"
		s.create("remote-fanout", id, map[string]any{})
		s.waitStatus(id, pregel.RunInterrupted)
		if st := s.do("POST", "/v1/runs/"+id+"/resume", map[string]any{"resume": "yes"}, nil); st >= 300 {
			t.Fatalf("resume: status %d", st)
		}
		s.waitStatus(id, pregel.RunCompleted)
		s.waitIdle()
		spans := runSpans(rec.Ended(), id, trace.TraceID{})
		got := spanTree(spans, pathKeys...)
		want := `invoke_workflow remote-fanout
  superstep step=1 tasks=1 outcome=committed link>invoke_workflow remote-fanout
    node prepare step=1 status=completed
  superstep step=2 tasks=4 outcome=dispatched link>superstep
    node side step=2 status=completed
    node work step=2 status=completed
    node work step=2 status=completed
    node work step=2 status=completed
  superstep step=3 tasks=1 outcome=dispatched link>node work
    node approve step=3 status=interrupted
  end remote-fanout step=2 status=interrupted link>node approve
  superstep step=3 tasks=1 outcome=dispatched
    node approve step=3 status=completed
  end remote-fanout step=3 status=completed link>node approve
`
		// The node pollers run beside the tick poller, as Lambda's do: when
		// the three remote results are in before the dispatching tick ends
		// (it runs "side" inline), that tick commits step 2 itself and the
		// next tick follows it, not the last node result.
		raced := strings.NewReplacer(
			"superstep step=2 tasks=4 outcome=dispatched", "superstep step=2 tasks=4 outcome=committed",
			"superstep step=3 tasks=1 outcome=dispatched link>node work", "superstep step=3 tasks=1 outcome=dispatched link>superstep",
		).Replace(want)
		if norm := sortNodes(got); norm != sortNodes(want) && norm != sortNodes(raced) {
			t.Errorf("span tree:\n%s\nwant:\n%s\nor, when the results beat the dispatching tick:\n%s", got, want, raced)
		}
		// The resumed step links to the resume request (a server span,
		// of a trace of its own).
		var resumeLinks int
		for _, sp := range spans {
			for _, l := range sp.Links() {
				for _, srv := range rec.Ended() {
					if srv.SpanContext().SpanID() == l.SpanContext.SpanID() && srv.Name() == "POST /v1/runs/{run_id}/resume" {
						resumeLinks++
						if attrOf(sp, "superstep.step") != "3" {
							t.Errorf("%s step=%s links to the resume request, want step 3", sp.Name(), attrOf(sp, "superstep.step"))
						}
					}
				}
			}
		}
		if resumeLinks != 1 {
			t.Errorf("%d spans link to the resume request, want 1", resumeLinks)
		}
		for _, sp := range spans {
			if sp.Name() != tracing.SpanStep {
				continue
			}
			if sp.SpanKind() != trace.SpanKindConsumer || attrOf(sp, "messaging.system") != "aws_sqs" || attrOf(sp, "messaging.message.id") == "" ||
				!strings.Contains(attrOf(sp, "messaging.destination.name"), "-") || attrOf(sp, "messaging.operation.type") != "process" {
				t.Errorf("tick span step=%s: kind %v, messaging %q %q %q", attrOf(sp, "superstep.step"), sp.SpanKind(),
					attrOf(sp, "messaging.system"), attrOf(sp, "messaging.destination.name"), attrOf(sp, "messaging.message.id"))
			}
		}
	})

	t.Run("thread run of a traced caller", func(t *testing.T) {
		if st := s.do("POST", "/v1/threads", map[string]any{"thread_id": "paths-thread"}, nil); st >= 300 {
			t.Fatalf("create thread: %d", st)
		}
		ctx, span := caller("client: new run")
		st := s.tracedDo(ctx, tr, "POST", "/v1/threads/paths-thread/runs", map[string]any{"graph": loop.Name, "run_id": "paths-thr", "input": map[string]int{"limit": 2}}, nil)
		span.End()
		if st >= 300 {
			t.Fatalf("create run on thread: %d", st)
		}
		s.waitStatus("paths-thr", pregel.RunCompleted)
		s.waitIdle()
		spans := runSpans(rec.Ended(), "paths-thr", span.SpanContext().TraceID())
		got := spanTree(spans, pathKeys...)
		want := `client: new run
  POST /v1/threads/{thread_id}/runs
    invoke_workflow counter
      superstep step=1 tasks=1 outcome=committed link>invoke_workflow counter
        node count step=1 status=completed
      superstep step=2 tasks=1 outcome=committed link>superstep
        node count step=2 status=completed
      end counter step=2 status=completed link>superstep
`
		if got != want {
			t.Errorf("span tree:\n%s\nwant:\n%s", got, want)
		}
		for _, sp := range spans {
			if sp.SpanContext().TraceID() != span.SpanContext().TraceID() {
				t.Errorf("span %q is not in the caller's trace", sp.Name())
			}
		}
	})

	t.Run("agent task over A2A, a tool call approved", func(t *testing.T) {
		msg := func(text string, extra map[string]any) map[string]any {
			m := map[string]any{"kind": "message", "role": "user", "messageId": fmt.Sprint(time.Now().UnixNano()), "parts": []any{map[string]any{"kind": "text", "text": text}}}
			for k, v := range extra {
				m[k] = v
			}
			return map[string]any{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": map[string]any{"message": m}}
		}
		var first struct {
			Result a2aTask `json:"result"`
		}
		ctx, span := caller("client: ask")
		if st := s.tracedDo(ctx, tr, "POST", "/a2a/traced-agent", msg("refund A-1", map[string]any{"contextId": "paths-conv"}), &first); st != http.StatusOK || first.Result.Status.State != "input-required" {
			t.Fatalf("message/send: %d %+v", st, first.Result)
		}
		span.End()
		actx, aspan := caller("client: approve")
		var done struct {
			Result a2aTask `json:"result"`
		}
		if st := s.tracedDo(actx, tr, "POST", "/a2a/traced-agent", msg("approve", map[string]any{"taskId": first.Result.ID, "contextId": "paths-conv"}), &done); st != http.StatusOK || done.Result.Status.State != "completed" {
			t.Fatalf("answer: %d %+v", st, done.Result)
		}
		aspan.End()
		s.waitIdle()
		spans := runSpans(rec.Ended(), first.Result.ID, span.SpanContext().TraceID())
		got := spanTree(spans, "superstep.step", "superstep.step.outcome", "superstep.node.status", "superstep.run.status", "gen_ai.tool.name", "superstep.tool.approval")
		want := `client: ask
  POST /a2a/{graph}
    invoke_agent traced-agent
      superstep step=1 outcome=committed link>invoke_agent traced-agent
        node model step=1 status=completed
          chat test.model-v1
      superstep step=2 outcome=dispatched link>superstep
        node tools step=2 status=completed
          execute_tool lookup name=lookup
        node tools step=2 status=interrupted
      end traced-agent step=1 status=interrupted link>node tools
      superstep step=2 outcome=dispatched
        node tools step=2 status=completed
          execute_tool refund name=refund approval=approve
      superstep step=3 outcome=committed link>node tools
        node model step=3 status=completed
          chat test.model-v1
      end traced-agent step=3 status=completed link>superstep
`
		if sortNodes(got) != sortNodes(want) {
			t.Errorf("span tree:\n%s\nwant:\n%s", got, want)
		}
		for _, sp := range spans {
			if strings.HasPrefix(sp.Name(), "chat ") && (attrOf(sp, "gen_ai.provider.name") != "aws.bedrock" || attrOf(sp, "gen_ai.usage.input_tokens") == "") {
				t.Errorf("chat span lacks provider or usage: %v", sp.Attributes())
			}
			if sp.Name() == "invoke_agent traced-agent" && attrOf(sp, "gen_ai.conversation.id") != "paths-conv" {
				t.Errorf("invoke_agent span: gen_ai.conversation.id %q", attrOf(sp, "gen_ai.conversation.id"))
			}
		}
	})

	t.Run("failed and cancelled", func(t *testing.T) {
		s.create("fails", "paths-failed", map[string]any{})
		s.waitStatus("paths-failed", pregel.RunFailed)
		s.create(loop.Name, "paths-cancel", map[string]int{"limit": 8, "delay_ms": 300})
		s.wait("paths-cancel", "step 2", func(r api.RunDetail) bool { return r.Step >= 2 })
		if st := s.do("POST", "/v1/runs/paths-cancel/cancel", nil, nil); st != http.StatusAccepted {
			t.Fatalf("cancel: %d", st)
		}
		r := s.waitStatus("paths-cancel", pregel.RunCancelled)
		s.waitIdle()
		var failedEnd, cancelEnd sdktrace.ReadOnlySpan
		for _, sp := range rec.Ended() {
			if !strings.HasPrefix(sp.Name(), tracing.SpanEnd+" ") {
				continue
			}
			switch attrOf(sp, "superstep.run.id") {
			case "paths-failed":
				failedEnd = sp
			case "paths-cancel":
				cancelEnd = sp
			}
		}
		if failedEnd == nil || attrOf(failedEnd, "superstep.run.status") != "failed" || attrOf(failedEnd, "error.type") != "node_failed" ||
			attrOf(failedEnd, "superstep.run.failed_node") != "boom" || failedEnd.Status().Code.String() != "Error" {
			t.Errorf("end span of the failed run: %v", failedEnd)
		}
		if cancelEnd == nil || attrOf(cancelEnd, "superstep.run.status") != "cancelled" {
			t.Errorf("end span of the cancelled run: %v", cancelEnd)
		}
		// The tick that ended the cancelled run names its step.
		for _, sp := range rec.Ended() {
			if attrOf(sp, "superstep.run.id") == "paths-cancel" && attrOf(sp, "superstep.step.outcome") == "cancelled" {
				if want := fmt.Sprint(r.Step + 1); attrOf(sp, "superstep.step") != want && attrOf(sp, "superstep.step") != fmt.Sprint(r.Step) {
					t.Errorf("cancel tick says step %s, the run stopped at step %d", attrOf(sp, "superstep.step"), r.Step)
				}
			}
		}
	})
}

// sortNodes sorts the node spans under each step span, each with the
// spans below it, whose order depends on timing: consecutive sibling
// lines starting "node " at one depth, at any depth.
func sortNodes(tree string) string {
	lines := strings.Split(tree, "\n")
	indent := func(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }
	isNode := func(l string) bool { return strings.HasPrefix(strings.TrimLeft(l, " "), "node ") }
	var out []string
	for i := 0; i < len(lines); {
		if !isNode(lines[i]) {
			out = append(out, lines[i])
			i++
			continue
		}
		// The run of sibling node subtrees starting at line i.
		depth := indent(lines[i])
		var blocks []string
		for i < len(lines) && isNode(lines[i]) && indent(lines[i]) == depth {
			j := i + 1
			for j < len(lines) && indent(lines[j]) > depth {
				j++
			}
			block := lines[i]
			if j > i+1 {
				block += "\n" + sortNodes(strings.Join(lines[i+1:j], "\n"))
			}
			blocks = append(blocks, block)
			i = j
		}
		slices.Sort(blocks)
		out = append(out, blocks...)
	}
	return strings.Join(out, "\n")
}

// bedrockNamed is a scripted model named as a Bedrock model in traces.
type bedrockNamed struct{ *agent.Scripted }

func (bedrockNamed) GenAIModel() (string, string) { return "aws.bedrock", "test.model-v1" }

// tracedAgent is an agent whose tools run in the node function: its
// first turn calls lookup and refund (which waits for approval), its
// second answers.
func tracedAgent(t *testing.T) *pregel.Graph {
	t.Helper()
	tool := func(name string) agent.Tool {
		return agent.MustTool(name, name+"s an order", func(_ context.Context, in struct {
			Order string `json:"order"`
		}) (string, error) {
			return name + " " + in.Order + ": done", nil
		})
	}
	call := func(id, name string) agent.Block {
		return agent.Block{ToolCall: &agent.ToolCall{ID: id, Name: name, Input: json.RawMessage(`{"order": "A-1"}`)}}
	}
	model := bedrockNamed{agent.ScriptedTurns(
		agent.Response{Message: agent.Message{Role: agent.RoleAssistant, Content: []agent.Block{call("c1", "lookup"), call("c2", "refund")}},
			StopReason: agent.StopToolUse, Usage: agent.Usage{InputTokens: 100, OutputTokens: 20}},
		agent.Response{Message: agent.AssistantText("Refunded."), StopReason: agent.StopEndTurn, Usage: agent.Usage{InputTokens: 150, OutputTokens: 5}},
	)}
	g, err := agent.New(agent.Config{Name: "traced-agent", Model: model, Tools: []agent.Tool{tool("lookup"), tool("refund")}, Approve: []string{"refund"}, RemoteTools: true, Generate: true})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestSortNodes checks the comparison the span tree tests use: sibling
// node spans in either order compare equal, children moving with their
// node; a different tree does not.
func TestSortNodes(t *testing.T) {
	a := `client: ask
  superstep step=2 outcome=dispatched
    node tools step=2 status=interrupted
    node tools step=2 status=completed
      execute_tool lookup name=lookup
  end traced-agent step=1 status=interrupted`
	b := `client: ask
  superstep step=2 outcome=dispatched
    node tools step=2 status=completed
      execute_tool lookup name=lookup
    node tools step=2 status=interrupted
  end traced-agent step=1 status=interrupted`
	c := `client: ask
  superstep step=2 outcome=dispatched
    node tools step=2 status=completed
    node tools step=2 status=interrupted
      execute_tool lookup name=lookup
  end traced-agent step=1 status=interrupted`
	if sortNodes(a) != sortNodes(b) {
		t.Errorf("the same tree in two orders compares unequal:\n%s\n---\n%s", sortNodes(a), sortNodes(b))
	}
	if sortNodes(a) == sortNodes(c) {
		t.Errorf("a tool call under another node compares equal:\n%s", sortNodes(c))
	}
}
