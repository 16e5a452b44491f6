package runs_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// cutRuns is a run store whose next update of one run fails, as when the
// process is killed (or the store call fails) between two writes.
type cutRuns struct {
	*runs.MemoryStore
	mu  sync.Mutex
	cut string
}

var errCut = errors.New("cut")

func (c *cutRuns) UpdateRun(ctx context.Context, r runs.Run) (runs.Run, error) {
	c.mu.Lock()
	cut := c.cut == r.ID
	if cut {
		c.cut = ""
	}
	c.mu.Unlock()
	if cut {
		return runs.Run{}, errCut
	}
	return c.MemoryStore.UpdateRun(ctx, r)
}

// TestCancelQueuedCutShort: cancelling a queued run takes it off its
// thread's queue, then writes it cancelled. When the second write is cut
// (a SIGKILL of superstep dev between them, or a failed store call), the
// run is pending on no thread: nothing will ever start it. Asking to
// cancel it again must end it, not leave it pending for ever with its
// cancel requested (TestDevKillLinearizable's long run found 4 such
// runs). The thread goes on without it.
func TestCancelQueuedCutShort(t *testing.T) {
	for _, then := range []string{"cancel again", "restart"} {
		t.Run(then, func(t *testing.T) { testCancelQueuedCutShort(t, then) })
	}
}

