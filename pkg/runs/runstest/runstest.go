// Package runstest implements a conformance suite for implementations of
// [runs.Store], in the manner of testing/fstest.
//
// A store's tests call [Run] with a function that makes a store:
//
//	func TestRunStoreConformance(t *testing.T) {
//		runstest.Run(t, func(t *testing.T) runs.Store {
//			s, err := mystore.Open(t.Context(), filepath.Join(t.TempDir(), "db"))
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// # What the suite holds stores to
//
//   - Every field of a [runs.Run] comes back as stored, its history of
//     events included (also a full one, of [runs.MaxEvents] events). JSON
//     (Input, interrupt values, resume values) is compared semantically, so
//     a store may re-encode it. Times must keep at least millisecond
//     precision; their location does not matter.
//   - CreateRun with an id already stored returns the stored record and
//     created=false, and changes nothing.
//   - GetRun and UpdateRun of an unknown id fail with an error wrapping
//     [runs.ErrNotFound].
//   - UpdateRun with a stale Version fails with an error wrapping
//     [runs.ErrConflict] and stores nothing; a successful one returns the
//     record with Version incremented and UpdatedAt set to the time of the
//     update, and GetRun returns the same.
//   - ListRuns lists newest first by CreatedAt, applies the Graph, Status
//     and ContextID filters together, and the Version filter (a graph
//     version's name or fingerprint, as the record's GraphVersion is
//     now, after updates; an unknown one lists nothing), pages with Limit and PageToken without
//     losing or repeating a run (also when several runs share a CreatedAt
//     and when newer runs are created between pages),
//     returns an empty NextPageToken on the last page, uses a page of at
//     least 25 when Limit is 0, and rejects a page token it did not issue
//     with an error wrapping [runs.ErrInvalid].
//   - Concurrent [runs.Mutate] calls on one run all apply.
//   - Records returned are copies: changing one does not change the store.
//
// Nil and empty slices and maps are treated as equal throughout.
package runstest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// Run tests that the stores made by newStore keep the promises of
// [runs.Store]. Each check is a sub-test, so -run can select one, e.g.
// -run 'Conformance/Pagination'.
//
// newStore is called once per sub-test with that sub-test's t, so a store
// can register its cleanup with t.Cleanup; it should fail the test with
// t.Fatal when it cannot make a store. Every run id, graph name and context
// id the suite uses is unique to its sub-test, so returning the same shared
// store each time also works.
func Run(t *testing.T, newStore func(t *testing.T) runs.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s runs.Store)
	}{
		{"CreateAndGet", testCreateAndGet},
		{"CreateIdempotent", testCreateIdempotent},
		{"RoundTrip", testRoundTrip},
		{"Events", testEvents},
		{"GetNotFound", testGetNotFound},
		{"Update", testUpdate},
		{"UpdateConflict", testUpdateConflict},
		{"UpdateNotFound", testUpdateNotFound},
		{"ListNewestFirst", testListNewestFirst},
		{"ListFilters", testListFilters},
		{"ListByVersion", testListByVersion},
		{"Pagination", testPagination},
		{"PaginationSameTime", testPaginationSameTime},
		{"DefaultPageSize", testDefaultPageSize},
		{"BadPageToken", testBadPageToken},
		{"ConcurrentMutate", testConcurrentMutate},
		{"ConcurrentCreate", testConcurrentCreate},
		{"Copies", testCopies},
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

// concurrency is the number of goroutines of the concurrency checks. It
// stays below the 50 attempts of runs.Mutate: each goroutine mutates once,
// so one loses at most concurrency-1 races.
const concurrency = 24

// base is the CreatedAt of the suite's runs; it has sub-millisecond digits
// so that a store that truncates to milliseconds is still accepted.
var base = time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.UTC)

// uniq returns a prefix unique to this call.
func uniq(t *testing.T) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "rt-" + hex.EncodeToString(b[:])
}

// newRun returns a pending run created at base+offset.
func newRun(id, graph string, offset time.Duration) runs.Run {
	at := base.Add(offset)
	return runs.Run{ID: id, Graph: graph, Status: pregel.RunPending, Input: json.RawMessage(`{"question":"why?"}`), CreatedAt: at, UpdatedAt: at}
}

func create(t *testing.T, s runs.Store, r runs.Run) runs.Run {
	t.Helper()
	got, created, err := s.CreateRun(t.Context(), r)
	if err != nil {
		t.Fatalf("CreateRun(%s): %v", r.ID, err)
	}
	if !created {
		t.Fatalf("CreateRun(%s): created = false for a new id", r.ID)
	}
	return got
}

func get(t *testing.T, s runs.Store, id string) runs.Run {
	t.Helper()
	got, err := s.GetRun(t.Context(), id)
	if err != nil {
		t.Fatalf("GetRun(%s): %v", id, err)
	}
	return got
}

