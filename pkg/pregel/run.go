package pregel

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// RunOption configures Run and Resume.
type RunOption func(*runConfig)

type runConfig struct {
	runID     string
	store     Checkpointer
	control   *Control
	observer  Observer
	taskCtx   TaskContextFunc
	resumeAll json.RawMessage
	resumeIDs map[string]json.RawMessage
	resumeErr error
	drainSink func(reason string)
	// prior: see WithPrior.
	prior *Stamp
	// adopted receives what Adopt applied (see WithPrior).
	adopted func(applied []string)
	// checkReads: see CheckReads.
	checkReads bool
}

// WithPrior tells Resume which graph wrote the run's state (the stamp its
// record keeps) when its latest checkpoint has no Stamp (one stored before
// checkpoints kept it); the checkpoint's stamp wins otherwise. When it is
// not this graph, Resume adopts the state with Graph.Adopt before anything
// runs, and fails with an error wrapping ErrIncompatible when the run
// cannot continue here. applied, if not nil, receives what Adopt applied
// (renames, a migration), whichever stamp was used.
func WithPrior(s Stamp, applied func([]string)) RunOption {
	return func(c *runConfig) { c.prior, c.adopted = &s, applied }
}

// WithRunID sets the run's id (default: a random one).
func WithRunID(id string) RunOption { return func(c *runConfig) { c.runID = id } }

// WithStore sets where checkpoints go (default: a new MemoryStore).
func WithStore(s Checkpointer) RunOption { return func(c *runConfig) { c.store = s } }

// WithControl lets the caller drain or cancel the run.
func WithControl(ctl *Control) RunOption { return func(c *runConfig) { c.control = ctl } }

// WithObserver receives the run's events. Given more than once, every
// observer receives them, in the order given.
func WithObserver(o Observer) RunOption {
	return func(c *runConfig) {
		switch prev := c.observer; {
		case o == nil:
		case prev == nil:
			c.observer = o
		default:
			c.observer = func(ev Event) { prev(ev); o(ev) }
		}
	}
}

// TaskContextFunc derives the context a task's node runs with from the
// run's context, and returns a function to call with the task's result
// once it is recorded. Tracing uses it to run each node inside its span,
// so that spans and logs a node makes belong to it.
type TaskContextFunc func(ctx context.Context, t Task) (context.Context, func(TaskResult))

// WithTaskContext sets the function that derives each task's context (see
// [TaskContextFunc]). Without it, tasks run with the run's context.
func WithTaskContext(fn TaskContextFunc) RunOption { return func(c *runConfig) { c.taskCtx = fn } }

// WithResume answers every pending interrupt of the run with v.
func WithResume(v any) RunOption {
	return func(c *runConfig) {
		raw, err := json.Marshal(v)
		if err != nil {
			c.resumeErr = fmt.Errorf("%w: encode resume value: %w", ErrInvalidResume, err)
		}
		c.resumeAll = raw
	}
}

// WithResumeByID answers pending interrupts one by one, by interrupt id.
func WithResumeByID(values map[string]any) RunOption {
	return func(c *runConfig) {
		c.resumeIDs = make(map[string]json.RawMessage, len(values))
		for id, v := range values {
			raw, err := json.Marshal(v)
			if err != nil {
				c.resumeErr = fmt.Errorf("%w: encode resume value for %s: %w", ErrInvalidResume, id, err)
			}
			c.resumeIDs[id] = raw
		}
	}
}

// Result is where a run stands when Run or Resume returns.
type Result struct {
	RunID  string    `json:"run_id"`
	Graph  string    `json:"graph"`
	Status RunStatus `json:"status"`
	// Step is the last committed step.
	Step   int                        `json:"step"`
	Values map[string]json.RawMessage `json:"values"`
	// Counters count the run's node executions over its committed
	// steps; those of a failed run include the tasks of the step that
	// failed it, the culprit counted as failed.
	Counters Counters `json:"counters"`
	// Interrupts are pending when Status is RunInterrupted.
	Interrupts []InterruptInfo `json:"interrupts,omitempty"`
	// DrainReason is set when a drain was requested, even if the run
	// completed before it could drain.
	DrainReason string `json:"drain_reason,omitempty"`
	// Err says why a failed run failed.
	Err error `json:"-"`
}

