package runs

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
)

func TestChanges(t *testing.T) {
	at := time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)
	pending := Run{Status: pregel.RunPending}
	running := Run{Status: pregel.RunRunning, Step: 2}
	draining := Run{Status: pregel.RunRunning, Step: 2, DrainRequested: true, DrainReason: "deploy"}
	drained := Run{Status: pregel.RunDrained, Step: 3, DrainRequested: true, DrainReason: "deploy"}
	interrupted := Run{Status: pregel.RunInterrupted, Step: 1, Interrupts: []pregel.InterruptInfo{{ID: "t1.0"}, {ID: "t2.0"}}}
	resume := &ResumeRequest{Value: json.RawMessage(`"yes"`)}
	ev := func(typ EventType, st pregel.RunStatus, step int, detail string) Event {
		return Event{At: at, Type: typ, Status: st, Step: step, Detail: detail}
	}
	tests := []struct {
		name     string
		old, new Run
		want     []Event
	}{
		{"nothing changed", running, running, nil},
		{"progress only", running, Run{Status: pregel.RunRunning, Step: 5, Counters: pregel.Counters{Completed: 5}}, nil},
		{"started", pending, Run{Status: pregel.RunRunning}, []Event{ev(EventRunning, pregel.RunRunning, 0, "")}},
		{"completed", running, Run{Status: pregel.RunCompleted, Step: 4}, []Event{ev(EventCompleted, pregel.RunCompleted, 4, "")}},
		{"failed", running, Run{Status: pregel.RunFailed, Step: 2, Error: "node \"a\" failed: boom", FailedNode: "a"},
			[]Event{ev(EventFailed, pregel.RunFailed, 2, "node \"a\" failed: boom")}},
		{"interrupted", running, interrupted, []Event{ev(EventInterrupted, pregel.RunInterrupted, 1, "t1.0, t2.0")}},
		{"drain requested", running, draining, []Event{ev(EventDrainRequested, pregel.RunRunning, 2, "deploy")}},
		{"drain requested again", draining, Run{Status: pregel.RunRunning, Step: 2, DrainRequested: true, DrainReason: "other"}, nil},
		{"drained", draining, drained, []Event{ev(EventDrained, pregel.RunDrained, 3, "deploy")}},
		{"drain requested and carried out at once", running, drained, []Event{ev(EventDrained, pregel.RunDrained, 3, "deploy")}},
		{"drain requested, run completed", draining, Run{Status: pregel.RunCompleted, Step: 4, DrainRequested: true, DrainReason: "deploy"},
			[]Event{ev(EventCompleted, pregel.RunCompleted, 4, "")}},
		{"cancel requested", running, Run{Status: pregel.RunRunning, Step: 2, CancelRequested: true}, []Event{ev(EventCancelRequested, pregel.RunRunning, 2, "")}},
		{"cancel requested of a draining run", draining, Run{Status: pregel.RunRunning, Step: 2, DrainRequested: true, DrainReason: "deploy", CancelRequested: true},
			[]Event{ev(EventCancelRequested, pregel.RunRunning, 2, "")}},
		{"rolled back", running, Run{Status: pregel.RunRunning, Step: 2, CancelRequested: true, Discarded: true, SupersededBy: "r9"},
			[]Event{ev(EventCancelRequested, pregel.RunRunning, 2, "rolled back by run r9 on its thread")}},
		{"cancelled", Run{Status: pregel.RunRunning, Step: 2, CancelRequested: true}, Run{Status: pregel.RunCancelled, Step: 2},
			[]Event{ev(EventCancelled, pregel.RunCancelled, 2, "")}},
		{"paused run cancelled at once", drained, Run{Status: pregel.RunCancelled, Step: 3, DrainRequested: true, DrainReason: "deploy"},
			[]Event{ev(EventCancelled, pregel.RunCancelled, 3, "")}},
		{"drained run resumed", drained, Run{Status: pregel.RunPending, Step: 3}, []Event{ev(EventResumeRequested, pregel.RunPending, 3, "")}},
		{"interrupted run resumed with values", interrupted, Run{Status: pregel.RunPending, Step: 1, Interrupts: interrupted.Interrupts, Resume: resume},
			[]Event{ev(EventResumeRequested, pregel.RunPending, 1, `answer: "yes"`)}},
		{"resume values given", running, Run{Status: pregel.RunRunning, Step: 2, Resume: resume}, []Event{ev(EventResumeRequested, pregel.RunRunning, 2, `answer: "yes"`)}},
		{"answers by interrupt, compacted", running, Run{Status: pregel.RunRunning, Step: 2, Resume: &ResumeRequest{Values: map[string]json.RawMessage{"b": json.RawMessage(`{ "decision": "reject", "message": "too much" }`), "a": json.RawMessage(`"approve"`)}}},
			[]Event{ev(EventResumeRequested, pregel.RunRunning, 2, `answer to a: "approve"; answer to b: {"decision":"reject","message":"too much"}`)}},
		{"resume named by its message", interrupted, Run{Status: pregel.RunPending, Step: 1, Interrupts: interrupted.Interrupts, Resume: &ResumeRequest{Value: json.RawMessage(`"yes"`), By: "message m-7"}},
			[]Event{ev(EventResumeRequested, pregel.RunPending, 1, `message m-7, answer: "yes"`)}},
		{"long answer shortened", interrupted, Run{Status: pregel.RunPending, Step: 1, Interrupts: interrupted.Interrupts, Resume: &ResumeRequest{Value: json.RawMessage(`"` + strings.Repeat("é", 400) + `"`)}},
			[]Event{ev(EventResumeRequested, pregel.RunPending, 1, `answer: "`+strings.Repeat("é", 290)+"…")}},
		{"resume values taken", Run{Status: pregel.RunRunning, Step: 1, Resume: resume}, Run{Status: pregel.RunRunning, Step: 1}, nil},
		{"resumed run started", Run{Status: pregel.RunPending, Step: 3}, Run{Status: pregel.RunRunning, Step: 3}, []Event{ev(EventRunning, pregel.RunRunning, 3, "")}},
		{"resume rolled back", Run{Status: pregel.RunPending, Step: 3}, drained, []Event{ev(EventDrained, pregel.RunDrained, 3, "deploy")}},
		{"back to pending otherwise", running, Run{Status: pregel.RunPending, Step: 2}, []Event{ev(EventType(pregel.RunPending), pregel.RunPending, 2, "")}},
		{"node drain at the last step", running, Run{Status: pregel.RunCompleted, Step: 4, DrainRequested: true, DrainReason: "node"},
			[]Event{ev(EventDrainRequested, pregel.RunCompleted, 4, "node"), ev(EventCompleted, pregel.RunCompleted, 4, "")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := changes(tt.old, tt.new, at)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("changes(%+v, %+v) =\n  %+v\nwant\n  %+v", tt.old, tt.new, got, tt.want)
			}
		})
	}
}

