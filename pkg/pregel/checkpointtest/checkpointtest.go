// Package checkpointtest implements a conformance suite for implementations
// of [pregel.Checkpointer], in the manner of testing/fstest.
//
// A store's tests call [Run] with a function that makes a store:
//
//	func TestConformance(t *testing.T) {
//		checkpointtest.Run(t, func(t *testing.T) pregel.Checkpointer {
//			s, err := mystore.Open(t.Context(), filepath.Join(t.TempDir(), "db"))
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// # JSON values
//
// Checkpoints and task results carry JSON as [encoding/json.RawMessage]. The
// suite requires compact JSON (no insignificant white space) to come back
// byte for byte: channel values, Trigger.Arg, Interrupt.Value, and the Writes
// and Resume of task results. That includes non-ASCII text, escape sequences
// such as \u00e9 kept as written, the characters <, > and & unescaped (so a
// store that encodes with encoding/json must call SetEscapeHTML(false)),
// integers beyond float64 precision and the value null. The engine derives
// task ids from triggers, so a trigger must plan to the same task after a
// round trip through the store. JSON with insignificant white space may come
// back compacted; the suite compares it semantically.
//
// Nil and empty slices and maps are treated as equal throughout.
//
// # What a store must do beyond the interface comments
//
// The suite holds stores to a few things the [pregel.Checkpointer] comments
// leave open or that the design asks for:
//
//   - A channel may be listed in Versions with no entry in Values (the step
//     that last wrote it cleared it); Load returns it that way.
//   - Values, trigger arguments and task writes larger than 400 KB (the
//     DynamoDB item limit) are stored, not refused.
//   - Committing a step below 0 is a step conflict.
//   - RecordTask and PendingTasks for a run with no committed step: RecordTask
//     fails with ErrNotFound or ErrStepConflict; History either returns no
//     steps or fails with ErrNotFound.
//   - A method called with a cancelled context returns an error wrapping
//     [context.Canceled] and changes nothing.
//   - Checkpoints the engine makes for channels stored in segments (see
//     [pregel.Builder.AppendReducer]) load back whole, at every step, in
//     runs that continue others ([pregel.Graph.ContinueFrom], committed
//     with CommitFrom when the store is a runs.Seeder) and after a new
//     version of the graph that does not segment them resumes the run. A
//     store that keeps checkpoints as they are (MemoryStore) passes as it
//     is; one that writes only the channels a step changed calls
//     [pregel.PackSegments] in Commit and [pregel.UnpackSegments] in Load,
//     and must keep channel names with the byte 0x1f.
package checkpointtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
)

// Run tests that the stores made by newStore keep the promises of
// [pregel.Checkpointer]. Each check is a sub-test, so -run can select one,
// e.g. -run 'Conformance/Deltas'.
//
// newStore is called once per sub-test with that sub-test's t, so a store
// can register its cleanup with t.Cleanup; it should fail the test with
// t.Fatal when it cannot make a store. It should return an empty store, but
// every run id the suite uses is unique to its sub-test and to this call, so
// returning the same shared store each time also works.
func Run(t *testing.T, newStore func(t *testing.T) pregel.Checkpointer) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s pregel.Checkpointer)
	}{
		{"CommitInOrder", testCommitInOrder},
		{"CommitConflict", testCommitConflict},
		{"RoundTrip", testRoundTrip},
		{"NonCompactJSON", testNonCompactJSON},
		{"LargeValues", testLargeValues},
		{"Deltas", testDeltas},
		{"ClearedChannel", testClearedChannel},
		{"LoadNotFound", testLoadNotFound},
		{"RecordTask", testRecordTask},
		{"PendingClearedOnCommit", testPendingClearedOnCommit},
		{"RecordTaskWrongStep", testRecordTaskWrongStep},
		{"History", testHistory},
		{"HistoryPage", testHistoryPage},
		{"RunIsolation", testRunIsolation},
		{"CancelledContext", testCancelledContext},
		{"ConcurrentCommit", testConcurrentCommit},
		{"ConcurrentRecordTask", testConcurrentRecordTask},
		{"ConcurrentRecordAndCommit", testConcurrentRecordAndCommit},
		{"ConcurrentRuns", testConcurrentRuns},
		{"Segments", testSegments},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			if s == nil {
				t.Fatal("newStore returned nil")
			}
			tt.fn(t, s)
		})
	}
}

// concurrency is the number of goroutines of the concurrency checks.
const concurrency = 16

// testCommitInOrder commits steps 0..n and loads each, as the latest step
// right after its commit and by number once all are committed.
func testCommitInOrder(t *testing.T, s pregel.Checkpointer) {
	ctx := t.Context()
	run := newRunID(t)
	cps := buildRun(run, []map[string]json.RawMessage{
		{"input": raw(`{"question":"why?"}`), "count": raw(`0`)},
		{"count": raw(`1`), "answer": raw(`"because"`)},
		{"count": raw(`2`)},
		{"count": raw(`3`), "answer": raw(`"because, really"`)},
		{"count": raw(`4`)},
	})
	for _, cp := range cps {
		if err := s.Commit(ctx, cp); err != nil {
			t.Fatalf("Commit(step %d): %v", cp.Step, err)
		}
		got, err := s.Load(ctx, run, pregel.Latest)
		if err != nil {
			t.Fatalf("Load(Latest) after committing step %d: %v", cp.Step, err)
		}
		checkCheckpoint(t, fmt.Sprintf("Load(Latest) after committing step %d", cp.Step), got, cp)
	}
	checkSteps(t, s, run, cps)
}

// testCommitConflict commits steps out of order and twice: each attempt fails
// with ErrStepConflict and changes nothing, not even the pending task results
// of the open step.
func testCommitConflict(t *testing.T, s pregel.Checkpointer) {
	tests := []struct {
		name      string
		committed int // steps committed before the attempt
		step      int // step of the attempt
	}{
		{"FirstStepNotZero", 0, 1},
		{"NegativeStepOnNewRun", 0, -1},
		{"StepZeroTwice", 1, 0},
		{"LatestStepTwice", 3, 2},
		{"OlderStep", 3, 1},
		{"SkipAhead", 3, 4},
		{"FarAhead", 3, 10},
		{"NegativeStep", 3, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			run := newRunID(t)
			cps := buildRun(run, []map[string]json.RawMessage{
				{"a": raw(`"a0"`), "b": raw(`"b0"`)},
				{"a": raw(`"a1"`)},
				{"b": raw(`"b2"`)},
			})[:tt.committed]
			commitAll(t, s, cps)
			open := tt.committed
			var pending []pregel.TaskResult
			if tt.committed > 0 {
				r := completed(taskID(run, open, "n"), "n", map[string]json.RawMessage{"a": raw(`"pending"`)})
				recordTask(t, s, run, open, r)
				pending = []pregel.TaskResult{r}
			}

			bad := &pregel.Checkpoint{
				RunID:    run,
				Graph:    "intruder",
				Step:     tt.step,
				Values:   map[string]json.RawMessage{"a": raw(`"conflict"`), "c": raw(`"conflict"`)},
				Versions: map[string]int{"a": tt.step, "c": tt.step},
				Next:     []pregel.Trigger{{Node: "intruder"}},
				Tasks:    []pregel.TaskStatus{{TaskID: "x", Node: "intruder", Status: pregel.NodeCompleted}},
				Counters: pregel.Counters{Completed: 99},
			}
			err := s.Commit(ctx, bad)
			if !errors.Is(err, pregel.ErrStepConflict) {
				t.Fatalf("Commit(step %d) after %d committed steps: got error %v, want one wrapping ErrStepConflict", tt.step, tt.committed, err)
			}

			checkSteps(t, s, run, cps)
			if tt.step >= tt.committed {
				checkNotFound(t, s, run, tt.step)
			}
			if tt.committed == 0 {
				checkNotFound(t, s, run, pregel.Latest)
				return
			}
			got, err := s.PendingTasks(ctx, run, open)
			if err != nil {
				t.Fatalf("PendingTasks(step %d): %v", open, err)
			}
			checkResults(t, fmt.Sprintf("PendingTasks(step %d) after the refused commit", open), got, pending)
		})
	}
}

