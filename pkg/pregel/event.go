package pregel

import (
	"encoding/json"
	"time"
)

// EventType names what an Event reports.
type EventType string

// Event types, in the order a run emits them.
const (
	EventRunStarted   EventType = "run_started"
	EventStepStarted  EventType = "step_started"
	EventNodeStarted  EventType = "node_started"
	EventNodeFinished EventType = "node_finished"
	EventStateUpdated EventType = "state_updated"
	EventStepFinished EventType = "step_finished"
	EventInterrupted  EventType = "interrupted"
	EventRunFinished  EventType = "run_finished"
	// EventCustom is an event a node sent with [Emit] while it ran; it
	// comes between the node's EventNodeStarted and EventNodeFinished.
	EventCustom EventType = "custom"
)

// Event is an engine event: it tells an observer what a run is doing (a
// step or node started or finished, the state changed, a node's own
// [Emit]) while it runs. Observers are called one at a time, from the
// goroutines running the step; they must be quick. The engine stores no
// events; the runtimes log them, numbered, as a run's stream
// (runs.StreamEvent, GET /v1/runs/{id}/stream). Not to be confused with
// runs.Event, an entry of a run record's history (created, drained,
// resumed).
type Event struct {
	Type   EventType `json:"type"`
	RunID  string    `json:"run_id"`
	Graph  string    `json:"graph"`
	Step   int       `json:"step"`
	Time   time.Time `json:"time"`
	Node   string    `json:"node,omitempty"`
	TaskID string    `json:"task_id,omitempty"`
	// Arg is a fan-out task's item, on EventNodeStarted.
	Arg json.RawMessage `json:"arg,omitempty"`
	// Status is set on EventNodeFinished.
	Status   NodeStatus `json:"status,omitempty"`
	Reason   string     `json:"reason,omitempty"`
	Error    string     `json:"error,omitempty"`
	Attempts int        `json:"attempts,omitempty"`
	// Tasks is the number of tasks, on EventStepStarted.
	Tasks int `json:"tasks,omitempty"`
	// Writes are a node's writes on EventNodeFinished. On
	// EventStateUpdated, Values are the new values of the channels the step
	// changed, except the segment-stored (append) channels to which it
	// only appended: Appended holds those, each with the elements the step
	// appended (a JSON array), not the whole array again. The whole state
	// after the step is in its checkpoint.
	Writes   map[string]json.RawMessage `json:"writes,omitempty"`
	Values   map[string]json.RawMessage `json:"values,omitempty"`
	Appended map[string]json.RawMessage `json:"appended,omitempty"`
	// RunStatus is set on EventRunFinished.
	RunStatus  RunStatus       `json:"run_status,omitempty"`
	Interrupts []InterruptInfo `json:"interrupts,omitempty"`
	// History is never set by the engine (it knows no run records). It is
	// set on the EventRunFinished that a run's executor (the
	// runs package, pkg/tick) publishes once the run's record shows where
	// it stopped: the length of the record's history then
	// (runs.Run.HistoryLen). Two stops of one run at the same step with
	// the same status, such as an interrupt asked again after a resume,
	// differ by it, so that a watcher can tell which one a record shows.
	History int `json:"history,omitempty"`
	// Name and Payload are an EventCustom's name and JSON payload.
	Name    string          `json:"name,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// Observer receives a run's events.
type Observer func(Event)