// Decode stores the run's state in v, a pointer to the state struct.
func (r *Result) Decode(v any) error {
	raw, err := json.Marshal(r.Values)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, v)
}

func newConfig(opts []RunOption) *runConfig {
	c := &runConfig{}
	for _, o := range opts {
		o(c)
	}
	if c.store == nil {
		c.store = NewMemoryStore()
	}
	if c.control == nil {
		c.control = &Control{}
	}
	return c
}

// NewRunID returns a random run id.
func NewRunID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Run starts a run with input (a partial state S, or its JSON) and drives
// it until it completes, fails, is interrupted, drained or cancelled. The
// returned error is non-nil only when the run failed or could not be
// stored; the Result says where the run stands in every other case.
func (g *Graph) Run(ctx context.Context, input any, opts ...RunOption) (*Result, error) {
	cfg := newConfig(opts)
	if cfg.runID == "" {
		cfg.runID = NewRunID()
	}
	raw, err := g.inputJSON(input)
	if err != nil {
		return nil, err
	}
	cp, err := g.Start(ctx, cfg.runID, raw)
	if err != nil {
		return nil, err
	}
	if err := cfg.store.Commit(ctx, cp); err != nil {
		if errors.Is(err, ErrStepConflict) {
			return nil, fmt.Errorf("pregel: run %q already exists; resume it instead: %w", cfg.runID, err)
		}
		return nil, fmt.Errorf("pregel: store step 0 of run %q: %w", cfg.runID, err)
	}
	return g.drive(ctx, cfg, cp, nil)
}

// inputJSON encodes a run's input: JSON as is; a state value S as its
// non-zero fields, like a node's writes; anything else through
// encoding/json.
func (g *Graph) inputJSON(input any) (json.RawMessage, error) {
	switch v := input.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return v, nil
	case []byte:
		return v, nil
	}
	raw, typed, err := g.encodeInput(input)
	if !typed {
		raw, err = json.Marshal(input)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: encode input: %w", ErrInvalidInput, err)
	}
	return raw, nil
}

// Resume continues a run from its last committed step in the store given
// with WithStore: after a drain, a crash, or an interrupt (answered with
// WithResume or WithResumeByID). Tasks whose results were recorded are not
// run again.
func (g *Graph) Resume(ctx context.Context, runID string, opts ...RunOption) (*Result, error) {
	cfg := newConfig(opts)
	cfg.runID = runID
	if cfg.resumeErr != nil {
		return nil, cfg.resumeErr
	}
	cp, err := cfg.store.Load(ctx, runID, Latest)
	if err != nil {
		return nil, fmt.Errorf("pregel: resume run %q: %w", runID, err)
	}
	if cp.Graph != g.name {
		return nil, fmt.Errorf("pregel: run %q belongs to graph %q, not %q", runID, cp.Graph, g.name)
	}
	pending, err := cfg.store.PendingTasks(ctx, runID, cp.Step+1)
	if err != nil {
		return nil, fmt.Errorf("pregel: resume run %q: %w", runID, err)
	}
	if pending, err = g.answer(ctx, cfg, cp, pending); err != nil {
		return nil, err
	}
	// The checkpoint's stamp names the code that wrote the state; the
	// record's (WithPrior) stands in for checkpoints stored without one.
	prior := cp.Stamp
	if prior == nil {
		prior = cfg.prior
	}
	if prior != nil {
		adopted, applied, err := g.Adopt(ctx, *prior, cp, pending)
		if err != nil {
			return nil, err
		}
		cp = adopted
		if cfg.adopted != nil && len(applied) > 0 {
			cfg.adopted(applied)
		}
	}
	return g.drive(ctx, cfg, cp, pending)
}

