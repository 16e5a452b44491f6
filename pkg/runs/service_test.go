package runs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// recClock is the real clock, remembering the times it told.
type recClock struct {
	mu   sync.Mutex
	told map[time.Time]bool
}

func (c *recClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now().UTC()
	c.told[now] = true
	return now
}

func (c *recClock) Told(at time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.told[at]
}

// nopDispatcher executes nothing, so that a test moves runs itself as an
// executor would; it fails Dispatch while fail is set.
type nopDispatcher struct{ fail bool }

func (d *nopDispatcher) Dispatch(context.Context, runs.Run) error {
	if d.fail {
		return errors.New("queue unavailable")
	}
	return nil
}

func (d *nopDispatcher) Signal(context.Context, runs.Run) {}

// wantEvent is an event without its time.
type wantEvent struct {
	typ    runs.EventType
	status pregel.RunStatus
	step   int
	detail string
}

func (w wantEvent) String() string {
	return fmt.Sprintf("%s/%s/%d/%q", w.typ, w.status, w.step, w.detail)
}

func eventsOf(r runs.Run) []wantEvent {
	out := make([]wantEvent, len(r.Events))
	for i, ev := range r.Events {
		out[i] = wantEvent{ev.Type, ev.Status, ev.Step, ev.Detail}
	}
	return out
}

// checkEvents compares a run's history with want, and checks that its
// times are set and never go back.
func checkEvents(t *testing.T, r runs.Run, want ...wantEvent) {
	t.Helper()
	got := eventsOf(r)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("run %s: events\n  %v\nwant\n  %v", r.ID, got, want)
	}
	for i, ev := range r.Events {
		if ev.At.IsZero() || (i > 0 && ev.At.Before(r.Events[i-1].At)) {
			t.Errorf("run %s: event %d (%s) at %v, after %v", r.ID, i, ev.Type, ev.At, r.Events[max(i-1, 0)].At)
		}
	}
	if r.EventsDropped != 0 {
		t.Errorf("run %s: %d events dropped", r.ID, r.EventsDropped)
	}
}

