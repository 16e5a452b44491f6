package dynamo_test

import (
	"errors"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/store/dynamo"
)

// TestStopMarker checks the stop marker a drain or cancel leaves for a
// chained superstep's commit (tick.StopCommitter): the commit of the step
// after the newest reports the request, once; every reader of step items
// on fresh and caching Stores sees the run as if there were no marker; a
// run that is not running, or has no step, gets none; the commit's one
// PutItem costs what it did.
func TestStopMarker(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEnv(t)
	a := e.store()
	const id = "stop-marker"
	_, _, err := a.CreateRun(ctx, runs.Run{ID: id, Graph: "loop", Status: pregel.RunRunning, CreatedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	request := func(t *testing.T, mutate func(r *runs.Run)) {
		t.Helper()
		r, err := a.GetRun(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		mutate(&r)
		if _, err := a.UpdateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	// No step yet: no marker (the run's first tick reads the record).
	request(t, func(r *runs.Run) { r.DrainRequested = true })
	if got := sortKeys(t, e, id, "STEP#"); len(got) != 0 {
		t.Fatalf("step keys %v before any step; want none", got)
	}
	request(t, func(r *runs.Run) { r.DrainRequested = false })

	cps := loopCheckpoints(id, 6)
	commit := func(t *testing.T, s *dynamo.Store, cp *pregel.Checkpoint, want bool) {
		t.Helper()
		var stop bool
		u := e.measure(t, func() error { var err error; stop, err = s.CommitStop(ctx, cp); return err })
		if stop != want {
			t.Errorf("CommitStop of step %d: stop %v, want %v", cp.Step, stop, want)
		}
		if w := u.calls.Op("PutItem"); w.Requests != 1 || u.units.total().WRU > 1 {
			t.Errorf("CommitStop of step %d made %s, %v WRU; want one PutItem of 1 WRU", cp.Step, opsString(u.calls), u.units.total().WRU)
		}
	}
	for _, cp := range cps[:3] {
		commit(t, a, cp, false)
	}

	for _, mode := range []string{"drain", "cancel"} {
		newest := 2
		if mode == "cancel" {
			newest = 3
		}
		request(t, func(r *runs.Run) {
			if mode == "drain" {
				r.DrainRequested, r.DrainReason = true, "deploy"
			} else {
				r.DrainRequested, r.DrainReason, r.CancelRequested = false, "", true
			}
		})
		// A second request while marked adds nothing.
		request(t, func(r *runs.Run) { r.DrainReason += "." })
		if got := sortKeys(t, e, id, "STEP#"); len(got) != newest+2 {
			t.Fatalf("%s: step keys %v; want steps 0-%d and a marker", mode, got, newest)
		}
		// Every reader sees step newest as the newest, on a fresh Store
		// and on the Store that committed it.
		for i, s := range []*dynamo.Store{e.store(), a} {
			if _, cp, pending, err := s.LoadRun(ctx, id); err != nil || cp == nil || cp.Step != newest || len(pending) != 0 {
				t.Errorf("%s: store %d: LoadRun: %v, %v pending, %v; want step %d", mode, i, cp, len(pending), err, newest)
			}
			if _, cp, _, _, err := s.LoadRunTask(ctx, id, "t"); err != nil || cp == nil || cp.Step != newest {
				t.Errorf("%s: store %d: LoadRunTask: %v, %v; want step %d", mode, i, cp, err, newest)
			}
			if cp, err := s.Load(ctx, id, pregel.Latest); err != nil || cp.Step != newest {
				t.Errorf("%s: store %d: Load(Latest): %v, %v; want step %d", mode, i, cp, err, newest)
			}
			if _, err := s.Load(ctx, id, newest+1); !errors.Is(err, pregel.ErrNotFound) {
				t.Errorf("%s: store %d: Load(%d): %v; want pregel.ErrNotFound", mode, i, newest+1, err)
			}
			if h, err := s.History(ctx, id); err != nil || len(h) != newest+1 {
				t.Errorf("%s: store %d: History: %d steps, %v; want %d", mode, i, len(h), err, newest+1)
			}
			if pending, err := s.PendingTasks(ctx, id, newest+1); err != nil || len(pending) != 0 {
				t.Errorf("%s: store %d: PendingTasks: %v, %v; want none", mode, i, pending, err)
			}
		}
		// A Store that has not read the newest step commits the next one
		// over the marker and reports it; the step after reports none.
		commit(t, e.store(), cps[newest+1], true)
		if got := sortKeys(t, e, id, "STEP#"); len(got) != newest+2 {
			t.Fatalf("%s: step keys %v after the commit; want steps 0-%d", mode, got, newest+1)
		}
		if mode == "drain" {
			request(t, func(r *runs.Run) { r.DrainRequested, r.DrainReason = false, "" })
		}
	}
	// A run that is not running gets no marker.
	request(t, func(r *runs.Run) { r.CancelRequested, r.Status = false, pregel.RunCancelled })
	request(t, func(r *runs.Run) { r.CancelRequested = true })
	if got := sortKeys(t, e, id, "STEP#"); len(got) != 5 {
		t.Fatalf("step keys %v after a request on a cancelled run; want steps 0-4", got)
	}
	commit(t, e.store(), cps[5], false)
}
