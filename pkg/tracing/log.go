package tracing

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// Log attribute keys of [NewLogHandler].
const (
	LogTraceID = "trace_id"
	LogSpanID  = "span_id"
)

// NewLogHandler wraps h so that a record logged with a context holding a
// span (slog's InfoContext and the like) carries the span's trace_id and
// span_id, which tie the log line to its run's trace.
func NewLogHandler(h slog.Handler) slog.Handler { return &logHandler{h} }

type logHandler struct{ next slog.Handler }

func (h *logHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String(LogTraceID, sc.TraceID().String()), slog.String(LogSpanID, sc.SpanID().String()))
	}
	return h.next.Handle(ctx, r)
}

func (h *logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &logHandler{h.next.WithAttrs(attrs)}
}

func (h *logHandler) WithGroup(name string) slog.Handler {
	return &logHandler{h.next.WithGroup(name)}
}

// SetDefaultLogger makes l the process's default logger (slog.SetDefault),
// so that records a graph's own code logs with slog.InfoContext(ctx, …)
// inside a node carry the node span's ids, when l's handler comes from
// [NewLogHandler]. It leaves the default alone when l's handler wraps the
// default logger's own handler: that one already writes through the
// default, and making it the default would send its output back to it.
func SetDefaultLogger(l *slog.Logger) {
	if l == nil {
		return
	}
	if h, ok := l.Handler().(*logHandler); ok && h.next == slog.Default().Handler() {
		return
	}
	slog.SetDefault(l)
}