// testRoundTrip commits checkpoints that use every field and loads them back.
func testRoundTrip(t *testing.T, s pregel.Checkpointer) {
	run := newRunID(t)
	cp0 := &pregel.Checkpoint{
		RunID: run,
		Graph: "support-bot",
		Step:  0,
		Values: map[string]json.RawMessage{
			"messages": raw(`[{"role":"user","content":"héllo <b>&amp;</b> \"quoted\" \u00e9 \n 😀` + "\u2028" + `"}]`),
			"count":    raw(`12345678901234567890`),
			"ratio":    raw(`1.50e3`),
			"flag":     raw(`false`),
			"nothing":  raw(`null`),
			"empty":    raw(`""`),
			"obj":      raw(`{"z":1,"a":{"nested":[1,"two",null,true]}}`),
		},
		Versions: map[string]int{"messages": 0, "count": 0, "ratio": 0, "flag": 0, "nothing": 0, "empty": 0, "obj": 0},
		Next: []pregel.Trigger{
			{Node: "classify", From: []string{"__start__"}},
		},
	}
	cp1 := &pregel.Checkpoint{
		RunID: run,
		Graph: "support-bot",
		Step:  1,
		Values: map[string]json.RawMessage{
			"messages": raw(`[{"role":"user","content":"hi"},{"role":"assistant","content":"<ok>"}]`),
			"count":    raw(`12345678901234567890`),
			"ratio":    raw(`1.50e3`),
			"flag":     raw(`true`),
			"nothing":  raw(`null`),
			"empty":    raw(`""`),
			"obj":      raw(`{"z":1,"a":{"nested":[1,"two",null,true]}}`),
			"route":    raw(`"billing"`),
		},
		Versions: map[string]int{"messages": 1, "count": 0, "ratio": 0, "flag": 1, "nothing": 0, "empty": 0, "obj": 0, "route": 1},
		Next: []pregel.Trigger{
			{Node: "billing", From: []string{"classify", "guard"}},
			{Node: "worker", Send: true, Arg: raw(`{"item":1,"tags":["a","b"]}`)},
			{Node: "worker", Send: true, Arg: raw(`"<tag>&amp;"`)},
			{Node: "on_error", From: []string{"fetch"}, Failure: &pregel.Failure{Node: "fetch", Attempts: 3, Error: "GET /x: 503 \"unavailable\"\nretry later"}},
		},
		Barriers: map[string][]string{"join": {"billing", "audit"}, "merge": {"worker"}},
		Tasks: []pregel.TaskStatus{
			{TaskID: "t-classify", Node: "classify", Status: pregel.NodeCompleted, Attempts: 1,
				Started: time.Date(2026, 11, 26, 13, 0, 0, 123456789, time.UTC), Finished: time.Date(2026, 11, 26, 13, 0, 1, 987654321, time.UTC)},
			{TaskID: "t-guard", Node: "guard", Status: pregel.NodeSkipped, Reason: "ShouldExecute returned false",
				Started: time.Date(2026, 11, 26, 13, 0, 0, 5, time.UTC), Finished: time.Date(2026, 11, 26, 13, 0, 0, 6, time.UTC)},
			{TaskID: "t-audit", Node: "audit", Status: pregel.NodeCancelled, Reason: "hook cancelled: quota"},
			{TaskID: "t-fetch", Node: "fetch", Status: pregel.NodeFailed, Attempts: 3, Error: "GET /x: 503"},
			{TaskID: "t-ask", Node: "ask", Status: pregel.NodeInterrupted},
		},
		Counters:     pregel.Counters{Completed: 1, Skipped: 1, Cancelled: 1, Failed: 1},
		DrainRequest: "maintenance window <22:00>",
	}
	commitAll(t, s, []*pregel.Checkpoint{cp0, cp1})
	checkSteps(t, s, run, []*pregel.Checkpoint{cp0, cp1})
}

// testNonCompactJSON commits JSON with insignificant white space and
// compares what comes back semantically.
func testNonCompactJSON(t *testing.T, s pregel.Checkpointer) {
	ctx := t.Context()
	run := newRunID(t)
	cp := &pregel.Checkpoint{
		RunID:    run,
		Graph:    "g",
		Values:   map[string]json.RawMessage{"doc": raw("{ \"a\" : [ 1, 2 ],\n  \"b\": \"x y\" }"), "n": raw(" 7 ")},
		Versions: map[string]int{"doc": 0, "n": 0},
		Next:     []pregel.Trigger{{Node: "w", Send: true, Arg: raw("[ 1,\t2 ]")}},
	}
	commitAll(t, s, []*pregel.Checkpoint{cp})
	for _, step := range []int{0, pregel.Latest} {
		got, err := s.Load(ctx, run, step)
		if err != nil {
			t.Fatalf("Load(%s): %v", stepName(step), err)
		}
		checkCheckpoint(t, fmt.Sprintf("Load(%s), compared compacted", stepName(step)), compactCheckpoint(t, got), compactCheckpoint(t, cp))
	}

	commitAll(t, s, []*pregel.Checkpoint{nextCheckpoint(cp, map[string]json.RawMessage{"n": raw(`8`)})})
	r := pregel.TaskResult{
		TaskID: taskID(run, 2, "ask"),
		Node:   "ask",
		Status: pregel.NodeInterrupted,
		Interrupts: []pregel.InterruptInfo{{
			ID: "i1", TaskID: taskID(run, 2, "ask"), Node: "ask", Value: raw("{ \"question\" : \"ok?\" }"),
			Type: pregel.TypeObject, Error: "the last answer was refused",
		}},
		Resume: map[string]json.RawMessage{"i0": raw(" true ")},
		Writes: map[string]json.RawMessage{"doc": raw("[ ]")},
	}
	stored, err := s.RecordTask(ctx, run, 2, r)
	if err != nil {
		t.Fatalf("RecordTask: %v", err)
	}
	checkResult(t, "RecordTask returned, compared compacted", compactResult(t, stored), compactResult(t, r))
	got, err := s.PendingTasks(ctx, run, 2)
	if err != nil {
		t.Fatalf("PendingTasks: %v", err)
	}
	if len(got) != 1 {
		t.Fatalf("PendingTasks returned %d results, want 1", len(got))
	}
	checkResult(t, "PendingTasks, compared compacted", compactResult(t, got[0]), compactResult(t, r))
}

// testLargeValues stores values over DynamoDB's 400 KB item limit in a
// channel, a trigger argument and a task's writes.
func testLargeValues(t *testing.T, s pregel.Checkpointer) {
	ctx := t.Context()
	run := newRunID(t)
	big := bigString(600 << 10)
	cps := buildRun(run, []map[string]json.RawMessage{
		{"big": big, "small": raw(`0`)},
		{"small": raw(`1`)},
		{"small": raw(`2`), "big2": bigString(450 << 10)},
	})
	cps[1].Next = []pregel.Trigger{{Node: "worker", Send: true, Arg: bigString(500 << 10)}}
	commitAll(t, s, cps)
	checkSteps(t, s, run, cps)

	r := completed(taskID(run, 3, "n"), "n", map[string]json.RawMessage{"big": bigString(700 << 10)})
	recordTask(t, s, run, 3, r)
	got, err := s.PendingTasks(ctx, run, 3)
	if err != nil {
		t.Fatalf("PendingTasks: %v", err)
	}
	checkResults(t, "PendingTasks with a 700 KB write", got, []pregel.TaskResult{r})
}

