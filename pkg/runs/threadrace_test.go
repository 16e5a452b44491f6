package runs_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"testing"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// stillDispatcher executes nothing: the test drives each run's progress by
// hand, as an executor would, to reach the interleavings that races reach
// by chance.
type stillDispatcher struct{}

func (stillDispatcher) Dispatch(context.Context, runs.Run) error { return nil }
func (stillDispatcher) Signal(context.Context, runs.Run)         {}

type raceChat struct {
	Messages []string `json:"messages" reduce:"append"`
}

func newStillService(t *testing.T) *runs.Service {
	t.Helper()
	b := pregel.NewGraph[raceChat]("chat")
	b.AddFunc("reply", func(_ context.Context, s raceChat) (raceChat, error) {
		return raceChat{Messages: []string{"re:" + s.Messages[len(s.Messages)-1]}}, nil
	})
	b.AddEdge(pregel.Start, "reply").AddEdge("reply", pregel.End)
	g, err := b.Compile()
	if err != nil {
		t.Fatal(err)
	}
	reg, err := runs.NewRegistry(g)
	if err != nil {
		t.Fatal(err)
	}
	m := runs.NewMemoryStore()
	return &runs.Service{Graphs: reg, Runs: m, Checkpoints: pregel.NewMemoryStore(), Threads: m, Dispatcher: stillDispatcher{}, Logger: slog.New(slog.DiscardHandler)}
}

func stillRun(t *testing.T, svc *runs.Service, thread, id, msg string, st runs.Strategy) runs.Run {
	t.Helper()
	r, _, err := svc.CreateOnThread(t.Context(), thread, runs.ThreadRunRequest{Graph: "chat", RunID: id, Input: json.RawMessage(`{"messages":["` + msg + `"]}`), Strategy: st})
	if err != nil {
		t.Fatalf("create %s: %v", id, err)
	}
	return r
}

