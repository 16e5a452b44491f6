package dynamo_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/store/dynamo"
)

// TestLoadRun checks that LoadRun returns what GetRun, Load(Latest) and
// PendingTasks of the next step return, from Stores with and without the
// run's steps cached, and what one Query it takes when no task result is
// stored.
func TestLoadRun(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEnv(t)
	a := e.store()
	const id = "load-run"

	// check compares LoadRun with the separate reads, on a fresh Store
	// and on the Stores given, and returns the step and task ids loaded.
	check := func(t *testing.T, stores ...*dynamo.Store) (int, []string) {
		t.Helper()
		step, ids := -1, []string(nil)
		for i, s := range append([]*dynamo.Store{e.store()}, stores...) {
			run, cp, pending, err := s.LoadRun(ctx, id)
			if err != nil {
				t.Fatalf("store %d: LoadRun: %v", i, err)
			}
			want, err := e.store().GetRun(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if run.ID != want.ID || run.Version != want.Version || run.Status != want.Status {
				t.Errorf("store %d: run %+v, want %+v", i, run, want)
			}
			got := -1
			if cp != nil {
				got = cp.Step
				if wantCP, err := e.store().Load(ctx, id, pregel.Latest); err != nil || !equalValues(cp.Values, wantCP.Values) || wantCP.Step != cp.Step {
					t.Errorf("store %d: checkpoint at step %d with %s; Load(Latest) gives %v, %v", i, cp.Step, cp.Values, wantCP, err)
				}
			}
			var gotIDs []string
			for _, p := range pending {
				gotIDs = append(gotIDs, p.TaskID)
			}
			if i == 0 {
				step, ids = got, gotIDs
			} else if got != step || !slices.Equal(gotIDs, ids) {
				t.Errorf("store %d: step %d, pending %v; a fresh Store: step %d, pending %v", i, got, gotIDs, step, ids)
			}
		}
		return step, ids
	}

	if _, _, _, err := a.LoadRun(ctx, id); !errors.Is(err, runs.ErrNotFound) {
		t.Fatalf("LoadRun of an unknown run: %v, want runs.ErrNotFound", err)
	}
	if _, _, err := a.CreateRun(ctx, runs.Run{ID: id, Graph: "loop", Status: pregel.RunPending, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if step, ids := check(t, a); step != -1 || ids != nil {
		t.Fatalf("a run without steps loads step %d, pending %v; want no checkpoint", step, ids)
	}

	cps := loopCheckpoints(id, 6)
	for _, cp := range cps[:3] {
		if err := a.Commit(ctx, cp); err != nil {
			t.Fatal(err)
		}
	}
	u := e.measure(t, func() error { _, _, _, err := e.store().LoadRun(ctx, id); return err })
	if !oneQuery(u) {
		t.Errorf("LoadRun on a fresh Store with no task result stored made %s; want one Query", opsString(u.calls))
	}
	if step, ids := check(t, a); step != 2 || ids != nil {
		t.Fatalf("after 3 commits: step %d, pending %v; want step 2, none", step, ids)
	}

	// Results of the open step, recorded by node handlers.
	for _, tid := range []string{"first", "second"} {
		if _, err := e.store().RecordTask(ctx, id, 3, pregel.TaskResult{TaskID: tid, Node: "n", Status: pregel.NodeCompleted}); err != nil {
			t.Fatal(err)
		}
	}
	if step, ids := check(t, a); step != 2 || !slices.Equal(ids, []string{"first", "second"}) {
		t.Fatalf("with two results recorded: step %d, pending %v; want step 2, [first second]", step, ids)
	}

	// Another Store commits step 3 without knowing of the results: they
	// are left overs, never returned, and deleted when found.
	b := e.store()
	if err := b.Commit(ctx, cps[3]); err != nil {
		t.Fatal(err)
	}
	if got := sortKeys(t, e, id, "TASK#"); len(got) != 2 {
		t.Fatalf("task items %v, want the 2 left overs", got)
	}
	if step, ids := check(t, a); step != 3 || ids != nil {
		t.Fatalf("after step 3 committed: step %d, pending %v; want step 3, none", step, ids)
	}
	if got := sortKeys(t, e, id, "TASK#"); len(got) != 0 {
		t.Errorf("left over task items after LoadRun: %v", got)
	}

	// Store a has step 3 cached; b commits step 4 and 5.
	for _, cp := range cps[4:] {
		if err := b.Commit(ctx, cp); err != nil {
			t.Fatal(err)
		}
	}
	if step, _ := check(t, a); step != 5 {
		t.Fatalf("a Store with step 3 cached loads step %d; want 5", step)
	}
	u = e.measure(t, func() error { _, _, _, err := a.LoadRun(ctx, id); return err })
	if !oneQuery(u) {
		t.Errorf("LoadRun on a Store with the newest step cached made %s; want one Query", opsString(u.calls))
	}
}

// oneQuery reports whether u is a single Query.
func oneQuery(u usage) bool {
	return slices.Equal(u.calls.Names(), []string{"Query"}) && u.calls.Op("Query").Requests == 1
}