// testDeltas commits a run whose channels change at different steps, the
// way the engine builds checkpoints (Values holds the full state, Versions
// the step that last wrote each channel), and loads every step back once all
// are committed. A store that writes only the changed channels must
// reconstruct the rest.
func testDeltas(t *testing.T, s pregel.Checkpointer) {
	ctx := t.Context()
	run := newRunID(t)
	cps := buildRun(run, []map[string]json.RawMessage{
		0: {"input": raw(`{"v":0}`), "tick": raw(`0`)},
		1: {"once": raw(`"written at step 1 only"`), "tick": raw(`1`)},
		2: {"tick": raw(`2`), "twice": raw(`"first"`)},
		3: {"tick": raw(`3`), "late": raw(`[3]`)},
		4: {"tick": raw(`4`), "twice": raw(`"second"`)},
		5: {"tick": raw(`5`)},
		6: {"tick": raw(`6`), "late": raw(`[3]`)}, // same value, new version
		7: {},                                     // a step that changed nothing
		8: {"tick": raw(`8`)},
	})
	commitAll(t, s, cps)

	last, err := s.Load(ctx, run, pregel.Latest)
	if err != nil {
		t.Fatalf("Load(Latest): %v", err)
	}
	if v, ok := last.Versions["once"]; !ok || v != 1 || string(last.Values["once"]) != `"written at step 1 only"` {
		t.Errorf("Load(Latest): channel %q written at step 1 only has version %d (present %t) and value %s, want version 1 and the step 1 value",
			"once", v, ok, last.Values["once"])
	}
	if v := last.Versions["late"]; v != 6 {
		t.Errorf("Load(Latest): channel %q rewritten with the same value at step 6 has version %d, want 6", "late", v)
	}
	checkSteps(t, s, run, cps)
}

// testClearedChannel commits a channel that a step clears: it keeps a
// version but has no value. It also checks that the JSON value null is a
// value.
func testClearedChannel(t *testing.T, s pregel.Checkpointer) {
	run := newRunID(t)
	cps := buildRun(run, []map[string]json.RawMessage{
		{"keep": raw(`"k"`), "temp": raw(`"scratch"`), "null": raw(`null`)},
		{"temp": nil},
		{"keep": raw(`"k2"`)},
		{"temp": raw(`"again"`)},
		{"temp": nil},
	})
	commitAll(t, s, cps)
	checkSteps(t, s, run, cps)
}

// testLoadNotFound loads runs and steps that do not exist.
func testLoadNotFound(t *testing.T, s pregel.Checkpointer) {
	run := newRunID(t)
	commitAll(t, s, buildRun(run, []map[string]json.RawMessage{{"a": raw(`1`)}, {"a": raw(`2`)}, {"a": raw(`3`)}}))
	tests := []struct {
		name string
		run  string
		step int
	}{
		{"UnknownRunLatest", run + "-unknown", pregel.Latest},
		{"UnknownRunStep0", run + "-unknown", 0},
		{"UnknownRunStep2", run + "-unknown", 2},
		{"RunPrefix", run[:len(run)-1], pregel.Latest},
		{"NextStep", run, 3},
		{"FarStep", run, 1000},
		{"NegativeStep", run, -2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkNotFound(t, s, tt.run, tt.step)
		})
	}
}

// testRecordTask checks what RecordTask keeps and returns, and the order of
// PendingTasks.
func testRecordTask(t *testing.T, s pregel.Checkpointer) {
	// open starts a run with steps 0 and 1 committed and returns its id;
	// step 2 is open.
	open := func(t *testing.T) string {
		run := newRunID(t)
		commitAll(t, s, buildRun(run, []map[string]json.RawMessage{{"a": raw(`0`)}, {"a": raw(`1`)}}))
		return run
	}
	const step = 2

	t.Run("NewResultStored", func(t *testing.T) {
		run := open(t)
		r := fullResult(run, step)
		checkResult(t, "RecordTask returned", recordTask(t, s, run, step, r), r)
		checkPending(t, s, run, step, []pregel.TaskResult{r})
	})

	t.Run("NothingRecorded", func(t *testing.T) {
		run := open(t)
		checkPending(t, s, run, step, nil)
	})

	for _, status := range []pregel.NodeStatus{pregel.NodeCompleted, pregel.NodeSkipped, pregel.NodeCancelled, pregel.NodeFailed} {
		t.Run("FirstFinalKept/"+string(status), func(t *testing.T) {
			run := open(t)
			id := taskID(run, step, "n")
			first := pregel.TaskResult{TaskID: id, Node: "n", Status: status, Reason: "first", Attempts: 1}
			if status == pregel.NodeCompleted {
				first.Writes = map[string]json.RawMessage{"a": raw(`"first"`)}
			}
			if status == pregel.NodeFailed {
				first.Error = "first failure"
			}
			checkResult(t, "first RecordTask returned", recordTask(t, s, run, step, first), first)

			second := completed(id, "n", map[string]json.RawMessage{"a": raw(`"second"`)})
			checkResult(t, "second (final) RecordTask returned", recordTask(t, s, run, step, second), first)

			third := interrupted(id, "n", `"third"`)
			checkResult(t, "third (interrupted) RecordTask returned", recordTask(t, s, run, step, third), first)

			checkPending(t, s, run, step, []pregel.TaskResult{first})
		})
	}

	t.Run("InterruptedReplaced", func(t *testing.T) {
		run := open(t)
		id := taskID(run, step, "ask")
		r1 := interrupted(id, "ask", `"first question"`)
		checkResult(t, "RecordTask(interrupted) returned", recordTask(t, s, run, step, r1), r1)
		checkPending(t, s, run, step, []pregel.TaskResult{r1})

		r2 := interrupted(id, "ask", `"second question"`)
		r2.Resume = map[string]json.RawMessage{"i-first question": raw(`"yes"`)}
		checkResult(t, "RecordTask(interrupted again) returned", recordTask(t, s, run, step, r2), r2)
		checkPending(t, s, run, step, []pregel.TaskResult{r2})

		r3 := completed(id, "ask", map[string]json.RawMessage{"answer": raw(`"yes"`)})
		checkResult(t, "RecordTask(completed) returned", recordTask(t, s, run, step, r3), r3)
		checkPending(t, s, run, step, []pregel.TaskResult{r3})

		r4 := completed(id, "ask", map[string]json.RawMessage{"answer": raw(`"no"`)})
		checkResult(t, "RecordTask(completed again) returned", recordTask(t, s, run, step, r4), r3)
		checkPending(t, s, run, step, []pregel.TaskResult{r3})
	})

	t.Run("FirstRecordedOrder", func(t *testing.T) {
		run := open(t)
		// Ids in an order that is neither sorted nor reverse sorted.
		a := completed(taskID(run, step, "m"), "m", map[string]json.RawMessage{"a": raw(`"m"`)})
		b := interrupted(taskID(run, step, "z"), "z", `"?"`)
		c := completed(taskID(run, step, "a"), "a", nil)
		recordTask(t, s, run, step, a)
		recordTask(t, s, run, step, b)
		recordTask(t, s, run, step, c)
		b2 := completed(b.TaskID, "z", map[string]json.RawMessage{"z": raw(`"done"`)})
		recordTask(t, s, run, step, b2)
		recordTask(t, s, run, step, completed(a.TaskID, "m", nil)) // kept: a
		d := pregel.TaskResult{TaskID: taskID(run, step, "f"), Node: "f", Status: pregel.NodeSkipped, Reason: "not needed"}
		recordTask(t, s, run, step, d)
		checkPending(t, s, run, step, []pregel.TaskResult{a, b2, c, d})
	})

	t.Run("SameIDOtherStepOrRun", func(t *testing.T) {
		run := open(t)
		other := open(t)
		id := "shared-task-id"
		r1 := completed(id, "n", map[string]json.RawMessage{"a": raw(`"run"`)})
		r2 := completed(id, "n", map[string]json.RawMessage{"a": raw(`"other"`)})
		checkResult(t, "RecordTask(run) returned", recordTask(t, s, run, step, r1), r1)
		checkResult(t, "RecordTask(other run) returned", recordTask(t, s, other, step, r2), r2)
		checkPending(t, s, run, step, []pregel.TaskResult{r1})
		checkPending(t, s, other, step, []pregel.TaskResult{r2})

		commitAll(t, s, []*pregel.Checkpoint{nextCheckpoint(mustLoad(t, s, run, pregel.Latest), nil)})
		r3 := completed(id, "n", map[string]json.RawMessage{"a": raw(`"next step"`)})
		checkResult(t, "RecordTask(next step, same id) returned", recordTask(t, s, run, step+1, r3), r3)
		checkPending(t, s, run, step+1, []pregel.TaskResult{r3})
		checkPending(t, s, other, step, []pregel.TaskResult{r2})
	})
}

