package runs

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
)

// MaxEvents bounds a run's history (Run.Events). When an update would make
// it longer, the first event (created) and the newest ones are kept, and
// the events dropped in between are counted in Run.EventsDropped.
const MaxEvents = 100

// Event is one entry of a run record's history (Run.Events, GET
// /v1/runs/{id}/events): a change of its status or a request made of it
// (created, drain requested, interrupted, resumed). Supersteps are not
// history; a run's steps, with the status of each node, are in its
// checkpoints (Service.History), and what the engine reports as it runs
// is a [pregel.Event], logged as the run's stream ([StreamEvent]).
type Event struct {
	// At is when the change was recorded.
	At time.Time `json:"at"`
	// Type says what happened.
	Type EventType `json:"type"`
	// Status is the run's status after the change.
	Status pregel.RunStatus `json:"status"`
	// Step is the run record's step at the change.
	Step int `json:"step"`
	// Detail is the drain reason (drain_requested, drained), the error
	// (failed) or the ids of the pending interrupts (interrupted).
	Detail string `json:"detail,omitempty"`
}

// EventType says what an Event records. A change of status is recorded
// with the new status as its type (running, interrupted, drained,
// completed, failed, cancelled), except the return to pending of a resumed
// run, which is a resume_requested event.
type EventType string

// The types of events.
const (
	// EventCreated is the first event of every run created by the Service.
	EventCreated EventType = "created"
	// EventRunning: an executor started (or continued) the run.
	EventRunning EventType = EventType(pregel.RunRunning)
	// EventInterrupted: the run waits for values; Detail lists the
	// interrupt ids.
	EventInterrupted EventType = EventType(pregel.RunInterrupted)
	// EventDrained: the run stopped at a superstep boundary; Detail is the
	// drain reason.
	EventDrained EventType = EventType(pregel.RunDrained)
	// EventCompleted: the run finished.
	EventCompleted EventType = EventType(pregel.RunCompleted)
	// EventFailed: the run failed; Detail is the error.
	EventFailed EventType = EventType(pregel.RunFailed)
	// EventCancelled: the run was cancelled.
	EventCancelled EventType = EventType(pregel.RunCancelled)
	// EventDrainRequested: a drain was asked for; Detail is the reason.
	// A drain requested and carried out in one update is recorded as
	// EventDrained alone.
	EventDrainRequested EventType = "drain_requested"
	// EventCancelRequested: a cancel of a pending or running run was asked
	// for. A paused run is cancelled at once (EventCancelled alone).
	EventCancelRequested EventType = "cancel_requested"
	// EventResumeRequested: a drained or interrupted run was resumed, or
	// given resume values; its status is pending again.
	EventResumeRequested EventType = "resume_requested"
	// EventAdopted: the run continued on code whose graph differs from
	// the one that wrote its state; Detail names both versions and the
	// renames and migration applied.
	EventAdopted EventType = "adopted"
)

// changes returns the events of a run's update from old to r, recorded at
// at: a drain, cancel or resume request, then the change of status.
func changes(old, r Run, at time.Time) []Event {
	var evs []Event
	add := func(t EventType, detail string) {
		evs = append(evs, Event{At: at, Type: t, Status: r.Status, Step: r.Step, Detail: detail})
	}
	statusChanged := r.Status != old.Status
	resumed := (statusChanged && r.Status == pregel.RunPending && old.Status.Resumable()) ||
		(old.Resume == nil && r.Resume != nil)
	if !old.DrainRequested && r.DrainRequested && !(statusChanged && r.Status == pregel.RunDrained) {
		add(EventDrainRequested, r.DrainReason)
	}
	if !old.CancelRequested && r.CancelRequested {
		// A rollback's cancel says so; a client's has no detail.
		var detail string
		if old.SupersededBy == "" && r.SupersededBy != "" {
			detail = supersedeReason(r.SupersededBy, StrategyRollback)
		}
		add(EventCancelRequested, detail)
	}
	if resumed {
		add(EventResumeRequested, answerDetail(r.Resume))
	}
	if statusChanged && !(resumed && r.Status == pregel.RunPending) {
		var detail string
		switch r.Status {
		case pregel.RunFailed:
			detail = r.Error
		case pregel.RunDrained:
			detail = r.DrainReason
		case pregel.RunInterrupted:
			detail = interruptIDs(r.Interrupts)
		}
		add(EventType(r.Status), detail)
	}
	return evs
}

// answerDetail is the detail of a resume_requested event: what names the
// answer (ResumeRequest.By) and the answer given, so that a run's history
// shows what was answered; "" without either.
func answerDetail(rr *ResumeRequest) string {
	const max = 300
	if rr == nil {
		return ""
	}
	var b strings.Builder
	if rr.By != "" {
		// What names the answer applied (an A2A message id), first.
		b.WriteString(rr.By)
	}
	if len(rr.Value) > 0 {
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString("answer: ")
		b.Write(compactAnswer(rr.Value))
	}
	for _, id := range slices.Sorted(maps.Keys(rr.Values)) {
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		b.WriteString("answer to " + id + ": ")
		b.Write(compactAnswer(rr.Values[id]))
	}
	if r := []rune(b.String()); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return b.String()
}

// compactAnswer is raw without insignificant space, or raw as is when it
// is not JSON.
func compactAnswer(raw json.RawMessage) []byte {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

// appendEvents adds evs to r's history, keeping at most MaxEvents: the
// first and the newest.
func appendEvents(r *Run, evs []Event) {
	if len(evs) == 0 {
		return
	}
	all := make([]Event, 0, len(r.Events)+len(evs))
	all = append(append(all, r.Events...), evs...)
	if over := len(all) - MaxEvents; over > 0 {
		all = append(all[:1], all[1+over:]...)
		r.EventsDropped += over
	}
	r.Events = all
}

// RecordChanges appends to after's history the events of its change from
// before (see Event), recorded at at, keeping at most MaxEvents. Mutate
// does this for every update; code that writes a record otherwise, such
// as a new record made in a status other than pending, calls it itself.
func RecordChanges(before Run, after *Run, at time.Time) {
	appendEvents(after, changes(before, *after, at))
}
