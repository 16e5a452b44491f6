package pregel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
)

// TaskInfo describes the task a node is executing.
type TaskInfo struct {
	RunID   string
	Step    int
	TaskID  string
	Node    string
	Attempt int
}

// taskContext is the per-task state reachable from a node's context.
type taskContext struct {
	info    TaskInfo
	trigger Trigger
	resume  map[string]json.RawMessage
	sink    EventSink

	mu         sync.Mutex
	interrupts int
	drain      string
}

type taskKey struct{}

func withTask(ctx context.Context, tc *taskContext) context.Context {
	return context.WithValue(ctx, taskKey{}, tc)
}

func taskFrom(ctx context.Context) *taskContext {
	tc, _ := ctx.Value(taskKey{}).(*taskContext)
	return tc
}

// TaskFrom returns the task the calling node executes.
func TaskFrom(ctx context.Context) (TaskInfo, bool) {
	tc := taskFrom(ctx)
	if tc == nil {
		return TaskInfo{}, false
	}
	return tc.info, true
}

// Arg decodes the argument a fan-out task was sent with (see [Send]).
func Arg[T any](ctx context.Context) (T, error) {
	var v T
	tc := taskFrom(ctx)
	if tc == nil || !tc.trigger.Send {
		return v, errors.New("pregel: Arg called outside a task started by Send")
	}
	if err := json.Unmarshal(tc.trigger.Arg, &v); err != nil {
		return v, fmt.Errorf("pregel: decode Send argument of node %q: %w", tc.info.Node, err)
	}
	return v, nil
}

// FailureFrom returns the failure an error handler node was routed for
// (see [OnError]).
func FailureFrom(ctx context.Context) (*Failure, bool) {
	tc := taskFrom(ctx)
	if tc == nil || tc.trigger.Failure == nil {
		return nil, false
	}
	return tc.trigger.Failure, true
}

// RequestDrain asks the run to stop at the next superstep boundary with the
// given reason, once the current step is committed. Called from a node
// inside a subgraph, it drains the parent run.
func RequestDrain(ctx context.Context, reason string) {
	if tc := taskFrom(ctx); tc != nil {
		tc.mu.Lock()
		if tc.drain == "" {
			tc.drain = reason
		}
		tc.mu.Unlock()
	}
}

// newAttempt starts an attempt: its Interrupt calls are matched to the
// task's interrupts from the first again, so a retried node receives the
// answers given to the attempts before it.
func (tc *taskContext) newAttempt() {
	tc.mu.Lock()
	tc.interrupts = 0
	tc.mu.Unlock()
}

func (tc *taskContext) drainRequest() string {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return tc.drain
}

// InterruptError is returned by [Interrupt] when the run must pause for a
// value. A node returns it (wrapped or not) from Execute.
type InterruptError struct {
	Interrupt InterruptInfo
}

// Error says which node waits for a value.
func (e *InterruptError) Error() string {
	return fmt.Sprintf("node %q interrupted (%s): waiting for a value to resume", e.Interrupt.Node, e.Interrupt.ID)
}

// Interrupt pauses the run for a value from outside, such as a person's
// answer. The first time, it returns an *InterruptError that the node must
// return; the run stops as interrupted with payload visible. When the run is
// resumed with a value, the node runs again and this call returns the value
// decoded into T. A node may call Interrupt several times; each call is its
// own interrupt, matched by order within an attempt: a node retried after
// an answer receives the same answer again.
func Interrupt[T any](ctx context.Context, payload any) (T, error) {
	var zero T
	tc := taskFrom(ctx)
	if tc == nil {
		return zero, errors.New("pregel: Interrupt called outside a node")
	}
	tc.mu.Lock()
	n := tc.interrupts
	tc.interrupts++
	tc.mu.Unlock()
	id := tc.info.TaskID + "." + strconv.Itoa(n)
	if raw, ok := tc.resume[id]; ok {
		var v T
		if err := json.Unmarshal(raw, &v); err != nil {
			return zero, fmt.Errorf("pregel: resume value for interrupt %s of node %q: %w", id, tc.info.Node, err)
		}
		return v, nil
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return zero, fmt.Errorf("pregel: encode interrupt payload of node %q: %w", tc.info.Node, err)
	}
	return zero, &InterruptError{Interrupt: InterruptInfo{ID: id, TaskID: tc.info.TaskID, Node: tc.info.Node, Value: raw}}
}
