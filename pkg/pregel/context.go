package pregel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
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

// Arg decodes the item a fan-out task was started with: one of the items
// the function given to [Builder.AddFanOut] returned.
func Arg[T any](ctx context.Context) (T, error) {
	var v T
	tc := taskFrom(ctx)
	if tc == nil || !tc.trigger.Send {
		return v, errors.New("pregel: Arg called outside a fan-out task (see Builder.AddFanOut)")
	}
	if err := json.Unmarshal(tc.trigger.Arg, &v); err != nil {
		return v, fmt.Errorf("pregel: decode the fan-out item of node %q: %w", tc.info.Node, err)
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
//
// The interrupt records the JSON type T decodes from (see
// [InterruptInfo.Type]), so that a resume with a value of another type is
// refused before the run continues. An answer that still does not decode
// into T is not lost either: the call asks again, under the same interrupt
// id, with the reason in [InterruptInfo.Error], and the run waits for a
// correct answer.
func Interrupt[T any](ctx context.Context, payload any) (T, error) {
	var v T
	if err := ask(ctx, payload, jsonTypeOf(reflect.TypeFor[T]()), "", func(raw json.RawMessage) error {
		return json.Unmarshal(raw, &v)
	}); err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}

// InterruptValid is [Interrupt] with a check of the answer beyond its
// type: an answer that decodes into T but that valid refuses (the
// arguments of an edited tool call that do not fit the tool's schema,
// say) is not taken either. The call asks again, under the same
// interrupt id, with valid's error as the reason in
// [InterruptInfo.Error], and the run waits for a correct answer. valid's
// error is shown to whoever answers: it should say what to fix.
func InterruptValid[T any](ctx context.Context, payload any, valid func(T) error) (T, error) {
	var v T
	if err := ask(ctx, payload, jsonTypeOf(reflect.TypeFor[T]()), "", func(raw json.RawMessage) error {
		if err := json.Unmarshal(raw, &v); err != nil {
			return err
		}
		if valid != nil {
			return valid(v)
		}
		return nil
	}); err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}

// ask is Interrupt over JSON: it returns the answer to the calling task's
// next interrupt, once decode accepts it, or the *InterruptError that asks
// for it. typ is the JSON type the answer must have ("" for any) and
// reason, when set, says why an earlier answer was refused.
func ask(ctx context.Context, payload any, typ, reason string, decode func(json.RawMessage) error) error {
	tc := taskFrom(ctx)
	if tc == nil {
		return errors.New("pregel: Interrupt called outside a node")
	}
	tc.mu.Lock()
	n := tc.interrupts
	tc.interrupts++
	tc.mu.Unlock()
	info := InterruptInfo{ID: tc.info.TaskID + "." + strconv.Itoa(n), TaskID: tc.info.TaskID, Node: tc.info.Node, Type: typ, Error: reason}
	if raw, ok := tc.resume[info.ID]; ok {
		err := info.Check(raw)
		if err == nil {
			if err = decode(raw); err == nil {
				return nil
			}
			err = answerError(err)
		}
		// The answer does not fit: ask again, saying why.
		info.Error = strings.TrimPrefix(err.Error(), ErrInvalidResume.Error()+": ")
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return fmt.Errorf("pregel: encode interrupt payload of node %q: %w", tc.info.Node, err)
	}
	info.Value = raw
	return &InterruptError{Interrupt: info}
}