// full returns a run with every field set.
func full(id, graph string) runs.Run {
	at := base.Add(time.Hour)
	return runs.Run{
		ID:              id,
		Graph:           graph,
		Status:          pregel.RunInterrupted,
		Input:           json.RawMessage(`{"question":"Grüße <b> & \"q\"","n":12345678901234567,"list":[1,null,{"x":true}]}`),
		ContextID:       "ctx-" + id,
		CreatedAt:       at,
		UpdatedAt:       at.Add(time.Minute),
		Step:            7,
		Counters:        pregel.Counters{Completed: 11, Skipped: 2, Cancelled: 3, Failed: 1},
		DrainRequested:  true,
		DrainReason:     "maintenance window",
		CancelRequested: true,
		Interrupts: []pregel.InterruptInfo{
			{ID: "task1.0", TaskID: "task1", Node: "ask", Value: json.RawMessage(`{"question":"approve?","amount":42.5}`)},
			{ID: "task2.0", TaskID: "task2", Node: "confirm", Value: json.RawMessage(`"sure?"`)},
		},
		Resume: &runs.ResumeRequest{
			Value:  json.RawMessage(`{"answer":"yes"}`),
			Values: map[string]json.RawMessage{"task1.0": json.RawMessage(`true`), "task2.0": json.RawMessage(`["a","b"]`)},
		},
		Error:      `node "ask" failed after 2 attempt(s): boom`,
		FailedNode: "ask",
		Events: []runs.Event{
			{At: at, Type: runs.EventCreated, Status: pregel.RunPending},
			{At: at.Add(time.Second), Type: runs.EventRunning, Status: pregel.RunRunning},
			{At: at.Add(2 * time.Second), Type: runs.EventDrainRequested, Status: pregel.RunRunning, Step: 6, Detail: "maintenance window"},
			{At: at.Add(3 * time.Second), Type: runs.EventInterrupted, Status: pregel.RunInterrupted, Step: 7, Detail: "task1.0, task2.0"},
		},
		EventsDropped: 3,
	}
}

// checkRun compares every field but Version and, unless times is set,
// CreatedAt and UpdatedAt.
func checkRun(t *testing.T, what string, got, want runs.Run, times bool) {
	t.Helper()
	eq := func(field string, g, w any) {
		t.Helper()
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s: %s = %#v, want %#v", what, field, g, w)
		}
	}
	eq("ID", got.ID, want.ID)
	eq("Graph", got.Graph, want.Graph)
	eq("Status", got.Status, want.Status)
	checkJSON(t, what+": Input", got.Input, want.Input)
	eq("ContextID", got.ContextID, want.ContextID)
	eq("Step", got.Step, want.Step)
	eq("Counters", got.Counters, want.Counters)
	eq("DrainRequested", got.DrainRequested, want.DrainRequested)
	eq("DrainReason", got.DrainReason, want.DrainReason)
	eq("CancelRequested", got.CancelRequested, want.CancelRequested)
	eq("Error", got.Error, want.Error)
	eq("FailedNode", got.FailedNode, want.FailedNode)
	eq("EventsDropped", got.EventsDropped, want.EventsDropped)
	if len(got.Events) != len(want.Events) {
		t.Errorf("%s: %d events, want %d: %+v", what, len(got.Events), len(want.Events), got.Events)
	} else {
		for i, w := range want.Events {
			g := got.Events[i]
			if g.Type != w.Type || g.Status != w.Status || g.Step != w.Step || g.Detail != w.Detail {
				t.Errorf("%s: event %d = %+v, want %+v", what, i, g, w)
			}
			checkTime(t, fmt.Sprintf("%s: event %d At", what, i), g.At, w.At)
		}
	}
	if len(got.Interrupts) != len(want.Interrupts) {
		t.Errorf("%s: %d interrupts, want %d: %+v", what, len(got.Interrupts), len(want.Interrupts), got.Interrupts)
	} else {
		for i, w := range want.Interrupts {
			g := got.Interrupts[i]
			if g.ID != w.ID || g.TaskID != w.TaskID || g.Node != w.Node {
				t.Errorf("%s: interrupt %d = %+v, want %+v", what, i, g, w)
			}
			checkJSON(t, fmt.Sprintf("%s: interrupt %d value", what, i), g.Value, w.Value)
		}
	}
	switch {
	case (got.Resume == nil) != (want.Resume == nil):
		t.Errorf("%s: Resume = %+v, want %+v", what, got.Resume, want.Resume)
	case want.Resume != nil:
		checkJSON(t, what+": Resume.Value", got.Resume.Value, want.Resume.Value)
		if len(got.Resume.Values) != len(want.Resume.Values) {
			t.Errorf("%s: Resume.Values = %s, want %s", what, got.Resume.Values, want.Resume.Values)
		}
		for k, w := range want.Resume.Values {
			checkJSON(t, fmt.Sprintf("%s: Resume.Values[%s]", what, k), got.Resume.Values[k], w)
		}
	}
	if times {
		checkTime(t, what+": CreatedAt", got.CreatedAt, want.CreatedAt)
		checkTime(t, what+": UpdatedAt", got.UpdatedAt, want.UpdatedAt)
	}
}