// testPendingClearedOnCommit checks that committing a step discards its
// recorded results and closes it to RecordTask.
func testPendingClearedOnCommit(t *testing.T, s pregel.Checkpointer) {
	ctx := t.Context()
	run := newRunID(t)
	cps := buildRun(run, []map[string]json.RawMessage{{"a": raw(`0`)}, {"a": raw(`1`)}, {"a": raw(`2`)}})
	commitAll(t, s, cps[:1])
	rs := []pregel.TaskResult{
		completed(taskID(run, 1, "x"), "x", map[string]json.RawMessage{"a": raw(`1`)}),
		interrupted(taskID(run, 1, "y"), "y", `"q"`),
		{TaskID: taskID(run, 1, "z"), Node: "z", Status: pregel.NodeFailed, Attempts: 2, Error: "boom"},
	}
	for _, r := range rs {
		recordTask(t, s, run, 1, r)
	}
	checkPending(t, s, run, 1, rs)
	commitAll(t, s, cps[1:2])
	checkPending(t, s, run, 1, nil)
	checkPending(t, s, run, 2, nil)

	if _, err := s.RecordTask(ctx, run, 1, rs[0]); !errors.Is(err, pregel.ErrStepConflict) {
		t.Errorf("RecordTask(step 1) after step 1 was committed: got error %v, want one wrapping ErrStepConflict", err)
	}
	checkPending(t, s, run, 1, nil)

	r := completed(taskID(run, 2, "x"), "x", nil)
	recordTask(t, s, run, 2, r)
	checkPending(t, s, run, 2, []pregel.TaskResult{r})
	commitAll(t, s, cps[2:])
	checkPending(t, s, run, 2, nil)
}

// testRecordTaskWrongStep records results for steps that are not open.
func testRecordTaskWrongStep(t *testing.T, s pregel.Checkpointer) {
	run := newRunID(t)
	commitAll(t, s, buildRun(run, []map[string]json.RawMessage{{"a": raw(`0`)}, {"a": raw(`1`)}, {"a": raw(`2`)}}))
	tests := []struct {
		name string
		step int
	}{
		{"LatestCommitted", 2},
		{"OlderCommitted", 0},
		{"AfterOpen", 4},
		{"FarAhead", 100},
		{"Negative", -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			r := completed(taskID(run, tt.step, "n"), "n", nil)
			_, err := s.RecordTask(ctx, run, tt.step, r)
			if !errors.Is(err, pregel.ErrStepConflict) {
				t.Fatalf("RecordTask(step %d) while step 3 is open: got error %v, want one wrapping ErrStepConflict", tt.step, err)
			}
			if tt.step >= 0 {
				checkPending(t, s, run, tt.step, nil)
			}
			checkPending(t, s, run, 3, nil)
		})
	}
	t.Run("UnknownRun", func(t *testing.T) {
		ctx := t.Context()
		unknown := newRunID(t)
		_, err := s.RecordTask(ctx, unknown, 0, completed("t", "n", nil))
		if !errors.Is(err, pregel.ErrNotFound) && !errors.Is(err, pregel.ErrStepConflict) {
			t.Fatalf("RecordTask on a run with no committed step: got error %v, want one wrapping ErrNotFound or ErrStepConflict", err)
		}
		checkNotFound(t, s, unknown, pregel.Latest)
	})
}

// testHistory lists the steps of a run.
func testHistory(t *testing.T, s pregel.Checkpointer) {
	ctx := t.Context()
	run := newRunID(t)
	cps := buildRun(run, []map[string]json.RawMessage{
		{"a": raw(`0`), "b": raw(`0`)},
		{"b": raw(`1`), "c": raw(`1`)},
		{},
		{"a": raw(`3`), "c": raw(`3`), "d": raw(`3`)},
	})
	cps[3].Next = nil // the run is done
	for i, cp := range cps {
		commitAll(t, s, []*pregel.Checkpoint{cp})
		got, err := s.History(ctx, run)
		if err != nil {
			t.Fatalf("History after committing step %d: %v", i, err)
		}
		var want []pregel.StepInfo
		for _, cp := range cps[:i+1] {
			want = append(want, cp.Info())
		}
		checkHistory(t, fmt.Sprintf("History after committing step %d", i), got, want)
	}

	t.Run("UnknownRun", func(t *testing.T) {
		got, err := s.History(t.Context(), newRunID(t))
		if err != nil && !errors.Is(err, pregel.ErrNotFound) {
			t.Fatalf("History of an unknown run: got error %v, want none or one wrapping ErrNotFound", err)
		}
		if len(got) != 0 {
			t.Fatalf("History of an unknown run returned %d steps, want none", len(got))
		}
	})
}

// historyPager is the optional method of a store that reads a run's
// history a page at a time (runs.HistoryPager).
type historyPager interface {
	HistoryPage(ctx context.Context, runID string, after, limit int) ([]pregel.StepInfo, error)
}

