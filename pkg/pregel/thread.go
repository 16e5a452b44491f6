package pregel

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Inherited is the version of a channel whose value a run took from the
// state it started from (see [Graph.Continue]) and has not written since.
// It is below every step of the run, so [Checkpoint.Changed] never lists
// such a channel and a store need not write its value again: the value
// stays where the earlier run stored it.
const Inherited = -1

// StepRef names a committed step of a run: the step a run continues from
// (a thread's head, a fork's base) when a store keeps a continuing run's
// inherited channels where the earlier run stored them.
type StepRef struct {
	RunID string `json:"run_id"`
	Step  int    `json:"step"`
}

// Continue builds the step 0 checkpoint of a run that continues from state,
// the channel values of an earlier checkpoint (a conversation's latest
// state), with input, a JSON object of channel values, applied through the
// channels' reducers: an append channel grows, a last-value channel is
// replaced. Channels of state that input does not write keep their value
// with version Inherited; channels it writes get version 0. Channels of
// state the graph does not know are kept as they are.
//
// The graph's input validation (Builder.ValidateInput) sees the input as
// the caller sent it, each channel's value applied to an empty channel, not
// the state it continues: a graph whose input check refuses output channels
// works on a thread as it does alone. Its routers from Start see the
// combined state. Input that names no channel of the graph or does not fit it is
// rejected with an error wrapping ErrInvalidInput. [Graph.Start] is
// Continue from no state.
func (g *Graph) Continue(ctx context.Context, runID string, state map[string]json.RawMessage, input json.RawMessage) (*Checkpoint, error) {
	return g.continueFrom(ctx, runID, state, nil, input)
}

// ContinueFrom is [Graph.Continue] from the values of base, a checkpoint
// loaded from a store (of this run's thread, say). Unlike Continue, it
// keeps what base knows of how its array channels are stored in segments
// (see [Builder.AppendReducer]): the new run inherits the segments, so its
// step 0 and its later steps store only what they add to a conversation,
// not the whole of it again. base may be nil: no state. A base written by
// another version of the graph (its Stamp) is adopted first (see
// [Graph.Adopt]); when it cannot be, the error wraps ErrIncompatible.
func (g *Graph) ContinueFrom(ctx context.Context, runID string, base *Checkpoint, input json.RawMessage) (*Checkpoint, error) {
	if base == nil {
		return g.continueFrom(ctx, runID, nil, nil, input)
	}
	if base.Stamp != nil && !g.Unchanged(*base.Stamp) {
		// base was written by other code: its state must fit this graph
		// (declared renames and a migration from its version applied),
		// as a resumed run's must. The new run starts from Start, so
		// what base planned next does not matter.
		b := *base
		b.Next, b.Barriers = nil, nil
		adopted, _, err := g.Adopt(ctx, *base.Stamp, &b, nil)
		if err != nil {
			return nil, err
		}
		base = adopted
	}
	return g.continueFrom(ctx, runID, base.Values, base.layouts, input)
}

func (g *Graph) continueFrom(ctx context.Context, runID string, state map[string]json.RawMessage, layouts map[string]layout, input json.RawMessage) (*Checkpoint, error) {
	if runID == "" {
		return nil, fmt.Errorf("%w: run id is empty", ErrInvalidInput)
	}
	var in map[string]json.RawMessage
	if len(bytes.TrimSpace(input)) > 0 {
		if err := json.Unmarshal(input, &in); err != nil {
			return nil, fmt.Errorf("%w: input must be a JSON object of channel values: %w", ErrInvalidInput, err)
		}
	}
	cp := &Checkpoint{RunID: runID, Graph: g.name, Values: make(map[string]json.RawMessage, len(state)+len(in)), Versions: make(map[string]int, len(state)+len(in)), Stamp: g.stamp}
	for ch, v := range state {
		cp.Values[ch], cp.Versions[ch] = v, Inherited
	}
	sent := make(map[string]json.RawMessage, len(in))
	for _, ch := range slices.Sorted(maps.Keys(in)) {
		if !slices.Contains(g.channels, ch) {
			return nil, fmt.Errorf("%w: %q is not a channel of graph %q; channels are %s", ErrInvalidInput, ch, g.name, strings.Join(g.channels, ", "))
		}
		if isNull(in[ch]) {
			continue
		}
		v, err := g.reduceOne(ch, state[ch], in[ch])
		if err != nil {
			return nil, fmt.Errorf("%w: channel %q: %w", ErrInvalidInput, ch, err)
		}
		if v == nil {
			continue // an empty update of a channel without a value leaves it without one
		}
		cp.Values[ch], cp.Versions[ch] = v, 0
		if state == nil {
			sent[ch] = v
		} else if alone, err := g.reduceOne(ch, nil, in[ch]); err != nil {
			return nil, fmt.Errorf("%w: channel %q: %w", ErrInvalidInput, ch, err)
		} else if alone != nil {
			sent[ch] = alone
		}
	}
	if err := g.checkInput(sent); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidInput, err)
	}
	next := newFrontier()
	for _, to := range g.edges[Start] {
		next.edge(to, Start)
	}
	if g.startRoutes != nil {
		ts, err := g.startRoutes(ctx, cp.Values)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidInput, err)
		}
		for _, t := range ts {
			next.add(t)
		}
	}
	cp.Next = next.list
	cp.layouts = g.inheritLayouts(cp, state, layouts)
	return cp, nil
}
