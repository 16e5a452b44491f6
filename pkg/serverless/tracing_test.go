package serverless_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/tracing"
)

// A run on the serverless path is one trace: the server span of the
// request that created it is the root, the api's invoke_workflow span its
// child; every tick's superstep span is its child (read from
// the run record), linked to the span that sent the tick; node spans of
// remote tasks are children of the tick span that sent them (carried in
// the SQS message attributes), and the tick a node sends to commit its
// step links back to it: api -> tick -> node -> tick. Logs a node writes
// with its context carry the trace and span ids.
func TestTracingServerless(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tr := tracing.New(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	var (
		mu   sync.Mutex
		logs bytes.Buffer
	)
	nodeLog := slog.New(tracing.NewLogHandler(slog.NewJSONHandler(&lockedWriter{&mu, &logs}, nil)))
	s := newStack(t, stackOptions{tracer: tr, work: func(ctx context.Context) {
		nodeLog.InfoContext(ctx, "work")
	}})
	const id = "traced-remote"
	s.create("remote-fanout", id, map[string]any{})
	s.waitStatus(id, pregel.RunInterrupted)
	if st := s.do("POST", "/v1/runs/"+id+"/resume", map[string]any{"resume": "yes"}, nil); st >= 300 {
		t.Fatalf("resume: status %d", st)
	}
	s.waitStatus(id, pregel.RunCompleted)
	s.waitIdle()

	// The API's server spans (one per request, each its own trace but
	// the one that created the run) are set apart.
	var spans []sdktrace.ReadOnlySpan
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	servers := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, sp := range rec.Ended() {
		if sp.SpanKind() == trace.SpanKindServer {
			servers[sp.SpanContext().SpanID()] = sp
			continue
		}
		spans = append(spans, sp)
		byID[sp.SpanContext().SpanID()] = sp
	}
	var root sdktrace.ReadOnlySpan
	for _, sp := range spans {
		if strings.HasPrefix(sp.Name(), "invoke_workflow") {
			if root != nil {
				t.Fatalf("two root spans: %q and %q", root.Name(), sp.Name())
			}
			root = sp
		}
	}
	if root == nil || root.Name() != "invoke_workflow remote-fanout" {
		t.Fatalf("want one root span invoke_workflow remote-fanout; spans: %v", names(spans))
	}
	if create := servers[root.Parent().SpanID()]; create == nil || create.Name() != "POST /v1/graphs/{graph}/runs" || create.Parent().IsValid() {
		t.Fatalf("the run's root span has parent %v, want the server span of the request that created it, itself without parent", create)
	}
	tid := root.SpanContext().TraceID()
	parent := func(sp sdktrace.ReadOnlySpan) sdktrace.ReadOnlySpan {
		p, ok := byID[sp.Parent().SpanID()]
		if !ok {
			t.Fatalf("span %q (step %s) has parent %s, which is not among the spans", sp.Name(), attrOf(sp, "superstep.step"), sp.Parent().SpanID())
		}
		return p
	}
	count := map[string]int{}
	commitLinks := 0
	workSpans := map[trace.SpanID]bool{}
	for _, sp := range spans {
		if sp.SpanContext().TraceID() != tid {
			t.Errorf("span %q is in another trace", sp.Name())
		}
		if attrOf(sp, "superstep.run.id") != id {
			t.Errorf("span %q has run id %q", sp.Name(), attrOf(sp, "superstep.run.id"))
		}
		switch {
		case sp.Name() == "superstep":
			if p := parent(sp); p != root {
				t.Errorf("superstep span of step %s has parent %q, want the root", attrOf(sp, "superstep.step"), p.Name())
			}
		case strings.HasPrefix(sp.Name(), "node "):
			node := strings.TrimPrefix(sp.Name(), "node ")
			key := node + "@" + attrOf(sp, "superstep.step") + "=" + attrOf(sp, "superstep.node.status")
			count[key]++
			p := parent(sp)
			if p.Name() != "superstep" || attrOf(p, "superstep.step") != attrOf(sp, "superstep.step") {
				t.Errorf("node span %s has parent %q step %s, want the superstep span of its step", key, p.Name(), attrOf(p, "superstep.step"))
			}
			if node == "work" {
				workSpans[sp.SpanContext().SpanID()] = true
			}
		}
	}
	stepSpans := map[trace.SpanID]string{} // superstep spans by id: their step
	for _, sp := range spans {
		if sp.Name() == "superstep" {
			stepSpans[sp.SpanContext().SpanID()] = attrOf(sp, "superstep.step")
		}
	}
	for _, sp := range spans {
		if sp.Name() != "superstep" {
			continue
		}
		for _, l := range sp.Links() {
			// The last node handler of step 2 commits it, or, when the
			// work tasks end before the inline side task, the tick of
			// step 2 does: the span of step 3 links to either.
			if workSpans[l.SpanContext.SpanID()] || attrOf(sp, "superstep.step") == "3" && stepSpans[l.SpanContext.SpanID()] == "2" {
				commitLinks++
			}
		}
	}
	want := map[string]int{
		"prepare@1=completed": 1, "side@2=completed": 1, "work@2=completed": 3,
		"approve@3=interrupted": 1, "approve@3=completed": 1,
	}
	for k, n := range want {
		if count[k] != n {
			t.Errorf("%d node spans %s, want %d (all: %v)", count[k], k, n, count)
		}
	}
	if commitLinks == 0 {
		t.Errorf("no superstep span of step 3 links to a node span of work or to the tick of step 2: the commit of step 2 must link back to who made it")
	}

	mu.Lock()
	defer mu.Unlock()
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) < 3 {
		t.Fatalf("want a log line per work task, got %q", logs.String())
	}
	for _, l := range lines {
		var r map[string]string
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		sid, _ := trace.SpanIDFromHex(r["span_id"])
		if r["trace_id"] != tid.String() || !workSpans[sid] {
			t.Errorf("log line %s does not carry the run's trace id %s and a work span's id", l, tid)
		}
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func attrOf(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name()
	}
	return out
}
