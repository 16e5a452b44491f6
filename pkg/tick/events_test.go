package tick_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// eventKey is what the comparisons of streams look at.
func eventKey(ev pregel.Event) string {
	k := fmt.Sprintf("%s step=%d", ev.Type, ev.Step)
	switch ev.Type {
	case pregel.EventNodeStarted, pregel.EventNodeFinished, pregel.EventCustom:
		k += " node=" + ev.Node + " task=" + ev.TaskID + " " + string(ev.Status) + ev.Name
	case pregel.EventRunFinished:
		k += " " + string(ev.RunStatus)
	case pregel.EventStateUpdated:
		keys := slices.Sorted(func(yield func(string) bool) {
			for c := range ev.Values {
				if !yield(c) {
					return
				}
			}
		})
		k += " " + strings.Join(keys, ",")
	}
	return k
}

// emitHook makes every node of the test graph emit a progress event.
func emitHook(ctx context.Context) {
	info, _ := pregel.TaskFrom(ctx)
	_ = pregel.Emit(ctx, "progress", map[string]string{"node": info.Node})
}

// TestTickEventsMatchTheEmbeddedStream runs the test graph (fan-out to
// remote nodes, a loop, a remote interrupt, a resume) through the tick
// and node handlers with an event log, and compares the run's stream
// with the events the embedded engine emits for the same run: the same
// events, in an order a watcher can rely on: ids from 1 without gaps; a
// step's events between its step_started and step_finished; a node's own
// events between its node_started and node_finished; each stop of the
// run last, as run_finished with the status and step of the record.
func TestTickEventsMatchTheEmbeddedStream(t *testing.T) {
	ctx := context.Background()
	// The embedded run's events.
	ex := newExecutions()
	ex.hook = emitHook
	g := testGraph(t, ex, true)
	var (
		mu   sync.Mutex
		want []string
	)
	obs := pregel.WithObserver(func(ev pregel.Event) {
		mu.Lock()
		defer mu.Unlock()
		want = append(want, eventKey(ev))
	})
	store := pregel.NewMemoryStore()
	if _, err := g.Run(ctx, nil, pregel.WithStore(store), pregel.WithRunID("r1"), obs); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Resume(ctx, "r1", pregel.WithStore(store), pregel.WithResume("yes"), obs); err != nil {
		t.Fatal(err)
	}

	e := newEnv(t, true)
	e.ex.hook = emitHook
	log := runs.NewMemoryEventLog(0, 0)
	e.h.Events = log
	if _, _, err := e.svc.Create(ctx, "tickgraph", runs.CreateRequest{RunID: "r1"}); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	e.drain(t, rng, false)
	paused := checkStream(t, log, e, pregel.RunInterrupted)
	if _, err := e.svc.Resume(ctx, "r1", runs.ResumeRequest{Value: json.RawMessage(`"yes"`)}); err != nil {
		t.Fatal(err)
	}
	e.drain(t, rng, false)
	all := checkStream(t, log, e, pregel.RunCompleted)
	if len(all) <= len(paused) {
		t.Fatalf("the resume added no events")
	}
	var got []string
	for _, ev := range all {
		got = append(got, eventKey(ev.Event))
	}
	if g, w := slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want)); !slices.Equal(g, w) {
		t.Errorf("the serverless stream has other events than the embedded one:\ngot  %s\nwant %s", strings.Join(g, "\n     "), strings.Join(w, "\n     "))
	}
}

