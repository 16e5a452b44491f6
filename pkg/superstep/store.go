//go:build !superstep.lambda

package superstep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/store/sqlite"
)

// localStore is the SQLite file of run and resume: its checkpoints and,
// when the store keeps them, its run records, so that a dev server over
// the same file lists and steers the runs made here.
//
// A local run's record is written when the command stops driving it (not
// while it runs), so that a dev server's recovery never mistakes a run
// this process is executing for one left behind by a crash.
type localStore struct {
	path string
	cp   pregel.Checkpointer
	runs runs.Store // nil when the store keeps no run records
	stop func() error
}

// openLocal opens (creating it if needed) the SQLite file at path.
func openLocal(ctx context.Context, path string) (*localStore, error) {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, failed(fmt.Errorf("create the store's directory: %w", err))
		}
	}
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		return nil, failed(fmt.Errorf("open store: %w", err))
	}
	ls := &localStore{path: path, cp: st, stop: st.Close}
	if rs, ok := any(st).(runs.Store); ok {
		ls.runs = rs
	}
	return ls, nil
}

// Close closes the store.
func (ls *localStore) Close() error { return ls.stop() }

// resumable refuses to resume a run whose record says it is not paused:
// one a dev server executes, or one that is over.
func (ls *localStore) resumable(ctx context.Context, id string) error {
	if ls.runs == nil {
		return nil
	}
	r, err := ls.runs.GetRun(ctx, id)
	switch {
	case errors.Is(err, runs.ErrNotFound):
		return nil // a local run that stopped before its record was written
	case err != nil:
		return failed(fmt.Errorf("read run %q: %w", id, err))
	}
	switch r.Status {
	case pregel.RunInterrupted, pregel.RunDrained:
		return nil
	case pregel.RunPending, pregel.RunRunning:
		return badInput(fmt.Errorf("run %q is %s under a dev server; steer it with 'superstep runs', or stop the server and run 'superstep dev' again to recover it", id, r.Status))
	default:
		return badInput(fmt.Errorf("run %q is %s; only interrupted or drained runs can be resumed", id, r.Status))
	}
}

// finished writes the run record of a run this process stopped driving.
// A run cancelled here (by a signal, after the grace period) is recorded
// as drained: its last committed step is intact and it can be resumed.
func (ls *localStore) finished(ctx context.Context, res *pregel.Result) error {
	if ls.runs == nil {
		return nil
	}
	now := time.Now().UTC()
	apply := func(r *runs.Run) {
		r.Status, r.Step, r.Counters = res.Status, res.Step, res.Counters
		r.Interrupts, r.Resume, r.CancelRequested = res.Interrupts, nil, false
		r.DrainRequested, r.DrainReason = res.DrainReason != "", res.DrainReason
		r.Error, r.FailedNode = "", ""
		switch res.Status {
		case pregel.RunCancelled:
			r.Status = pregel.RunDrained
			r.DrainRequested = true
			r.DrainReason = strings.TrimSpace(res.DrainReason + " (cancelled: the step in progress was discarded)")
		case pregel.RunFailed:
			if res.Err != nil {
				r.Error = res.Err.Error()
			}
			var ne *pregel.NodeError
			if errors.As(res.Err, &ne) {
				r.FailedNode = ne.Node
			}
		}
	}
	r, err := ls.runs.GetRun(ctx, res.RunID)
	if errors.Is(err, runs.ErrNotFound) {
		input := json.RawMessage("{}")
		if cp, err := ls.cp.Load(ctx, res.RunID, 0); err == nil && len(cp.Values) > 0 {
			if raw, err := json.Marshal(cp.Values); err == nil {
				input = raw
			}
		}
		created := runs.Run{ID: res.RunID, Graph: res.Graph, Status: pregel.RunPending, Input: input, CreatedAt: now, UpdatedAt: now,
			Events: []runs.Event{{At: now, Type: runs.EventCreated, Status: pregel.RunPending}}}
		r = created
		apply(&r)
		runs.RecordChanges(created, &r, now)
		if _, created, err := ls.runs.CreateRun(ctx, r); err != nil || created {
			return err
		}
	} else if err != nil {
		return err
	}
	_, err = runs.Mutate(ctx, ls.runs, res.RunID, func(r *runs.Run) error {
		apply(r)
		return nil
	})
	return err
}
