package pregel

import (
	"context"
	"encoding/json"
	"fmt"
)

// Subgraph runs child as one node of a graph over S. in maps the parent's
// state to the child's input; out folds the child's final state into the
// parent's writes. The child's interrupts pause the parent (resuming the
// parent answers them); a drain requested inside the child drains the
// parent; cancelling the parent cancels the child.
//
// The child runs to its end within the parent's task: when the parent task
// is re-executed (after an interrupt or a crash), the child is replayed
// from its start, so its nodes should be deterministic.
func Subgraph[S, C any](child *Graph, in func(S) C, out func(parent S, child C) S) Node[S] {
	return &subgraphNode[S, C]{child: child, in: in, out: out}
}

type subgraphNode[S, C any] struct {
	child *Graph
	in    func(S) C
	out   func(S, C) S
}

// Describe implements Describer.
func (n *subgraphNode[S, C]) Describe() NodeInfo {
	return NodeInfo{Description: "subgraph " + n.child.name, Metadata: map[string]string{"subgraph": n.child.name}}
}

// Execute implements Node.
func (n *subgraphNode[S, C]) Execute(ctx context.Context, s S) (S, error) {
	var zero S
	tc := taskFrom(ctx)
	if tc == nil {
		return zero, fmt.Errorf("subgraph %q: not running as a task", n.child.name)
	}
	id := tc.info.RunID + "/" + tc.info.TaskID
	store := NewMemoryStore()
	sink := func(reason string) { RequestDrain(ctx, reason) }
	opts := func(more ...RunOption) []RunOption {
		return append([]RunOption{WithRunID(id), WithStore(store), func(c *runConfig) { c.drainSink = sink }}, more...)
	}
	res, err := n.child.Run(ctx, n.in(s), opts()...)
	for err == nil && res.Status == RunInterrupted {
		answers := make(map[string]any, len(res.Interrupts))
		for _, ci := range res.Interrupts {
			var v json.RawMessage
			if err := ask(ctx, ci.Value, ci.Type, ci.Error, func(raw json.RawMessage) error {
				v = raw
				return nil
			}); err != nil {
				return zero, err
			}
			answers[ci.ID] = v
		}
		res, err = n.child.Resume(ctx, id, opts(WithResumeByID(answers))...)
	}
	if err != nil {
		return zero, fmt.Errorf("subgraph %q: %w", n.child.name, err)
	}
	if res.Status != RunCompleted {
		if ctx.Err() != nil {
			return zero, ctx.Err()
		}
		return zero, fmt.Errorf("subgraph %q stopped as %s", n.child.name, res.Status)
	}
	var c C
	if err := res.Decode(&c); err != nil {
		return zero, fmt.Errorf("subgraph %q: decode its state: %w", n.child.name, err)
	}
	return n.out(s, c), nil
}
