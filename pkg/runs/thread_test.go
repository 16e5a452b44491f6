package runs_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/embedded"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/runs/runstest"
)

func TestMemoryThreadStoreConformance(t *testing.T) {
	runstest.ThreadStores(t, func(*testing.T) runs.ThreadStore { return runs.NewMemoryStore() })
}

func TestMemoryThreadStrategies(t *testing.T) {
	runstest.Strategies(t, 50, func(*testing.T) runstest.ThreadEnv {
		m := runs.NewMemoryStore()
		return runstest.ThreadEnv{Runs: m, Threads: m, Checkpoints: pregel.NewMemoryStore()}
	})
}

// TestThreadQueueSurvivesRestart checks that a run waiting in its
// thread's queue when the process stops is not executed by the next
// Scheduler before its turn: it starts when the run ahead of it ends, from
// that run's state.
func TestThreadQueueSurvivesRestart(t *testing.T) {
	type chat struct {
		Messages []string `json:"messages" reduce:"append"`
	}
	gate := make(chan struct{})
	b := pregel.NewGraph[chat]("chat")
	b.AddFunc("reply", func(ctx context.Context, s chat) (chat, error) {
		last := s.Messages[len(s.Messages)-1]
		if last == "block" {
			select {
			case <-gate:
			case <-ctx.Done():
				return chat{}, ctx.Err()
			}
		}
		return chat{Messages: []string{"re:" + last}}, nil
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
	store, cps := runs.NewMemoryStore(), pregel.NewMemoryStore()
	log := slog.New(slog.DiscardHandler)
	start := func() (*runs.Service, *embedded.Scheduler, context.CancelFunc) {
		svc := &runs.Service{Graphs: reg, Runs: store, Checkpoints: cps, Threads: store, Logger: log}
		sched := embedded.NewScheduler(embedded.SchedulerConfig{Graphs: reg, Runs: store, Checkpoints: cps, Logger: log, OnStop: svc.RunStopped, StartThreadRun: svc.StartThreadRun})
		svc.Dispatcher = sched
		ctx, cancel := context.WithCancel(context.Background())
		if err := sched.Start(ctx); err != nil {
			t.Fatal(err)
		}
		return svc, sched, cancel
	}
	svc, sched, crash := start()
	ctx := t.Context()
	if _, _, err := svc.CreateThread(ctx, runs.CreateThreadRequest{ThreadID: "t"}); err != nil {
		t.Fatal(err)
	}
	a, _, err := svc.CreateOnThread(ctx, "t", runs.ThreadRunRequest{Graph: "chat", Input: json.RawMessage(`{"messages":["block"]}`)})
	if err != nil {
		t.Fatal(err)
	}
	for {
		if r, _ := svc.Get(ctx, a.ID); r.Status == pregel.RunRunning {
			break
		}
		time.Sleep(time.Millisecond)
	}
	bRun, _, err := svc.CreateOnThread(ctx, "t", runs.ThreadRunRequest{Graph: "chat", Input: json.RawMessage(`{"messages":["two"]}`), Strategy: runs.StrategyEnqueue})
	if err != nil {
		t.Fatal(err)
	}
	crash()
	wctx, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	if err := sched.WaitIdle(wctx); err != nil {
		t.Fatal(err)
	}

	svc, sched, crash = start()
	defer crash()
	close(gate)
	if err := sched.WaitIdle(wctx); err != nil {
		t.Fatal(err)
	}
	ra, _ := svc.Get(ctx, a.ID)
	rb, _ := svc.Get(ctx, bRun.ID)
	if ra.Status != pregel.RunCompleted || rb.Status != pregel.RunCompleted {
		t.Fatalf("after the restart: %s %s, %s %s; want both completed", a.ID, ra.Status, bRun.ID, rb.Status)
	}
	if rb.Base == nil || rb.Base.RunID != a.ID {
		t.Errorf("the queued run started from %v, want the end of %s", rb.Base, a.ID)
	}
	st, err := svc.State(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	if err := json.Unmarshal(st.Values["messages"], &msgs); err != nil {
		t.Fatal(err)
	}
	if want := []string{"block", "re:block", "two", "re:two"}; !slices.Equal(msgs, want) {
		t.Errorf("thread state %v, want %v", msgs, want)
	}
}

// TestThreadStaleClaim checks that a thread claimed by a run whose creator
// stopped before storing it (so the run has no record) is taken over once
// the claim is StaleClaim old, and not before.
func TestThreadStaleClaim(t *testing.T) {
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
	clock := time.Now()
	svc := &runs.Service{Graphs: reg, Runs: store, Checkpoints: pregel.NewMemoryStore(), Threads: store, Logger: slog.New(slog.DiscardHandler),
		Dispatcher: recordDispatch{}, Now: func() time.Time { return clock }}
	ctx := t.Context()
	if _, _, err := svc.CreateThread(ctx, runs.CreateThreadRequest{ThreadID: "t"}); err != nil {
		t.Fatal(err)
	}
	// A creator claimed the thread for "ghost" and stopped.
	if _, err := runs.MutateThread(ctx, store, "t", func(th *runs.Thread) error { th.Active = "ghost"; return nil }); err != nil {
		t.Fatal(err)
	}
	req := runs.ThreadRunRequest{Graph: "g", Input: json.RawMessage(`{"text":"x"}`)}
	var busy *runs.BusyError
	if _, _, err := svc.CreateOnThread(ctx, "t", req); !errors.As(err, &busy) || busy.ActiveRun != "ghost" {
		t.Fatalf("a fresh claim: %v, want busy with ghost", err)
	}
	clock = clock.Add(runs.StaleClaim + time.Second)
	r, _, err := svc.CreateOnThread(ctx, "t", req)
	if err != nil {
		t.Fatalf("after StaleClaim: %v", err)
	}
	th, err := svc.GetThread(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if th.Active != r.ID {
		t.Errorf("thread active %q, want the new run %s", th.Active, r.ID)
	}
}

type recordDispatch struct{}

func (recordDispatch) Dispatch(context.Context, runs.Run) error { return nil }
func (recordDispatch) Signal(context.Context, runs.Run)         {}

func TestMemoryThreadsLinearizable(t *testing.T) {
	threads, clients, ops := runstest.LinearizableSize()
	runstest.Linearizable(t, threads, clients, ops, func(*testing.T) runstest.ThreadEnv {
		m := runs.NewMemoryStore()
		return runstest.ThreadEnv{Runs: m, Threads: m, Checkpoints: pregel.NewMemoryStore()}
	})
}