// complete ends run id as an executor does when its last step is
// committed: its record says completed (a plain conditional update, as
// the scheduler and the tick handler write it), then the thread is passed
// on.
func complete(t *testing.T, svc *runs.Service, id string) runs.Run {
	t.Helper()
	r, err := runs.Mutate(t.Context(), svc.Runs, id, func(r *runs.Run) error {
		if r.Status != pregel.RunPending && r.Status != pregel.RunRunning {
			return errors.New("not running")
		}
		r.Status = pregel.RunCompleted
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.RunStopped(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	return r
}

func stillMessages(t *testing.T, svc *runs.Service, thread string) []string {
	t.Helper()
	st, err := svc.State(t.Context(), thread)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	if raw, ok := st.Values["messages"]; ok {
		if err := json.Unmarshal(raw, &msgs); err != nil {
			t.Fatal(err)
		}
	}
	return msgs
}

// TestRollbackOfUnstartedRunKeepsThread is issue 22 item 1: a queued run
// made active but not yet started (its executor stopped between the
// hand-off and the start) has no base step; a rollback that cancels it
// must leave the thread at the step it was passed on at, not empty it.
func TestRollbackOfUnstartedRunKeepsThread(t *testing.T) {
	svc := newStillService(t)
	ctx := t.Context()
	if _, _, err := svc.CreateThread(ctx, runs.CreateThreadRequest{ThreadID: "t"}); err != nil {
		t.Fatal(err)
	}
	stillRun(t, svc, "t", "a", "one", "")
	complete(t, svc, "a")
	stillRun(t, svc, "t", "b", "two", "")
	stillRun(t, svc, "t", "c", "three", runs.StrategyEnqueue)
	// b completes; its hand-off makes c active, and the process stops
	// before c starts (the thread's write is the hand-off's only write).
	if _, err := runs.Mutate(ctx, svc.Runs, "b", func(r *runs.Run) error { r.Status = pregel.RunCompleted; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := runs.MutateThread(ctx, svc.Threads, "t", func(th *runs.Thread) error {
		th.Head, th.Active, th.Queue = &runs.StepRef{RunID: "b", Step: 0}, "c", nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	stillRun(t, svc, "t", "d", "four", runs.StrategyRollback)
	// c's executor finds it (StartThreadRun), cancelled by the rollback.
	c, _ := svc.Get(ctx, "c")
	if err := svc.StartThreadRun(ctx, c); err != nil {
		t.Fatal(err)
	}
	if c, _ = svc.Get(ctx, "c"); c.Status != pregel.RunCancelled || !c.Discarded || c.SupersededBy != "d" {
		t.Errorf("rolled back run c: status %s discarded %v superseded by %q; want cancelled, discarded, by d", c.Status, c.Discarded, c.SupersededBy)
	}
	want := []string{"one", "two", "four"}
	if got := stillMessages(t, svc, "t"); !slices.Equal(got, want) {
		t.Errorf("thread state after the rollback = %v, want %v (the completed runs' writes kept)", got, want)
	}
}

// TestCancelOfUnstartedRunKeepsThread: the same window with a plain cancel.
func TestCancelOfUnstartedRunKeepsThread(t *testing.T) {
	svc := newStillService(t)
	ctx := t.Context()
	if _, _, err := svc.CreateThread(ctx, runs.CreateThreadRequest{ThreadID: "t"}); err != nil {
		t.Fatal(err)
	}
	stillRun(t, svc, "t", "a", "one", "")
	complete(t, svc, "a")
	stillRun(t, svc, "t", "b", "two", "")
	stillRun(t, svc, "t", "c", "three", runs.StrategyEnqueue)
	if _, err := runs.Mutate(ctx, svc.Runs, "b", func(r *runs.Run) error { r.Status = pregel.RunCompleted; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := runs.MutateThread(ctx, svc.Threads, "t", func(th *runs.Thread) error {
		th.Head, th.Active, th.Queue = &runs.StepRef{RunID: "b", Step: 0}, "c", nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Cancel(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	c, _ := svc.Get(ctx, "c")
	if err := svc.StartThreadRun(ctx, c); err != nil {
		t.Fatal(err)
	}
	if got, want := stillMessages(t, svc, "t"), []string{"one", "two"}; !slices.Equal(got, want) {
		t.Errorf("thread state after cancelling an unstarted run = %v, want %v", got, want)
	}
}

// TestRunCompletingUnderRollbackTellsTheTruth is issue 22 item 2: a run
// that completes after a rollback took its thread must not say completed
// while its writes are not in the thread; it says it was discarded and
// names the run that replaced it.
func TestRunCompletingUnderRollbackTellsTheTruth(t *testing.T) {
	svc := newStillService(t)
	ctx := t.Context()
	if _, _, err := svc.CreateThread(ctx, runs.CreateThreadRequest{ThreadID: "t"}); err != nil {
		t.Fatal(err)
	}
	stillRun(t, svc, "t", "a", "one", "")
	stillRun(t, svc, "t", "b", "two", runs.StrategyRollback)
	// a's executor had its last step done when the cancel arrived.
	a := complete(t, svc, "a")
	if a.Status == pregel.RunCompleted || !a.Discarded || a.SupersededBy != "b" {
		t.Errorf("run a: status %s discarded %v superseded by %q; want not completed, discarded, by b", a.Status, a.Discarded, a.SupersededBy)
	}
	stillMessages(t, svc, "t")
	b, _ := svc.Get(ctx, "b")
	if b.Base != nil {
		t.Errorf("run b starts from %v, want the empty state (a was rolled back)", b.Base)
	}
}

// claimStopped claims thread for run id with strategy st as CreateOnThread
// does, and stops there, as a creator cut short between its claim and the
// write of its supersede on the active run.
func claimStopped(t *testing.T, svc *runs.Service, thread, id string, st runs.Strategy) runs.HandOffEffect {
	t.Helper()
	var eff runs.HandOffEffect
	if _, err := runs.MutateThread(t.Context(), svc.Threads, thread, func(th *runs.Thread) error {
		next, e, err := runs.HandOff(*th, runs.HandOffEvent{Kind: runs.HandOffClaim, Run: id, Strategy: st})
		*th, eff = next, e
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return eff
}

// TestSupersedeByFirstClaim: the linearizability check found (issue 22)
// that a claim and its supersede are two writes: a rollback b queued
// first, an interrupt c queued after it wrote its supersede first, and the
// active run a was drained by c (its steps kept, "superseded by c") while
// b took the thread next; or an enqueue queued after b while b's write
// was still to come. The first claim's supersede is recorded with the
// claim, and every later claim carries it out before it queues.
func TestSupersedeByFirstClaim(t *testing.T) {
	for _, st := range []runs.Strategy{runs.StrategyEnqueue, runs.StrategyInterrupt, runs.StrategyRollback} {
		t.Run(string(st), func(t *testing.T) {
			svc := newStillService(t)
			ctx := t.Context()
			if _, _, err := svc.CreateThread(ctx, runs.CreateThreadRequest{ThreadID: "t"}); err != nil {
				t.Fatal(err)
			}
			stillRun(t, svc, "t", "a", "one", "")
			if eff := claimStopped(t, svc, "t", "b", runs.StrategyRollback); eff.Supersede != "a" {
				t.Fatalf("rollback claim effect %+v, want a superseded", eff)
			}
			stillRun(t, svc, "t", "c", "three", st)
			a, _ := svc.Get(ctx, "a")
			if a.SupersededBy != "b" || !a.Discarded || !a.CancelRequested {
				t.Errorf("run a: superseded by %q discarded %v cancel requested %v; want rolled back by b, the first to claim", a.SupersededBy, a.Discarded, a.CancelRequested)
			}
			th, err := svc.GetThread(ctx, "t")
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(th.Queue, []string{"b", "c"}) {
				t.Errorf("thread queue %v, want [b c]", th.Queue)
			}
			// a stops as its executor sees the cancel: b starts from the
			// empty state, a's steps discarded.
			a, err = runs.Mutate(ctx, svc.Runs, "a", func(r *runs.Run) error { r.Status, r.CancelRequested = pregel.RunCancelled, false; return nil })
			if err != nil {
				t.Fatal(err)
			}
			if err := svc.RunStopped(ctx, a); err != nil {
				t.Fatal(err)
			}
			if got := stillMessages(t, svc, "t"); len(got) != 0 {
				t.Errorf("thread state after a's rollback = %v, want empty", got)
			}
		})
	}
}

// TestSupersedeTooLate: a run whose record says completed when the
// supersede is written has nothing left to drain or cancel; it stays
// completed, its writes stay in the thread, and the superseding run
// starts after it (the strategy's promise is about a run that still
// runs; see pkg/runs/README.md).
func TestSupersedeTooLate(t *testing.T) {
	svc := newStillService(t)
	ctx := t.Context()
	if _, _, err := svc.CreateThread(ctx, runs.CreateThreadRequest{ThreadID: "t"}); err != nil {
		t.Fatal(err)
	}
	stillRun(t, svc, "t", "a", "one", "")
	claimStopped(t, svc, "t", "b", runs.StrategyRollback)
	// a's last step was committed; its executor records the end.
	a, err := runs.Mutate(ctx, svc.Runs, "a", func(r *runs.Run) error { r.Status = pregel.RunCompleted; return nil })
	if err != nil {
		t.Fatal(err)
	}
	stillRun(t, svc, "t", "c", "three", runs.StrategyEnqueue)
	if a, _ = svc.Get(ctx, "a"); a.Status != pregel.RunCompleted || a.Discarded || a.SupersededBy != "" {
		t.Errorf("run a: status %s discarded %v superseded by %q; want completed, kept, superseded by none", a.Status, a.Discarded, a.SupersededBy)
	}
	if err := svc.RunStopped(ctx, a); err != nil {
		t.Fatal(err)
	}
	th, err := svc.GetThread(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if th.Active != "b" || !slices.Equal(th.Queue, []string{"c"}) || th.Head == nil || th.Head.RunID != "a" {
		t.Errorf("thread active %q queue %v head %v; want b active, c queued, head at a", th.Active, th.Queue, th.Head)
	}
}