// checkJSON compares JSON semantically; empty and absent are equal.
func checkJSON(t *testing.T, what string, got, want json.RawMessage) {
	t.Helper()
	if len(got) == 0 || len(want) == 0 {
		if len(got) != len(want) {
			t.Errorf("%s = %s, want %s", what, got, want)
		}
		return
	}
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Errorf("%s = %s: not JSON: %v", what, got, err)
		return
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("%s: bad test JSON %s: %v", what, want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s = %s, want %s", what, got, want)
	}
}

// checkTime accepts a time within a millisecond of want, in any location.
func checkTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if d := got.Sub(want); d <= -time.Millisecond || d >= time.Millisecond {
		t.Errorf("%s = %v, want %v (within a millisecond)", what, got, want)
	}
}

func testCreateAndGet(t *testing.T, s runs.Store) {
	p := uniq(t)
	r := newRun(p+"-a", p+"-graph", 0)
	got := create(t, s, r)
	checkRun(t, "CreateRun", got, r, true)
	checkRun(t, "GetRun", get(t, s, r.ID), r, true)
	if v := get(t, s, r.ID).Version; v != got.Version {
		t.Errorf("GetRun: Version = %d, CreateRun returned %d", v, got.Version)
	}
}

func testCreateIdempotent(t *testing.T, s runs.Store) {
	ctx := t.Context()
	p := uniq(t)
	r := newRun(p+"-a", p+"-graph", 0)
	first := create(t, s, r)
	again := r
	again.Input = json.RawMessage(`{"question":"something else"}`)
	again.Graph = p + "-other"
	again.Status = pregel.RunRunning
	again.CreatedAt = base.Add(time.Hour)
	got, created, err := s.CreateRun(ctx, again)
	if err != nil {
		t.Fatalf("second CreateRun: %v", err)
	}
	if created {
		t.Error("second CreateRun: created = true, want false")
	}
	checkRun(t, "second CreateRun", got, r, true)
	if got.Version != first.Version {
		t.Errorf("second CreateRun: Version = %d, want %d", got.Version, first.Version)
	}
	checkRun(t, "GetRun after second CreateRun", get(t, s, r.ID), r, true)
}

func testRoundTrip(t *testing.T, s runs.Store) {
	p := uniq(t)
	want := full(p+"-a", p+"-graph")
	got := create(t, s, want)
	checkRun(t, "CreateRun", got, want, true)
	checkRun(t, "GetRun", get(t, s, want.ID), want, true)

	// Every field also round-trips through UpdateRun.
	plain := newRun(p+"-b", p+"-graph", 0)
	stored := create(t, s, plain)
	upd := full(plain.ID, plain.Graph)
	upd.CreatedAt = plain.CreatedAt
	upd.Version = stored.Version
	out, err := s.UpdateRun(t.Context(), upd)
	if err != nil {
		t.Fatalf("UpdateRun: %v", err)
	}
	checkRun(t, "UpdateRun", out, upd, false)
	after := get(t, s, plain.ID)
	checkRun(t, "GetRun after UpdateRun", after, upd, false)
	checkTime(t, "GetRun after UpdateRun: CreatedAt", after.CreatedAt, plain.CreatedAt)
	checkTime(t, "GetRun after UpdateRun: UpdatedAt", after.UpdatedAt, out.UpdatedAt)

	// Clearing fields clears them.
	after.Interrupts, after.Resume, after.Error, after.FailedNode = nil, nil, "", ""
	after.DrainRequested, after.DrainReason, after.CancelRequested = false, "", false
	after.Events, after.EventsDropped = nil, 0
	after.Status = pregel.RunCompleted
	cleared, err := s.UpdateRun(t.Context(), after)
	if err != nil {
		t.Fatalf("UpdateRun (clearing): %v", err)
	}
	checkRun(t, "GetRun after clearing", get(t, s, plain.ID), cleared, false)
	checkRun(t, "UpdateRun (clearing)", cleared, after, false)
}

