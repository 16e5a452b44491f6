package tick

import (
	"bytes"
	"slices"

	"github.com/superstep/superstep/pkg/pregel"
)

// planMemoFrom is the number of tasks from which a Handler remembers the
// step it planned last (see Handler.plan).
const planMemoFrom = 64

// planned is the tasks Plan returned for a step: its graph, run and
// checkpoint step, and a copy of the checkpoint's Next they were planned
// from.
type planned struct {
	g     *pregel.Graph
	runID string
	step  int
	next  []pregel.Trigger
	tasks []pregel.Task
	// remote counts the tasks node handlers execute (remoteTasks).
	remote int
}

// plan is g.Plan(cp) for a node task, remembered for the last step of at
// least planMemoFrom tasks planned: a node handler plans its task's whole
// step to find the task, O(n) work for a step of n tasks (a SHA-256 per
// task: 40 ms for 10,000 here), so that the n node tasks of a wide
// fan-out would do O(n²) work in all; an execution environment that
// handles many tasks of one step plans it once. The step is the one
// remembered only if its Next equals, trigger by trigger, the copy kept
// (a comparison, not a hash, per task). Callers must not modify the
// tasks returned.
func (h *Handler) plan(g *pregel.Graph, cp *pregel.Checkpoint) []pregel.Task {
	if p, _ := h.planned.Load().(*planned); p != nil && p.g == g && p.runID == cp.RunID && p.step == cp.Step && sameTriggers(p.next, cp.Next) {
		return p.tasks
	}
	tasks := g.Plan(cp)
	if len(tasks) >= planMemoFrom {
		h.planned.Store(&planned{g: g, runID: cp.RunID, step: cp.Step, next: cloneTriggers(cp.Next), tasks: slices.Clip(tasks), remote: remoteTasks(g, tasks)})
	}
	return tasks
}

// remoteTasks is remoteTasks(g, tasks), counted once for the tasks of the
// step plan remembers (the same slice): a node task of a wide step asks
// up to three times, a look-up of each task's node each time.
func (h *Handler) remoteTasks(g *pregel.Graph, tasks []pregel.Task) int {
	if p, _ := h.planned.Load().(*planned); p != nil && p.g == g && len(tasks) > 0 && len(p.tasks) == len(tasks) && &p.tasks[0] == &tasks[0] {
		return p.remote
	}
	return remoteTasks(g, tasks)
}

// sameTriggers reports whether a and b list the same triggers.
func sameTriggers(a, b []pregel.Trigger) bool {
	return slices.EqualFunc(a, b, func(x, y pregel.Trigger) bool {
		return x.Node == y.Node && x.Send == y.Send && x.Skip == y.Skip && x.Fan == y.Fan &&
			bytes.Equal(x.Arg, y.Arg) && slices.Equal(x.From, y.From) &&
			(x.Failure == nil) == (y.Failure == nil) && (x.Failure == nil || *x.Failure == *y.Failure)
	})
}

// cloneTriggers copies ts, with the slices and the failure each holds.
func cloneTriggers(ts []pregel.Trigger) []pregel.Trigger {
	out := make([]pregel.Trigger, len(ts))
	for i, t := range ts {
		t.Arg, t.From = bytes.Clone(t.Arg), slices.Clone(t.From)
		if t.Failure != nil {
			f := *t.Failure
			t.Failure = &f
		}
		out[i] = t
	}
	return out
}
