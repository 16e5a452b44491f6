package tick

import (
	"context"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// Tracer traces ticks and node tasks; pkg/tracing implements it with
// OpenTelemetry. A Handler without one traces nothing.
type Tracer interface {
	// StartTick starts the span of a tick that works on step of run,
	// started at start (zero: now), and returns the context to work
	// with and the function that ends the span with the tick's error.
	StartTick(ctx context.Context, run runs.Run, step int, start time.Time) (context.Context, func(error))
	// StartTask starts the span of one task of run this handler
	// executes, and returns the context to execute it with and the
	// function that ends the span with its result.
	StartTask(ctx context.Context, run runs.Run, t pregel.Task) (context.Context, func(pregel.TaskResult))
	// Annotate records on the span of the tick working in ctx, if any,
	// the number of tasks of its step (when tasks > 0) and how the
	// tick's work on it ended (when outcome is not empty): dispatched,
	// committed, interrupted, or the status of the run it stopped.
	Annotate(ctx context.Context, tasks int, outcome string)
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

// annotate is Tracer.Annotate when there is a Tracer.
func (h *Handler) annotate(ctx context.Context, tasks int, outcome string) {
	if h.Tracer != nil {
		h.Tracer.Annotate(ctx, tasks, outcome)
	}
}

// traceStopped records, with a Tracer, that a tick stopped run.
func (h *Handler) traceStopped(ctx context.Context, run runs.Run) {
	if h.Tracer != nil {
		h.Tracer.Annotate(ctx, 0, string(run.Status))
		h.Tracer.EndRun(ctx, run)
	}
}

// pendingKey holds, in a context, the tick span a handler may open later
// (see deferTick).
type pendingKey struct{}

// pendingTick is the span of a tick's work that a handler does only if
// its commit wins: the node handler that records a step's last result,
// or a tick that finds the node handlers done, commits the step and then
// dispatches the next one's remote tasks as a tick would.
type pendingTick struct {
	run   runs.Run
	step  int
	start time.Time
	end   func(error) // set once opened
}

// deferTick returns ctx carrying the span of step's dispatch, to be
// opened by openTick when the handler dispatches that step (a handler
// that loses the commit, or whose commit stops the run, opens none), and
// the function that ends it if it was opened.
func (h *Handler) deferTick(ctx context.Context, run runs.Run, step int) (context.Context, func(error)) {
	if h.Tracer == nil {
		return ctx, func(error) {}
	}
	p := &pendingTick{run: run, step: step, start: time.Now()}
	return context.WithValue(ctx, pendingKey{}, p), func(err error) {
		if p.end != nil {
			p.end(err)
		}
	}
}

// openTick opens the span deferTick put in ctx, if any and not opened
// yet, starting when the handler's work on it began, and returns ctx
// holding it.
func (h *Handler) openTick(ctx context.Context) context.Context {
	p, _ := ctx.Value(pendingKey{}).(*pendingTick)
	if h.Tracer == nil || p == nil || p.end != nil {
		return ctx
	}
	ctx, p.end = h.Tracer.StartTick(ctx, p.run, p.step, p.start)
	return ctx
}