func testEvents(t *testing.T, s runs.Store) {
	ctx := t.Context()
	p := uniq(t)
	r := newRun(p+"-a", p+"-graph", 0)
	r.Events = []runs.Event{{At: r.CreatedAt, Type: runs.EventCreated, Status: pregel.RunPending}}
	want := r
	checkRun(t, "CreateRun with an event", create(t, s, r), want, true)

	// Mutate records the events of each change, and the store keeps them.
	steps := []func(*runs.Run){
		func(r *runs.Run) { r.Status = pregel.RunRunning },
		func(r *runs.Run) { r.Step, r.Counters.Completed = 1, 1 },
		func(r *runs.Run) { r.DrainRequested, r.DrainReason = true, "deploy" },
		func(r *runs.Run) { r.Status, r.Step = pregel.RunDrained, 2 },
		func(r *runs.Run) { r.Status, r.DrainRequested, r.DrainReason = pregel.RunPending, false, "" },
	}
	for i, step := range steps {
		if _, err := runs.Mutate(ctx, s, r.ID, func(r *runs.Run) error { step(r); return nil }); err != nil {
			t.Fatalf("Mutate %d: %v", i, err)
		}
	}
	got := get(t, s, r.ID)
	type short struct {
		Type   runs.EventType
		Status pregel.RunStatus
		Step   int
		Detail string
	}
	var gotEvents []short
	for _, ev := range got.Events {
		gotEvents = append(gotEvents, short{ev.Type, ev.Status, ev.Step, ev.Detail})
	}
	wantEvents := []short{
		{runs.EventCreated, pregel.RunPending, 0, ""},
		{runs.EventRunning, pregel.RunRunning, 0, ""},
		{runs.EventDrainRequested, pregel.RunRunning, 1, "deploy"},
		{runs.EventDrained, pregel.RunDrained, 2, "deploy"},
		{runs.EventResumeRequested, pregel.RunPending, 2, ""},
	}
	if !reflect.DeepEqual(gotEvents, wantEvents) {
		t.Errorf("events after Mutate calls = %+v, want %+v", gotEvents, wantEvents)
	}
	checkTime(t, "created event At", got.Events[0].At, r.CreatedAt)
	for i, ev := range got.Events[1:] {
		if ev.At.Before(got.Events[i].At) || ev.At.After(time.Now().Add(time.Second)) {
			t.Errorf("event %d at %v, after %v", i+1, ev.At, got.Events[i].At)
		}
	}

	// A full history, with details of every kind, round-trips through
	// UpdateRun.
	full := got
	full.Events = make([]runs.Event, runs.MaxEvents)
	for i := range full.Events {
		full.Events[i] = runs.Event{
			At:     base.Add(time.Duration(i) * time.Millisecond),
			Type:   []runs.EventType{runs.EventRunning, runs.EventDrainRequested, runs.EventFailed}[i%3],
			Status: pregel.RunRunning,
			Step:   i,
			Detail: fmt.Sprintf(`node "n%d" failed: Grüße <b> & "q"`, i),
		}
	}
	full.EventsDropped = 1234
	out, err := s.UpdateRun(ctx, full)
	if err != nil {
		t.Fatalf("UpdateRun with %d events: %v", runs.MaxEvents, err)
	}
	checkRun(t, "UpdateRun with a full history", out, full, false)
	checkRun(t, "GetRun after UpdateRun with a full history", get(t, s, r.ID), full, false)
	listed := list(t, s, runs.Filter{Graph: r.Graph})
	if len(listed.Runs) != 1 {
		t.Fatalf("ListRuns: %d runs, want 1", len(listed.Runs))
	}
	checkRun(t, "listed run with a full history", listed.Runs[0], full, false)
}

func testGetNotFound(t *testing.T, s runs.Store) {
	_, err := s.GetRun(t.Context(), uniq(t)+"-missing")
	if !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("GetRun(missing) error = %v, want one wrapping runs.ErrNotFound", err)
	}
}

func testUpdate(t *testing.T, s runs.Store) {
	ctx := t.Context()
	p := uniq(t)
	r := create(t, s, newRun(p+"-a", p+"-graph", 0))
	before := time.Now()
	r.Status, r.Step = pregel.RunRunning, 1
	r.UpdatedAt = time.Time{}
	got, err := s.UpdateRun(ctx, r)
	if err != nil {
		t.Fatalf("UpdateRun: %v", err)
	}
	if got.Version != r.Version+1 {
		t.Errorf("UpdateRun: Version = %d, want %d", got.Version, r.Version+1)
	}
	if got.Status != pregel.RunRunning || got.Step != 1 {
		t.Errorf("UpdateRun returned status %s step %d, want running step 1", got.Status, got.Step)
	}
	if got.UpdatedAt.Before(before.Add(-time.Second)) || got.UpdatedAt.After(time.Now().Add(time.Second)) {
		t.Errorf("UpdateRun: UpdatedAt = %v, want about %v", got.UpdatedAt, before)
	}
	stored := get(t, s, r.ID)
	if stored.Version != got.Version || stored.Status != pregel.RunRunning || stored.Step != 1 {
		t.Errorf("GetRun after UpdateRun = version %d status %s step %d, want version %d running step 1", stored.Version, stored.Status, stored.Step, got.Version)
	}
	checkTime(t, "GetRun after UpdateRun: UpdatedAt", stored.UpdatedAt, got.UpdatedAt)
	checkTime(t, "GetRun after UpdateRun: CreatedAt", stored.CreatedAt, base)

	// A second update builds on the first.
	stored.Step = 2
	got2, err := s.UpdateRun(ctx, stored)
	if err != nil {
		t.Fatalf("second UpdateRun: %v", err)
	}
	if got2.Version != got.Version+1 {
		t.Errorf("second UpdateRun: Version = %d, want %d", got2.Version, got.Version+1)
	}
	if got2.UpdatedAt.Before(got.UpdatedAt.Add(-time.Millisecond)) {
		t.Errorf("second UpdateRun: UpdatedAt %v is before the first's %v", got2.UpdatedAt, got.UpdatedAt)
	}
}