// testCancelQueuedCutShort cuts a cancel of a queued run short, then asks
// again (then "cancel again"), or lets an executor's recovery find the
// run without a step 0 (then "restart": StartThreadRun, as the embedded
// scheduler calls it when superstep dev starts again).
func testCancelQueuedCutShort(t *testing.T, then string) {
	type state struct {
		Text string `json:"text"`
	}
	g := pregel.NewGraph[state]("g")
	g.AddFunc("n", func(_ context.Context, s state) (state, error) { return s, nil })
	g.AddEdge(pregel.Start, "n").AddEdge("n", pregel.End)
	graph, err := g.Compile()
	if err != nil {
		t.Fatal(err)
	}
	reg, err := runs.NewRegistry(graph)
	if err != nil {
		t.Fatal(err)
	}
	mem := runs.NewMemoryStore()
	store := &cutRuns{MemoryStore: mem}
	svc := &runs.Service{Graphs: reg, Runs: store, Checkpoints: pregel.NewMemoryStore(), Threads: mem, Logger: slog.New(slog.DiscardHandler), Dispatcher: &dispatched{}}
	ctx := t.Context()
	if _, _, err := svc.CreateThread(ctx, runs.CreateThreadRequest{ThreadID: "t"}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "c"} {
		req := runs.ThreadRunRequest{Graph: "g", RunID: id, Input: json.RawMessage(`{"text":"x"}`), Strategy: runs.StrategyEnqueue}
		if _, _, err := svc.CreateOnThread(ctx, "t", req); err != nil {
			t.Fatal(err)
		}
	}
	store.mu.Lock()
	store.cut = "b"
	store.mu.Unlock()
	if _, err := svc.Cancel(ctx, "b"); !errors.Is(err, errCut) {
		t.Fatalf("cancel cut short: got %v, want the cut", err)
	}
	th, err := svc.GetThread(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if th.Active != "a" || !slices.Equal(th.Queue, []string{"c"}) {
		t.Fatalf("after the cut the thread is active %q queue %v; want a, [c]", th.Active, th.Queue)
	}
	if then == "restart" {
		b, err := svc.Get(ctx, "b")
		if err != nil {
			t.Fatal(err)
		}
		if err := svc.StartThreadRun(ctx, b); err != nil {
			t.Fatalf("start thread run b: %v", err)
		}
		// The queued run c is left alone.
		if c, err := svc.Get(ctx, "c"); err != nil || c.Status != pregel.RunPending {
			t.Fatalf("queued run c is %s (%v) after b's recovery; want pending", c.Status, err)
		}
	} else {
		r, err := svc.Cancel(ctx, "b")
		if err != nil {
			t.Fatalf("cancel asked again: %v", err)
		}
		if r.Status != pregel.RunCancelled {
			t.Fatalf("run b is %s (cancel asked %v) after its cancel was asked again; it is on no thread, so nothing else will end it", r.Status, r.CancelRequested)
		}
	}
	r, err := svc.Get(ctx, "b")
	if err != nil || r.Status != pregel.RunCancelled {
		t.Fatalf("run b stored as %s (%v); want cancelled", r.Status, err)
	}
	// The thread goes on: a ends, c takes the thread.
	if _, err := svc.Cancel(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	a, err := svc.Get(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if a.Status == pregel.RunPending {
		// Dispatched but not executed here: its executor would cancel it.
		a, err = runs.Mutate(ctx, store, "a", func(r *runs.Run) error { r.Status = pregel.RunCancelled; return nil })
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := svc.RunStopped(ctx, a); err != nil {
		t.Fatal(err)
	}
	if th, err = svc.GetThread(ctx, "t"); err != nil || th.Active != "c" || len(th.Queue) != 0 {
		t.Fatalf("thread after a ended: active %q queue %v (%v); want c, []", th.Active, th.Queue, err)
	}
}

// TestCancelActiveNeverStarted: a hand-off cut short after it made a
// queued run active but before it started it leaves a pending run that
// holds its thread with no step 0 and no executor. Cancelling it must end
// it and pass the thread on, not only record the request (which no
// executor would ever read).
func TestCancelActiveNeverStarted(t *testing.T) {
	type state struct {
		Text string `json:"text"`
	}
	g := pregel.NewGraph[state]("g")
	g.AddFunc("n", func(_ context.Context, s state) (state, error) { return s, nil })
	g.AddEdge(pregel.Start, "n").AddEdge("n", pregel.End)
	graph, err := g.Compile()
	if err != nil {
		t.Fatal(err)
	}
	reg, err := runs.NewRegistry(graph)
	if err != nil {
		t.Fatal(err)
	}
	mem := runs.NewMemoryStore()
	d := &dispatched{}
	svc := &runs.Service{Graphs: reg, Runs: mem, Checkpoints: pregel.NewMemoryStore(), Threads: mem, Logger: slog.New(slog.DiscardHandler), Dispatcher: d}
	ctx := t.Context()
	if _, _, err := svc.CreateThread(ctx, runs.CreateThreadRequest{ThreadID: "t"}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "c"} {
		req := runs.ThreadRunRequest{Graph: "g", RunID: id, Input: json.RawMessage(`{"text":"x"}`), Strategy: runs.StrategyEnqueue}
		if _, _, err := svc.CreateOnThread(ctx, "t", req); err != nil {
			t.Fatal(err)
		}
	}
	// a ends; its hand-off makes b active and is cut before starting it.
	if _, err := runs.Mutate(ctx, mem, "a", func(r *runs.Run) error { r.Status = pregel.RunCompleted; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := runs.MutateThread(ctx, mem, "t", func(th *runs.Thread) error {
		next, _, err := runs.HandOff(*th, runs.HandOffEvent{Kind: runs.HandOffPassOn, Run: "a"})
		*th = next
		return err
	}); err != nil {
		t.Fatal(err)
	}
	r, err := svc.Cancel(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != pregel.RunCancelled {
		t.Fatalf("run b is %s (cancel requested %v) after its cancel; it holds its thread and was never started, so no executor will end it", r.Status, r.CancelRequested)
	}
	th, err := svc.GetThread(ctx, "t")
	if err != nil || th.Active != "c" {
		t.Fatalf("thread after b's cancel: active %q (%v), want c", th.Active, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !slices.Contains(d.ids, "c") || slices.Contains(d.ids, "b") {
		t.Errorf("dispatched %v; want c, and never b", d.ids)
	}
}
