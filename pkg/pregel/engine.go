package pregel

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"
)

// Errors of runs.
var (
	// ErrInvalidInput is wrapped when a run's input is rejected.
	ErrInvalidInput = errors.New("pregel: invalid input")
	// ErrStepLimit is wrapped when a run reaches its superstep limit.
	ErrStepLimit = errors.New("pregel: superstep limit reached")
	// ErrWriteConflict is wrapped when two tasks of one superstep write a
	// channel that has no reducer.
	ErrWriteConflict = errors.New("pregel: conflicting writes")
	// ErrInvalidResume is wrapped when resume values do not match the
	// run's pending interrupts.
	ErrInvalidResume = errors.New("pregel: invalid resume")
)

// NodeError reports the node that failed a run.
type NodeError struct {
	Node     string
	TaskID   string
	Step     int
	Attempts int
	Message  string
}

// Error names the node, the step, the attempts and the failure.
func (e *NodeError) Error() string {
	return fmt.Sprintf("node %q failed in step %d after %d attempt(s): %s", e.Node, e.Step, e.Attempts, e.Message)
}

// Start builds the step 0 checkpoint of a run from its input, a JSON object
// of channel values. Input that names no channel of the state or does not
// fit it is rejected with an error wrapping ErrInvalidInput.
func (g *Graph) Start(ctx context.Context, runID string, input json.RawMessage) (*Checkpoint, error) {
	return g.Continue(ctx, runID, nil, input)
}

// Plan returns the tasks of the superstep after cp, in the order their
// results will be applied. Task ids are derived from the run, step, node
// and trigger, so planning the same checkpoint always gives the same ids.
func (g *Graph) Plan(cp *Checkpoint) []Task {
	step := cp.Step + 1
	tasks := make([]Task, len(cp.Next))
	for i, tr := range cp.Next {
		tasks[i] = Task{ID: taskID(cp.RunID, step, i, tr), RunID: cp.RunID, Step: step, Index: i, Trigger: tr}
	}
	return tasks
}

func taskID(runID string, step, index int, tr Trigger) string {
	h := sha256.New()
	var buf [20]byte
	h.Write([]byte(runID))
	h.Write([]byte{0})
	h.Write(strconv.AppendInt(buf[:0], int64(step), 10))
	h.Write([]byte{0})
	h.Write([]byte(tr.Node))
	h.Write([]byte{0})
	h.Write(strconv.AppendInt(buf[:0], int64(index), 10))
	if tr.Send {
		h.Write([]byte{1})
		h.Write(tr.Arg)
	}
	if tr.Failure != nil {
		h.Write([]byte{2})
		h.Write([]byte(tr.Failure.Node))
	}
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0])[:12])
}

// Execute runs one task against a snapshot of the state (the Values of the
// checkpoint it was planned from) and returns its result. resume holds
// values for the task's interrupts, by interrupt id; it may be nil. Execute
// records nothing; node failures are reported in the result, not as errors.
func (g *Graph) Execute(ctx context.Context, t Task, values map[string]json.RawMessage, resume map[string]json.RawMessage) TaskResult {
	res, _ := g.execute(ctx, t, values, resume)
	return res
}

func (g *Graph) execute(ctx context.Context, t Task, values map[string]json.RawMessage, resume map[string]json.RawMessage) (TaskResult, *taskContext) {
	start := time.Now().UTC()
	n := g.nodes[g.resolve(t.Node())]
	tc := &taskContext{info: TaskInfo{RunID: t.RunID, Step: t.Step, TaskID: t.ID, Node: t.Node()}, trigger: t.Trigger, resume: resume, sink: sinkFrom(ctx)}
	if n == nil {
		return TaskResult{TaskID: t.ID, Node: t.Node(), Status: NodeFailed, Error: fmt.Sprintf("graph %q has no node %q", g.name, t.Node()), Started: start, Finished: start}, tc
	}
	res := n.run(withTask(ctx, tc), tc, values)
	res.Started, res.Finished = start, time.Now().UTC()
	res.DrainRequest = tc.drainRequest()
	if len(resume) > 0 && res.Status == NodeInterrupted {
		res.Resume = resume
		for _, in := range res.Interrupts {
			if _, asked := resume[in.ID]; asked { // its answer was refused
				res.Resume = maps.Clone(resume)
				delete(res.Resume, in.ID)
			}
		}
	}
	return res, tc
}

// Outcome is the result of applying a superstep.
type Outcome struct {
	// Status is RunRunning or RunCompleted when the step can be
	// committed (Checkpoint is then set), RunInterrupted when a task
	// waits for a value, RunFailed when the run fails (Err says why).
	Status     RunStatus
	Checkpoint *Checkpoint
	Interrupts []InterruptInfo
	// Counters are the run's counters after the step: those of
	// Checkpoint when it is set; when the run fails, those of the last
	// committed step plus the tasks of the failed step, the task that
	// failed the run counted as failed; when it is interrupted, those of
	// the last committed step.
	Counters Counters
	Err      error
}