func testUpdateConflict(t *testing.T, s runs.Store) {
	ctx := t.Context()
	p := uniq(t)
	r := create(t, s, newRun(p+"-a", p+"-graph", 0))
	first := r
	first.Step = 1
	won, err := s.UpdateRun(ctx, first)
	if err != nil {
		t.Fatalf("UpdateRun: %v", err)
	}
	stale := r
	stale.Step, stale.Status, stale.Error = 99, pregel.RunFailed, "stale"
	for _, v := range []int64{r.Version, r.Version + 5} {
		stale.Version = v
		if _, err := s.UpdateRun(ctx, stale); !errors.Is(err, runs.ErrConflict) {
			t.Errorf("UpdateRun with version %d (stored %d): error = %v, want one wrapping runs.ErrConflict", v, won.Version, err)
		}
	}
	got := get(t, s, r.ID)
	if got.Step != 1 || got.Status != pregel.RunPending || got.Error != "" || got.Version != won.Version {
		t.Errorf("after stale updates: step %d status %s error %q version %d; want the first update's step 1 pending version %d", got.Step, got.Status, got.Error, got.Version, won.Version)
	}
}

func testUpdateNotFound(t *testing.T, s runs.Store) {
	p := uniq(t)
	_, err := s.UpdateRun(t.Context(), newRun(p+"-missing", p+"-graph", 0))
	if !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("UpdateRun(missing) error = %v, want one wrapping runs.ErrNotFound", err)
	}
	if _, err := s.GetRun(t.Context(), p+"-missing"); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("GetRun after UpdateRun(missing): error = %v, want runs.ErrNotFound", err)
	}
}

func ids(rs []runs.Run) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

func list(t *testing.T, s runs.Store, f runs.Filter) runs.Page {
	t.Helper()
	page, err := s.ListRuns(t.Context(), f)
	if err != nil {
		t.Fatalf("ListRuns(%+v): %v", f, err)
	}
	return page
}

func testListNewestFirst(t *testing.T, s runs.Store) {
	p := uniq(t)
	graph := p + "-graph"
	// Created out of order, one second apart.
	offsets := []int{3, 0, 4, 1, 2}
	for _, o := range offsets {
		create(t, s, newRun(fmt.Sprintf("%s-%d", p, o), graph, time.Duration(o)*time.Second))
	}
	want := []string{p + "-4", p + "-3", p + "-2", p + "-1", p + "-0"}
	page := list(t, s, runs.Filter{Graph: graph})
	if got := ids(page.Runs); !slices.Equal(got, want) {
		t.Errorf("ListRuns = %v, want %v", got, want)
	}
	if page.NextPageToken != "" {
		t.Errorf("ListRuns: NextPageToken = %q on the only page", page.NextPageToken)
	}
	if len(page.Runs) > 0 {
		checkRun(t, "listed run", page.Runs[0], newRun(p+"-4", graph, 4*time.Second), true)
	}
	// Unfiltered, in a store that may hold other runs: ours come in order
	// and the whole listing is newest first.
	all := listAll(t, s, runs.Filter{Limit: 500})
	var ours []string
	for i, r := range all {
		if i > 0 && r.CreatedAt.After(all[i-1].CreatedAt) {
			t.Errorf("unfiltered ListRuns: %s (created %v) after %s (created %v)", r.ID, r.CreatedAt, all[i-1].ID, all[i-1].CreatedAt)
		}
		if r.Graph == graph {
			ours = append(ours, r.ID)
		}
	}
	if !slices.Equal(ours, want) {
		t.Errorf("unfiltered ListRuns: our runs = %v, want %v", ours, want)
	}
}

