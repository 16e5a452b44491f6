package dynamo_test

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/store/dynamo"
)

// A step that reads only "count" beside an unchanged 300 KiB "doc" loads
// on a new Store with one Query and no read of the document; committing
// the next step from that partial checkpoint keeps the document; and a
// Store asked for the whole checkpoint afterwards reads it.
func TestLoadRunReading(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEnv(t)
	const id = "reading"
	if _, _, err := e.store().CreateRun(ctx, runs.Run{ID: id, Graph: "g", Status: pregel.RunRunning, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	doc := json.RawMessage(strconv.Quote(strings.Repeat("d", 300<<10)))
	step := func(n int) *pregel.Checkpoint {
		return &pregel.Checkpoint{
			RunID: id, Graph: "g", Step: n,
			Values:   map[string]json.RawMessage{"doc": doc, "count": json.RawMessage(strconv.Itoa(n))},
			Versions: map[string]int{"doc": 0, "count": n},
			Next:     []pregel.Trigger{{Node: "step"}},
		}
	}
	w := e.store()
	for n := range 2 {
		if err := w.Commit(ctx, step(n)); err != nil {
			t.Fatal(err)
		}
	}
	onlyCount := func(*pregel.Checkpoint) ([]string, bool) { return []string{"count"}, false }

	s := e.store()
	var cp *pregel.Checkpoint
	u := e.measure(t, func() (err error) { _, cp, _, err = s.LoadRunReading(ctx, id, onlyCount); return err })
	if got := u.calls.Total().Requests; got != 1 || u.units.total().RRU > 2 {
		t.Errorf("LoadRunReading of a step beside a 300 KiB channel it does not read: %s, %.0f RRU; want one Query of at most 2 RRU", opsString(u.calls), u.units.total().RRU)
	}
	if cp.Step != 1 || string(cp.Values["count"]) != "1" || cp.Values["doc"] != nil || !maps.Equal(cp.Unloaded, map[string]bool{"doc": true}) {
		t.Fatalf("partial checkpoint: step %d, values %v, unloaded %v; want step 1, count 1, doc unloaded", cp.Step, slices.Sorted(maps.Keys(cp.Values)), cp.Unloaded)
	}

	// Commit step 2 from the partial checkpoint, as Apply leaves it.
	next := &pregel.Checkpoint{RunID: id, Graph: "g", Step: 2, Values: maps.Clone(cp.Values), Versions: maps.Clone(cp.Versions), Next: cp.Next, Unloaded: cp.Unloaded}
	next.Values["count"], next.Versions["count"] = json.RawMessage("2"), 2
	u = e.measure(t, func() error { return s.Commit(ctx, next) })
	if got := u.calls.Total().Requests; got != 1 || u.units.total().WRU > 1 {
		t.Errorf("Commit of a partial checkpoint: %s, %.0f WRU; want one PutItem of 1 WRU", opsString(u.calls), u.units.total().WRU)
	}
	for name, st := range map[string]*dynamo.Store{"the committing Store": s, "a new Store": e.store()} {
		got, err := st.Load(ctx, id, pregel.Latest)
		if err != nil {
			t.Fatal(err)
		}
		if got.Step != 2 || string(got.Values["doc"]) != string(doc) || string(got.Values["count"]) != "2" || got.Unloaded != nil {
			t.Errorf("%s: Load(Latest) is step %d, doc of %d bytes, count %s, unloaded %v; want step 2, the document, count 2, nothing unloaded", name, got.Step, len(got.Values["doc"]), got.Values["count"], got.Unloaded)
		}
	}

	// LoadChannels of the partial checkpoint reads the document; the
	// partial checkpoint itself is not changed.
	s2 := e.store()
	_, part, _, err := s2.LoadRunReading(ctx, id, onlyCount)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := s2.LoadChannels(ctx, part, []string{"doc"})
	if err != nil {
		t.Fatal(err)
	}
	if string(whole.Values["doc"]) != string(doc) || whole.Unloaded != nil || part.Values["doc"] != nil || !part.Unloaded["doc"] {
		t.Errorf("LoadChannels: doc of %d bytes, unloaded %v; the partial one now: doc of %d bytes, unloaded %v", len(whole.Values["doc"]), whole.Unloaded, len(part.Values["doc"]), part.Unloaded)
	}
	// Reads that ask for everything read everything.
	_, all, _, err := e.store().LoadRunReading(ctx, id, func(*pregel.Checkpoint) ([]string, bool) { return nil, true })
	if err != nil {
		t.Fatal(err)
	}
	if string(all.Values["doc"]) != string(doc) || all.Unloaded != nil {
		t.Errorf("LoadRunReading of all channels: doc of %d bytes, unloaded %v", len(all.Values["doc"]), all.Unloaded)
	}
}

// CountSettled counts across Stores, and the commit of the step by a Store
// that counted deletes the counter.
func TestCountSettled(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEnv(t)
	const id = "settled"
	a, b := e.store(), e.store()
	if _, _, err := a.CreateRun(ctx, runs.Run{ID: id, Graph: "loop", Status: pregel.RunRunning, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	cps := loopCheckpoints(id, 2)
	if err := a.Commit(ctx, cps[0]); err != nil {
		t.Fatal(err)
	}
	for i, st := range []*dynamo.Store{a, b, a} {
		u := e.measure(t, func() error {
			n, err := st.CountSettled(ctx, id, 1)
			if err == nil && n != i+1 {
				t.Errorf("count %d, want %d", n, i+1)
			}
			return err
		})
		if got := u.calls.Op("UpdateItem").Requests; got != 1 || u.calls.Total().Requests != 1 || u.units.total().WRU != 1 {
			t.Errorf("CountSettled: %s, %.0f WRU; want one UpdateItem of 1 WRU", opsString(u.calls), u.units.total().WRU)
		}
	}
	if n, err := a.CountSettled(ctx, id, 2); err != nil || n != 1 {
		t.Errorf("count of another step: %d, %v; want 1", n, err)
	}
	if err := a.Commit(ctx, cps[1]); err != nil {
		t.Fatal(err)
	}
	if sks := sortKeys(t, e, id, "SETTLED#"); !slices.Equal(sks, []string{"SETTLED#0000000002"}) {
		t.Errorf("counters after the commit of step 1: %v; want only step 2's", sks)
	}
	// LoadRun does not see counters.
	_, cp, pending, err := e.store().LoadRun(ctx, id)
	if err != nil || cp == nil || cp.Step != 1 || len(pending) != 0 {
		t.Errorf("LoadRun: %+v, %v, %v; want step 1, nothing pending", cp, pending, err)
	}
}