// checkStream reads the run's stream, checks its order (see
// TestTickEventsMatchTheEmbeddedStream) and that it ends with the run
// stopped as status, and returns it.
func checkStream(t *testing.T, log *runs.MemoryEventLog, e *env, status pregel.RunStatus) []runs.StreamEvent {
	t.Helper()
	page, err := log.EventsSince(t.Context(), "r1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	evs := page.Events
	if len(evs) == 0 {
		t.Fatal("the run has no events")
	}
	open := -1 // the step whose events come
	nodes := map[string]bool{}
	for i, ev := range evs {
		if ev.ID != int64(i+1) {
			t.Fatalf("event %d has id %d", i, ev.ID)
		}
		if ev.RunID != "r1" || ev.Graph != "tickgraph" || ev.Time.IsZero() {
			t.Fatalf("event %d (%s) is of run %q, graph %q, at %v", ev.ID, ev.Type, ev.RunID, ev.Graph, ev.Time)
		}
		if ev.Type != pregel.EventRunStarted && ev.Type != pregel.EventRunFinished && ev.Type != pregel.EventStepStarted && ev.Step != open {
			t.Fatalf("event %d (%s) of step %d outside the open step %d", ev.ID, ev.Type, ev.Step, open)
		}
		switch ev.Type {
		case pregel.EventStepStarted:
			if open != -1 {
				t.Fatalf("event %d: step %d starts while step %d is open", ev.ID, ev.Step, open)
			}
			open = ev.Step
		case pregel.EventNodeStarted:
			nodes[ev.TaskID] = true
		case pregel.EventCustom, pregel.EventNodeFinished:
			if !nodes[ev.TaskID] {
				t.Fatalf("event %d: %s of task %s outside its node_started and node_finished", ev.ID, ev.Type, ev.TaskID)
			}
			if ev.Type == pregel.EventNodeFinished {
				delete(nodes, ev.TaskID)
			}
		case pregel.EventStepFinished, pregel.EventInterrupted:
			if ev.Step != open || len(nodes) > 0 {
				t.Fatalf("event %d: %s of step %d; open step %d, nodes running %v", ev.ID, ev.Type, ev.Step, open, nodes)
			}
			open = -1
		}
	}
	r, err := e.svc.Get(t.Context(), "r1")
	if err != nil {
		t.Fatal(err)
	}
	last := evs[len(evs)-1]
	if last.Type != pregel.EventRunFinished || last.RunStatus != status || r.Status != status || last.Step != r.Step {
		t.Fatalf("the stream ends with %s %s at step %d; the record is %s at step %d; want run_finished %s", last.Type, last.RunStatus, last.Step, r.Status, r.Step, status)
	}
	return evs
}

// TestTickNodeEventsFlushWhileRunning checks that a long node's own
// events reach the log while it runs, not only when it ends.
func TestTickNodeEventsFlushWhileRunning(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, false)
	log := runs.NewMemoryEventLog(0, 0)
	e.h.Events, e.h.EventFlush = log, 10*time.Millisecond
	seen := make(chan bool, 1)
	e.ex.hook = func(ctx context.Context) {
		info, _ := pregel.TaskFrom(ctx)
		if info.Node != "prepare" {
			return
		}
		_ = pregel.Emit(ctx, "token", "hel")
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			page, _ := log.EventsSince(ctx, "r1", 0, 0)
			for _, ev := range page.Events {
				if ev.Type == pregel.EventCustom && ev.Name == "token" {
					seen <- true
					return
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
		seen <- false
	}
	if _, _, err := e.svc.Create(ctx, "tickgraph", runs.CreateRequest{RunID: "r1"}); err != nil {
		t.Fatal(err)
	}
	e.drain(t, rand.New(rand.NewPCG(7, 8)), false)
	if !<-seen {
		t.Fatal("the node's token event was not in the log while the node ran")
	}
	checkStream(t, log, e, pregel.RunCompleted)
}

// TestTickEventFilter checks Handler.EventFilter: the events of a run it
// does not approve are not kept at all; once it approves, the events of
// the calls that read the approving record are.
func TestTickEventFilter(t *testing.T) {
	for _, tc := range []struct {
		name    string
		approve func(calls int) bool
		some    bool
	}{
		{"never", func(int) bool { return false }, false},
		{"always", func(int) bool { return true }, true},
		{"from the fourth call", func(n int) bool { return n >= 4 }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t, false)
			e.ex.hook = emitHook
			log := runs.NewMemoryEventLog(0, 0)
			var mu sync.Mutex
			calls := 0
			e.h.Events = log
			e.h.EventFilter = func(r runs.Run) bool {
				mu.Lock()
				defer mu.Unlock()
				calls++
				return tc.approve(calls)
			}
			if _, _, err := e.svc.Create(ctx, "tickgraph", runs.CreateRequest{RunID: "r1"}); err != nil {
				t.Fatal(err)
			}
			e.drain(t, rand.New(rand.NewPCG(9, 10)), false)
			if r, _ := e.svc.Get(ctx, "r1"); r.Status != pregel.RunCompleted {
				t.Fatalf("run %s; want completed", r.Status)
			}
			page, err := log.EventsSince(ctx, "r1", 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(page.Events) > 0; got != tc.some {
				t.Fatalf("%d events kept; want some: %t", len(page.Events), tc.some)
			}
			if tc.some {
				if last := page.Events[len(page.Events)-1]; last.Type != pregel.EventRunFinished || last.RunStatus != pregel.RunCompleted {
					t.Errorf("the stream ends with %s %s; want run_finished completed", last.Type, last.RunStatus)
				}
			}
		})
	}
}
