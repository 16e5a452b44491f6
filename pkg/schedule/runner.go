package schedule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/superstep/superstep/pkg/runs"
)

// DefaultPoll bounds how long a Runner sleeps between looks at its
// schedules, so that a jump of the clock (a laptop waking) is noticed.
const DefaultPoll = time.Minute

// Runner fires the schedules of an embedded Backend in this process.
//
// Catch-up policy: a firing whose time passed while the process was
// stopped (or asleep) is made up once, when the runner next looks (at
// start): one run, for the most recent of the missed times; the others are
// skipped and counted in the schedule's Missed. A paused schedule does
// not fire, and firings missed while it was paused are not made up.
type Runner struct {
	svc  *Service
	log  *slog.Logger
	now  func() time.Time
	poll time.Duration
	wake chan struct{}

	mu      sync.Mutex
	running bool
}

// RunnerConfig configures a Runner.
type RunnerConfig struct {
	// Logger receives a line per firing (default slog.Default()).
	Logger *slog.Logger
	// Now is the clock (default the Service's).
	Now func() time.Time
	// Poll bounds a sleep (default DefaultPoll).
	Poll time.Duration
}

// NewRunner returns a Runner of svc's schedules. It sets svc.Changed to
// wake it.
func NewRunner(svc *Service, cfg RunnerConfig) *Runner {
	r := &Runner{svc: svc, log: cfg.Logger, now: cfg.Now, poll: cfg.Poll, wake: make(chan struct{}, 1)}
	if r.log == nil {
		r.log = slog.Default()
	}
	if r.now == nil {
		r.now = svc.now
	}
	if r.poll <= 0 {
		r.poll = DefaultPoll
	}
	svc.Changed = r.Wake
	return r
}

// Wake makes a running loop look at the schedules now.
func (r *Runner) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run fires schedules until ctx ends: a Tick at once (the catch-up), then
// one at each next firing, on Wake, and at least every poll.
func (r *Runner) Run(ctx context.Context) error {
	r.mu.Lock()
	if r.running {
		r.mu.Unlock()
		return errors.New("schedule: the runner is already running")
	}
	r.running = true
	r.mu.Unlock()
	for {
		next, err := r.Tick(ctx, r.now())
		if err != nil && ctx.Err() == nil {
			r.log.WarnContext(ctx, "schedules: look at schedules", "error", err)
		}
		sleep := r.poll
		if !next.IsZero() {
			sleep = min(sleep, max(next.Sub(r.now()), 0))
		}
		timer := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-r.wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// Tick fires every schedule due at now (see the catch-up policy) and
// returns the earliest next firing (zero: none).
func (r *Runner) Tick(ctx context.Context, now time.Time) (time.Time, error) {
	all, err := r.svc.Backend.List(ctx)
	if err != nil {
		return time.Time{}, err
	}
	var next time.Time
	var errs []error
	for _, sc := range all {
		if !sc.Paused && sc.NextFireAt != nil && !sc.NextFireAt.After(now) {
			sc, err = r.fire(ctx, sc, now)
			if err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if !sc.Paused && sc.NextFireAt != nil && (next.IsZero() || sc.NextFireAt.Before(next)) {
			next = *sc.NextFireAt
		}
	}
	return next, errors.Join(errs...)
}

// fire starts the run of sc's latest due firing and records it.
func (r *Runner) fire(ctx context.Context, sc Schedule, now time.Time) (Schedule, error) {
	spec, err := Spec(sc)
	if err != nil {
		return sc, fmt.Errorf("schedule %s: %w", sc.Name, err)
	}
	due := *sc.NextFireAt
	// The due firing and those after it up to now: the latest is made,
	// the others (missed) skipped.
	at := due
	last, missed := spec.Previous(due, now, sc.Anchor)
	if missed > 0 {
		at = last
	}
	log := r.log.With("schedule", sc.Name, "graph", sc.Graph, "scheduled_at", at)
	run, created, ferr := r.svc.Fire(ctx, sc, at)
	msg := ""
	switch {
	case ferr == nil:
		log.InfoContext(ctx, "schedules: fired", "run_id", run.ID, "created", created, "missed", missed)
	case errors.Is(ferr, runs.ErrInvalid), errors.Is(ferr, runs.ErrNotFound), errors.Is(ferr, runs.ErrConflict):
		// The firing cannot start a run (a busy thread with reject, a
		// deleted thread): it is skipped, and says why.
		msg = runs.Public(ferr).Error()
		log.WarnContext(ctx, "schedules: firing started no run", "reason", msg)
	default:
		return sc, fmt.Errorf("schedule %s: fire: %w", sc.Name, ferr) // tried again at the next look
	}
	nx, ok := spec.Next(now, sc.Anchor)
	return r.svc.Backend.Mutate(ctx, sc.Name, func(cur *Schedule) error {
		cur.LastFireAt, cur.LastRunID, cur.LastError = &at, run.ID, msg
		if msg != "" {
			cur.LastRunID = ""
		}
		cur.Missed += missed
		// Changed meanwhile (paused, retimed): its new next firing stands.
		if cur.NextFireAt != nil && cur.NextFireAt.Equal(due) && !cur.Paused {
			cur.NextFireAt = nil
			if ok {
				cur.NextFireAt = &nx
			}
		}
		return nil
	})
}
