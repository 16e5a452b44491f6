package sqlite_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/runs/runstest"
)

func TestRunStoreConformance(t *testing.T) {
	runstest.Run(t, func(t *testing.T) runs.Store {
		return open(t, filepath.Join(t.TempDir(), "superstep.db"))
	})
}

// TestRunStoreSharedConformance runs the suite against one Store for all
// its checks, as a server uses it.
func TestRunStoreSharedConformance(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "superstep.db"))
	runstest.Run(t, func(*testing.T) runs.Store { return s })
}

// TestRunStoreConformanceTwoStores runs the suite against two Stores on one
// file, used alternately, as two processes would share it.
func TestRunStoreConformanceTwoStores(t *testing.T) {
	runstest.Run(t, func(t *testing.T) runs.Store {
		path := filepath.Join(t.TempDir(), "superstep.db")
		return &alternateRuns{stores: []runs.Store{open(t, path), open(t, path)}}
	})
}

// alternateRuns sends each call to the next of its stores in turn.
type alternateRuns struct {
	stores []runs.Store
	n      atomic.Uint64
}

func (a *alternateRuns) next() runs.Store {
	return a.stores[a.n.Add(1)%uint64(len(a.stores))]
}

func (a *alternateRuns) CreateRun(ctx context.Context, r runs.Run) (runs.Run, bool, error) {
	return a.next().CreateRun(ctx, r)
}

func (a *alternateRuns) GetRun(ctx context.Context, id string) (runs.Run, error) {
	return a.next().GetRun(ctx, id)
}

func (a *alternateRuns) UpdateRun(ctx context.Context, r runs.Run) (runs.Run, error) {
	return a.next().UpdateRun(ctx, r)
}

func (a *alternateRuns) ListRuns(ctx context.Context, f runs.Filter) (runs.Page, error) {
	return a.next().ListRuns(ctx, f)
}

// TestRunRecordsReopen closes a store and opens its file again: the run
// records, their versions and the listing order are still there, and a page
// token issued before closing continues the listing after.
func TestRunRecordsReopen(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "superstep.db")
	s := open(t, path)
	at := time.Date(2026, 11, 22, 9, 0, 0, 123456789, time.UTC)
	var want []runs.Run
	for i := range 5 {
		r, created, err := s.CreateRun(ctx, runs.Run{
			ID: fmt.Sprint("run-", i), Graph: "g", Status: pregel.RunPending,
			Input: json.RawMessage(`{"q":"<why>"}`), ContextID: "c",
			CreatedAt: at.Add(time.Duration(i) * time.Second),
		})
		if err != nil || !created {
			t.Fatalf("CreateRun: created %v, error %v", created, err)
		}
		want = append(want, r)
	}
	// Update one twice, so it has version 3.
	for range 2 {
		r := want[2]
		r.Status, r.Step = pregel.RunRunning, r.Step+1
		got, err := s.UpdateRun(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		want[2] = got
	}
	first, err := s.ListRuns(ctx, runs.Filter{Graph: "g", Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = open(t, path)
	for _, w := range want {
		got, err := s.GetRun(ctx, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		if g, w := mustJSON(t, got), mustJSON(t, w); g != w {
			t.Errorf("after reopening:\n\tgot  %s\n\twant %s", g, w)
		}
	}
	if v := want[2].Version; v != 3 {
		t.Errorf("run updated twice has version %d, want 3", v)
	}
	rest, err := s.ListRuns(ctx, runs.Filter{Graph: "g", Limit: 10, PageToken: first.NextPageToken})
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, r := range append(first.Runs, rest.Runs...) {
		order = append(order, r.ID)
	}
	if g, w := fmt.Sprint(order), "[run-4 run-3 run-2 run-1 run-0]"; g != w {
		t.Errorf("listing across reopening = %s, want %s", g, w)
	}
	// Optimistic concurrency survives too.
	stale := want[2]
	stale.Version = 2
	if _, err := s.UpdateRun(ctx, stale); !errors.Is(err, runs.ErrConflict) {
		t.Errorf("stale update after reopening: %v, want ErrConflict", err)
	}
}

// TestUpdateRunKeepsCreatedAt changes CreatedAt in an update: the store
// keeps the one it has, so listings keep their order.
func TestUpdateRunKeepsCreatedAt(t *testing.T) {
	ctx := t.Context()
	s := open(t, filepath.Join(t.TempDir(), "superstep.db"))
	at := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	r, _, err := s.CreateRun(ctx, runs.Run{ID: "r", Graph: "g", Status: pregel.RunPending, CreatedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	r.CreatedAt = at.Add(time.Hour)
	r.Status = pregel.RunRunning
	got, err := s.UpdateRun(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := s.GetRun(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	for what, r := range map[string]runs.Run{"UpdateRun": got, "GetRun": stored} {
		if !r.CreatedAt.Equal(at) || r.Status != pregel.RunRunning || r.Version != 2 {
			t.Errorf("%s: created %v, status %s, version %d; want %v, running, 2", what, r.CreatedAt, r.Status, r.Version, at)
		}
	}
}

// TestRunRecordsAndCheckpointsShareFile writes both kinds of record through
// one Store and reads them back through another on the same file.
func TestRunRecordsAndCheckpointsShareFile(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "superstep.db")
	a, b := open(t, path), open(t, path)
	g := loopGraph(t, 3)
	res, err := g.Run(ctx, loopState{}, pregel.WithStore(a), pregel.WithRunID("r"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.CreateRun(ctx, runs.Run{ID: "r", Graph: res.Graph, Status: res.Status, Step: res.Step, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	rec, err := b.GetRun(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	cp, err := b.Load(ctx, "r", pregel.Latest)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Step != 3 || cp.Step != 3 || string(cp.Values["count"]) != "3" {
		t.Errorf("record at step %d, checkpoint at step %d with count %s; want 3, 3, 3", rec.Step, cp.Step, cp.Values["count"])
	}
}
