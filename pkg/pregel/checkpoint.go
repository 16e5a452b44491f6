package pregel

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"
)

// Checkpoint is the durable state of a run after a committed superstep.
//
// Step 0 is the run's input; step N is the state after N supersteps. A
// checkpoint is plain data: it can be stored, sent to another process and
// handed to [Graph.Plan] and [Graph.Apply] there. Checkpoints returned by the
// engine and by stores are shared values and must not be modified.
type Checkpoint struct {
	RunID string `json:"run_id"`
	Graph string `json:"graph"`
	Step  int    `json:"step"`
	// Values holds every channel that has a value, as JSON.
	Values map[string]json.RawMessage `json:"values"`
	// Versions holds, per channel, the step that last changed it; a store
	// writes only the channels whose version equals Step.
	Versions map[string]int `json:"versions"`
	// Next lists what the next superstep runs.
	Next []Trigger `json:"next,omitempty"`
	// Barriers holds, per join, the predecessors that finished since the
	// join last fired.
	Barriers map[string][]string `json:"barriers,omitempty"`
	// Tasks reports the node statuses of the superstep that produced this
	// checkpoint, in the order they were applied.
	Tasks []TaskStatus `json:"tasks,omitempty"`
	// Counters are cumulative over the run.
	Counters Counters `json:"counters"`
	// DrainRequest is the reason given by a node that asked, during this
	// step, for the run to drain. Empty when none did.
	DrainRequest string `json:"drain_request,omitempty"`
	// Stamp identifies the graph whose code wrote this checkpoint (its
	// version, fingerprint and reducers). A run or thread continuing on
	// other code is checked against it (Graph.Adopt) before anything runs,
	// so a migration is applied once: the next step records the new
	// graph's stamp. Nil in checkpoints written before stamps were stored.
	Stamp *Stamp `json:"stamp,omitempty"`
	// Unloaded names the channels whose values a store did not read: a
	// checkpoint loaded in part, for a step that reads only some channels
	// (see Graph.StepReads). Those channels have a version and a value in
	// the store, which Values does not hold. Nil for a whole checkpoint;
	// never stored. Apply carries it to the next checkpoint, minus the
	// channels the step wrote, and a store that commits such a checkpoint
	// keeps the stored values of these channels.
	Unloaded map[string]bool `json:"-"`

	// layouts holds the segments of the array channels stored in
	// segments (see segments.go): what the next step may keep.
	layouts map[string]layout
}

// Changed lists the channels this checkpoint's step wrote, sorted. The
// segments of the stored form ([PackSegments]) are not channels: it does
// not list them.
func (cp *Checkpoint) Changed() []string {
	var out []string
	for ch, v := range cp.Versions {
		if v == cp.Step && !IsSegment(ch) {
			out = append(out, ch)
		}
	}
	slices.Sort(out)
	return out
}

// Info summarises the checkpoint for a run's history.
func (cp *Checkpoint) Info() StepInfo {
	next := make([]string, 0, len(cp.Next))
	for _, t := range cp.Next {
		next = append(next, t.Node)
	}
	return StepInfo{Step: cp.Step, Changed: cp.Changed(), Tasks: cp.Tasks, Next: next}
}

// Done reports whether the run has nothing left to execute.
func (cp *Checkpoint) Done() bool { return len(cp.Next) == 0 }

// Trigger is one pending activation of a node: the next superstep plans one
// task per edge-triggered node and one task per fan-out item.
type Trigger struct {
	Node string `json:"node"`
	// From lists the nodes whose completion triggered this node.
	From []string `json:"from,omitempty"`
	// Send marks a fan-out task (see [Builder.AddFanOut]); Arg is its
	// item. (The JSON name stays "send" so stored checkpoints load.)
	Send bool            `json:"send,omitempty"`
	Arg  json.RawMessage `json:"arg,omitempty"`
	// Failure is set when this trigger routes a failed node to its error
	// handler.
	Failure *Failure `json:"failure,omitempty"`
	// Skip, when set, makes the task skipped with this reason without
	// running the node: a fan-out with no items plans one such task, so
	// that joins and edges after its target still fire.
	Skip string `json:"skip,omitempty"`
	// Fan names the fan-out a Send belongs to when the fan-out has a
	// completion policy: the id of the source task that planned it
	// ("start" for a fan-out from Start). The tasks of one step with the
	// same Fan and Node are the fan-out's items (see fanpolicy.go).
	Fan string `json:"fan,omitempty"`
}

// Failure describes a node that failed after its retries; error handler
// nodes receive it through [FailureFrom].
type Failure struct {
	Node     string `json:"node"`
	Attempts int    `json:"attempts"`
	Error    string `json:"error"`
}

// Counters count node executions over a run.
type Counters struct {
	// Completed counts nodes that ran to completion.
	Completed int `json:"completed"`
	Skipped   int `json:"skipped"`
	Cancelled int `json:"cancelled"`
	Failed    int `json:"failed"`
}

func (c *Counters) add(s NodeStatus) {
	switch s {
	case NodeCompleted:
		c.Completed++
	case NodeSkipped:
		c.Skipped++
	case NodeCancelled:
		c.Cancelled++
	case NodeFailed:
		c.Failed++
	}
}

// Task is one node execution planned for a superstep.
type Task struct {
	// ID is derived from the run, step, node and trigger, so planning the
	// same checkpoint again yields the same ids.
	ID    string `json:"id"`
	RunID string `json:"run_id"`
	Step  int    `json:"step"`
	// Index is the task's position in the plan; results are applied in
	// this order.
	Index   int     `json:"index"`
	Trigger Trigger `json:"trigger"`
}