func testListByVersion(t *testing.T, s runs.Store) {
	p := uniq(t)
	graph := p + "-graph"
	v1 := &pregel.Stamp{Version: p + "-v1", Fingerprint: p + "-f1"}
	v2 := &pregel.Stamp{Version: p + "-v2", Fingerprint: p + "-f2"}
	var made []runs.Run
	for i, v := range []*pregel.Stamp{v1, v2, v1, nil} {
		r := newRun(fmt.Sprintf("%s-%d", p, i), graph, time.Duration(i)*time.Second)
		r.GraphVersion = v
		made = append(made, create(t, s, r))
	}
	// Run 2 continued on v2's code: its record names v2 now.
	moved := made[2]
	moved.GraphVersion = v2
	if _, err := s.UpdateRun(t.Context(), moved); err != nil {
		t.Fatalf("UpdateRun: %v", err)
	}
	for _, tc := range []struct {
		version string
		want    []string
	}{
		{v1.Version, []string{p + "-0"}},
		{v1.Fingerprint, []string{p + "-0"}},
		{v2.Version, []string{p + "-2", p + "-1"}},
		{v2.Fingerprint, []string{p + "-2", p + "-1"}},
		{p + "-unknown", nil},
	} {
		got := ids(list(t, s, runs.Filter{Graph: graph, Version: tc.version}).Runs)
		if !slices.Equal(got, tc.want) {
			t.Errorf("ListRuns(version %s) = %v, want %v", tc.version, got, tc.want)
		}
	}
	if r, err := s.GetRun(t.Context(), made[1].ID); err != nil || r.GraphVersion == nil || r.GraphVersion.Fingerprint != v2.Fingerprint {
		t.Errorf("GetRun: graph version %+v, %v; want %+v", r.GraphVersion, err, v2)
	}
}

func testListFilters(t *testing.T, s runs.Store) {
	ctx := t.Context()
	p := uniq(t)
	g1, g2 := p+"-g1", p+"-g2"
	c1, c2 := p+"-c1", p+"-c2"
	type spec struct {
		graph, ctxID string
		status       pregel.RunStatus
	}
	specs := []spec{
		{g1, c1, pregel.RunPending},
		{g1, c1, pregel.RunCompleted},
		{g1, c2, pregel.RunCompleted},
		{g2, c1, pregel.RunCompleted},
		{g2, "", pregel.RunFailed},
		{g1, "", pregel.RunPending},
		{g2, c2, pregel.RunInterrupted},
	}
	for i, sp := range specs {
		r := newRun(fmt.Sprintf("%s-%d", p, i), sp.graph, time.Duration(i)*time.Second)
		r.ContextID = sp.ctxID
		r = create(t, s, r)
		if sp.status != r.Status {
			r.Status = sp.status
			if _, err := s.UpdateRun(ctx, r); err != nil {
				t.Fatalf("UpdateRun: %v", err)
			}
		}
	}
	want := func(keep func(spec) bool) []string {
		var out []string
		for i := len(specs) - 1; i >= 0; i-- {
			if keep(specs[i]) {
				out = append(out, fmt.Sprintf("%s-%d", p, i))
			}
		}
		return out
	}
	cases := []struct {
		f    runs.Filter
		keep func(spec) bool
	}{
		{runs.Filter{Graph: g1}, func(s spec) bool { return s.graph == g1 }},
		{runs.Filter{Graph: g2}, func(s spec) bool { return s.graph == g2 }},
		{runs.Filter{ContextID: c1}, func(s spec) bool { return s.ctxID == c1 }},
		{runs.Filter{ContextID: c2}, func(s spec) bool { return s.ctxID == c2 }},
		{runs.Filter{Graph: g1, Status: pregel.RunCompleted}, func(s spec) bool { return s.graph == g1 && s.status == pregel.RunCompleted }},
		{runs.Filter{Graph: g2, Status: pregel.RunCompleted}, func(s spec) bool { return s.graph == g2 && s.status == pregel.RunCompleted }},
		{runs.Filter{Graph: g1, Status: pregel.RunPending}, func(s spec) bool { return s.graph == g1 && s.status == pregel.RunPending }},
		{runs.Filter{Graph: g1, ContextID: c1}, func(s spec) bool { return s.graph == g1 && s.ctxID == c1 }},
		{runs.Filter{Graph: g1, ContextID: c1, Status: pregel.RunCompleted}, func(s spec) bool {
			return s.graph == g1 && s.ctxID == c1 && s.status == pregel.RunCompleted
		}},
		{runs.Filter{ContextID: c2, Status: pregel.RunInterrupted}, func(s spec) bool { return s.ctxID == c2 && s.status == pregel.RunInterrupted }},
		{runs.Filter{Graph: g2, Status: pregel.RunCancelled}, func(spec) bool { return false }},
		{runs.Filter{Graph: p + "-none"}, func(spec) bool { return false }},
	}
	for _, c := range cases {
		page := list(t, s, c.f)
		if got, w := ids(page.Runs), want(c.keep); !slices.Equal(got, w) {
			t.Errorf("ListRuns(%+v) = %v, want %v", c.f, got, w)
		}
	}
	// Status alone, over a store that may hold other runs.
	var failed []string
	for _, r := range listAll(t, s, runs.Filter{Status: pregel.RunFailed, Limit: 500}) {
		if r.Status != pregel.RunFailed {
			t.Errorf("ListRuns(status failed) returned %s with status %s", r.ID, r.Status)
		}
		if r.Graph == g1 || r.Graph == g2 {
			failed = append(failed, r.ID)
		}
	}
	if w := want(func(s spec) bool { return s.status == pregel.RunFailed }); !slices.Equal(failed, w) {
		t.Errorf("ListRuns(status failed): our runs = %v, want %v", failed, w)
	}
}