// testHistoryPage reads a run's history in pages, when the store can.
func testHistoryPage(t *testing.T, s pregel.Checkpointer) {
	p, ok := s.(historyPager)
	if !ok {
		t.Skip("the store has no HistoryPage method: readers slice its History")
	}
	ctx := t.Context()
	run := newRunID(t)
	writes := make([]map[string]json.RawMessage, 7)
	for i := range writes {
		writes[i] = map[string]json.RawMessage{"n": raw(fmt.Sprint(i))}
		if i%2 == 0 {
			writes[i]["even"] = raw(fmt.Sprint(i))
		}
	}
	cps := buildRun(run, writes)
	commitAll(t, s, cps)
	// Another run with more steps, whose steps must not show.
	other := buildRun(run+"0", append(writes, writes...))
	commitAll(t, s, other)
	infos := func(from, to int) []pregel.StepInfo {
		var out []pregel.StepInfo
		for _, cp := range cps[from:to] {
			out = append(out, cp.Info())
		}
		return out
	}
	tests := []struct {
		name         string
		after, limit int
		want         []pregel.StepInfo
	}{
		{"FirstPage", -1, 3, infos(0, 3)},
		{"MiddlePage", 2, 3, infos(3, 6)},
		{"LastPageShort", 5, 3, infos(6, 7)},
		{"AfterNewest", 6, 3, nil},
		{"FarAfterNewest", 1000, 3, nil},
		{"OneStep", 3, 1, infos(4, 5)},
		{"AllInOnePage", -1, 500, infos(0, 7)},
		{"LimitIsCount", -1, 7, infos(0, 7)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := p.HistoryPage(ctx, run, tt.after, tt.limit)
			if err != nil {
				t.Fatalf("HistoryPage(after %d, limit %d): %v", tt.after, tt.limit, err)
			}
			checkHistory(t, fmt.Sprintf("HistoryPage(after %d, limit %d)", tt.after, tt.limit), got, tt.want)
		})
	}
	t.Run("PagesMakeHistory", func(t *testing.T) {
		var all []pregel.StepInfo
		after := -1
		for range len(cps) + 1 {
			page, err := p.HistoryPage(ctx, run, after, 2)
			if err != nil {
				t.Fatalf("HistoryPage(after %d, limit 2): %v", after, err)
			}
			if len(page) == 0 {
				break
			}
			all = append(all, page...)
			after = page[len(page)-1].Step
		}
		whole, err := s.History(ctx, run)
		if err != nil {
			t.Fatalf("History: %v", err)
		}
		checkHistory(t, "the pages of 2 joined", all, whole)
	})
	t.Run("UnknownRun", func(t *testing.T) {
		got, err := p.HistoryPage(ctx, newRunID(t), -1, 10)
		if err != nil && !errors.Is(err, pregel.ErrNotFound) {
			t.Fatalf("HistoryPage of an unknown run: got error %v, want none or one wrapping ErrNotFound", err)
		}
		if len(got) != 0 {
			t.Fatalf("HistoryPage of an unknown run returned %d steps, want none", len(got))
		}
	})
	t.Run("CancelledContext", func(t *testing.T) {
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := p.HistoryPage(cancelled, run, -1, 10); !errors.Is(err, context.Canceled) {
			t.Fatalf("HistoryPage with a cancelled context: got error %v, want one wrapping context.Canceled", err)
		}
	})
}

// testRunIsolation drives runs whose ids share prefixes, as a store with
// composite keys might confuse them, and checks none sees another's data.
func testRunIsolation(t *testing.T, s pregel.Checkpointer) {
	ctx := t.Context()
	base := newRunID(t)
	runs := []string{base, base + "0", base + "#1", base + "/1", base + "1"}
	all := make(map[string][]*pregel.Checkpoint)
	for i, run := range runs {
		var writes []map[string]json.RawMessage
		for step := range i + 2 {
			writes = append(writes, map[string]json.RawMessage{
				"owner": raw(fmt.Sprintf("%q", run)),
				"step":  raw(fmt.Sprint(step)),
			})
		}
		all[run] = buildRun(run, writes)
	}
	// Interleave the commits and record a result for each run's open step.
	for step := range len(runs) + 1 {
		for _, run := range runs {
			if step < len(all[run]) {
				commitAll(t, s, all[run][step:step+1])
			}
		}
	}
	for _, run := range runs {
		recordTask(t, s, run, len(all[run]), completed("same-id", "n", map[string]json.RawMessage{"owner": raw(fmt.Sprintf("%q", run))}))
	}
	for _, run := range runs {
		cps := all[run]
		checkSteps(t, s, run, cps)
		checkPending(t, s, run, len(cps), []pregel.TaskResult{completed("same-id", "n", map[string]json.RawMessage{"owner": raw(fmt.Sprintf("%q", run))})})
		got, err := s.History(ctx, run)
		if err != nil {
			t.Fatalf("History(%q): %v", run, err)
		}
		var want []pregel.StepInfo
		for _, cp := range cps {
			want = append(want, cp.Info())
		}
		checkHistory(t, fmt.Sprintf("History(%q)", run), got, want)
	}
	// Committing one run's open step leaves the others' pending results.
	first := all[runs[0]]
	commitAll(t, s, []*pregel.Checkpoint{nextCheckpoint(first[len(first)-1], map[string]json.RawMessage{"step": raw(`99`)})})
	checkPending(t, s, runs[0], len(first), nil)
	for _, run := range runs[1:] {
		if got, err := s.PendingTasks(ctx, run, len(all[run])); err != nil || len(got) != 1 {
			t.Errorf("PendingTasks(%q) after another run committed: got %d results (error %v), want 1", run, len(got), err)
		}
	}
}

// testCancelledContext calls every method with a cancelled context.
func testCancelledContext(t *testing.T, s pregel.Checkpointer) {
	run := newRunID(t)
	cps := buildRun(run, []map[string]json.RawMessage{{"a": raw(`0`)}, {"a": raw(`1`)}})
	commitAll(t, s, cps[:1])
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()

	tests := []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"Commit", func(ctx context.Context) error { return s.Commit(ctx, cps[1]) }},
		{"RecordTask", func(ctx context.Context) error {
			_, err := s.RecordTask(ctx, run, 1, completed(taskID(run, 1, "n"), "n", nil))
			return err
		}},
		{"PendingTasks", func(ctx context.Context) error { _, err := s.PendingTasks(ctx, run, 1); return err }},
		{"LoadLatest", func(ctx context.Context) error { _, err := s.Load(ctx, run, pregel.Latest); return err }},
		{"LoadStep", func(ctx context.Context) error { _, err := s.Load(ctx, run, 0); return err }},
		{"History", func(ctx context.Context) error { _, err := s.History(ctx, run); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(cancelled); !errors.Is(err, context.Canceled) {
				t.Fatalf("%s with a cancelled context: got error %v, want one wrapping context.Canceled", tt.name, err)
			}
		})
	}
	// Nothing changed.
	checkSteps(t, s, run, cps[:1])
	checkNotFound(t, s, run, 1)
	checkPending(t, s, run, 1, nil)
}

// testConcurrentCommit commits the same step from many goroutines at once:
// exactly one wins and its checkpoint is the one stored.
func testConcurrentCommit(t *testing.T, s pregel.Checkpointer) {
	for _, step := range []int{0, 3} {
		t.Run(fmt.Sprintf("Step%d", step), func(t *testing.T) {
			ctx := t.Context()
			run := newRunID(t)
			base := buildRun(run, []map[string]json.RawMessage{{"a": raw(`0`)}, {"a": raw(`1`)}, {"a": raw(`2`)}})[:step]
			commitAll(t, s, base)

			cands := make([]*pregel.Checkpoint, concurrency)
			for i := range cands {
				w := map[string]json.RawMessage{"winner": raw(fmt.Sprint(i))}
				if step == 0 {
					cands[i] = buildRun(run, []map[string]json.RawMessage{w})[0]
				} else {
					cands[i] = nextCheckpoint(base[len(base)-1], w)
				}
			}
			errs := make([]error, concurrency)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range cands {
				wg.Go(func() {
					<-start
					errs[i] = s.Commit(ctx, cloneCheckpoint(cands[i]))
				})
			}
			close(start)
			wg.Wait()

			winner := -1
			for i, err := range errs {
				switch {
				case err == nil && winner >= 0:
					t.Errorf("concurrent Commit(step %d): goroutines %d and %d both succeeded", step, winner, i)
				case err == nil:
					winner = i
				case !errors.Is(err, pregel.ErrStepConflict):
					t.Errorf("concurrent Commit(step %d) in goroutine %d: got error %v, want nil or one wrapping ErrStepConflict", step, i, err)
				}
			}
			if winner < 0 {
				t.Fatalf("concurrent Commit(step %d): no goroutine succeeded", step)
			}
			checkSteps(t, s, run, append(base, cands[winner]))
		})
	}
}

