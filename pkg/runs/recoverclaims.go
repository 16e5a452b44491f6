package runs

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// RecoverClaims repairs, at once, the threads a crash left held: by a
// run that ended before it passed its thread on, or claimed by runs that
// were never stored: a creator killed between claiming a thread (as its
// active run, or in its queue) and storing the run leaves a claim no run
// will ever release, and without this the thread stays busy, its queued
// runs pending, until a later create finds the claim StaleClaim old.
// Call it when no creator can be at work on the store: as a server that
// is the store's only writer starts, before it serves (superstep dev). It
// passes on the threads of ended runs, takes the unstored runs off every
// thread, starts the run each thread passes to, and returns how many
// claims of unstored runs it dropped.
func (s *Service) RecoverClaims(ctx context.Context) (int, error) {
	ts, err := s.threads()
	if err != nil {
		return 0, err
	}
	dropped := 0
	tok := ""
	for {
		page, err := ts.ListThreads(ctx, ThreadFilter{Limit: 500, PageToken: tok})
		if err != nil {
			return dropped, fmt.Errorf("recover thread claims: %w", err)
		}
		for _, t := range page.Threads {
			n, err := s.recoverClaims(ctx, t)
			dropped += n
			if err != nil {
				return dropped, fmt.Errorf("recover claims of thread %q: %w", t.ID, err)
			}
		}
		if page.NextPageToken == "" {
			return dropped, nil
		}
		tok = page.NextPageToken
	}
}

// recoverClaims drops the unstored runs of thread t.
func (s *Service) recoverClaims(ctx context.Context, t Thread) (int, error) {
	stored := func(id string) (bool, error) {
		_, err := s.Runs.GetRun(ctx, id)
		if errors.Is(err, ErrNotFound) {
			return false, nil
		}
		return err == nil, err
	}
	if t.Active != "" {
		// Its active run ended, and the crash came before it passed the
		// thread on.
		if r, err := s.Runs.GetRun(ctx, t.Active); err == nil && leftThread(r) {
			s.logger().Warn("thread still held by a run that left it; passing it on", "thread_id", t.ID, "run_id", r.ID, "status", r.Status)
			if err := s.RunStopped(ctx, r); err != nil {
				return 0, err
			}
			if t, err = s.Threads.GetThread(ctx, t.ID); err != nil {
				return 0, err
			}
		}
	}
	var ghosts []string
	for _, id := range slices.Concat([]string{t.Active}, t.Queue) {
		if id == "" {
			continue
		}
		ok, err := stored(id)
		if err != nil {
			return 0, err
		}
		if !ok {
			ghosts = append(ghosts, id)
		}
	}
	if len(ghosts) == 0 {
		return 0, nil
	}
	var promoted string
	_, err := MutateThread(ctx, s.Threads, t.ID, func(t *Thread) error {
		promoted = ""
		t.Queue = slices.DeleteFunc(slices.Clone(t.Queue), func(id string) bool { return slices.Contains(ghosts, id) })
		if sp := t.Superseding; sp != nil && sp.Pending && slices.Contains(ghosts, sp.Run) {
			// Not yet written on the active run: the run that was to
			// supersede it does not exist, and it goes on.
			t.Superseding = nil
		}
		if slices.Contains(ghosts, t.Active) {
			s.logger().Warn("thread claimed by a run that was never stored; passing it on", "thread_id", t.ID, "run_id", t.Active)
			t.Active, t.Superseding = "", nil
			if len(t.Queue) > 0 {
				t.Active, t.Queue = t.Queue[0], t.Queue[1:]
				promoted = t.Active
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if promoted == "" {
		return len(ghosts), nil
	}
	return len(ghosts), s.startIfActive(ctx, t.ID, promoted)
}