// listAll follows page tokens to the end.
func listAll(t *testing.T, s runs.Store, f runs.Filter) []runs.Run {
	t.Helper()
	var all []runs.Run
	for range 10000 {
		page := list(t, s, f)
		all = append(all, page.Runs...)
		if page.NextPageToken == "" {
			return all
		}
		f.PageToken = page.NextPageToken
	}
	t.Fatalf("ListRuns(%+v): page tokens do not end", f)
	return nil
}

// checkPages lists graph with pages of size and checks the concatenation
// against want.
func checkPages(t *testing.T, s runs.Store, graph string, size int, want []string, sizes []int) {
	t.Helper()
	f := runs.Filter{Graph: graph, Limit: size}
	var got []string
	var gotSizes []int
	seen := map[string]bool{}
	for range len(want) + 2 {
		page := list(t, s, f)
		gotSizes = append(gotSizes, len(page.Runs))
		if len(page.Runs) > size {
			t.Errorf("ListRuns(limit %d) returned %d runs", size, len(page.Runs))
		}
		for _, id := range ids(page.Runs) {
			if seen[id] {
				t.Errorf("ListRuns(limit %d): %s listed twice", size, id)
			}
			seen[id] = true
			got = append(got, id)
		}
		if page.NextPageToken == "" {
			break
		}
		f.PageToken = page.NextPageToken
	}
	if !slices.Equal(got, want) {
		t.Errorf("ListRuns pages of %d = %v, want %v", size, got, want)
	}
	if sizes != nil && !slices.Equal(gotSizes, sizes) {
		t.Errorf("ListRuns pages of %d: page sizes %v, want %v", size, gotSizes, sizes)
	}
}

func testPagination(t *testing.T, s runs.Store) {
	p := uniq(t)
	graph := p + "-graph"
	const n = 25
	var want []string
	for i := range n {
		create(t, s, newRun(fmt.Sprintf("%s-%02d", p, i), graph, time.Duration(i)*time.Second))
		want = append(want, fmt.Sprintf("%s-%02d", p, i))
	}
	slices.Reverse(want)
	checkPages(t, s, graph, 10, want, []int{10, 10, 5})
	checkPages(t, s, graph, 25, want, nil)
	checkPages(t, s, graph, 1, want, nil)
	checkPages(t, s, graph, 7, want, nil)

	// Runs created while paging: none of the listed ones is lost or
	// repeated, and newer runs do not shift the pages.
	f := runs.Filter{Graph: graph, Limit: 10}
	first := list(t, s, f)
	create(t, s, newRun(p+"-newer", graph, time.Hour))
	f.PageToken = first.NextPageToken
	rest := listAll(t, s, f)
	got := append(ids(first.Runs), ids(rest)...)
	if !slices.Equal(got, want) {
		t.Errorf("paging while a newer run is created = %v, want %v", got, want)
	}
}

func testPaginationSameTime(t *testing.T, s runs.Store) {
	p := uniq(t)
	graph := p + "-graph"
	// 25 runs, three or four to a CreatedAt (on a millisecond boundary).
	at := base.Truncate(time.Millisecond)
	var want []string
	for i := range 25 {
		r := newRun(fmt.Sprintf("%s-%02d", p, i), graph, 0)
		r.CreatedAt = at.Add(time.Duration(i/4) * time.Second)
		r.UpdatedAt = r.CreatedAt
		create(t, s, r)
		want = append(want, r.ID)
	}
	all := listAll(t, s, runs.Filter{Graph: graph, Limit: 500})
	for i := 1; i < len(all); i++ {
		if all[i].CreatedAt.After(all[i-1].CreatedAt) {
			t.Errorf("ListRuns: %s (created %v) after %s (created %v)", all[i].ID, all[i].CreatedAt, all[i-1].ID, all[i-1].CreatedAt)
		}
	}
	order := ids(all)
	if !slices.Equal(slices.Sorted(slices.Values(order)), want) {
		t.Fatalf("ListRuns = %v, want the runs %v", order, want)
	}
	for _, size := range []int{10, 3, 4, 1} {
		checkPages(t, s, graph, size, order, nil)
	}
}