// testConcurrentRecordTask records the same task from many goroutines at
// once: every caller gets back the one result stored.
func testConcurrentRecordTask(t *testing.T, s pregel.Checkpointer) {
	for _, mixed := range []bool{false, true} {
		name := "AllFinal"
		if mixed {
			name = "InterruptedAndFinal"
		}
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			run := newRunID(t)
			commitAll(t, s, buildRun(run, []map[string]json.RawMessage{{"a": raw(`0`)}}))
			id := taskID(run, 1, "n")
			in := make([]pregel.TaskResult, concurrency)
			for i := range in {
				if mixed && i%2 == 0 {
					in[i] = interrupted(id, "n", fmt.Sprint(i))
				} else {
					in[i] = completed(id, "n", map[string]json.RawMessage{"by": raw(fmt.Sprint(i))})
				}
			}
			out := make([]pregel.TaskResult, concurrency)
			errs := make([]error, concurrency)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range in {
				wg.Go(func() {
					<-start
					out[i], errs[i] = s.RecordTask(ctx, run, 1, cloneResult(in[i]))
				})
			}
			close(start)
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("concurrent RecordTask in goroutine %d: %v", i, err)
				}
			}

			pending, err := s.PendingTasks(ctx, run, 1)
			if err != nil {
				t.Fatalf("PendingTasks: %v", err)
			}
			if len(pending) != 1 {
				t.Fatalf("PendingTasks after concurrent RecordTask of one task id returned %d results, want 1", len(pending))
			}
			stored := pending[0]
			if !stored.Final() {
				t.Fatalf("stored result has status %q, want the final result of one of the callers", stored.Status)
			}
			if !slices.ContainsFunc(in, func(r pregel.TaskResult) bool { return equalResult(r, stored) }) {
				t.Fatalf("stored result %s is none of the recorded ones", show(stored))
			}
			for i := range in {
				if in[i].Final() {
					checkResult(t, fmt.Sprintf("RecordTask in goroutine %d (final) returned", i), out[i], stored)
				} else if !equalResult(out[i], in[i]) && !equalResult(out[i], stored) {
					t.Errorf("RecordTask in goroutine %d (interrupted) returned %s, want its own result or the stored final one", i, show(out[i]))
				}
			}
		})
	}
}

// testConcurrentRecordAndCommit records results while the step commits:
// each RecordTask lands before the commit (and is discarded) or fails with
// ErrStepConflict after it, so no result of the committed step survives.
func testConcurrentRecordAndCommit(t *testing.T, s pregel.Checkpointer) {
	ctx := t.Context()
	run := newRunID(t)
	cps := buildRun(run, []map[string]json.RawMessage{{"a": raw(`0`)}, {"a": raw(`1`)}})
	commitAll(t, s, cps[:1])
	errs := make([]error, concurrency)
	var commitErr error
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range concurrency {
		wg.Go(func() {
			<-start
			_, errs[i] = s.RecordTask(ctx, run, 1, completed(taskID(run, 1, fmt.Sprint("n", i)), "n", nil))
		})
		if i == concurrency/2 {
			wg.Go(func() {
				<-start
				commitErr = s.Commit(ctx, cloneCheckpoint(cps[1]))
			})
		}
	}
	close(start)
	wg.Wait()
	if commitErr != nil {
		t.Fatalf("Commit(step 1): %v", commitErr)
	}
	for i, err := range errs {
		if err != nil && !errors.Is(err, pregel.ErrStepConflict) {
			t.Errorf("RecordTask in goroutine %d: got error %v, want nil or one wrapping ErrStepConflict", i, err)
		}
	}
	checkPending(t, s, run, 1, nil)
	checkSteps(t, s, run, cps)
}