// answer attaches the resume values of cfg to the pending interrupted
// tasks and records them, so a crash after this point does not lose them.
func (g *Graph) answer(ctx context.Context, cfg *runConfig, cp *Checkpoint, pending []TaskResult) ([]TaskResult, error) {
	answered, err := Answer(cp.RunID, pending, cfg.resumeAll, cfg.resumeIDs)
	if err != nil {
		return nil, err
	}
	out := slices.Clone(pending)
	for i, p := range out {
		a, ok := answered[p.TaskID]
		if !ok {
			continue
		}
		stored, err := cfg.store.RecordTask(ctx, cp.RunID, cp.Step+1, a)
		if err != nil {
			return nil, fmt.Errorf("pregel: record resume value of run %q: %w", cp.RunID, err)
		}
		out[i] = stored
	}
	return out, nil
}

// Answer attaches resume values to the interrupted results among pending
// (the recorded results of a run's open step): all answers every pending
// interrupt, byID answers them one by one. It returns the updated results
// by task id; the caller records them before executing the tasks again.
// It fails with ErrInvalidResume when byID names an interrupt that is not
// pending, when interrupts wait and no value is given, or when a value is
// not of the JSON type its interrupt asks for (see [CheckAnswers]); the
// run then still waits, as it did.
func Answer(runID string, pending []TaskResult, all json.RawMessage, byID map[string]json.RawMessage) (map[string]TaskResult, error) {
	var waiting []string
	var open []InterruptInfo
	known := map[string]bool{}
	for _, p := range pending {
		for _, in := range p.Interrupts {
			known[in.ID] = true
			if _, ok := p.Resume[in.ID]; !ok {
				waiting = append(waiting, in.ID)
				open = append(open, in)
			}
		}
	}
	for id := range byID {
		if !known[id] {
			return nil, fmt.Errorf("%w: run %q has no pending interrupt %q; pending: %s", ErrInvalidResume, runID, id, strings.Join(slices.Sorted(maps.Keys(known)), ", "))
		}
	}
	if len(waiting) == 0 {
		return nil, nil
	}
	if all == nil && len(byID) == 0 {
		return nil, fmt.Errorf("%w: run %q waits for a value for interrupt(s) %s; resume it with a value", ErrInvalidResume, runID, strings.Join(waiting, ", "))
	}
	if err := CheckAnswers(open, all, byID); err != nil {
		return nil, err
	}
	out := make(map[string]TaskResult)
	for _, p := range pending {
		if p.Status != NodeInterrupted {
			continue
		}
		resume := maps.Clone(p.Resume)
		for _, in := range p.Interrupts {
			v, ok := byID[in.ID]
			if !ok && all != nil {
				v, ok = all, true
			}
			if ok {
				if resume == nil {
					resume = make(map[string]json.RawMessage)
				}
				resume[in.ID] = v
			}
		}
		p.Resume = resume
		out[p.TaskID] = p
	}
	return out, nil
}

// emitter serialises a run's events.
type emitter struct {
	mu    sync.Mutex
	fn    Observer
	run   string
	graph string
}

func (e *emitter) emit(ev Event) {
	if e.fn == nil {
		return
	}
	ev.RunID, ev.Graph, ev.Time = e.run, e.graph, time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.fn(ev)
}

