package embedded_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// emitGraph runs "talk", which emits n "token" events and then asks for an
// answer when ask is set, then "done".
func emitGraph(t *testing.T, name string, n int, ask bool) *pregel.Graph {
	t.Helper()
	g := pregel.NewGraph[St](name)
	g.AddFunc("talk", func(ctx context.Context, s St) (St, error) {
		for i := range n {
			if err := pregel.Emit(ctx, pregel.MessageToken, map[string]int{"i": i}); err != nil {
				return St{}, err
			}
		}
		if ask {
			a, err := pregel.Interrupt[string](ctx, "answer?")
			if err != nil {
				return St{}, err
			}
			return St{Log: []string{"talk"}, Answer: a}, nil
		}
		return St{Log: []string{"talk"}}, nil
	}, pregel.Writes("log", "answer"))
	g.AddFunc("done", func(_ context.Context, s St) (St, error) {
		return St{Log: []string{"done"}}, nil
	}, pregel.Writes("log"))
	g.AddEdge(pregel.Start, "talk")
	g.AddEdge("talk", "done")
	g.AddEdge("done", pregel.End)
	graph, err := g.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return graph
}

func allEvents(t *testing.T, src runs.EventReader, id string) []runs.StreamEvent {
	t.Helper()
	var out []runs.StreamEvent
	var after int64
	for {
		page, err := src.EventsSince(t.Context(), id, after, 0)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page.Events...)
		if len(page.Events) == 0 {
			return out
		}
		after = page.Events[len(page.Events)-1].ID
	}
}

// finishedEvents waits until the run's stream ends with a run_finished
// event (the record is updated a moment before) and returns it all.
func finishedEvents(t *testing.T, src runs.EventReader, id string, after int64) []runs.StreamEvent {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		evs := allEvents(t, src, id)
		if n := len(evs); n > 0 && int64(n) > after && evs[n-1].Type == pregel.EventRunFinished {
			return evs
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s's stream does not end with run_finished: %v", id, types(evs))
		}
		time.Sleep(time.Millisecond)
	}
}

func types(evs []runs.StreamEvent) []pregel.EventType {
	out := make([]pregel.EventType, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type
	}
	return out
}

// TestSchedulerStreamsEvents checks that a run's events, the nodes' own
// included, are logged with consecutive ids in the order they happened,
// and reach a watcher in the same order; the stream ends with the
// run_finished event carrying the record's status; a resumed run's events
// continue the ids.
func TestSchedulerStreamsEvents(t *testing.T) {
	e := newEnv(t, 2, emitGraph(t, "emit", 3, true))
	w := e.sched.WatchEvents("r1")
	defer w.Stop()
	if _, _, err := e.svc.Create(t.Context(), "emit", runs.CreateRequest{RunID: "r1"}); err != nil {
		t.Fatal(err)
	}
	e.wait(t, "r1", pregel.RunInterrupted)
	logged := finishedEvents(t, e.sched, "r1", 0)
	want := []pregel.EventType{
		pregel.EventRunStarted, pregel.EventStepStarted, pregel.EventNodeStarted,
		pregel.EventCustom, pregel.EventCustom, pregel.EventCustom,
		pregel.EventNodeFinished, pregel.EventInterrupted, pregel.EventRunFinished,
	}
	if got := types(logged); !slicesEqual(got, want) {
		t.Fatalf("logged events %v; want %v", got, want)
	}
	for i, ev := range logged {
		if ev.ID != int64(i+1) || ev.RunID != "r1" {
			t.Fatalf("event %d: id %d, run %q; want id %d of r1", i, ev.ID, ev.RunID, i+1)
		}
	}
	if p := logged[4]; p.Node != "talk" || p.Name != pregel.MessageToken || string(p.Payload) != `{"i":1}` {
		t.Errorf("second token event = %+v", p)
	}
	if last := logged[len(logged)-1]; last.RunStatus != pregel.RunInterrupted || len(last.Interrupts) != 1 {
		t.Errorf("run_finished = %+v; want status interrupted with one interrupt", last)
	}
	for i := range logged {
		select {
		case ev := <-w.C:
			if ev.ID != logged[i].ID || ev.Type != logged[i].Type {
				t.Fatalf("watched event %d = %d %s; want %d %s", i, ev.ID, ev.Type, logged[i].ID, logged[i].Type)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("watcher got %d events; want %d", i, len(logged))
		}
	}

	if _, err := e.svc.Resume(t.Context(), "r1", runs.ResumeRequest{Value: json.RawMessage(`"yes"`)}); err != nil {
		t.Fatal(err)
	}
	e.wait(t, "r1", pregel.RunCompleted)
	all := finishedEvents(t, e.sched, "r1", int64(len(logged)))
	more := all[len(logged):]
	if len(more) == 0 || more[0].ID != int64(len(logged)+1) || more[0].Type != pregel.EventRunStarted {
		t.Fatalf("after the resume: %v; want run_started with id %d first", types(more), len(logged)+1)
	}
	if last := all[len(all)-1]; last.Type != pregel.EventRunFinished || last.RunStatus != pregel.RunCompleted {
		t.Errorf("last event %s %s; want run_finished completed", last.Type, last.RunStatus)
	}
}

// TestSchedulerDropsSlowWatcher checks that a watcher that reads nothing
// does not hold a run back: it is dropped with ErrWatchBehind. A Cursor,
// which reads the log when its watch falls behind, gets every event once,
// in order.
func TestSchedulerDropsSlowWatcher(t *testing.T) {
	const tokens = 3000
	e := newEnv(t, 2, emitGraph(t, "chatty", tokens, false))
	slow := e.sched.WatchEvents("r1")
	defer slow.Stop()
	cur := runs.NewCursor(e.sched, "r1", 0)
	defer cur.Close()
	type result struct {
		ids []int64
		err error
	}
	got := make(chan result, 1)
	go func() {
		var r result
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for {
			ev, err := cur.Next(ctx)
			if err != nil {
				r.err = err
				break
			}
			r.ids = append(r.ids, ev.ID)
			if ev.Type == pregel.EventRunFinished {
				break
			}
			if len(r.ids)%500 == 0 {
				time.Sleep(20 * time.Millisecond) // fall behind now and then
			}
		}
		got <- r
	}()
	if _, _, err := e.svc.Create(t.Context(), "chatty", runs.CreateRequest{RunID: "r1"}); err != nil {
		t.Fatal(err)
	}
	e.wait(t, "r1", pregel.RunCompleted)
	total := len(finishedEvents(t, e.sched, "r1", 0))
	if total < tokens {
		t.Fatalf("%d events logged; want at least %d", total, tokens)
	}
	if !errors.Is(slow.Err(), runs.ErrWatchBehind) {
		t.Errorf("the watcher that reads nothing ended with %v; want ErrWatchBehind", slow.Err())
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("cursor: %v after %d events", r.err, len(r.ids))
	}
	if len(r.ids) != total {
		t.Fatalf("cursor got %d events; want %d", len(r.ids), total)
	}
	for i, id := range r.ids {
		if id != int64(i+1) {
			t.Fatalf("cursor's event %d has id %d; want %d", i, id, i+1)
		}
	}
}

func slicesEqual[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