// testConcurrentRuns drives several runs at once, each through several steps
// with task results.
func testConcurrentRuns(t *testing.T, s pregel.Checkpointer) {
	ctx := t.Context()
	const runs, steps, tasks = 6, 8, 3
	base := newRunID(t)
	all := make([][]*pregel.Checkpoint, runs)
	var wg sync.WaitGroup
	for i := range runs {
		run := fmt.Sprintf("%s-%d", base, i)
		var writes []map[string]json.RawMessage
		for step := range steps {
			writes = append(writes, map[string]json.RawMessage{"step": raw(fmt.Sprint(step)), fmt.Sprint("c", step%3): raw(fmt.Sprintf(`"%d/%d"`, i, step))})
		}
		all[i] = buildRun(run, writes)
		wg.Go(func() {
			for step, cp := range all[i] {
				if step > 0 {
					for k := range tasks {
						r := completed(taskID(run, step, fmt.Sprint("n", k)), "n", nil)
						if _, err := s.RecordTask(ctx, run, step, r); err != nil {
							t.Errorf("RecordTask(%q, step %d): %v", run, step, err)
							return
						}
					}
					if got, err := s.PendingTasks(ctx, run, step); err != nil || len(got) != tasks {
						t.Errorf("PendingTasks(%q, step %d): got %d results (error %v), want %d", run, step, len(got), err, tasks)
						return
					}
				}
				if err := s.Commit(ctx, cp); err != nil {
					t.Errorf("Commit(%q, step %d): %v", run, step, err)
					return
				}
				if _, err := s.Load(ctx, run, pregel.Latest); err != nil {
					t.Errorf("Load(%q, Latest): %v", run, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for i, cps := range all {
		checkSteps(t, s, fmt.Sprintf("%s-%d", base, i), cps)
	}
}

// Building checkpoints.

// raw returns s as a JSON value.
func raw(s string) json.RawMessage { return json.RawMessage(s) }

// bigString returns a JSON string of n bytes.
func bigString(n int) json.RawMessage {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	b[0], b[n-1] = '"', '"'
	return b
}

// newRunID returns a run id unique to t and to this call.
func newRunID(t *testing.T) string {
	var b [4]byte
	rand.Read(b[:])
	return t.Name() + "-" + hex.EncodeToString(b[:])
}

// taskID returns a task id in the spirit of the engine's.
func taskID(run string, step int, node string) string {
	return fmt.Sprintf("%s:%d:%s", run, step, node)
}

// buildRun returns the checkpoints of steps 0..len(writes)-1 of a run, as the
// engine builds them: Values holds the full state and Versions the step that
// last wrote each channel. writes[i] are the channels step i writes; a nil
// value clears the channel.
func buildRun(run string, writes []map[string]json.RawMessage) []*pregel.Checkpoint {
	var cps []*pregel.Checkpoint
	prev := &pregel.Checkpoint{RunID: run, Graph: "conformance", Step: -1}
	for _, w := range writes {
		cp := nextCheckpoint(prev, w)
		cps = append(cps, cp)
		prev = cp
	}
	return cps
}

// nextCheckpoint returns the checkpoint of the step after prev, which writes
// the channels of w (a nil value clears the channel). It shares no map or
// slice with prev.
func nextCheckpoint(prev *pregel.Checkpoint, w map[string]json.RawMessage) *pregel.Checkpoint {
	step := prev.Step + 1
	cp := &pregel.Checkpoint{
		RunID:    prev.RunID,
		Graph:    prev.Graph,
		Step:     step,
		Values:   maps.Clone(prev.Values),
		Versions: maps.Clone(prev.Versions),
		Counters: prev.Counters,
	}
	if cp.Values == nil {
		cp.Values = make(map[string]json.RawMessage)
	}
	if cp.Versions == nil {
		cp.Versions = make(map[string]int)
	}
	for _, ch := range slices.Sorted(maps.Keys(w)) {
		if v := w[ch]; v != nil {
			cp.Values[ch] = slices.Clone(v)
		} else {
			delete(cp.Values, ch)
		}
		cp.Versions[ch] = step
	}
	node := fmt.Sprint("node", step)
	cp.Next = []pregel.Trigger{{Node: fmt.Sprint("node", step+1), From: []string{node}}}
	if step > 0 {
		cp.Tasks = []pregel.TaskStatus{{TaskID: taskID(prev.RunID, step, node), Node: node, Status: pregel.NodeCompleted, Attempts: 1}}
		cp.Counters.Completed++
	}
	if step%3 == 2 {
		cp.Barriers = map[string][]string{"join": {node}}
	}
	return cp
}

// completed returns a completed result.
func completed(id, node string, writes map[string]json.RawMessage) pregel.TaskResult {
	return pregel.TaskResult{TaskID: id, Node: node, Status: pregel.NodeCompleted, Attempts: 1, Writes: writes}
}

// interrupted returns an interrupted result whose interrupt carries value.
func interrupted(id, node, value string) pregel.TaskResult {
	return pregel.TaskResult{
		TaskID:     id,
		Node:       node,
		Status:     pregel.NodeInterrupted,
		Interrupts: []pregel.InterruptInfo{{ID: "i-" + value, TaskID: id, Node: node, Value: raw(value)}},
	}
}

// fullResult returns a result that uses every field.
func fullResult(run string, step int) pregel.TaskResult {
	id := taskID(run, step, "agent")
	return pregel.TaskResult{
		TaskID:   id,
		Node:     "agent",
		Status:   pregel.NodeCompleted,
		Reason:   "because <reasons> & more",
		Attempts: 2,
		Error:    "first attempt: timeout",
		Writes: map[string]json.RawMessage{
			"messages": raw(`[{"role":"assistant","content":"héllo <b>&amp;</b> \u00e9 😀"}]`),
			"count":    raw(`12345678901234567890`),
			"nothing":  raw(`null`),
		},
		Routes: []pregel.Trigger{
			{Node: "tool", From: []string{"agent"}},
			{Node: "worker", Send: true, Arg: raw(`{"q":"<x>"}`)},
			{Node: "handler", Failure: &pregel.Failure{Node: "agent", Attempts: 2, Error: "e"}},
		},
		Interrupts:   []pregel.InterruptInfo{{ID: "i1", TaskID: id, Node: "agent", Value: raw(`{"ask":"ok?"}`)}},
		Resume:       map[string]json.RawMessage{"i0": raw(`"yes"`)},
		DrainRequest: "deploying",
		Started:      time.Date(2026, 11, 26, 14, 0, 0, 123456789, time.UTC),
		Finished:     time.Date(2026, 11, 26, 14, 0, 2, 1, time.UTC),
	}
}

// Calling the store.

// commitAll commits copies of cps, so that a store that modified what it is
// given would not also modify what the suite compares with.
func commitAll(t *testing.T, s pregel.Checkpointer, cps []*pregel.Checkpoint) {
	t.Helper()
	for _, cp := range cps {
		if err := s.Commit(t.Context(), cloneCheckpoint(cp)); err != nil {
			t.Fatalf("Commit(run %q, step %d): %v", cp.RunID, cp.Step, err)
		}
	}
}

// recordTask records a copy of r.
func recordTask(t *testing.T, s pregel.Checkpointer, run string, step int, r pregel.TaskResult) pregel.TaskResult {
	t.Helper()
	got, err := s.RecordTask(t.Context(), run, step, cloneResult(r))
	if err != nil {
		t.Fatalf("RecordTask(run %q, step %d, task %q): %v", run, step, r.TaskID, err)
	}
	return got
}

func mustLoad(t *testing.T, s pregel.Checkpointer, run string, step int) *pregel.Checkpoint {
	t.Helper()
	cp, err := s.Load(t.Context(), run, step)
	if err != nil {
		t.Fatalf("Load(run %q, %s): %v", run, stepName(step), err)
	}
	if cp == nil {
		t.Fatalf("Load(run %q, %s) returned a nil checkpoint", run, stepName(step))
	}
	return cp
}

// checkSteps checks that cps are exactly the committed steps of run: each
// loads back by number, the last as Latest, and the next step is not found.
func checkSteps(t *testing.T, s pregel.Checkpointer, run string, cps []*pregel.Checkpoint) {
	t.Helper()
	for i, want := range cps {
		checkCheckpoint(t, fmt.Sprintf("Load(run %q, step %d)", run, i), mustLoad(t, s, run, i), want)
	}
	if len(cps) > 0 {
		checkCheckpoint(t, fmt.Sprintf("Load(run %q, Latest)", run), mustLoad(t, s, run, pregel.Latest), cps[len(cps)-1])
	}
	checkNotFound(t, s, run, len(cps))
}

func checkNotFound(t *testing.T, s pregel.Checkpointer, run string, step int) {
	t.Helper()
	cp, err := s.Load(t.Context(), run, step)
	if !errors.Is(err, pregel.ErrNotFound) {
		if err == nil && cp != nil {
			t.Fatalf("Load(run %q, %s): got step %d, want an error wrapping ErrNotFound", run, stepName(step), cp.Step)
		}
		t.Fatalf("Load(run %q, %s): got error %v, want one wrapping ErrNotFound", run, stepName(step), err)
	}
}

func checkPending(t *testing.T, s pregel.Checkpointer, run string, step int, want []pregel.TaskResult) {
	t.Helper()
	got, err := s.PendingTasks(t.Context(), run, step)
	if err != nil {
		t.Fatalf("PendingTasks(run %q, step %d): %v", run, step, err)
	}
	checkResults(t, fmt.Sprintf("PendingTasks(run %q, step %d)", run, step), got, want)
}

func stepName(step int) string {
	if step == pregel.Latest {
		return "Latest"
	}
	return fmt.Sprint("step ", step)
}

// Comparing.

func checkCheckpoint(t *testing.T, what string, got, want *pregel.Checkpoint) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: got a nil checkpoint", what)
	}
	if d := diffCheckpoint(got, want); d != "" {
		t.Errorf("%s differs from the committed checkpoint:%s", what, d)
	}
}

// diffCheckpoint describes, field by field, how got differs from want.
func diffCheckpoint(got, want *pregel.Checkpoint) string {
	g, w := normCheckpoint(got), normCheckpoint(want)
	var b strings.Builder
	field := func(name string, gv, wv any) {
		if !reflect.DeepEqual(gv, wv) {
			fmt.Fprintf(&b, "\n\t%s: got %s, want %s", name, show(gv), show(wv))
		}
	}
	field("RunID", g.RunID, w.RunID)
	field("Graph", g.Graph, w.Graph)
	field("Step", g.Step, w.Step)
	for _, ch := range unionKeys(g.Values, w.Values) {
		gv, gok := g.Values[ch]
		wv, wok := w.Values[ch]
		switch {
		case gok && !wok:
			fmt.Fprintf(&b, "\n\tValues[%q]: got %s, want no value", ch, show(gv))
		case !gok && wok:
			fmt.Fprintf(&b, "\n\tValues[%q]: got no value, want %s", ch, show(wv))
		case !bytes.Equal(gv, wv):
			fmt.Fprintf(&b, "\n\tValues[%q]: got %s, want %s (byte for byte)", ch, show(gv), show(wv))
		}
	}
	for _, ch := range unionKeys(g.Versions, w.Versions) {
		gv, gok := g.Versions[ch]
		wv, wok := w.Versions[ch]
		if gok != wok || gv != wv {
			fmt.Fprintf(&b, "\n\tVersions[%q]: got %s, want %s", ch, showVersion(gv, gok), showVersion(wv, wok))
		}
	}
	diffSlice(&b, "Next", g.Next, w.Next)
	for _, j := range unionKeys(g.Barriers, w.Barriers) {
		field(fmt.Sprintf("Barriers[%q]", j), g.Barriers[j], w.Barriers[j])
	}
	diffSlice(&b, "Tasks", g.Tasks, w.Tasks)
	field("Counters", g.Counters, w.Counters)
	field("DrainRequest", g.DrainRequest, w.DrainRequest)
	return b.String()
}

// diffSlice describes how got differs from want, element by element when
// they have the same length.
func diffSlice[E any](b *strings.Builder, name string, got, want []E) {
	if len(got) != len(want) {
		fmt.Fprintf(b, "\n\t%s: got %d elements %s, want %d elements %s", name, len(got), show(got), len(want), show(want))
		return
	}
	for i := range got {
		if !reflect.DeepEqual(got[i], want[i]) {
			fmt.Fprintf(b, "\n\t%s[%d]: got %s, want %s", name, i, show(got[i]), show(want[i]))
		}
	}
}

func showVersion(v int, ok bool) string {
	if !ok {
		return "none"
	}
	return fmt.Sprint(v)
}

func unionKeys[V any](a, b map[string]V) []string {
	keys := slices.Collect(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

func checkResult(t *testing.T, what string, got, want pregel.TaskResult) {
	t.Helper()
	if !equalResult(got, want) {
		t.Errorf("%s:\n\tgot  %s\n\twant %s", what, show(got), show(want))
	}
}

func checkResults(t *testing.T, what string, got, want []pregel.TaskResult) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: got %d results, want %d:\n\tgot  %s\n\twant %s", what, len(got), len(want), show(got), show(want))
		return
	}
	for i := range got {
		checkResult(t, fmt.Sprintf("%s[%d]", what, i), got[i], want[i])
	}
}

func equalResult(a, b pregel.TaskResult) bool {
	return reflect.DeepEqual(normResult(a), normResult(b))
}

func checkHistory(t *testing.T, what string, got, want []pregel.StepInfo) {
	t.Helper()
	norm := func(in []pregel.StepInfo) []pregel.StepInfo {
		var out []pregel.StepInfo
		for _, si := range in {
			out = append(out, pregel.StepInfo{Step: si.Step, Changed: nilIfEmpty(si.Changed), Tasks: nilIfEmpty(si.Tasks), Next: nilIfEmpty(si.Next)})
		}
		return out
	}
	if g, w := norm(got), norm(want); !reflect.DeepEqual(g, w) {
		t.Errorf("%s:\n\tgot  %s\n\twant %s", what, show(g), show(w))
	}
}

// show renders v as JSON for a failure message, shortened when long.
func show(v any) string {
	if m, ok := v.(json.RawMessage); ok {
		if m == nil {
			return "nil"
		}
		return shorten(string(m))
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return shorten(strings.TrimSuffix(b.String(), "\n"))
}

func shorten(s string) string {
	const max = 600
	if len(s) <= max {
		return s
	}
	return fmt.Sprintf("%s...(%d bytes)...%s", s[:max/2], len(s), s[len(s)-max/2:])
}

// Copying.

func cloneCheckpoint(cp *pregel.Checkpoint) *pregel.Checkpoint {
	c := *cp
	c.Values = cloneRawMap(cp.Values)
	c.Versions = maps.Clone(cp.Versions)
	c.Next = cloneTriggers(cp.Next)
	if cp.Barriers != nil {
		c.Barriers = make(map[string][]string, len(cp.Barriers))
		for k, v := range cp.Barriers {
			c.Barriers[k] = slices.Clone(v)
		}
	}
	c.Tasks = slices.Clone(cp.Tasks)
	return &c
}

func cloneResult(r pregel.TaskResult) pregel.TaskResult {
	r.Writes = cloneRawMap(r.Writes)
	r.Routes = cloneTriggers(r.Routes)
	r.Resume = cloneRawMap(r.Resume)
	if r.Interrupts != nil {
		is := make([]pregel.InterruptInfo, len(r.Interrupts))
		for i, in := range r.Interrupts {
			in.Value = slices.Clone(in.Value)
			is[i] = in
		}
		r.Interrupts = is
	}
	return r
}

func cloneTriggers(ts []pregel.Trigger) []pregel.Trigger {
	if ts == nil {
		return nil
	}
	out := make([]pregel.Trigger, len(ts))
	for i, tr := range ts {
		tr.From = slices.Clone(tr.From)
		tr.Arg = slices.Clone(tr.Arg)
		if tr.Failure != nil {
			f := *tr.Failure
			tr.Failure = &f
		}
		out[i] = tr
	}
	return out
}

func cloneRawMap(m map[string]json.RawMessage) map[string]json.RawMessage {
	if m == nil {
		return nil
	}
	out := make(map[string]json.RawMessage, len(m))
	for k, v := range m {
		out[k] = slices.Clone(v)
	}
	return out
}

// Normalising: nil and empty slices and maps are equal.

func nilIfEmpty[S ~[]E, E any](s S) S {
	if len(s) == 0 {
		return nil
	}
	return s
}

func nilIfEmptyMap[M ~map[K]V, K comparable, V any](m M) M {
	if len(m) == 0 {
		return nil
	}
	return m
}

func normCheckpoint(cp *pregel.Checkpoint) pregel.Checkpoint {
	n := *cp
	n.Values = nilIfEmptyMap(cp.Values)
	n.Versions = nilIfEmptyMap(cp.Versions)
	n.Next = normTriggers(cp.Next)
	if len(cp.Barriers) > 0 {
		n.Barriers = make(map[string][]string, len(cp.Barriers))
		for k, v := range cp.Barriers {
			n.Barriers[k] = nilIfEmpty(v)
		}
	} else {
		n.Barriers = nil
	}
	n.Tasks = nilIfEmpty(cp.Tasks)
	return n
}

func normTriggers(ts []pregel.Trigger) []pregel.Trigger {
	if len(ts) == 0 {
		return nil
	}
	out := make([]pregel.Trigger, len(ts))
	for i, tr := range ts {
		tr.From = nilIfEmpty(tr.From)
		tr.Arg = nilIfEmpty(tr.Arg)
		out[i] = tr
	}
	return out
}

func normResult(r pregel.TaskResult) pregel.TaskResult {
	r.Writes = nilIfEmptyMap(r.Writes)
	r.Routes = normTriggers(r.Routes)
	r.Resume = nilIfEmptyMap(r.Resume)
	if len(r.Interrupts) == 0 {
		r.Interrupts = nil
	} else {
		is := make([]pregel.InterruptInfo, len(r.Interrupts))
		for i, in := range r.Interrupts {
			in.Value = nilIfEmpty(in.Value)
			is[i] = in
		}
		r.Interrupts = is
	}
	return r
}

// compactCheckpoint returns a copy of cp with every JSON value compacted.
func compactCheckpoint(t *testing.T, cp *pregel.Checkpoint) *pregel.Checkpoint {
	t.Helper()
	n := normCheckpoint(cp)
	n.Values = compactMap(t, cp.Values)
	for i := range n.Next {
		n.Next[i].Arg = compact(t, n.Next[i].Arg)
	}
	return &n
}

// compactResult returns a copy of r with every JSON value compacted.
func compactResult(t *testing.T, r pregel.TaskResult) pregel.TaskResult {
	t.Helper()
	r = normResult(r)
	r.Writes = compactMap(t, r.Writes)
	r.Resume = compactMap(t, r.Resume)
	for i := range r.Routes {
		r.Routes[i].Arg = compact(t, r.Routes[i].Arg)
	}
	for i := range r.Interrupts {
		r.Interrupts[i].Value = compact(t, r.Interrupts[i].Value)
	}
	return r
}

func compactMap(t *testing.T, m map[string]json.RawMessage) map[string]json.RawMessage {
	t.Helper()
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]json.RawMessage, len(m))
	for k, v := range m {
		out[k] = compact(t, v)
	}
	return out
}

func compact(t *testing.T, v json.RawMessage) json.RawMessage {
	t.Helper()
	if len(v) == 0 {
		return nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		t.Fatalf("invalid JSON %s: %v", show(v), err)
	}
	return b.Bytes()
}
