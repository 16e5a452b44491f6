package tracing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/superstep/superstep/examples/loop"
	"github.com/superstep/superstep/examples/triage"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/tracing"
)

var treeKeys = []string{"superstep.step", "superstep.node.status", "superstep.node.reason", "superstep.step.outcome", "superstep.run.status"}

// The counter example on the memory store: one invoke_workflow span, a
// superstep span per step, a node span per task inside it.
func TestEngineCounterTree(t *testing.T) {
	r := newRecorder()
	g, err := loop.Graph()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := g.Run(ctx, []byte(`{"limit": 3}`), r.Options(ctx)...)
	if err != nil || res.Status != pregel.RunCompleted {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	got := tree(t, r.rec.Ended(), treeKeys...)
	want := `invoke_workflow counter run.status=completed
  superstep step=1 step.outcome=committed
    node count step=1 node.status=completed
  superstep step=2 step.outcome=committed
    node count step=2 node.status=completed
  superstep step=3 step.outcome=committed
    node count step=3 node.status=completed
  end counter step=3 run.status=completed
`
	if got != want {
		t.Errorf("span tree:\n%s\nwant:\n%s", got, want)
	}
	root := r.rec.Ended()[len(r.rec.Ended())-1]
	for k, v := range map[string]string{"gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": "counter", "superstep.graph": "counter", "superstep.run.id": res.RunID} {
		if got := attr(root, k); got != v {
			t.Errorf("root span %s = %q, want %q", k, got, v)
		}
	}
}

// The triage example: its span tree follows the run's events, step by
// step and task by task, through a skip, a fan-out, a join and an
// interrupt, and the resumed run's tree goes on to the end.
func TestEngineTriageTree(t *testing.T) {
	r := newRecorder()
	g, err := triage.Graph()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var events []pregel.Event
	collect := pregel.WithObserver(func(ev pregel.Event) { events = append(events, ev) })
	store := pregel.NewMemoryStore()
	in := []byte(`{"ticket": {"id": "T-1", "from": "ana@example.com", "subject": "Refund", "body": "I was charged twice for my invoice"}}`)
	res, err := g.Run(ctx, in, append(r.Options(ctx), pregel.WithStore(store), collect)...)
	if err != nil || res.Status != pregel.RunInterrupted {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	got := tree(t, r.rec.Ended(), treeKeys...)
	if want := treeFromEvents(g.Name(), events); got != want {
		t.Errorf("span tree:\n%s\nwant (from the run's events):\n%s", got, want)
	}
	for _, must := range []string{"node translate step=2 node.status=skipped node.reason=", "node review step=7 node.status=interrupted", "step.outcome=interrupted", "run.status=interrupted", "node search_kb step=5"} {
		if !strings.Contains(got, must) {
			t.Errorf("span tree lacks %q:\n%s", must, got)
		}
	}

	r2 := newRecorder()
	events = nil
	res, err = g.Resume(ctx, res.RunID, append(r2.Options(ctx), pregel.WithStore(store), pregel.WithResume("approve"), collect)...)
	if err != nil || res.Status != pregel.RunCompleted {
		t.Fatalf("Resume = %+v, %v", res, err)
	}
	got = tree(t, r2.rec.Ended(), treeKeys...)
	t.Logf("resumed run's spans:\n%s", got)
	if want := treeFromEvents(g.Name(), events); got != want {
		t.Errorf("resumed span tree:\n%s\nwant:\n%s", got, want)
	}
}

// treeFromEvents renders the span tree a run's events call for, as tree
// does.
func treeFromEvents(graph string, events []pregel.Event) string {
	var b strings.Builder
	steps := map[int][]string{}
	var order []int
	stepLine := map[int]string{}
	var final string
	finalStep := 0
	for _, ev := range events {
		switch ev.Type {
		case pregel.EventStepStarted:
			order = append(order, ev.Step)
			stepLine[ev.Step] = fmt.Sprintf("  superstep step=%d", ev.Step)
		case pregel.EventStepFinished:
			stepLine[ev.Step] += " step.outcome=committed"
		case pregel.EventInterrupted:
			stepLine[ev.Step] += " step.outcome=interrupted"
		case pregel.EventNodeFinished:
			l := fmt.Sprintf("    node %s step=%d node.status=%s", ev.Node, ev.Step, ev.Status)
			if ev.Reason != "" {
				l += " node.reason=" + ev.Reason
			}
			steps[ev.Step] = append(steps[ev.Step], l)
		case pregel.EventRunFinished:
			final, finalStep = string(ev.RunStatus), ev.Step
		}
	}
	fmt.Fprintf(&b, "invoke_workflow %s run.status=%s\n", graph, final)
	for _, s := range order {
		b.WriteString(stepLine[s] + "\n")
		nodes := steps[s]
		sortStrings(nodes)
		for _, l := range nodes {
			b.WriteString(l + "\n")
		}
	}
	fmt.Fprintf(&b, "  end %s step=%d run.status=%s\n", graph, finalStep, final)
	return b.String()
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// A node runs inside its span: spans it starts are children of it, and
// records it logs with its context carry the trace and span ids.
func TestNodeContextCarriesSpan(t *testing.T) {
	r := newRecorder()
	var logs bytes.Buffer
	log := slog.New(tracing.NewLogHandler(slog.NewJSONHandler(&logs, nil)))
	type S struct {
		N int `json:"n"`
	}
	b := pregel.NewGraph[S]("child-span")
	b.AddFunc("work", func(ctx context.Context, s S) (S, error) {
		_, span := r.Tracer.Tracer().Start(ctx, "chat model")
		log.InfoContext(ctx, "working")
		span.End()
		return S{N: 1}, nil
	})
	b.AddEdge(pregel.Start, "work").AddEdge("work", pregel.End)
	g, err := b.Compile()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := g.Run(ctx, nil, r.Options(ctx)...); err != nil {
		t.Fatal(err)
	}
	got := tree(t, r.rec.Ended())
	want := "invoke_workflow child-span\n  superstep\n    node work\n      chat model\n  end child-span\n"
	if got != want {
		t.Errorf("span tree:\n%s\nwant:\n%s", got, want)
	}
	var rec map[string]any
	if err := json.Unmarshal(logs.Bytes(), &rec); err != nil {
		t.Fatalf("log %q: %v", logs.String(), err)
	}
	for _, s := range r.rec.Ended() {
		if s.Name() == "node work" {
			if rec["trace_id"] != s.SpanContext().TraceID().String() || rec["span_id"] != s.SpanContext().SpanID().String() {
				t.Errorf("log record %v does not carry the node span's ids %s/%s", rec, s.SpanContext().TraceID(), s.SpanContext().SpanID())
			}
		}
	}
}

// A nil Tracer adds no options, so a run pays nothing.
func TestNilTracer(t *testing.T) {
	var tr *tracing.Tracer
	if opts := tr.Options(context.Background()); opts != nil {
		t.Errorf("nil Tracer returned %d options", len(opts))
	}
}
