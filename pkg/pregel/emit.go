package pregel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// EventSink receives the custom events nodes emit with [Emit]. It is called
// from the goroutine running the node, so it must be quick and safe for
// concurrent use by the tasks of one step.
type EventSink func(Event)

type sinkKey struct{}

// WithEventSink returns a context under which the nodes that [Graph.Execute]
// runs deliver their [Emit] events to sink. Runners that execute tasks one
// at a time (the tick and node handlers) use it; [Graph.Run] and
// [Graph.Resume] deliver node events to the run's [Observer] themselves.
func WithEventSink(ctx context.Context, sink EventSink) context.Context {
	return context.WithValue(ctx, sinkKey{}, sink)
}

func sinkFrom(ctx context.Context) EventSink {
	s, _ := ctx.Value(sinkKey{}).(EventSink)
	return s
}

// Emit sends an event from the running node to whoever watches the run: a
// progress report, a token of a model's answer, anything a client wants
// before the node finishes. name says what the event is (for example
// "progress" or "token"); payload is encoded as JSON. The event reaches
// observers as an [EventCustom] with the node, task and step filled in.
//
// Emit costs nothing when nobody watches. It fails only when called outside
// a node or when payload cannot be encoded; a node may ignore that error.
func Emit(ctx context.Context, name string, payload any) error {
	tc := taskFrom(ctx)
	if tc == nil {
		return errors.New("pregel: Emit called outside a node")
	}
	if name == "" {
		return fmt.Errorf("pregel: Emit from node %q: the event needs a name", tc.info.Node)
	}
	if tc.sink == nil {
		return nil
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return fmt.Errorf("pregel: encode event %q of node %q: %w", name, tc.info.Node, err)
	}
	tc.sink(Event{Type: EventCustom, RunID: tc.info.RunID, Step: tc.info.Step, Node: tc.info.Node, TaskID: tc.info.TaskID, Name: name, Payload: raw})
	return nil
}
