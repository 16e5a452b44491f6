package pregel

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// What a node reads
//
// A node that declares its reads with [Reads] sees those channels and no
// other: its state, and that of its hooks, ShouldExecute and Validate,
// holds the declared channels, every other field is its zero value. Its
// routers and fan-outs see the declared reads and writes ([Writes]) with
// the node's writes applied. This holds in every runtime, embedded
// included, so a node that reads a channel it did not declare behaves in a
// test on SQLite exactly as on Lambda, where the tick loads only the
// channels its step reads ([Graph.StepReads]). A node that declares no
// reads sees the whole state, and a step with such a node loads it whole.
//
// Go cannot observe which fields a function reads, so an undeclared read
// itself is not detected while a run executes: it sees the zero value in
// every runtime. [CheckReads] detects it in tests. What is always
// detected: a task whose reads a runtime did not load fails with an error
// naming the node and the channel (never a stale or empty value), and
// Apply refuses to reduce into a channel that was not loaded.

// CheckReads makes a run check, for every task of a node that declares
// [Reads] and completes, that the node's writes do not depend on a channel
// it does not declare: the node runs again once for each undeclared
// channel that has a value, with that channel added to its state, and if
// its writes differ (or it fails) the task fails with an error naming the
// node and the channel. It is meant for tests of deterministic nodes: the
// node runs more than once, with its side effects (events it emits
// included), and a node whose writes vary from run to run (time, random
// numbers, a model) is reported although it reads nothing more. Routers
// are not checked.
func CheckReads() RunOption { return func(c *runConfig) { c.checkReads = true } }

type checkReadsKey struct{}

// checkingReads reports whether the run checks reads (CheckReads).
func checkingReads(ctx context.Context) bool {
	on, _ := ctx.Value(checkReadsKey{}).(bool)
	return on
}

// readsUndeclared returns the first channel outside view whose value
// changes the node's writes (or makes it fail), or "".
func (b *Builder[S]) readsUndeclared(ctx context.Context, tc *taskContext, n *node, impl Node[S], values map[string]json.RawMessage, view, declared []string, writes map[string]json.RawMessage) string {
	for _, c := range b.schema.names() {
		if slices.Contains(view, c) || len(values[c]) == 0 {
			continue
		}
		st, err := b.schema.decodeView(values, append(slices.Clone(view), c))
		if err != nil {
			return c
		}
		tc.newAttempt()
		up, err := b.attempt(ctx, n, impl, st, "node "+n.info.ID)
		if err != nil {
			return c
		}
		w, err := b.schema.encode(up, declared)
		if _, wrote := writes[c]; !wrote && string(w[c]) == string(values[c]) {
			delete(w, c) // the state passed back as it came
		}
		if err != nil || !maps.EqualFunc(w, writes, func(x, y json.RawMessage) bool { return string(x) == string(y) }) {
			return c
		}
	}
	return ""
}

// view returns the channels a node's state holds: its declared reads, or
// nil for the whole state.
func (n *node) view() []string {
	if len(n.info.Reads) == 0 {
		return nil
	}
	return n.info.Reads
}

// needs returns the channels a task of the node needs loaded (all: every
// channel): its reads, and, for its routers and fan-outs, the current
// values of the reducer channels it declares it writes.
func (g *Graph) needs(n *node) (channels []string, all bool) {
	if len(n.info.Reads) == 0 {
		return nil, true
	}
	out := slices.Clone(n.info.Reads)
	if len(g.routes[n.info.ID]) > 0 {
		for _, ch := range n.info.Writes {
			if !g.lastValue[ch] {
				out = append(out, ch)
			}
		}
	}
	return out, false
}

// StepReads returns the channels that the tasks of the step after cp, and
// their routers and fan-outs, read: the union of their nodes' [Reads]
// (and of the reducer channels written by those with routers), sorted.
// all is true when some task's node declares no reads, or has no node:
// the step reads the whole state. A runtime may load only these channels
// of cp before executing the step's tasks (see [Checkpoint.Unloaded]).
func (g *Graph) StepReads(cp *Checkpoint) (channels []string, all bool) {
	set := map[string]bool{}
	for _, t := range cp.Next {
		n := g.nodes[t.Node]
		if n == nil {
			return nil, true
		}
		chs, all := g.needs(n)
		if all {
			return nil, true
		}
		for _, ch := range chs {
			set[ch] = true
		}
	}
	return slices.Sorted(maps.Keys(set)), false
}

// ApplyReads returns the channels that Apply needs loaded, beyond those
// the step's tasks read, to apply results to cp: the reducer channels
// that the results write and cp did not load. A last-value write needs
// nothing: it replaces the value.
func (g *Graph) ApplyReads(cp *Checkpoint, results []TaskResult) []string {
	if len(cp.Unloaded) == 0 {
		return nil
	}
	set := map[string]bool{}
	for _, r := range results {
		if r.Status != NodeCompleted {
			continue
		}
		for ch := range r.Writes {
			if cp.Unloaded[ch] && !g.lastValue[ch] {
				set[ch] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// ExecuteFrom is [Graph.Execute] on the values of cp, which may be loaded
// in part (see [Checkpoint.Unloaded]): a task whose node needs a channel
// that cp did not load fails, with an error naming the node and the
// channel, instead of running on an empty value.
func (g *Graph) ExecuteFrom(ctx context.Context, t Task, cp *Checkpoint, resume map[string]json.RawMessage) TaskResult {
	if n := g.nodes[t.Node()]; n != nil && len(cp.Unloaded) > 0 {
		chs, all := g.needs(n)
		if all {
			chs = g.channels
		}
		for _, ch := range chs {
			if cp.Unloaded[ch] {
				return TaskResult{TaskID: t.ID, Node: t.Node(), Status: NodeFailed, Error: fmt.Sprintf("node %q reads channel %q, which was not loaded for step %d of run %q; the runtime must load what Graph.StepReads lists", t.Node(), ch, t.Step, t.RunID)}
			}
		}
	}
	return g.Execute(ctx, t, cp.Values, resume)
}

// decodeView builds the state a node sees from values: only the channels
// in view, or all when view is nil.
func (s *schema[S]) decodeView(values map[string]json.RawMessage, view []string) (S, error) {
	if view == nil {
		return s.decode(values)
	}
	sub := make(map[string]json.RawMessage, len(view))
	for _, ch := range view {
		if v, ok := values[ch]; ok {
			sub[ch] = v
		}
	}
	return s.decode(sub)
}

// restrict returns the entries of m whose keys are in keep (m itself when
// keep is nil).
func restrict(m map[string]json.RawMessage, keep []string) map[string]json.RawMessage {
	if keep == nil || m == nil {
		return m
	}
	out := make(map[string]json.RawMessage, len(keep))
	for _, k := range keep {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	return out
}
