package runs_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// dispatched records the runs dispatched.
type dispatched struct {
	mu  sync.Mutex
	ids []string
}

func (d *dispatched) Dispatch(_ context.Context, r runs.Run) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ids = append(d.ids, r.ID)
	return nil
}
func (d *dispatched) Signal(context.Context, runs.Run) {}

// TestRecoverClaims: a thread claimed by runs whose creator was killed
// before storing them (as its active run, and in its queue before a
// stored run) is repaired at once by RecoverClaims, as dev calls it when
// it starts: the unstored runs are dropped, the stored queued run becomes
// active and is dispatched; a thread with nothing to repair is left as it
// is. (Without it, the thread stays busy until a create finds the claim
// StaleClaim old; with no create, for ever: TestDevKillLinearizable's
// long run in cmd/superstep found threads stuck so.)
func TestRecoverClaims(t *testing.T) {
	g := pregel.NewGraph[struct {
		Text string `json:"text"`
	}]("g")
	g.AddFunc("n", func(_ context.Context, s struct {
		Text string `json:"text"`
	}) (struct {
		Text string `json:"text"`
	}, error) {
		return s, nil
	})
	g.AddEdge(pregel.Start, "n").AddEdge("n", pregel.End)
	graph, err := g.Compile()
	if err != nil {
		t.Fatal(err)
	}
	reg, err := runs.NewRegistry(graph)
	if err != nil {
		t.Fatal(err)
	}
	store := runs.NewMemoryStore()
	d := &dispatched{}
	svc := &runs.Service{Graphs: reg, Runs: store, Checkpoints: pregel.NewMemoryStore(), Threads: store, Logger: slog.New(slog.DiscardHandler), Dispatcher: d}
	ctx := t.Context()
	for _, id := range []string{"t", "fine"} {
		if _, _, err := svc.CreateThread(ctx, runs.CreateThreadRequest{ThreadID: id}); err != nil {
			t.Fatal(err)
		}
	}
	// A creator claimed t for "ghost" and was killed.
	if _, err := runs.MutateThread(ctx, store, "t", func(th *runs.Thread) error { th.Active = "ghost"; return nil }); err != nil {
		t.Fatal(err)
	}
	req := runs.ThreadRunRequest{Graph: "g", RunID: "real", Input: json.RawMessage(`{"text":"x"}`), Strategy: runs.StrategyEnqueue}
	if _, _, err := svc.CreateOnThread(ctx, "t", req); err != nil {
		t.Fatal(err)
	}
	// Another was killed after queueing "ghost2" ahead of it.
	if _, err := runs.MutateThread(ctx, store, "t", func(th *runs.Thread) error { th.Queue = append([]string{"ghost2"}, th.Queue...); return nil }); err != nil {
		t.Fatal(err)
	}
	req.RunID = "other"
	if _, _, err := svc.CreateOnThread(ctx, "fine", req); err != nil {
		t.Fatal(err)
	}
	fineBefore, err := svc.GetThread(ctx, "fine")
	if err != nil {
		t.Fatal(err)
	}
	d.ids = nil
	n, err := svc.RecoverClaims(ctx)
	if err != nil || n != 2 {
		t.Fatalf("RecoverClaims = %d, %v; want the 2 unstored runs dropped", n, err)
	}
	th, err := svc.GetThread(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if th.Active != "real" || len(th.Queue) != 0 {
		t.Errorf("thread t: active %q, queue %v; want real active, nothing queued", th.Active, th.Queue)
	}
	if !slices.Equal(d.ids, []string{"real"}) {
		t.Errorf("dispatched %v, want [real]", d.ids)
	}
	fine, err := svc.GetThread(ctx, "fine")
	if err != nil {
		t.Fatal(err)
	}
	if fine.Version != fineBefore.Version || fine.Active != "other" {
		t.Errorf("thread fine changed: %+v, was %+v", fine, fineBefore)
	}
	if n, err := svc.RecoverClaims(ctx); err != nil || n != 0 {
		t.Errorf("again: %d, %v; want nothing to do", n, err)
	}
}