// failed is the outcome of a step that fails the run: the counters count
// the step's tasks, the one at index culprit (if any) as failed.
func failed(cp *Checkpoint, tasks []Task, byID map[string]*TaskResult, culprit int, err error) Outcome {
	c := cp.Counters
	for i, t := range tasks {
		switch r := byID[t.ID]; {
		case i == culprit:
			c.add(NodeFailed)
		case r != nil:
			c.add(r.Status)
		}
	}
	return Outcome{Status: RunFailed, Counters: c, Err: err}
}

// Apply combines the results of the tasks planned from cp into the next
// checkpoint. Results are applied in plan order whatever order they came
// in, so concurrency never changes the outcome. It returns an error only
// when results are missing or do not belong to tasks.
func (g *Graph) Apply(cp *Checkpoint, tasks []Task, results []TaskResult) (Outcome, error) {
	byID := make(map[string]*TaskResult, len(results))
	for i := range results {
		byID[results[i].TaskID] = &results[i]
	}
	ordered := make([]*TaskResult, len(tasks))
	var interrupts []InterruptInfo
	fan := g.settleFanOuts(tasks, byID) // completion policies (fanpolicy.go)
	for i, t := range tasks {
		r := byID[t.ID]
		if r == nil {
			return Outcome{}, fmt.Errorf("pregel: apply step %d of run %q: no result for task %s (node %q)", t.Step, t.RunID, t.ID, t.Node())
		}
		ordered[i] = r
		switch r.Status {
		case NodeFailed:
			if fan != nil && fan.tolerated[i] {
				break
			}
			if n := g.nodes[g.resolve(t.Node())]; n == nil || n.onError == "" {
				msg := r.Error
				if fan != nil && fan.over[i] != "" {
					msg += " (" + fan.over[i] + ")"
				}
				return failed(cp, tasks, byID, i, &NodeError{Node: t.Node(), TaskID: t.ID, Step: t.Step, Attempts: r.Attempts, Message: msg}), nil
			}
		case NodeInterrupted:
			interrupts = append(interrupts, r.Interrupts...)
		case NodeCompleted, NodeSkipped, NodeCancelled:
		default:
			return Outcome{}, fmt.Errorf("pregel: apply step %d of run %q: task %s has status %q", t.Step, t.RunID, t.ID, r.Status)
		}
	}
	if len(interrupts) > 0 {
		return Outcome{Status: RunInterrupted, Interrupts: interrupts, Counters: cp.Counters}, nil
	}

	step := cp.Step + 1
	next := &Checkpoint{
		RunID: cp.RunID, Graph: cp.Graph, Step: step,
		Values: cp.Values, Versions: cp.Versions, Barriers: cp.Barriers,
		Counters: cp.Counters, Tasks: make([]TaskStatus, 0, len(tasks)),
		Unloaded: cp.Unloaded, Stamp: g.stamp,
	}
	unloadedCopied := false
	written := make(map[string]string) // last-value channel -> node
	copied := false
	frontier := newFrontier()
	barriersCopied := false
	for i, t := range tasks {
		r := ordered[i]
		next.Tasks = append(next.Tasks, TaskStatus{TaskID: t.ID, Node: t.Node(), Status: r.Status, Reason: r.Reason, Attempts: r.Attempts, Error: r.Error, Started: r.Started, Finished: r.Finished})
		next.Counters.add(r.Status)
		if next.DrainRequest == "" {
			next.DrainRequest = r.DrainRequest
		}
		from := g.resolve(t.Node())
		switch r.Status {
		case NodeCancelled:
			continue
		case NodeFailed: // routed to its handler (checked above)
			if fan != nil && fan.tolerated[i] {
				break // tolerated: what follows fires, as after a skip
			}
			frontier.add(Trigger{Node: g.nodes[from].onError, From: []string{from}, Failure: &Failure{Node: from, Attempts: r.Attempts, Error: r.Error}})
			continue
		}
		for _, ch := range sortedKeys(r.Writes) {
			if !slices.Contains(g.channels, ch) {
				return failed(cp, tasks, byID, i, &NodeError{Node: from, TaskID: t.ID, Step: step, Attempts: r.Attempts, Message: fmt.Sprintf("wrote %q, which is not a channel of the state", ch)}), nil
			}
			if g.lastValue[ch] {
				if other, dup := written[ch]; dup {
					return failed(cp, tasks, byID, -1, fmt.Errorf("%w: channel %q was written by nodes %q and %q in step %d; give it a reducer (e.g. `reduce:\"append\"`) or let one node write it", ErrWriteConflict, ch, other, from, step)), nil
				}
				written[ch] = from
			}
			if !copied {
				next.Values, next.Versions, copied = maps.Clone(cp.Values), maps.Clone(cp.Versions), true
				if next.Values == nil {
					next.Values, next.Versions = map[string]json.RawMessage{}, map[string]int{}
				}
			}
			if next.Unloaded[ch] {
				if !g.lastValue[ch] {
					return Outcome{}, fmt.Errorf("pregel: apply step %d of run %q: channel %q, which task %s (node %q) writes, was not loaded; load the channels Graph.ApplyReads lists first", step, cp.RunID, ch, t.ID, from)
				}
				if !unloadedCopied {
					next.Unloaded, unloadedCopied = maps.Clone(next.Unloaded), true
				}
				delete(next.Unloaded, ch) // the write replaces the value
			}
			v, err := g.reduceOne(ch, next.Values[ch], r.Writes[ch])
			if err != nil {
				return failed(cp, tasks, byID, i, &NodeError{Node: from, TaskID: t.ID, Step: step, Attempts: r.Attempts, Message: fmt.Sprintf("channel %q: %v", ch, err)}), nil
			}
			if v == nil { // an empty update of a channel that has no value
				continue
			}
			next.Values[ch], next.Versions[ch] = v, step
		}
		for _, to := range g.edges[from] {
			frontier.edge(to, from)
		}
		for _, tr := range r.Routes {
			frontier.add(tr)
		}
		for _, ji := range g.joinsOf[from] {
			j := g.joins[ji]
			if !barriersCopied {
				next.Barriers, barriersCopied = make(map[string][]string, len(cp.Barriers)+1), true
				for k, v := range cp.Barriers {
					next.Barriers[k] = slices.Clone(v)
				}
			}
			key := joinKey(ji, j.To)
			if !slices.Contains(next.Barriers[key], from) {
				next.Barriers[key] = append(next.Barriers[key], from)
			}
			if len(next.Barriers[key]) == len(j.From) {
				frontier.edge(j.To, next.Barriers[key]...)
				delete(next.Barriers, key)
			}
		}
	}
	if fan != nil {
		if err := g.writeOutcomes(cp, next, fan, tasks, ordered, written, &copied, &unloadedCopied); err != nil {
			return failed(cp, tasks, byID, -1, err), nil
		}
	}
	if barriersCopied && len(next.Barriers) == 0 {
		next.Barriers = nil
	}
	next.Next = frontier.list
	next.layouts = g.segmentLayouts(cp, next)
	status := RunRunning
	if next.Done() {
		status = RunCompleted
	}
	return Outcome{Status: status, Checkpoint: next, Counters: next.Counters}, nil
}

