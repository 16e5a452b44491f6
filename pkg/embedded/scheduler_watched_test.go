package embedded_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/embedded"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// modeEnv is a started Scheduler with the given EventsMode on memory
// stores, and a Service on it.
func modeEnv(t *testing.T, mode embedded.EventsMode, graphs ...*pregel.Graph) (*embedded.Scheduler, *runs.Service) {
	t.Helper()
	reg, err := runs.NewRegistry(graphs...)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	st, cps := runs.NewMemoryStore(), pregel.NewMemoryStore()
	sched := embedded.NewScheduler(embedded.SchedulerConfig{Graphs: reg, Runs: st, Checkpoints: cps, Logger: log, EventsMode: mode})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		ctx, stop := context.WithTimeout(context.Background(), 5*time.Second)
		defer stop()
		_ = sched.WaitIdle(ctx)
	})
	if err := sched.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return sched, &runs.Service{Graphs: reg, Runs: st, Checkpoints: cps, Dispatcher: sched, Logger: log}
}

func waitStatus(t *testing.T, svc *runs.Service, id string, want pregel.RunStatus) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r, err := svc.Get(t.Context(), id)
		if err == nil && r.Status == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s: %s (%v); want %s", id, r.Status, err, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestSchedulerEventsModes checks what the log keeps of a run nobody
// watches: nothing under EventsWatched (the default) and EventsOff, the
// whole stream under EventsOn; under EventsWatched, a watcher that comes
// just after the run ended still gets its whole stream.
func TestSchedulerEventsModes(t *testing.T) {
	for _, tt := range []struct{ mode embedded.EventsMode }{{""}, {embedded.EventsWatched}, {embedded.EventsOff}, {embedded.EventsOn}} {
		t.Run(string(tt.mode), func(t *testing.T) {
			sched, svc := modeEnv(t, tt.mode, emitGraph(t, "emit", 0, false))
			if _, _, err := svc.Create(t.Context(), "emit", runs.CreateRequest{RunID: "r"}); err != nil {
				t.Fatal(err)
			}
			waitStatus(t, svc, "r", pregel.RunCompleted)
			if err := sched.WaitIdle(t.Context()); err != nil {
				t.Fatal(err)
			}
			evs := allEvents(t, sched, "r")
			if tt.mode != embedded.EventsOn {
				if len(evs) != 0 {
					t.Fatalf("an unwatched run logged %v; want nothing", types(evs))
				}
				if tt.mode == embedded.EventsOff {
					return
				}
				// A watcher within RecentWindow gets the execution's events.
				w := sched.WatchEvents("r")
				w.Stop()
				evs = allEvents(t, sched, "r")
			}
			if len(evs) == 0 || evs[0].Type != pregel.EventRunStarted || evs[len(evs)-1].Type != pregel.EventRunFinished {
				t.Fatalf("logged %v; want the whole stream from run_started to run_finished", types(evs))
			}
		})
	}
}

// TestSchedulerLateWatcher checks that a watcher that arrives while an
// unwatched run executes gets the events held so far, from run_started,
// then every later event, with consecutive ids;
// and that the run's events are still logged after it left (the lease).
func TestSchedulerLateWatcher(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	g := pregel.NewGraph[St]("slow")
	g.AddFunc("first", func(_ context.Context, s St) (St, error) { return St{Log: []string{"first"}}, nil }, pregel.Writes("log"))
	g.AddFunc("wait", func(ctx context.Context, s St) (St, error) {
		if err := pregel.Emit(ctx, pregel.MessageToken, "before"); err != nil {
			return St{}, err
		}
		started <- struct{}{}
		<-release
		return St{Log: []string{"wait"}}, nil
	}, pregel.Writes("log"))
	g.AddEdge(pregel.Start, "first")
	g.AddEdge("first", "wait")
	g.AddEdge("wait", pregel.End)
	graph, err := g.Compile()
	if err != nil {
		t.Fatal(err)
	}
	sched, svc := modeEnv(t, embedded.EventsWatched, graph)
	if _, _, err := svc.Create(t.Context(), "slow", runs.CreateRequest{RunID: "r"}); err != nil {
		t.Fatal(err)
	}
	<-started
	time.Sleep(20 * time.Millisecond) // the held events would have been logged by now
	if evs := allEvents(t, sched, "r"); len(evs) != 0 {
		t.Fatalf("unwatched so far, the run logged %v", types(evs))
	}
	cur := runs.NewCursor(sched, "r", 0)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	var got []runs.StreamEvent
	next := func() runs.StreamEvent {
		ev, err := cur.Next(ctx)
		if err != nil {
			t.Fatalf("after %v: %v", types(got), err)
		}
		got = append(got, ev)
		return ev
	}
	// run_started, step 1, then step 2 so far: step_started,
	// node_started, custom.
	for range 9 {
		next()
	}
	close(release)
	for next().Type != pregel.EventRunFinished {
	}
	cur.Close()
	want := []pregel.EventType{pregel.EventRunStarted,
		pregel.EventStepStarted, pregel.EventNodeStarted, pregel.EventNodeFinished, pregel.EventStateUpdated, pregel.EventStepFinished,
		pregel.EventStepStarted, pregel.EventNodeStarted, pregel.EventCustom,
		pregel.EventNodeFinished, pregel.EventStateUpdated, pregel.EventStepFinished, pregel.EventRunFinished}
	if gt := types(got); !slicesEqual(gt, want) {
		t.Fatalf("late watcher got %v; want %v", gt, want)
	}
	for i, ev := range got {
		if ev.ID != int64(i+1) {
			t.Fatalf("event %d has id %d; want consecutive ids from 1", i, ev.ID)
		}
	}
	// The watcher left: a resumed or new execution within the lease is
	// still logged. A Subscribe also counts as watching.
	events, stop := sched.Subscribe("r2")
	if _, _, err := svc.Create(t.Context(), "slow", runs.CreateRequest{RunID: "r2"}); err != nil {
		t.Fatal(err)
	}
	<-started
	waitStatus(t, svc, "r2", pregel.RunCompleted)
	stop()
	for range events {
	}
	if evs := finishedEvents(t, sched, "r2", 0); evs[0].Type != pregel.EventRunStarted {
		t.Fatalf("subscribed run logged %v; want its whole stream", types(evs))
	}
}