// Node is the name of the node the task runs.
func (t Task) Node() string { return t.Trigger.Node }

// TaskResult is what executing a task produced.
type TaskResult struct {
	TaskID string     `json:"task_id"`
	Node   string     `json:"node"`
	Status NodeStatus `json:"status"`
	// Reason explains a skip or a cancellation.
	Reason   string `json:"reason,omitempty"`
	Attempts int    `json:"attempts,omitempty"`
	// Error is the final error of a failed task.
	Error string `json:"error,omitempty"`
	// Writes are the channel updates of a completed task.
	Writes map[string]json.RawMessage `json:"writes,omitempty"`
	// Routes are the triggers chosen by the node's routers.
	Routes []Trigger `json:"routes,omitempty"`
	// Interrupts are pending when Status is NodeInterrupted.
	Interrupts []InterruptInfo `json:"interrupts,omitempty"`
	// Resume holds the values supplied for this task's interrupts, by
	// interrupt id; the task's next execution receives them.
	Resume map[string]json.RawMessage `json:"resume,omitempty"`
	// DrainRequest is set when the node asked the run to drain.
	DrainRequest string `json:"drain_request,omitempty"`
	// Started and Finished are when the task's execution began and
	// ended (its last execution, for a task resumed after an interrupt),
	// in UTC; zero for a result that did not come from an execution.
	Started  time.Time `json:"started,omitzero"`
	Finished time.Time `json:"finished,omitzero"`
}

// Final reports whether the result is settled: every status but interrupted.
func (r TaskResult) Final() bool { return r.Status != NodeInterrupted && r.Status != "" }

// TaskStatus is the recorded outcome of one task of a step.
type TaskStatus struct {
	TaskID   string     `json:"task_id"`
	Node     string     `json:"node"`
	Status   NodeStatus `json:"status"`
	Reason   string     `json:"reason,omitempty"`
	Attempts int        `json:"attempts,omitempty"`
	Error    string     `json:"error,omitempty"`
	// Started and Finished are when the task ran (see
	// TaskResult.Started); zero when unknown.
	Started  time.Time `json:"started,omitzero"`
	Finished time.Time `json:"finished,omitzero"`
}

// Duration is how long the task ran; zero when its times are unknown.
func (s TaskStatus) Duration() time.Duration {
	if s.Started.IsZero() || s.Finished.IsZero() {
		return 0
	}
	return s.Finished.Sub(s.Started)
}

// InterruptInfo is a pause requested by a node through [Interrupt].
type InterruptInfo struct {
	// ID identifies the interrupt when resuming with one value per
	// interrupt.
	ID     string          `json:"id"`
	TaskID string          `json:"task_id"`
	Node   string          `json:"node"`
	Value  json.RawMessage `json:"value,omitempty"`
	// Type is the JSON type the answer must have ("string", "integer",
	// "number", "boolean", "array" or "object"); empty when any value
	// may do. Resuming with a value of another type is refused.
	Type string `json:"type,omitempty"`
	// Error says why the last answer was refused, when the node asks
	// again because it could not use it.
	Error string `json:"error,omitempty"`
}

// StepInfo summarises one committed step in a run's history.
type StepInfo struct {
	Step    int          `json:"step"`
	Changed []string     `json:"changed,omitempty"`
	Tasks   []TaskStatus `json:"tasks,omitempty"`
	Next    []string     `json:"next,omitempty"`
}

// Latest asks [Checkpointer.Load] for the newest committed step.
const Latest = -1

// Errors returned by checkpoint stores.
var (
	// ErrNotFound: no such run or step.
	ErrNotFound = errors.New("pregel: checkpoint not found")
	// ErrStepConflict: the step being committed does not follow the
	// latest committed step (another process committed it first).
	ErrStepConflict = errors.New("pregel: step already committed or out of order")
)

// Checkpointer stores checkpoints and the results of tasks of the step in
// progress. Implementations must be safe for concurrent use. The package
// checkpointtest holds a conformance suite for them.
type Checkpointer interface {
	// Commit stores cp atomically with its node statuses, but only if
	// the newest committed step of cp.RunID is cp.Step-1 (or, for step 0,
	// if the run has none); otherwise it returns an error wrapping
	// ErrStepConflict and stores nothing. A store may write only the
	// channels listed by cp.Changed, trusting the others to hold their
	// stored values. The store may keep cp: callers must not modify it
	// afterwards. Committing a step discards the recorded task results of
	// that step.
	Commit(ctx context.Context, cp *Checkpoint) error
	// RecordTask stores the result of a task of the uncommitted step.
	// A final result already stored for the same task is kept and
	// returned instead; an interrupted one is replaced. It returns the
	// result now stored.
	RecordTask(ctx context.Context, runID string, step int, r TaskResult) (TaskResult, error)
	// PendingTasks returns the results recorded for step, which has not
	// been committed, in the order they were first recorded.
	PendingTasks(ctx context.Context, runID string, step int) ([]TaskResult, error)
	// Load returns the checkpoint of step, or of the newest step when
	// step is Latest. It returns an error wrapping ErrNotFound when
	// there is none.
	Load(ctx context.Context, runID string, step int) (*Checkpoint, error)
	// History lists the committed steps of a run, oldest first.
	History(ctx context.Context, runID string) ([]StepInfo, error)
}
