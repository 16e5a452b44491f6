package dynamo_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/store/dynamo"
)

// A sharded step (ShardTasks): each task's lease and result live in its
// shard, not in the run's partition; Stores that never saw the marker
// follow it; every reader finds every result; exactly the last count
// reports the step settled; the commit deletes every item of the step;
// DeleteRun deletes the shards of an open step.
func TestShardedTaskItems(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEnv(t)
	const id, n, shards = "wide", 20, 4
	dispatcher := e.store(dynamo.WithTasksPerShard(n / shards))
	if _, _, err := dispatcher.CreateRun(ctx, runs.Run{ID: id, Graph: "loop", Status: pregel.RunRunning, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	cps := loopCheckpoints(id, 2)
	if err := dispatcher.Commit(ctx, cps[0]); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s:1:work:%02d", id, i)
	}
	if err := dispatcher.ShardTasks(ctx, id, 1, ids); err != nil {
		t.Fatal(err)
	}
	// A tick delivered again, on a Store of another setting, keeps the
	// layout.
	if err := e.store().ShardTasks(ctx, id, 1, ids[:3]); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i, tid := range ids {
		node := e.store() // a node function's, which never saw the marker
		if _, _, _, _, err := node.LoadRunTask(ctx, id, tid); err != nil {
			t.Fatal(err)
		}
		if ok, _, err := node.Claim(ctx, id, 1, tid, "owner", now, now.Add(time.Minute)); err != nil || !ok {
			t.Fatalf("claim %s: %v, %v", tid, ok, err)
		}
		res := pregel.TaskResult{TaskID: tid, Node: "work", Status: pregel.NodeCompleted, Writes: map[string]json.RawMessage{"results": json.RawMessage(strconv.Itoa(i))}}
		if _, err := node.RecordTask(ctx, id, 1, res); err != nil {
			t.Fatal(err)
		}
		all, err := node.SettledAll(ctx, id, 1, tid, n)
		if err != nil {
			t.Fatal(err)
		}
		if want := i == n-1; all != want {
			t.Errorf("SettledAll after %d of %d results: %v, want %v", i+1, n, all, want)
		}
	}
	if sks := sortKeys(t, e, id, "TASK#"); !slices.Equal(sks, []string{"TASK#0000000001#"}) {
		t.Errorf("task items in the run's partition: %v; want only the step's marker", sks)
	}
	results, leases := 0, 0
	for k := range shards {
		r, l := len(sortKeys(t, e, id+"#T"+strconv.Itoa(k), "TASK#")), len(sortKeys(t, e, id+"#T"+strconv.Itoa(k), "CLAIM#"))
		if r == 0 || r != l {
			t.Errorf("shard %d holds %d results and %d leases; want some, as many of each", k, r, l)
		}
		results, leases = results+r, leases+l
	}
	if results != n || leases != n {
		t.Errorf("the shards hold %d results and %d leases, want %d of each", results, leases, n)
	}
	if sks := shardKeys(t, e, id, shards); len(sks) != 0 {
		t.Errorf("a shard past the step's %d holds %v", shards, sks)
	}

	pending, err := e.store().PendingTasks(ctx, id, 1)
	if err != nil || len(pending) != n {
		t.Fatalf("PendingTasks: %d results, %v; want %d", len(pending), err, n)
	}
	_, cp, loaded, err := e.store().LoadRun(ctx, id)
	if err != nil || cp == nil || cp.Step != 0 || len(loaded) != n {
		t.Fatalf("LoadRun: step %v, %d results, %v; want step 0 and %d", cp, len(loaded), err, n)
	}
	_, _, own, started, err := e.store().LoadRunTask(ctx, id, ids[7])
	if err != nil || len(own) != 1 || own[0].TaskID != ids[7] || !started {
		t.Fatalf("LoadRunTask: %v, started %v, %v; want the task's result", own, started, err)
	}

	committer := e.store()
	if _, err := committer.PendingTasks(ctx, id, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := committer.SettledAll(ctx, id, 1, ids[0], n); err != nil { // counts: its commit deletes the counters
		t.Fatal(err)
	}
	if err := committer.Commit(ctx, cps[1]); err != nil {
		t.Fatal(err)
	}
	left := append(sortKeys(t, e, id, "TASK#"), sortKeys(t, e, id, "SETTLED#")...)
	for k := range shards {
		left = append(left, sortKeys(t, e, id+"#T"+strconv.Itoa(k), "TASK#")...)
		left = append(left, sortKeys(t, e, id+"#T"+strconv.Itoa(k), "SETTLED#")...)
	}
	if len(left) != 0 {
		t.Errorf("after the commit, items of the step are left: %v", left)
	}

	// DeleteRun of a run whose open step is sharded.
	const open = "wide-open"
	if _, _, err := dispatcher.CreateRun(ctx, runs.Run{ID: open, Graph: "loop", Status: pregel.RunRunning, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := dispatcher.Commit(ctx, loopCheckpoints(open, 1)[0]); err != nil {
		t.Fatal(err)
	}
	if err := dispatcher.ShardTasks(ctx, open, 1, ids); err != nil {
		t.Fatal(err)
	}
	for _, tid := range ids[:6] {
		if _, err := dispatcher.RecordTask(ctx, open, 1, pregel.TaskResult{TaskID: tid, Node: "work", Status: pregel.NodeCompleted}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.store().DeleteRun(ctx, open); err != nil {
		t.Fatal(err)
	}
	for k := range shards {
		if sks := shardKeys(t, e, open, k); len(sks) != 0 {
			t.Errorf("shard %d of a deleted run keeps %v", k, sks)
		}
	}
}

// shardKeys returns the sort keys of the items of shard k of a run.
func shardKeys(t *testing.T, e *env, run string, k int) []string {
	t.Helper()
	var sks []string
	for _, p := range []string{"TASK#", "CLAIM#", "SETTLED#", "BLOB#"} {
		sks = append(sks, sortKeys(t, e, run+"#T"+strconv.Itoa(k), p)...)
	}
	return sks
}
