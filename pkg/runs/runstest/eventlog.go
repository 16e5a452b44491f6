package runstest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// EventLogRetention is the retention RunEventLog asks its factory for.
const EventLogRetention = 50

// RunEventLog runs the conformance suite for [runs.EventLog]
// implementations. newLog returns an empty log that keeps retention events
// per run (the suite passes EventLogRetention).
//
// The suite holds logs to this: ids start at 1 and are consecutive per
// run, across appends; AppendEvents returns the events with their ids;
// EventsSince returns the events after an id, oldest first, with every
// field as appended (JSON compared semantically, times to the
// millisecond), honours its limit (and caps it at runs.MaxEventPage), and
// reports the first and last ids kept; a run without events gives an
// empty page; runs' streams are independent; past the retention the
// oldest events go and First moves up; a negative id is an error wrapping
// runs.ErrInvalid; concurrent appends to different runs all land.
func RunEventLog(t *testing.T, newLog func(t *testing.T, retention int) runs.EventLog) {
	t.Run("IDsAndOrder", func(t *testing.T) {
		l := newLog(t, EventLogRetention)
		ctx := t.Context()
		page, err := l.EventsSince(ctx, "r1", 0, 0)
		if err != nil || len(page.Events) != 0 || page.First != 0 || page.Last != 0 {
			t.Fatalf("EventsSince of a run without events = %+v, %v; want an empty page", page, err)
		}
		first := sampleEvents("r1", 3)
		got, err := l.AppendEvents(ctx, "r1", first)
		if err != nil {
			t.Fatal(err)
		}
		checkIDs(t, "first AppendEvents", got, 1, 3)
		more := sampleEvents("r1", 2)
		got, err = l.AppendEvents(ctx, "r1", more)
		if err != nil {
			t.Fatal(err)
		}
		checkIDs(t, "second AppendEvents", got, 4, 2)

		page, err = l.EventsSince(ctx, "r1", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if page.First != 1 || page.Last != 5 {
			t.Errorf("First, Last = %d, %d; want 1, 5", page.First, page.Last)
		}
		checkIDs(t, "EventsSince(0)", page.Events, 1, 5)
		for i, want := range append(first, more...) {
			sameEvent(t, page.Events[i].Event, want)
		}

		page, err = l.EventsSince(ctx, "r1", 2, 2)
		if err != nil {
			t.Fatal(err)
		}
		checkIDs(t, "EventsSince(2, limit 2)", page.Events, 3, 2)
		page, err = l.EventsSince(ctx, "r1", 5, 0)
		if err != nil || len(page.Events) != 0 || page.Last != 5 {
			t.Errorf("EventsSince(last) = %d events, last %d, %v; want none, last 5", len(page.Events), page.Last, err)
		}
		page, err = l.EventsSince(ctx, "r1", 99, 0)
		if err != nil || len(page.Events) != 0 {
			t.Errorf("EventsSince(beyond last) = %d events, %v; want none", len(page.Events), err)
		}
		if _, err := l.EventsSince(ctx, "r1", -1, 0); !errors.Is(err, runs.ErrInvalid) {
			t.Errorf("EventsSince(-1) error = %v; want one wrapping runs.ErrInvalid", err)
		}
	})

	t.Run("RunsAreIndependent", func(t *testing.T) {
		l := newLog(t, EventLogRetention)
		ctx := t.Context()
		if _, err := l.AppendEvents(ctx, "a", sampleEvents("a", 4)); err != nil {
			t.Fatal(err)
		}
		got, err := l.AppendEvents(ctx, "b", sampleEvents("b", 2))
		if err != nil {
			t.Fatal(err)
		}
		checkIDs(t, "run b", got, 1, 2)
		page, err := l.EventsSince(ctx, "a", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		checkIDs(t, "run a", page.Events, 1, 4)
		for _, ev := range page.Events {
			if ev.RunID != "a" {
				t.Errorf("run a's stream holds an event of run %q", ev.RunID)
			}
		}
	})

	t.Run("Limit", func(t *testing.T) {
		l := newLog(t, runs.MaxEventPage+100)
		ctx := t.Context()
		if _, err := l.AppendEvents(ctx, "r", sampleEvents("r", runs.MaxEventPage+10)); err != nil {
			t.Fatal(err)
		}
		page, err := l.EventsSince(ctx, "r", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		checkIDs(t, "EventsSince(0, limit 0)", page.Events, 1, runs.MaxEventPage)
		page, err = l.EventsSince(ctx, "r", 0, runs.MaxEventPage*2)
		if err != nil {
			t.Fatal(err)
		}
		checkIDs(t, "EventsSince(0, limit above the maximum)", page.Events, 1, runs.MaxEventPage)
	})

	t.Run("Retention", func(t *testing.T) {
		l := newLog(t, EventLogRetention)
		ctx := t.Context()
		for range 3 {
			if _, err := l.AppendEvents(ctx, "r", sampleEvents("r", EventLogRetention/2+1)); err != nil {
				t.Fatal(err)
			}
		}
		total := int64(3 * (EventLogRetention/2 + 1))
		page, err := l.EventsSince(ctx, "r", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		wantFirst := total - EventLogRetention + 1
		if page.First != wantFirst || page.Last != total {
			t.Fatalf("after %d events with retention %d: First, Last = %d, %d; want %d, %d", total, EventLogRetention, page.First, page.Last, wantFirst, total)
		}
		checkIDs(t, "EventsSince(0) past the retention", page.Events, wantFirst, EventLogRetention)
		page, err = l.EventsSince(ctx, "r", total-3, 0)
		if err != nil {
			t.Fatal(err)
		}
		checkIDs(t, "EventsSince(last-3)", page.Events, total-2, 3)
	})

	t.Run("ConcurrentRuns", func(t *testing.T) {
		l := newLog(t, EventLogRetention)
		ctx := t.Context()
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for i := range 8 {
			wg.Go(func() {
				id := fmt.Sprint("run-", i)
				for range 5 {
					if _, err := l.AppendEvents(ctx, id, sampleEvents(id, 2)); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		for i := range 8 {
			page, err := l.EventsSince(ctx, fmt.Sprint("run-", i), 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			checkIDs(t, fmt.Sprint("run-", i), page.Events, 1, 10)
		}
	})
}

// sampleEvents returns n events of several kinds.
func sampleEvents(runID string, n int) []pregel.Event {
	at := time.Date(2026, 11, 25, 4, 0, 0, 123_000_000, time.UTC)
	evs := make([]pregel.Event, n)
	for i := range evs {
		ev := pregel.Event{RunID: runID, Graph: "g", Step: i, Time: at.Add(time.Duration(i) * time.Millisecond)}
		switch i % 3 {
		case 0:
			ev.Type, ev.Node, ev.TaskID, ev.Name, ev.Payload = pregel.EventCustom, "n", "t1", "token", json.RawMessage(`{"text": "hé"}`)
		case 1:
			ev.Type, ev.Node, ev.TaskID, ev.Status, ev.Attempts = pregel.EventNodeFinished, "n", "t1", pregel.NodeCompleted, 1
			ev.Writes = map[string]json.RawMessage{"out": json.RawMessage(fmt.Sprint(i))}
		default:
			ev.Type, ev.RunStatus, ev.History = pregel.EventRunFinished, pregel.RunInterrupted, i
			ev.Interrupts = []pregel.InterruptInfo{{ID: "t1.0", TaskID: "t1", Node: "n", Value: json.RawMessage(`"ok?"`)}}
		}
		evs[i] = ev
	}
	return evs
}

func checkIDs(t *testing.T, what string, evs []runs.StreamEvent, first int64, n int) {
	t.Helper()
	if len(evs) != n {
		t.Fatalf("%s: %d events; want %d", what, len(evs), n)
	}
	for i, ev := range evs {
		if ev.ID != first+int64(i) {
			t.Fatalf("%s: event %d has id %d; want %d", what, i, ev.ID, first+int64(i))
		}
	}
}

// sameEvent compares events as JSON, times to the millisecond.
func sameEvent(t *testing.T, got, want pregel.Event) {
	t.Helper()
	if d := got.Time.Sub(want.Time); d < -time.Millisecond || d > time.Millisecond {
		t.Errorf("event time %v; want %v", got.Time, want.Time)
	}
	got.Time, want.Time = time.Time{}, time.Time{}
	if !sameJSON(t, got, want) {
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		t.Errorf("event read back\n%s\nwant\n%s", g, w)
	}
}

func sameJSON(t *testing.T, a, b any) bool {
	t.Helper()
	var x, y any
	for _, p := range []struct {
		v   any
		out *any
	}{{a, &x}, {b, &y}} {
		raw, err := json.Marshal(p.v)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, p.out); err != nil {
			t.Fatal(err)
		}
	}
	return fmt.Sprint(x) == fmt.Sprint(y)
}
