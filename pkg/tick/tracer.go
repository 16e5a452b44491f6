package tick

import (
	"context"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// Tracer traces ticks and node tasks; pkg/tracing implements it with
// OpenTelemetry. A Handler without one traces nothing.
type Tracer interface {
	// StartTick starts the span of a tick that works on step of run, and
	// returns the context to work with and the function that ends the
	// span with the tick's error.
	StartTick(ctx context.Context, run runs.Run, step int) (context.Context, func(error))
	// StartTask starts the span of one task of run this handler
	// executes, and returns the context to execute it with and the
	// function that ends the span with its result.
	StartTask(ctx context.Context, run runs.Run, t pregel.Task) (context.Context, func(pregel.TaskResult))
	// EndRun records how run stopped (run.Status): a tick stopped it.
	EndRun(ctx context.Context, run runs.Run)
}

// startTask wraps one task's execution in the Tracer's span, if any.
func (h *Handler) startTask(ctx context.Context, run runs.Run, t pregel.Task) (context.Context, func(pregel.TaskResult)) {
	if h.Tracer == nil {
		return ctx, func(pregel.TaskResult) {}
	}
	return h.Tracer.StartTask(ctx, run, t)
}
