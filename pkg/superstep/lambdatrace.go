//go:build !superstep.lambda

package superstep

import (
	"context"
	"log/slog"
	"time"

	"github.com/superstep/superstep/pkg/serverless"
	"github.com/superstep/superstep/pkg/tracing"
)

// shutdownTracer exports what is left when Lambda stops the process (or
// when `superstep invoke` ends).
func shutdownTracer(app *serverless.App) {
	if app.Tracer == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = app.Tracer.Shutdown(ctx)
}

// installLogger makes log the process's default slog logger when tracing
// is on, so that the records a graph's own code logs with
// slog.InfoContext(ctx, ...) inside a node go where the runtime's do and
// carry the node span's trace_id and span_id (log wraps its handler with
// tracing.NewLogHandler). With tracing off the default is left alone.
func installLogger(tr *tracing.Tracer, log *slog.Logger) {
	if tr != nil {
		tracing.SetDefaultLogger(log)
	}
}
