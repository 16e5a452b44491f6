package tracing_test

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/superstep/superstep/pkg/tracing"
)

// recorder is a Tracer whose spans end up in memory.
type recorder struct {
	*tracing.Tracer
	rec *tracetest.SpanRecorder
}

func newRecorder() recorder {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	return recorder{tracing.New(tp), rec}
}

// attr returns a span attribute as text ("" when absent).
func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

// tree renders the ended spans of one trace as an indented outline, one
// line per span with the attributes in keys, children ordered by step,
// then name, then start time. It fails the test if the spans are not
// one trace, or if a parent is missing.
func tree(t *testing.T, spans []sdktrace.ReadOnlySpan, keys ...string) string {
	t.Helper()
	if len(spans) == 0 {
		t.Fatal("no spans")
	}
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	children := map[trace.SpanID][]sdktrace.ReadOnlySpan{}
	tid := spans[0].SpanContext().TraceID()
	for _, s := range spans {
		if s.SpanContext().TraceID() != tid {
			t.Fatalf("span %q is in trace %s, not %s: a run's spans must be one trace", s.Name(), s.SpanContext().TraceID(), tid)
		}
		byID[s.SpanContext().SpanID()] = s
	}
	var roots []sdktrace.ReadOnlySpan
	for _, s := range spans {
		p := s.Parent().SpanID()
		if !s.Parent().IsValid() {
			roots = append(roots, s)
			continue
		}
		if _, ok := byID[p]; !ok {
			t.Fatalf("span %q has parent %s, which is not among the spans", s.Name(), p)
		}
		children[p] = append(children[p], s)
	}
	var b strings.Builder
	var walk func(s sdktrace.ReadOnlySpan, depth int)
	order := func(list []sdktrace.ReadOnlySpan) {
		slices.SortStableFunc(list, func(x, y sdktrace.ReadOnlySpan) int {
			return cmp.Or(
				// A run's end spans come after its steps.
				cmp.Compare(isEnd(x), isEnd(y)),
				cmp.Compare(len(attr(x, "superstep.step")), len(attr(y, "superstep.step"))),
				cmp.Compare(attr(x, "superstep.step"), attr(y, "superstep.step")),
				cmp.Compare(x.Name(), y.Name()),
				// Tasks of one step run in parallel: their start order is
				// the scheduler's, not the run's.
				cmp.Compare(parallelKey(x), parallelKey(y)),
				x.StartTime().Compare(y.StartTime()),
			)
		})
	}
	walk = func(s sdktrace.ReadOnlySpan, depth int) {
		b.WriteString(strings.Repeat("  ", depth))
		b.WriteString(s.Name())
		for _, k := range keys {
			if v := attr(s, k); v != "" {
				fmt.Fprintf(&b, " %s=%s", strings.TrimPrefix(k, "superstep."), v)
			}
		}
		if s.Status().Code.String() == "Error" {
			b.WriteString(" ERROR")
		}
		b.WriteString("\n")
		kids := children[s.SpanContext().SpanID()]
		order(kids)
		for _, c := range kids {
			walk(c, depth+1)
		}
	}
	order(roots)
	for _, r := range roots {
		walk(r, 0)
	}
	return b.String()
}

// isEnd is 1 for a run's end span, 0 for others.
func isEnd(s sdktrace.ReadOnlySpan) int {
	if strings.HasPrefix(s.Name(), tracing.SpanEnd+" ") {
		return 1
	}
	return 0
}

// parallelKey orders the node spans of one step, which start in no set
// order, by their status; other spans keep their start order.
func parallelKey(s sdktrace.ReadOnlySpan) string {
	if !strings.HasPrefix(s.Name(), "node ") {
		return ""
	}
	return attr(s, "superstep.node.status")
}