// drive runs supersteps from cp until the run stops.
func (g *Graph) drive(ctx context.Context, cfg *runConfig, cp *Checkpoint, pending []TaskResult) (*Result, error) {
	ctx, cancel := cfg.control.bind(ctx)
	defer cancel()
	em := &emitter{fn: cfg.observer, run: cp.RunID, graph: g.name}
	em.emit(Event{Type: EventRunStarted, Step: cp.Step})
	finish := func(status RunStatus, interrupts []InterruptInfo, err error) (*Result, error) {
		res := &Result{RunID: cp.RunID, Graph: g.name, Status: status, Step: cp.Step, Values: cp.Values, Counters: cp.Counters, Interrupts: interrupts, Err: err}
		res.DrainReason, _ = cfg.control.DrainRequested()
		ev := Event{Type: EventRunFinished, Step: cp.Step, RunStatus: status, Interrupts: interrupts, Reason: res.DrainReason}
		if err != nil {
			ev.Error = err.Error()
		}
		em.emit(ev)
		return res, err
	}
	for {
		if ctx.Err() != nil {
			return finish(RunCancelled, nil, nil)
		}
		tasks := g.Plan(cp)
		if len(tasks) == 0 {
			return finish(RunCompleted, nil, nil)
		}
		if _, ok := cfg.control.DrainRequested(); ok {
			return finish(RunDrained, nil, nil)
		}
		if cp.Step >= g.maxSteps {
			return finish(RunFailed, nil, fmt.Errorf("%w: run %q reached %d supersteps with work left; raise the limit with pregel.MaxSteps if the loop is meant to run longer", ErrStepLimit, cp.RunID, g.maxSteps))
		}
		em.emit(Event{Type: EventStepStarted, Step: cp.Step + 1, Tasks: len(tasks)})
		results, err := g.runStep(ctx, cfg, em, cp, tasks, pending)
		pending = nil
		if ctx.Err() != nil {
			return finish(RunCancelled, nil, nil)
		}
		if err != nil {
			return finish(RunFailed, nil, err)
		}
		out, err := g.Apply(cp, tasks, results)
		if err != nil {
			return finish(RunFailed, nil, err)
		}
		switch out.Status {
		case RunInterrupted:
			em.emit(Event{Type: EventInterrupted, Step: cp.Step + 1, Interrupts: out.Interrupts})
			return finish(RunInterrupted, out.Interrupts, nil)
		case RunFailed:
			res, err := finish(RunFailed, nil, out.Err)
			res.Counters = out.Counters // the failed step's tasks count
			return res, err
		}
		if err := cfg.store.Commit(ctx, out.Checkpoint); err != nil {
			if ctx.Err() != nil {
				return finish(RunCancelled, nil, nil)
			}
			return finish(RunFailed, nil, fmt.Errorf("pregel: commit step %d of run %q: %w", out.Checkpoint.Step, cp.RunID, err))
		}
		prev := cp
		cp = out.Checkpoint
		if em.fn != nil {
			if values, appended := StepChanges(prev, cp); values != nil || appended != nil {
				em.emit(Event{Type: EventStateUpdated, Step: cp.Step, Values: values, Appended: appended})
			}
			em.emit(Event{Type: EventStepFinished, Step: cp.Step, Tasks: len(tasks)})
		}
		if r := cp.DrainRequest; r != "" {
			if cfg.drainSink != nil {
				cfg.drainSink(r)
			} else {
				cfg.control.RequestDrain(r)
			}
		}
	}
}