func testDefaultPageSize(t *testing.T, s runs.Store) {
	p := uniq(t)
	graph := p + "-graph"
	for i := range 25 {
		create(t, s, newRun(fmt.Sprintf("%s-%02d", p, i), graph, time.Duration(i)*time.Second))
	}
	page := list(t, s, runs.Filter{Graph: graph})
	if len(page.Runs) != 25 || page.NextPageToken != "" {
		t.Errorf("ListRuns with Limit 0: %d runs, next page token %q; want all 25 on one page", len(page.Runs), page.NextPageToken)
	}
}

func testBadPageToken(t *testing.T, s runs.Store) {
	p := uniq(t)
	graph := p + "-graph"
	for i := range 3 {
		create(t, s, newRun(fmt.Sprintf("%s-%d", p, i), graph, time.Duration(i)*time.Second))
	}
	for _, tok := range []string{"not a token", "%%%", "eyJ0IjoxfQ", "AAAA"} {
		_, err := s.ListRuns(t.Context(), runs.Filter{Graph: graph, PageToken: tok})
		if !errors.Is(err, runs.ErrInvalid) {
			t.Errorf("ListRuns(page token %q): error = %v, want one wrapping runs.ErrInvalid", tok, err)
		}
	}
}

func testConcurrentMutate(t *testing.T, s runs.Store) {
	ctx := t.Context()
	p := uniq(t)
	r := create(t, s, newRun(p+"-a", p+"-graph", 0))
	var wg sync.WaitGroup
	errs := make(chan error, concurrency)
	for i := range concurrency {
		wg.Go(func() {
			_, err := runs.Mutate(ctx, s, r.ID, func(r *runs.Run) error {
				r.Counters.Completed++
				r.Step += i
				return nil
			})
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Mutate: %v", err)
	}
	got := get(t, s, r.ID)
	wantStep := concurrency * (concurrency - 1) / 2
	if got.Counters.Completed != concurrency || got.Step != wantStep {
		t.Errorf("after %d concurrent Mutate calls: completed %d, step %d; want %d, %d", concurrency, got.Counters.Completed, got.Step, concurrency, wantStep)
	}
	if got.Version != r.Version+concurrency {
		t.Errorf("after %d concurrent Mutate calls: Version = %d, want %d", concurrency, got.Version, r.Version+concurrency)
	}
}

func testConcurrentCreate(t *testing.T, s runs.Store) {
	ctx := t.Context()
	p := uniq(t)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		created int
		inputs  = map[string]bool{}
	)
	for i := range concurrency {
		wg.Go(func() {
			r := newRun(p+"-a", p+"-graph", 0)
			r.Input = json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))
			got, ok, err := s.CreateRun(ctx, r)
			if err != nil {
				t.Errorf("CreateRun: %v", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if ok {
				created++
			}
			inputs[string(compact(t, got.Input))] = true
		})
	}
	wg.Wait()
	if created != 1 || len(inputs) != 1 {
		t.Errorf("%d concurrent CreateRun calls with one id: %d reported created, %d different records returned; want 1 and 1", concurrency, created, len(inputs))
	}
}

func compact(t *testing.T, raw json.RawMessage) []byte {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Errorf("stored input %s is not JSON: %v", raw, err)
		return raw
	}
	out, _ := json.Marshal(v)
	return out
}

func testCopies(t *testing.T, s runs.Store) {
	ctx := t.Context()
	p := uniq(t)
	want := full(p+"-a", p+"-graph")
	in := full(p+"-a", p+"-graph")
	got := create(t, s, in)
	scribble := func(r *runs.Run) {
		if len(r.Input) > 0 {
			r.Input[0] = 'X'
		}
		if len(r.Interrupts) > 0 {
			r.Interrupts[0].Node = "changed"
			if len(r.Interrupts[0].Value) > 0 {
				r.Interrupts[0].Value[0] = 'X'
			}
		}
		if r.Resume != nil {
			if len(r.Resume.Value) > 0 {
				r.Resume.Value[0] = 'X'
			}
			r.Resume.Values["task1.0"] = json.RawMessage(`"changed"`)
		}
		if len(r.Events) > 0 {
			r.Events[0].Detail = "changed"
		}
	}
	scribble(&in)
	scribble(&got)
	listed := list(t, s, runs.Filter{Graph: want.Graph})
	for i := range listed.Runs {
		scribble(&listed.Runs[i])
	}
	fresh := get(t, s, want.ID)
	checkRun(t, "GetRun after changing returned and passed records", fresh, want, true)

	upd := fresh
	out, err := s.UpdateRun(ctx, upd)
	if err != nil {
		t.Fatalf("UpdateRun: %v", err)
	}
	scribble(&upd)
	scribble(&out)
	checkRun(t, "GetRun after changing the records of UpdateRun", get(t, s, want.ID), want, false)
}