func joinKey(i int, to string) string { return strconv.Itoa(i) + ":" + to }

// frontier collects the triggers of the next step: one per edge-triggered
// node, one per fan-out item or failure.
type frontier struct {
	list   []Trigger
	byNode map[string]int
}

func newFrontier() *frontier { return &frontier{} }

func (f *frontier) edge(to string, from ...string) {
	f.add(Trigger{Node: to, From: from})
}

func (f *frontier) add(t Trigger) {
	if t.Send || t.Failure != nil {
		f.list = append(f.list, t)
		return
	}
	i := -1
	if f.byNode != nil {
		if j, ok := f.byNode[t.Node]; ok {
			i = j
		}
	} else {
		for j := range f.list {
			if l := &f.list[j]; !l.Send && l.Failure == nil && l.Node == t.Node {
				i = j
				break
			}
		}
	}
	if i >= 0 {
		for _, p := range t.From {
			if !slices.Contains(f.list[i].From, p) {
				// Clip: never append into a slice the trigger may share.
				f.list[i].From = append(slices.Clip(f.list[i].From), p)
			}
		}
		return
	}
	if f.byNode == nil && len(f.list) >= 16 {
		f.byNode = make(map[string]int, 2*len(f.list))
		for j, l := range f.list {
			if !l.Send && l.Failure == nil {
				f.byNode[l.Node] = j
			}
		}
	}
	if f.byNode != nil {
		f.byNode[t.Node] = len(f.list)
	}
	f.list = append(f.list, t)
}

// reduceOne returns the value of channel ch after update. It returns nil,
// meaning the channel keeps having no value, when a reducer leaves a
// channel without a value as it was (an empty append, merge or sum update
// of a channel nobody has written yet).
func (g *Graph) reduceOne(ch string, cur, update json.RawMessage) (json.RawMessage, error) {
	if r := g.reducers[ch]; r != nil {
		v, err := r(cur, update)
		if err != nil || len(bytes.TrimSpace(v)) == 0 {
			return nil, err
		}
		return v, nil
	}
	if !json.Valid(update) {
		return nil, errors.New("value is not valid JSON")
	}
	return update, nil
}

// sortedKeys returns the channels of writes in order, without sorting the
// common single write.
func sortedKeys(writes map[string]json.RawMessage) []string {
	if len(writes) == 1 {
		for k := range writes {
			return []string{k}
		}
	}
	return slices.Sorted(maps.Keys(writes))
}
