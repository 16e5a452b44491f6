package tick

import (
	"context"
	"fmt"

	"github.com/superstep/superstep/pkg/runs"
)

// Threads passes a thread from a run that stopped to the thread's next run,
// and starts a run of a thread from the thread's state; runs.Service does
// both (RunStopped, StartThreadRun). Both must be idempotent: a handler
// calls them again when a message is delivered again.
type Threads interface {
	// RunStopped is called with the stored record of a run of a thread
	// whenever a handler sees it stopped: when it ends or pauses the run,
	// and when a tick or node task of a stopped run is delivered (again),
	// so that a hand-off cut short by a crash is finished.
	RunStopped(ctx context.Context, r runs.Run) error
	// StartThreadRun is called for a run of a thread that has no step 0:
	// it starts the run if it holds its thread, and leaves it otherwise.
	StartThreadRun(ctx context.Context, r runs.Run) error
}

// stopped passes the thread of run r on, if r is a run of a thread. An
// error fails the message, whose next delivery calls it again.
func (h *Handler) stopped(ctx context.Context, r runs.Run) error {
	if h.Threads == nil || r.ThreadID == "" {
		return nil
	}
	if err := h.Threads.RunStopped(ctx, r); err != nil {
		return fmt.Errorf("pass thread %q on from run %q: %w", r.ThreadID, r.ID, err)
	}
	return nil
}

// startThreadRun starts a run of a thread that has no step 0 yet; ok is
// false for other runs, which the tick starts as usual.
func (h *Handler) startThreadRun(ctx context.Context, r runs.Run) (ok bool, err error) {
	if h.Threads == nil || r.ThreadID == "" {
		return false, nil
	}
	if err := h.Threads.StartThreadRun(ctx, r); err != nil {
		return true, fmt.Errorf("start run %q of thread %q: %w", r.ID, r.ThreadID, err)
	}
	return true, nil
}
