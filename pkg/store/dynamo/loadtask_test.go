package dynamo_test

import (
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/store/dynamo"
)

// LoadRunTask returns the run, its newest step, one task's result of the
// open step (none or one) and whether the step has any result; results
// left over from a committed step are not the open step's.
func TestLoadRunTask(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEnv(t)
	a := e.store()
	const id = "load-run-task"
	if _, _, err := a.CreateRun(ctx, runs.Run{ID: id, Graph: "loop", Status: pregel.RunRunning, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	cps := loopCheckpoints(id, 4)
	for _, cp := range cps[:2] {
		if err := a.Commit(ctx, cp); err != nil {
			t.Fatal(err)
		}
	}
	// check loads task on a Store with the steps cached and on a fresh one.
	check := func(t *testing.T, task string, step int, own string, started bool) {
		t.Helper()
		for i, s := range []*dynamo.Store{a, e.store()} {
			run, cp, got, gotStarted, err := s.LoadRunTask(ctx, id, task)
			if err != nil {
				t.Fatalf("store %d: %v", i, err)
			}
			var gotOwn string
			for _, r := range got {
				gotOwn += r.TaskID
			}
			if run.ID != id || cp == nil || cp.Step != step || gotOwn != own || gotStarted != started {
				t.Errorf("store %d: LoadRunTask(%s) = run %q, step %v, own %q, started %v; want step %d, own %q, started %v", i, task, run.ID, cp, gotOwn, gotStarted, step, own, started)
			}
		}
	}
	check(t, "x", 1, "", false)
	for _, tid := range []string{"x", "y"} {
		if _, err := e.store().RecordTask(ctx, id, 2, pregel.TaskResult{TaskID: tid, Node: "n", Status: pregel.NodeCompleted}); err != nil {
			t.Fatal(err)
		}
	}
	check(t, "x", 1, "x", true)
	check(t, "z", 1, "", true)
	// Another Store commits step 2 without knowing of the results: they
	// are left overs; step 3 has none.
	if err := e.store().Commit(ctx, cps[2]); err != nil {
		t.Fatal(err)
	}
	check(t, "x", 2, "", false)
	if p, err := e.store().PendingTasks(ctx, id, 2); err != nil || len(p) != 0 {
		t.Errorf("PendingTasks of the committed step: %v, %v; want none", p, err)
	}
}
