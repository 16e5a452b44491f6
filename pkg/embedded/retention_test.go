package embedded_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/embedded"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// retentionEnv is a Scheduler logging every run's events (EventsOn) into
// its own MemoryEventLog, with maxAge, and a Service with threads on it.
func retentionEnv(t *testing.T, maxAge time.Duration) (*embedded.Scheduler, *runs.Service) {
	t.Helper()
	reg, err := runs.NewRegistry(emitGraph(t, "emit", 2, false))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	st, cps := runs.NewMemoryStore(), pregel.NewMemoryStore()
	svc := &runs.Service{Graphs: reg, Runs: st, Checkpoints: cps, Threads: st, Logger: log}
	sched := embedded.NewScheduler(embedded.SchedulerConfig{Graphs: reg, Runs: st, Checkpoints: cps, Logger: log, EventsMode: embedded.EventsOn,
		EventMaxAge: maxAge, OnStop: svc.RunStopped, StartThreadRun: svc.StartThreadRun})
	svc.Dispatcher = sched
	if err := sched.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, stop := context.WithTimeout(context.Background(), 5*time.Second)
		defer stop()
		if err := sched.Shutdown(ctx, time.Second); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return sched, svc
}

// TestSchedulerSweepsExpiredEvents: with EventMaxAge set, the Scheduler's
// sweep deletes a run's events once they are older; a negative age is
// refused at Start, saying what to fix.
func TestSchedulerSweepsExpiredEvents(t *testing.T) {
	bad := embedded.NewScheduler(embedded.SchedulerConfig{Graphs: &runs.Registry{}, Runs: runs.NewMemoryStore(), Checkpoints: pregel.NewMemoryStore(), EventMaxAge: -time.Second})
	if err := bad.Start(t.Context()); !errors.Is(err, runs.ErrInvalid) {
		t.Errorf("Start with EventMaxAge -1s = %v; want an error wrapping ErrInvalid", err)
	}

	sched, svc := retentionEnv(t, 200*time.Millisecond)
	if _, _, err := svc.Create(t.Context(), "emit", runs.CreateRequest{RunID: "r"}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, svc, "r", pregel.RunCompleted)
	if err := sched.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	if evs := allEvents(t, sched, "r"); len(evs) == 0 {
		t.Fatal("EventsOn: the run logged no events")
	}
	// The sweep runs every second at the most often.
	deadline := time.Now().Add(10 * time.Second)
	for len(allEvents(t, sched, "r")) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the run's events were still kept 10 s after they expired (max age 200ms)")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestDeleteThreadDeletesEvents: deleting a thread deletes its runs'
// events, also from a log apart from the stores (the Scheduler's
// MemoryEventLog beside a MemoryStore), and no other run's.
func TestDeleteThreadDeletesEvents(t *testing.T) {
	sched, svc := retentionEnv(t, 0)
	ctx := t.Context()
	if _, _, err := svc.CreateThread(ctx, runs.CreateThreadRequest{ThreadID: "t"}); err != nil {
		t.Fatal(err)
	}
	r, _, err := svc.CreateOnThread(ctx, "t", runs.ThreadRunRequest{Graph: "emit", Input: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.Create(ctx, "emit", runs.CreateRequest{RunID: "other"}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, svc, r.ID, pregel.RunCompleted)
	waitStatus(t, svc, "other", pregel.RunCompleted)
	if err := sched.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		// OnStop passes the thread on after the record is stored.
		th, err := svc.GetThread(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		if th.Active == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread t still has run %s active", th.Active)
		}
		time.Sleep(time.Millisecond)
	}
	if len(allEvents(t, sched, r.ID)) == 0 {
		t.Fatal("EventsOn: the thread's run logged no events")
	}
	if err := svc.DeleteThread(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if evs := allEvents(t, sched, r.ID); len(evs) != 0 {
		t.Errorf("the deleted thread's run still has %d events", len(evs))
	}
	if len(allEvents(t, sched, "other")) == 0 {
		t.Error("deleting the thread deleted another run's events")
	}
}
