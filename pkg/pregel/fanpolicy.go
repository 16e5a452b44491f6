package pregel

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
)

// Completion policies of a fan-out.
//
// A fan-out ([Builder.AddFanOut]) plans one task of its target per item;
// without a policy every task must end, and one failed task fails the run
// (or goes to the target's error handler). A completion policy changes
// that for the tasks of one fan-out (the items one task of the source
// produced, called the fan-out's group below):
//
//   - [ToleratedFailures] and [ToleratedFailurePercent] let some items
//     fail: a failed item within the tolerance keeps its status (failed)
//     and its error, counts as failed, and does not fail the run; what
//     follows the target (edges, joins) still fires, as after a skipped
//     task. Percent p of n items tolerates floor(p*n/100) failures; with
//     both given, the lower bound applies. Once more items failed than
//     tolerated, the fan-out fails: the run fails with an error naming the
//     fan-out (or, when the target has an error handler, the failed items
//     beyond the tolerance go to it).
//   - [MinSuccesses] completes the fan-out once that many items completed:
//     the items without a result then are cancelled (status cancelled,
//     the reason naming the fan-out) and the step commits. Without a
//     tolerance, failures are tolerated as long as the minimum can still
//     be reached (n - min of them).
//   - [FanOutOutcomes] writes, when the fan-out's step commits, one
//     [ItemOutcome] per item (its index, item, status, reason and error)
//     to a channel, which the join after the target reads to know which
//     items succeeded.
//
// The policy is judged, in [Graph.Apply], from the results present: it is
// the same on every runtime. Only a minimum reached ends a fan-out before
// all its items have a result (too many failures fail it once all have
// one, so that every runtime counts the same tasks). The embedded engine
// stops starting the group's tasks, and cancels the context of those
// running, once the minimum is reached;
// the serverless tick path commits the step as soon as the results
// recorded decide it (see pkg/tick) and discards results recorded later.
// A task that finished before it saw the cancellation keeps its result:
// a fan-out may end with more successes than its minimum.
//
// Bad policies are refused: a percent outside 0..100, a negative count or
// minimum at Compile; a minimum larger than the items a fan-out produces
// when its step plans them (a run failure naming the fan-out), or at
// Compile for a fan-out over fixed items ([Builder.AddFanOutOver]).

// ToleratedFailures lets up to n items of a fan-out fail without failing
// it. n must be 0 or more.
func ToleratedFailures(n int) FanOutOption {
	return func(o *fanOutOptions) { o.tolerate, o.tolerateSet = n, true }
}

// ToleratedFailurePercent lets up to pct percent of a fan-out's items
// (rounded down) fail without failing it. pct must be within 0..100.
func ToleratedFailurePercent(pct float64) FanOutOption {
	return func(o *fanOutOptions) { o.tolPct, o.tolPctSet = pct, true }
}

// MinSuccesses completes a fan-out once n of its items completed; the
// items without a result then are cancelled. n must be 1 or more and at
// most the number of items.
func MinSuccesses(n int) FanOutOption {
	return func(o *fanOutOptions) { o.min, o.minSet = n, true }
}

// FanOutOutcomes writes the outcome of each item of the fan-out
// ([]ItemOutcome, in item order) to channel when the fan-out's step
// commits. The channel must be a field of the state of type
// []pregel.ItemOutcome without a reducer: each fan-out replaces it.
func FanOutOutcomes(channel string) FanOutOption {
	return func(o *fanOutOptions) { o.outcomes = channel }
}