func TestServiceEvents(t *testing.T) {
	type step func(t *testing.T, svc *runs.Service, d *nopDispatcher, id string)
	// exec changes the record as an executor does.
	exec := func(fn func(r *runs.Run)) step {
		return func(t *testing.T, svc *runs.Service, _ *nopDispatcher, id string) {
			t.Helper()
			if _, err := runs.Mutate(t.Context(), svc.Runs, id, func(r *runs.Run) error { fn(r); return nil }); err != nil {
				t.Fatalf("Mutate: %v", err)
			}
		}
	}
	var (
		running   = exec(func(r *runs.Run) { r.Status = pregel.RunRunning })
		progress  = exec(func(r *runs.Run) { r.Step++; r.Counters.Completed++ })
		drained   = exec(func(r *runs.Run) { r.Status, r.Step = pregel.RunDrained, r.Step+1 })
		completed = exec(func(r *runs.Run) { r.Status, r.Step = pregel.RunCompleted, r.Step+1 })
		cancelled = exec(func(r *runs.Run) { r.Status, r.CancelRequested = pregel.RunCancelled, false })
		failed    = exec(func(r *runs.Run) {
			r.Status, r.Step, r.Error, r.FailedNode = pregel.RunFailed, r.Step+1, `node "inc" failed after 1 attempt(s): boom`, "inc"
		})
		interrupted = exec(func(r *runs.Run) {
			r.Status, r.Step = pregel.RunInterrupted, r.Step+1
			r.Interrupts = []pregel.InterruptInfo{{ID: "t1.0", TaskID: "t1", Node: "ask"}, {ID: "t2.0", TaskID: "t2", Node: "ask"}}
		})
		tookValues = exec(func(r *runs.Run) { r.Resume, r.Interrupts = nil, nil })
		drain      = func(t *testing.T, svc *runs.Service, _ *nopDispatcher, id string) {
			t.Helper()
			if _, err := svc.Drain(t.Context(), id, "deploy"); err != nil {
				t.Fatalf("Drain: %v", err)
			}
		}
		cancel = func(t *testing.T, svc *runs.Service, _ *nopDispatcher, id string) {
			t.Helper()
			if _, err := svc.Cancel(t.Context(), id); err != nil {
				t.Fatalf("Cancel: %v", err)
			}
		}
		resume = func(req runs.ResumeRequest) step {
			return func(t *testing.T, svc *runs.Service, _ *nopDispatcher, id string) {
				t.Helper()
				if _, err := svc.Resume(t.Context(), id, req); err != nil {
					t.Fatalf("Resume: %v", err)
				}
			}
		}
		resumeUndispatched = func(t *testing.T, svc *runs.Service, d *nopDispatcher, id string) {
			t.Helper()
			d.fail = true
			defer func() { d.fail = false }()
			if _, err := svc.Resume(t.Context(), id, runs.ResumeRequest{}); err == nil {
				t.Fatal("Resume with a failing dispatcher succeeded")
			}
		}
		refused = func(t *testing.T, svc *runs.Service, _ *nopDispatcher, id string) {
			t.Helper()
			if _, err := svc.Drain(t.Context(), id, "late"); !errors.Is(err, runs.ErrInvalidState) {
				t.Fatalf("Drain of a finished run: %v, want ErrInvalidState", err)
			}
		}
	)
	created := wantEvent{runs.EventCreated, pregel.RunPending, 0, ""}
	tests := []struct {
		name  string
		steps []step
		want  []wantEvent
	}{
		{
			name:  "drained, resumed, completed",
			steps: []step{running, progress, drain, drained, resume(runs.ResumeRequest{}), running, progress, completed, refused},
			want: []wantEvent{
				created,
				{runs.EventRunning, pregel.RunRunning, 0, ""},
				{runs.EventDrainRequested, pregel.RunRunning, 1, "deploy"},
				{runs.EventDrained, pregel.RunDrained, 2, "deploy"},
				{runs.EventResumeRequested, pregel.RunPending, 2, ""},
				{runs.EventRunning, pregel.RunRunning, 2, ""},
				{runs.EventCompleted, pregel.RunCompleted, 4, ""},
			},
		},
		{
			name:  "cancelled while running",
			steps: []step{running, progress, cancel, cancelled},
			want: []wantEvent{
				created,
				{runs.EventRunning, pregel.RunRunning, 0, ""},
				{runs.EventCancelRequested, pregel.RunRunning, 1, ""},
				{runs.EventCancelled, pregel.RunCancelled, 1, ""},
			},
		},
		{
			name:  "cancelled while drained",
			steps: []step{running, drain, drained, cancel},
			want: []wantEvent{
				created,
				{runs.EventRunning, pregel.RunRunning, 0, ""},
				{runs.EventDrainRequested, pregel.RunRunning, 0, "deploy"},
				{runs.EventDrained, pregel.RunDrained, 1, "deploy"},
				{runs.EventCancelled, pregel.RunCancelled, 1, ""},
			},
		},
		{
			name:  "failed",
			steps: []step{running, progress, failed, refused},
			want: []wantEvent{
				created,
				{runs.EventRunning, pregel.RunRunning, 0, ""},
				{runs.EventFailed, pregel.RunFailed, 2, `node "inc" failed after 1 attempt(s): boom`},
			},
		},
		{
			name:  "interrupted, answered, completed",
			steps: []step{running, interrupted, resume(runs.ResumeRequest{Value: json.RawMessage(`"yes"`)}), running, tookValues, completed},
			want: []wantEvent{
				created,
				{runs.EventRunning, pregel.RunRunning, 0, ""},
				{runs.EventInterrupted, pregel.RunInterrupted, 1, "t1.0, t2.0"},
				{runs.EventResumeRequested, pregel.RunPending, 1, `answer "yes"`},
				{runs.EventRunning, pregel.RunRunning, 1, ""},
				{runs.EventCompleted, pregel.RunCompleted, 2, ""},
			},
		},
		{
			name:  "resume not dispatched",
			steps: []step{running, drain, drained, resumeUndispatched},
			want: []wantEvent{
				created,
				{runs.EventRunning, pregel.RunRunning, 0, ""},
				{runs.EventDrainRequested, pregel.RunRunning, 0, "deploy"},
				{runs.EventDrained, pregel.RunDrained, 1, "deploy"},
				{runs.EventResumeRequested, pregel.RunPending, 1, ""},
				{runs.EventDrained, pregel.RunDrained, 1, "deploy"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg, err := runs.NewRegistry(loopGraph(t, "loop", 5, nil))
			if err != nil {
				t.Fatal(err)
			}
			clock := &recClock{told: map[time.Time]bool{}}
			d := &nopDispatcher{}
			svc := &runs.Service{Graphs: reg, Runs: runs.NewMemoryStore(), Checkpoints: pregel.NewMemoryStore(), Dispatcher: d,
				Logger: slog.New(slog.DiscardHandler), Now: clock.Now}
			r, _, err := svc.Create(t.Context(), "loop", runs.CreateRequest{Input: json.RawMessage(`{"count":0}`)})
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			if len(r.Events) != 1 || !r.Events[0].At.Equal(r.CreatedAt) {
				t.Errorf("created run: events %+v, want one at CreatedAt %v", r.Events, r.CreatedAt)
			}
			for _, s := range tt.steps {
				s(t, svc, d, r.ID)
			}
			got, err := svc.Get(t.Context(), r.ID)
			if err != nil {
				t.Fatal(err)
			}
			checkEvents(t, got, tt.want...)
			evs, dropped, err := svc.Events(t.Context(), r.ID)
			if err != nil || dropped != 0 || len(evs) != len(tt.want) {
				t.Errorf("Events = %d events, %d dropped, %v; want %d, 0, nil", len(evs), dropped, err, len(tt.want))
			}
			// The events the Service records are at the times of its clock.
			for _, ev := range got.Events {
				if ev.Type == runs.EventDrainRequested || ev.Type == runs.EventCancelRequested || ev.Type == runs.EventResumeRequested {
					if !clock.Told(ev.At) {
						t.Errorf("%s event at %v, not by the Service's clock", ev.Type, ev.At)
					}
				}
			}
		})
	}
}

func TestServiceEventsCapped(t *testing.T) {
	reg, err := runs.NewRegistry(loopGraph(t, "loop", 5, nil))
	if err != nil {
		t.Fatal(err)
	}
	svc := &runs.Service{Graphs: reg, Runs: runs.NewMemoryStore(), Checkpoints: pregel.NewMemoryStore(), Dispatcher: &nopDispatcher{}}
	r, _, err := svc.Create(t.Context(), "loop", runs.CreateRequest{Input: json.RawMessage(`{"count":0}`)})
	if err != nil {
		t.Fatal(err)
	}
	// Each round adds running, drain_requested, drained, resume_requested.
	const rounds = 40
	for i := range rounds {
		if _, err := runs.Mutate(t.Context(), svc.Runs, r.ID, func(r *runs.Run) error { r.Status, r.Step = pregel.RunRunning, i; return nil }); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Drain(t.Context(), r.ID, fmt.Sprintf("round %d", i)); err != nil {
			t.Fatal(err)
		}
		if _, err := runs.Mutate(t.Context(), svc.Runs, r.ID, func(r *runs.Run) error { r.Status = pregel.RunDrained; return nil }); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Resume(t.Context(), r.ID, runs.ResumeRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	evs, dropped, err := svc.Events(t.Context(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if total := 1 + 4*rounds; len(evs) != runs.MaxEvents || dropped != total-runs.MaxEvents {
		t.Fatalf("%d events, %d dropped; want %d, %d", len(evs), dropped, runs.MaxEvents, total-runs.MaxEvents)
	}
	if evs[0].Type != runs.EventCreated {
		t.Errorf("first event kept is %s, want created", evs[0].Type)
	}
	last := evs[len(evs)-1]
	if last.Type != runs.EventResumeRequested || last.Step != rounds-1 {
		t.Errorf("last event = %+v, want the last round's resume_requested", last)
	}
	// The newest events are kept, in order.
	if ev := evs[len(evs)-3]; ev.Type != runs.EventDrainRequested || !strings.HasSuffix(ev.Detail, fmt.Sprint(rounds-1)) {
		t.Errorf("third to last event = %+v, want the last round's drain request", ev)
	}
}