func TestAppendEventsCap(t *testing.T) {
	at := time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)
	numbered := func(from, to int) []Event {
		var evs []Event
		for i := from; i < to; i++ {
			evs = append(evs, Event{At: at, Type: EventRunning, Detail: fmt.Sprint(i)})
		}
		return evs
	}
	details := func(evs []Event) []string {
		out := make([]string, len(evs))
		for i, ev := range evs {
			out[i] = ev.Detail
		}
		return out
	}
	tests := []struct {
		name        string
		have        int // events 0..have-1 already recorded
		dropped     int
		add         int // events have..have+add-1 appended
		wantFirst   []string
		wantLast    string
		wantLen     int
		wantDropped int
	}{
		{"empty", 0, 0, 1, []string{"0"}, "0", 1, 0},
		{"below the cap", 10, 0, 3, []string{"0", "1"}, "12", 13, 0},
		{"up to the cap", MaxEvents - 2, 0, 2, []string{"0", "1"}, fmt.Sprint(MaxEvents - 1), MaxEvents, 0},
		{"one over", MaxEvents, 0, 1, []string{"0", "2"}, fmt.Sprint(MaxEvents), MaxEvents, 1},
		{"three over", MaxEvents - 1, 0, 4, []string{"0", "4"}, fmt.Sprint(MaxEvents + 2), MaxEvents, 3},
		{"already dropped some", MaxEvents, 7, 2, []string{"0", "3"}, fmt.Sprint(MaxEvents + 1), MaxEvents, 9},
		{"nothing to add", MaxEvents, 7, 0, []string{"0", "1"}, fmt.Sprint(MaxEvents - 1), MaxEvents, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Run{Events: numbered(0, tt.have), EventsDropped: tt.dropped}
			before := details(r.Events)
			kept := r.Events
			appendEvents(&r, numbered(tt.have, tt.have+tt.add))
			got := details(r.Events)
			if len(got) != tt.wantLen || r.EventsDropped != tt.wantDropped {
				t.Fatalf("%d events, %d dropped; want %d, %d", len(got), r.EventsDropped, tt.wantLen, tt.wantDropped)
			}
			for i, w := range tt.wantFirst {
				if got[i] != w {
					t.Errorf("event %d = %s, want %s (events %v)", i, got[i], w, got)
				}
			}
			if got[len(got)-1] != tt.wantLast {
				t.Errorf("last event = %s, want %s", got[len(got)-1], tt.wantLast)
			}
			if !reflect.DeepEqual(details(kept), before) {
				t.Error("appendEvents changed the events it was given")
			}
		})
	}
}

func TestRecordChanges(t *testing.T) {
	at := time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)
	created := Event{At: at, Type: EventCreated, Status: pregel.RunPending}
	before := Run{Status: pregel.RunPending, Events: []Event{created}}
	after := before
	after.Status, after.Step, after.Error = pregel.RunFailed, 2, "boom"
	RecordChanges(before, &after, at.Add(time.Second))
	want := []Event{created, {At: at.Add(time.Second), Type: EventFailed, Status: pregel.RunFailed, Step: 2, Detail: "boom"}}
	if !reflect.DeepEqual(after.Events, want) {
		t.Errorf("events = %+v, want %+v", after.Events, want)
	}
	if len(before.Events) != 1 {
		t.Errorf("before's events changed: %+v", before.Events)
	}
}