// ItemOutcome is what happened to one item of a fan-out with
// [FanOutOutcomes].
type ItemOutcome struct {
	// Index is the item's position among the fan-out's items.
	Index  int             `json:"index"`
	TaskID string          `json:"task_id"`
	Item   json.RawMessage `json:"item,omitempty"`
	Status NodeStatus      `json:"status"`
	Reason string          `json:"reason,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// Succeeded reports whether the item's task completed.
func (o ItemOutcome) Succeeded() bool { return o.Status == NodeCompleted }

// fanPolicy is the compiled completion policy of one fan-out.
type fanPolicy struct {
	from, to    string
	tolerate    int     // -1: not set
	tolPct      float64 // -1: not set
	min         int     // 0: not set
	tolSet      bool    // ToleratedFailures given
	pctSet      bool    // ToleratedFailurePercent given
	minSet      bool    // MinSuccesses given
	outcomes    string  // channel, "" when none
	staticItems int     // -1: items not fixed
}

// policy returns the fan-out's compiled policy, nil when it has none.
func (f *builderFanOut[S]) policy() *fanPolicy {
	o := f.opts
	if !o.tolerateSet && !o.tolPctSet && !o.minSet && o.outcomes == "" {
		return nil
	}
	p := &fanPolicy{from: f.from, to: f.to, tolerate: -1, tolPct: -1, outcomes: o.outcomes, staticItems: -1}
	p.tolSet, p.pctSet, p.minSet = o.tolerateSet, o.tolPctSet, o.minSet
	if o.tolerateSet {
		p.tolerate = o.tolerate
	}
	if o.tolPctSet {
		p.tolPct = o.tolPct
	}
	if o.minSet {
		p.min = o.min
	}
	if f.static != nil {
		p.staticItems = len(f.static)
	}
	return p
}

// check reports what is wrong with the policy, for Compile.
func (p *fanPolicy) check(lastValue map[string]bool) []error {
	var errs []error
	where := fmt.Sprintf("fan-out %s -> %s", p.from, p.to)
	if p.tolSet && p.tolerate < 0 {
		errs = append(errs, fmt.Errorf("%s: ToleratedFailures(%d) is negative; give 0 or more", where, p.tolerate))
	}
	if p.pctSet && !(p.tolPct >= 0 && p.tolPct <= 100) {
		errs = append(errs, fmt.Errorf("%s: ToleratedFailurePercent(%g) is outside 0..100", where, p.tolPct))
	}
	if p.minSet && p.min < 1 {
		errs = append(errs, fmt.Errorf("%s: MinSuccesses(%d) must be 1 or more", where, p.min))
	}
	if p.staticItems >= 0 && p.min > p.staticItems {
		errs = append(errs, fmt.Errorf("%s: MinSuccesses(%d) is more than its %d items", where, p.min, p.staticItems))
	}
	if ch := p.outcomes; ch != "" {
		v, ok := lastValue[ch]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%s: FanOutOutcomes names channel %q, which the state does not have", where, ch))
		case !v:
			errs = append(errs, fmt.Errorf("%s: FanOutOutcomes channel %q has a reducer; the outcomes replace its value, so it must have none", where, ch))
		}
	}
	return errs
}

// tolerated is how many of n items may fail.
func (p *fanPolicy) tolerated(n int) int {
	t := math.MaxInt
	if p.tolerate >= 0 {
		t = p.tolerate
	}
	if p.tolPct >= 0 {
		t = min(t, int(math.Floor(p.tolPct*float64(n)/100+1e-9)))
	}
	if t == math.MaxInt {
		if p.min > 0 {
			return n - p.min
		}
		return 0
	}
	return t
}

// limited reports whether the policy changes how failures count.
func (p *fanPolicy) limited() bool { return p.tolerate >= 0 || p.tolPct >= 0 || p.min > 0 }

// fanKey names a fan-out by its source and target.
func fanKey(from, to string) string { return from + "\x00" + to }

// fanGroup is the tasks of one step planned by one fan-out with a policy
// from one task of its source.
type fanGroup struct {
	policy *fanPolicy
	tasks  []int // indexes in the step's plan, in order
}

// fanGroups lists the step's fan-out groups with a policy; nil when none.
func (g *Graph) fanGroups(tasks []Task) []fanGroup {
	if len(g.fanPolicies) == 0 {
		return nil
	}
	var groups []fanGroup
	byKey := map[string]int{}
	for i, t := range tasks {
		tr := t.Trigger
		if tr.Fan == "" || !tr.Send || len(tr.From) == 0 {
			continue
		}
		p := g.fanPolicies[fanKey(tr.From[0], tr.Node)]
		if p == nil {
			continue
		}
		k := tr.Fan + "\x00" + tr.Node
		j, ok := byKey[k]
		if !ok {
			j = len(groups)
			byKey[k] = j
			groups = append(groups, fanGroup{policy: p})
		}
		groups[j].tasks = append(groups[j].tasks, i)
	}
	return groups
}

// fanVerdict is where a fan-out group stands given the results present.
type fanVerdict struct {
	succeeded, failed, tolerated int
	// reached: the minimum of successes is reached. over: more items
	// failed than tolerated.
	reached, over bool
}

// decided reports whether the fan-out may end before all its items have
// a result: its minimum is reached. Failures beyond the tolerance fail it
// only once every item has a result, so that every runtime counts the
// same tasks whatever order results come in.
func (v fanVerdict) decided() bool { return v.reached }

func (gr fanGroup) verdict(result func(i int) (TaskResult, bool)) fanVerdict {
	v := fanVerdict{tolerated: gr.policy.tolerated(len(gr.tasks))}
	for _, i := range gr.tasks {
		r, ok := result(i)
		if !ok {
			continue
		}
		switch r.Status {
		case NodeCompleted:
			v.succeeded++
		case NodeFailed:
			v.failed++
		}
	}
	v.reached = gr.policy.min > 0 && v.succeeded >= gr.policy.min
	v.over = gr.policy.limited() && v.failed > v.tolerated
	return v
}

// cancelReason is the reason given to the items a decided fan-out
// cancels.
func (gr fanGroup) cancelReason(fanVerdict) string {
	return fmt.Sprintf("fan-out from %s reached its minimum of %d successful items", gr.policy.from, gr.policy.min)
}

// overMessage is added to the error of an item that fails the fan-out.
func (gr fanGroup) overMessage(v fanVerdict) string {
	return fmt.Sprintf("fan-out from %s to %s: %d of %d items failed, more than the %d tolerated", gr.policy.from, gr.policy.to, v.failed, len(gr.tasks), v.tolerated)
}

// StepSettled reports whether the step of tasks can be applied with the
// results in settled (by task id): every task has one, or belongs to a
// fan-out whose minimum of successes ([MinSuccesses]) is reached, whose tasks
// without a result [Graph.Apply] cancels. Runtimes that record results
// apart (pkg/tick) call it to commit a step as soon as it may be.
func (g *Graph) StepSettled(tasks []Task, settled map[string]TaskResult) bool {
	var groups []fanGroup
	var decided map[int]bool
	for i, t := range tasks {
		if _, ok := settled[t.ID]; ok {
			continue
		}
		if groups == nil {
			groups = g.fanGroups(tasks)
			if len(groups) == 0 {
				return false
			}
			decided = map[int]bool{}
			for _, gr := range groups {
				if gr.verdict(func(i int) (TaskResult, bool) { r, ok := settled[tasks[i].ID]; return r, ok }).decided() {
					for _, j := range gr.tasks {
						decided[j] = true
					}
				}
			}
		}
		if !decided[i] {
			return false
		}
	}
	return true
}

// FanOutMinimum returns, for a task of a fan-out with [MinSuccesses], the
// minimum (0 for any other task): the serverless runtime counts the
// successes of such a step to commit it once the minimum may be reached.
func (g *Graph) FanOutMinimum(t Task) int {
	if t.Trigger.Fan == "" || len(t.Trigger.From) == 0 {
		return 0
	}
	if p := g.fanPolicies[fanKey(t.Trigger.From[0], t.Node())]; p != nil {
		return p.min
	}
	return 0
}

// fanStep is what the completion policies of a step's fan-outs decided.
type fanStep struct {
	groups []fanGroup
	// tolerated holds the plan indexes of failed tasks within their
	// fan-out's tolerance; over, those of failed tasks of a fan-out that
	// failed, with what to add to their error.
	tolerated map[int]bool
	over      map[int]string
}

// settleFanOuts applies the completion policies of the step's fan-outs to
// its results (byID, which it may extend): the tasks of a decided group
// without a final result get a cancelled one. Nil when the step has no
// fan-out with a policy.
func (g *Graph) settleFanOuts(tasks []Task, byID map[string]*TaskResult) *fanStep {
	groups := g.fanGroups(tasks)
	if len(groups) == 0 {
		return nil
	}
	fs := &fanStep{groups: groups, tolerated: map[int]bool{}, over: map[int]string{}}
	for _, gr := range groups {
		v := gr.verdict(func(i int) (TaskResult, bool) {
			r := byID[tasks[i].ID]
			if r == nil || !r.Final() {
				return TaskResult{}, false
			}
			return *r, true
		})
		if v.decided() {
			reason := gr.cancelReason(v)
			for _, i := range gr.tasks {
				t := tasks[i]
				if r := byID[t.ID]; r == nil || !r.Final() {
					byID[t.ID] = &TaskResult{TaskID: t.ID, Node: t.Node(), Status: NodeCancelled, Reason: reason}
				}
			}
		}
		if !gr.policy.limited() {
			continue
		}
		for _, i := range gr.tasks {
			if r := byID[tasks[i].ID]; r != nil && r.Status == NodeFailed {
				if v.over {
					fs.over[i] = gr.overMessage(v)
				} else {
					fs.tolerated[i] = true
				}
			}
		}
	}
	return fs
}

// fanOutcomes returns the outcomes of the step's groups with an outcomes
// channel, by channel, in plan order.
func fanOutcomes(groups []fanGroup, tasks []Task, ordered []*TaskResult) (map[string][]ItemOutcome, []string) {
	var out map[string][]ItemOutcome
	var chans []string
	for _, gr := range groups {
		ch := gr.policy.outcomes
		if ch == "" {
			continue
		}
		if out == nil {
			out = map[string][]ItemOutcome{}
		}
		if _, ok := out[ch]; !ok {
			chans = append(chans, ch)
			out[ch] = []ItemOutcome{}
		}
		for k, i := range gr.tasks {
			r := ordered[i]
			out[ch] = append(out[ch], ItemOutcome{Index: k, TaskID: tasks[i].ID, Item: tasks[i].Trigger.Arg, Status: r.Status, Reason: r.Reason, Error: r.Error})
		}
	}
	slices.Sort(chans)
	return out, chans
}

// fanItemsError is the error of a fan-out whose items cannot meet its
// minimum.
func fanItemsError(p *fanPolicy, n int) error {
	items := "items"
	if n == 1 {
		items = "item"
	}
	return fmt.Errorf("fan-out from %q to %q produced %d %s, fewer than its MinSuccesses(%d); lower the minimum or produce more items", p.from, p.to, n, items, p.min)
}

// writeOutcomes writes the outcomes of the step's fan-outs with an
// outcomes channel into next (a last-value channel: the value is
// replaced).
func (g *Graph) writeOutcomes(cp, next *Checkpoint, fan *fanStep, tasks []Task, ordered []*TaskResult, written map[string]string, copied, unloadedCopied *bool) error {
	outs, chans := fanOutcomes(fan.groups, tasks, ordered)
	for _, ch := range chans {
		if other, dup := written[ch]; dup {
			return fmt.Errorf("%w: channel %q holds the outcomes of a fan-out and was written by node %q in step %d; let the outcomes have their own channel", ErrWriteConflict, ch, other, next.Step)
		}
		raw, err := json.Marshal(outs[ch])
		if err != nil {
			return fmt.Errorf("pregel: encode the outcomes of channel %q: %w", ch, err)
		}
		if !*copied {
			next.Values, next.Versions, *copied = maps.Clone(cp.Values), maps.Clone(cp.Versions), true
			if next.Values == nil {
				next.Values, next.Versions = map[string]json.RawMessage{}, map[string]int{}
			}
		}
		if next.Unloaded[ch] {
			if !*unloadedCopied {
				next.Unloaded, *unloadedCopied = maps.Clone(next.Unloaded), true
			}
			delete(next.Unloaded, ch)
		}
		next.Values[ch], next.Versions[ch] = raw, next.Step
	}
	return nil
}
