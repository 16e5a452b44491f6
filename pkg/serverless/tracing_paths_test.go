package serverless_test

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

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
		slices.SortStableFunc(l, func(x, y sdktrace.ReadOnlySpan) int { return cmp.Compare(x.StartTime().UnixNano(), y.StartTime().UnixNano()) })
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

func TestTracingServerlessDump(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tr := tracing.New(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	s := newStack(t, stackOptions{tracer: tr})
	const id = "dump"
	s.create("remote-fanout", id, map[string]any{})
	s.waitStatus(id, pregel.RunInterrupted)
	if st := s.do("POST", "/v1/runs/"+id+"/resume", map[string]any{"resume": "yes"}, nil); st >= 300 {
		t.Fatalf("resume: status %d", st)
	}
	s.waitStatus(id, pregel.RunCompleted)
	s.waitIdle()
	t.Logf("\n%s", spanTree(rec.Ended(), "superstep.step", "superstep.step.tasks", "superstep.step.outcome", "superstep.node.status", "superstep.run.status", "messaging.destination.name"))
}
