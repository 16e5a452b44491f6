package embedded

import (
	"context"
	"time"

	"github.com/superstep/superstep/pkg/runs"
)

// The Scheduler's share of event retention (see the runs package's
// retention.go): with SchedulerConfig.EventMaxAge set, it deletes the
// log's expired events periodically; DeleteRun deletes a run's events from
// a log apart from the stores.

// sweepEvery is how often the Scheduler's sweep deletes expired events: a
// tenth of the maximum age, between a second and a minute, so that events
// outlive it by at most a tenth.
func sweepEvery(maxAge time.Duration) time.Duration {
	return min(max(maxAge/10, time.Second), time.Minute)
}

// sweepEvents deletes the log's expired events every sweepEvery(maxAge)
// until ctx is done or stop is closed.
func (s *Scheduler) sweepEvents(ctx context.Context, x runs.EventExpirer, maxAge time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(sweepEvery(maxAge))
	defer t.Stop()
	for {
		n, err := x.ExpireEvents(ctx, time.Now().Add(-maxAge))
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Warn("delete expired run events", "error", err)
		case n > 0:
			s.log.Debug("deleted expired run events", "events", n, "max_age", maxAge)
		}
		select {
		case <-ctx.Done():
			return
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// DeleteRun deletes the run's events from the Scheduler's log when that
// log is not one of the stores a Service deletes runs from itself (a
// MemoryEventLog beside a MemoryStore): Service.DeleteThread calls it
// through its Dispatcher.
func (s *Scheduler) DeleteRun(ctx context.Context, id string) error {
	d, ok := s.events.(runs.RunDeleter)
	if !ok || any(s.events) == any(s.runs) || any(s.events) == any(s.checkpoints) {
		return nil
	}
	return d.DeleteRun(ctx, id)
}