// runStep executes the tasks of one step, reusing recorded results. With
// more than one task, each result is recorded as it finishes so a crash
// keeps the finished ones; interrupted and failed results are always
// recorded.
func (g *Graph) runStep(ctx context.Context, cfg *runConfig, em *emitter, cp *Checkpoint, tasks []Task, pending []TaskResult) ([]TaskResult, error) {
	results := make([]TaskResult, len(tasks))
	var (
		resume   map[string]map[string]json.RawMessage
		recorded map[string]TaskResult
	)
	if len(pending) > 0 {
		resume = make(map[string]map[string]json.RawMessage)
		recorded = make(map[string]TaskResult, len(pending))
	}
	for _, p := range pending {
		if p.Final() {
			recorded[p.TaskID] = p
		} else {
			resume[p.TaskID] = p.Resume
		}
	}
	record := len(tasks) > 1
	if len(tasks) == 1 && len(recorded) == 0 {
		var err error
		results[0], err = g.runTask(ctx, cfg, em, cp, tasks[0], resume[tasks[0].ID], record)
		return results, err
	}
	fan := g.newFanTracker(ctx, tasks) // completion policies (fanrun.go)
	if fan != nil {
		defer fan.stop()
	}
	todo := make([]int, 0, len(tasks))
	for i, t := range tasks {
		if r, ok := recorded[t.ID]; ok {
			results[i] = r
			if fan != nil {
				fan.add(i, r)
			}
			continue
		}
		todo = append(todo, i)
	}
	// A pool of workers, not a goroutine per task: each task in a fresh
	// goroutine pays for growing its stack.
	var (
		mu       sync.Mutex
		firstErr error
		next     atomic.Int64
		wg       sync.WaitGroup
	)
	for range min(g.concurrency, len(todo)) {
		wg.Go(func() {
			for {
				k := int(next.Add(1)) - 1
				if k >= len(todo) {
					return
				}
				i := todo[k]
				var err error
				if fan == nil {
					results[i], err = g.runTask(ctx, cfg, em, cp, tasks[i], resume[tasks[i].ID], record)
				} else if fan.cut(i) == "" {
					// A task of a fan-out with a policy: not started once
					// the fan-out is decided; Apply cancels it then.
					results[i], err = g.runTask(fan.ctx(i, ctx), cfg, em, cp, tasks[i], resume[tasks[i].ID], record)
					if reason := fan.cut(i); reason != "" && ctx.Err() == nil && (results[i].Status == NodeCancelled || !results[i].Final()) {
						if em.fn != nil {
							t := tasks[i]
							em.emit(Event{Type: EventNodeFinished, Step: t.Step, Node: t.Node(), TaskID: t.ID, Status: NodeCancelled, Reason: reason})
						}
						results[i] = TaskResult{}
					} else {
						fan.add(i, results[i])
					}
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return results, firstErr
}

// runTask executes one task and records its result when record is set or
// the result is not a plain completion.
func (g *Graph) runTask(ctx context.Context, cfg *runConfig, em *emitter, cp *Checkpoint, t Task, resume map[string]json.RawMessage, record bool) (TaskResult, error) {
	if em.fn != nil {
		em.emit(Event{Type: EventNodeStarted, Step: t.Step, Node: t.Node(), TaskID: t.ID, Arg: t.Trigger.Arg})
	}
	ectx := ctx
	if em.fn != nil {
		ectx = WithEventSink(ctx, em.emit)
	}
	var done func(TaskResult)
	if cfg.taskCtx != nil {
		ectx, done = cfg.taskCtx(ectx, t)
	}
	if cfg.checkReads {
		ectx = context.WithValue(ectx, checkReadsKey{}, true)
	}
	res, _ := g.execute(ectx, t, cp.Values, resume)
	if ctx.Err() != nil {
		if done != nil {
			done(res)
		}
		return res, nil
	}
	var err error
	if record || !(res.Status == NodeCompleted || res.Status == NodeSkipped || res.Status == NodeCancelled) {
		stored, rerr := cfg.store.RecordTask(ctx, t.RunID, t.Step, res)
		if rerr != nil {
			err = fmt.Errorf("pregel: record task %s of run %q: %w", t.ID, t.RunID, rerr)
		} else {
			res = stored
		}
	}
	if done != nil {
		done(res)
	}
	if em.fn != nil {
		em.emit(Event{Type: EventNodeFinished, Step: t.Step, Node: t.Node(), TaskID: t.ID, Status: res.Status, Reason: res.Reason, Error: res.Error, Attempts: res.Attempts, Writes: res.Writes, Interrupts: res.Interrupts})
	}
	return res, err
}
