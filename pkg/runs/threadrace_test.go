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
