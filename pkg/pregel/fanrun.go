package pregel

import (
	"context"
	"sync"
)

// fanTracker follows the fan-outs with a completion policy while the
// embedded engine runs a step: once a fan-out is decided (its minimum of
// successes reached), its tasks not
// started are not started, and those running see their context cancelled.
// Apply then cancels the tasks left without a result (fanpolicy.go).
type fanTracker struct {
	mu      sync.Mutex
	tasks   []Task
	groups  []fanGroup
	groupOf map[int]int // plan index -> group
	final   map[int]TaskResult
	reasons []string // per group; set once decided
	ctxs    []context.Context
	cancels []context.CancelFunc
}

// newFanTracker returns a tracker for the step's fan-outs with a policy,
// nil when there are none. stop releases its contexts.
func (g *Graph) newFanTracker(ctx context.Context, tasks []Task) *fanTracker {
	groups := g.fanGroups(tasks)
	if len(groups) == 0 {
		return nil
	}
	f := &fanTracker{tasks: tasks, groups: groups, groupOf: map[int]int{}, final: map[int]TaskResult{},
		reasons: make([]string, len(groups)), ctxs: make([]context.Context, len(groups)), cancels: make([]context.CancelFunc, len(groups))}
	for k, gr := range groups {
		f.ctxs[k], f.cancels[k] = context.WithCancel(ctx)
		for _, i := range gr.tasks {
			f.groupOf[i] = k
		}
	}
	return f
}

func (f *fanTracker) stop() {
	for _, c := range f.cancels {
		c()
	}
}

// ctx is the context task i runs with.
func (f *fanTracker) ctx(i int, parent context.Context) context.Context {
	if k, ok := f.groupOf[i]; ok {
		return f.ctxs[k]
	}
	return parent
}

// cut returns, when task i belongs to a decided fan-out, the reason its
// tasks without a result are cancelled.
func (f *fanTracker) cut(i int) string {
	k, ok := f.groupOf[i]
	if !ok {
		return ""
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reasons[k]
}

// add notes the result of task i and decides its fan-out if it can.
func (f *fanTracker) add(i int, r TaskResult) {
	k, ok := f.groupOf[i]
	if !ok || !r.Final() {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.final[i] = r
	if f.reasons[k] != "" {
		return
	}
	gr := f.groups[k]
	v := gr.verdict(func(j int) (TaskResult, bool) { r, ok := f.final[j]; return r, ok })
	if v.decided() {
		f.reasons[k] = gr.cancelReason(v)
		f.cancels[k]()
	}
}
