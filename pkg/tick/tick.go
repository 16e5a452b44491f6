// Package tick runs a graph one superstep per message, as the serverless
// runtime does: a tick message makes the tick handler load the run, plan
// the next step, execute inline tasks, hand remote tasks to node handlers,
// and, once every task of the step has a recorded result, apply them and
// commit the step. The commit is fenced on the step number, so duplicate,
// late or concurrent ticks are harmless, and recorded task results are never
// recomputed. No handler waits for another: the node handler of the last
// task to finish commits its step (fenced like a tick's commit), and sends
// the next tick, or, when every task of the next step is remote, their
// node tasks. With a Chain, a tick runs consecutive inline steps in one
// call. With a ChannelLoader, a tick reads only the channels its step
// reads (pregel.Graph.StepReads); with a SettleCounter, the node handlers
// of a wide step count settled results instead of each reading them all.
// See README.md.
//
// Drain and cancel requests are read from the run record at step
// boundaries. A drain lets the step in progress (one with a recorded
// result) finish and commit, then stops the run. A cancel starts no task:
// Dispatcher.Signal sends a tick, and a node task of the run sends one
// instead of executing; the tick ends the run cancelled, after committing
// the open step only if all its tasks had settled. Whatever is skipped or
// abandoned, some message is left that ends the run.
//
// The handlers are independent of AWS: the Lambdas in functions/ and the
// local emulation in `superstep dev --aws` wire them to SQS.
package tick

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// Tick asks for superstep Step of a run to be executed or committed.
type Tick struct {
	RunID string `json:"run_id"`
	Step  int    `json:"step"`
	// Nonce distinguishes ticks of one step that must not be
	// deduplicated (a resume, the commit after a node task).
	Nonce string `json:"nonce,omitempty"`
}

// DedupID is the queue deduplication id of the tick.
func (t Tick) DedupID() string {
	id := t.RunID + "#" + strconv.Itoa(t.Step)
	if t.Nonce != "" {
		id += "#" + t.Nonce
	}
	return id
}

// NodeTask asks a node handler to execute one task of a run's open step.
type NodeTask struct {
	RunID  string `json:"run_id"`
	Step   int    `json:"step"`
	TaskID string `json:"task_id"`
	// Resent marks a node task sent again by the handler of an earlier
	// step's task that found the run past its step (see Chain): a resent
	// task that finds its own step committed sends nothing in turn.
	Resent bool `json:"resent,omitempty"`
}

// Queue carries ticks and node tasks between handlers.
type Queue interface {
	SendTick(ctx context.Context, t Tick) error
	SendTask(ctx context.Context, t NodeTask) error
}

// Handler executes ticks and node tasks. It is safe for concurrent use.
type Handler struct {
	Graphs      *runs.Registry
	Runs        runs.Store
	Checkpoints pregel.Checkpointer
	Queue       Queue
	Logger      *slog.Logger
	// Claims, when set, leases each task to one executor at a time.
	Claims Claims
	// Lease is how long a claim lasts (default 15 minutes, the longest
	// a Lambda runs); keep it under the queue's visibility timeout.
	Lease time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Loader, when set, reads what a tick starts from in one request
	// (see RunLoader); otherwise Runs and Checkpoints are read in turn.
	Loader RunLoader
	// Tracer, when set, traces ticks and tasks (see pkg/tracing).
	Tracer Tracer
	// Chain lets a tick go on to the next superstep in the same
	// invocation while every task of it is inline (see Chain). The zero
	// value is one superstep per message.
	Chain Chain
	// Events, when set, receives the run's events (see events.go): the
	// stream GET /v1/runs/{id}/stream serves. Nil: no events are kept.
	Events EventLog
	// EventFilter, when set, says which runs' events go to Events: those
	// whose record it approves (say, watched ones). Nil: every run's.
	EventFilter func(runs.Run) bool
	// EventFlush is how often the events of a node still running are
	// appended (default DefaultEventFlush); the rest are appended when
	// the call ends.
	EventFlush time.Duration
	// Threads, when set, passes a thread on when a run of it stops and
	// starts a thread's runs from its state (see Threads; runs.Service).
	Threads Threads

	// planned holds the *planned of the wide step a node task planned
	// last (plan.go). An atomic.Value, not an atomic.Pointer, so that a
	// Handler may still be copied as a value (a copy starts from the same
	// memo and goes its own way).
	planned atomic.Value
}

// RunLoader reads what a tick starts from: a run record, its newest
// checkpoint (nil if it has none) and the recorded results of the step
// after it (as Checkpointer.PendingTasks). A store that keeps them side
// by side reads them at once. The error wraps runs.ErrNotFound when the
// run does not exist.
type RunLoader interface {
	LoadRun(ctx context.Context, runID string) (runs.Run, *pregel.Checkpoint, []pregel.TaskResult, error)
}

// TaskLoader is a RunLoader that also reads what a node handler starts
// from without reading every result of the step: the run record, its
// newest checkpoint (nil if none), the results recorded for one task of
// the step after it (none or one), and whether any result of that step is
// recorded. A Handler whose Loader implements it uses it for node tasks,
// so that each task of a wide fan-out does not read the results of all.
type TaskLoader interface {
	LoadRunTask(ctx context.Context, runID, taskID string) (runs.Run, *pregel.Checkpoint, []pregel.TaskResult, bool, error)
}

// loadTask reads what a node handler starts from (see TaskLoader).
func (h *Handler) loadTask(ctx context.Context, runID, taskID string) (runs.Run, *pregel.Checkpoint, []pregel.TaskResult, bool, error) {
	if tl, ok := h.Loader.(TaskLoader); ok {
		return tl.LoadRunTask(ctx, runID, taskID)
	}
	run, cp, pending, err := h.load(ctx, runID)
	if err != nil {
		return run, cp, nil, false, err
	}
	var own []pregel.TaskResult
	for _, p := range pending {
		if p.TaskID == taskID {
			own = append(own, p)
		}
	}
	return run, cp, own, len(pending) > 0, nil
}

// ChannelLoader is a RunLoader that reads a checkpoint in part: of the
// newest checkpoint's values, LoadRunReading reads those of the channels
// reads asks for (given the checkpoint without values; all when it says
// so), and may leave others out, listing them in the checkpoint's
// Unloaded; LoadChannels returns a checkpoint it loaded with the values of
// more channels (cp itself when it has them). A Handler whose Loader
// implements it reads, for a step, the channels pregel.Graph.StepReads
// lists, and before applying the step's results those Graph.ApplyReads
// lists: a large channel that no task of the step reads is not fetched.
type ChannelLoader interface {
	LoadRunReading(ctx context.Context, runID string, reads func(cp *pregel.Checkpoint) (channels []string, all bool)) (runs.Run, *pregel.Checkpoint, []pregel.TaskResult, error)
	LoadChannels(ctx context.Context, cp *pregel.Checkpoint, channels []string) (*pregel.Checkpoint, error)
}

// load reads a run, its newest checkpoint and the results recorded for
// its open step. With a ChannelLoader, the checkpoint holds the values of
// the channels its next step reads, and maybe not the others.
func (h *Handler) load(ctx context.Context, runID string) (runs.Run, *pregel.Checkpoint, []pregel.TaskResult, error) {
	if cl, ok := h.Loader.(ChannelLoader); ok {
		return cl.LoadRunReading(ctx, runID, h.stepReads)
	}
	if h.Loader != nil {
		return h.Loader.LoadRun(ctx, runID)
	}
	run, err := h.Runs.GetRun(ctx, runID)
	if err != nil {
		return runs.Run{}, nil, nil, err
	}
	cp, err := h.Checkpoints.Load(ctx, runID, pregel.Latest)
	open := 1
	switch {
	case errors.Is(err, pregel.ErrNotFound):
		cp = nil
	case err != nil:
		return runs.Run{}, nil, nil, fmt.Errorf("load run %q: %w", runID, err)
	default:
		open = cp.Step + 1
	}
	pending, err := h.Checkpoints.PendingTasks(ctx, runID, open)
	if err != nil {
		return runs.Run{}, nil, nil, err
	}
	return run, cp, pending, nil
}

// stepReads lists the channels the step after cp reads, by its graph
// (all when the graph is not deployed here).
func (h *Handler) stepReads(cp *pregel.Checkpoint) ([]string, bool) {
	g, ok := h.Graphs.Get(cp.Graph)
	if !ok {
		return nil, true
	}
	return g.StepReads(cp)
}

// leaseWindow returns the time now (Handler.Now, or the clock) and how
// long a lease taken now lasts (Handler.Lease, 15 minutes by default).
func (h *Handler) leaseWindow() (time.Time, time.Duration) {
	now := time.Now()
	if h.Now != nil {
		now = h.Now()
	}
	ttl := h.Lease
	if ttl <= 0 {
		ttl = 15 * time.Minute
	}
	return now, ttl
}

// claim leases a task to this handler call; owner identifies the call.
// answers, the number of resume values the task runs with, keeps the lease
// of an earlier, interrupted execution from blocking the resumed one.
//
// A handler that takes over the expired lease of another checks again that
// the task has no result and its step is open: the other may have executed
// it, recorded it and seen the step committed since this handler looked.
func (h *Handler) claim(ctx context.Context, t pregel.Task, answers int, owner string) (bool, error) {
	if h.Claims == nil {
		return true, nil
	}
	now, ttl := h.leaseWindow()
	ok, tookOver, err := h.Claims.Claim(ctx, t.RunID, t.Step, t.ID+"."+strconv.Itoa(answers), owner, now, now.Add(ttl))
	if err != nil || !ok || tookOver == "" {
		return ok, err
	}
	pending, err := h.Checkpoints.PendingTasks(ctx, t.RunID, t.Step)
	if err != nil {
		return false, err
	}
	for _, p := range pending {
		if p.TaskID == t.ID && (isSettled(p) || len(p.Resume) > answers) {
			return false, nil
		}
	}
	cp, err := h.Checkpoints.Load(ctx, t.RunID, pregel.Latest)
	if err != nil {
		return false, err
	}
	return cp.Step == t.Step-1, nil
}

func (h *Handler) log() *slog.Logger {
	if h.Logger != nil {
		return h.Logger
	}
	return slog.Default()
}

// ErrBadMessage is wrapped by errors about messages that can never be
// processed; the caller should leave them to the dead-letter queue.
var ErrBadMessage = errors.New("tick: bad message")

// Tick executes or commits one superstep. A returned error means the tick
// should be delivered again; outcomes of the run itself (failed nodes,
// interrupts) are stored on the run and return nil.
//
// With h.Chain set, a tick that commits a step goes on to the next one in
// the same call while the next step's tasks are all inline and the chain's
// budget allows (see Chain); each step is read, fenced and committed as if
// its own tick had been delivered.
func (h *Handler) Tick(ctx context.Context, t Tick) error {
	if t.RunID == "" || t.Step < 1 {
		return fmt.Errorf("%w: tick needs a run_id and a step >= 1, got %+v", ErrBadMessage, t)
	}
	ctx, flush := h.startEvents(ctx, t.RunID)
	defer flush()
	return h.tick(ctx, t, h.Chain.start(ctx))
}

// tickRun is what a tick has read and decided so far.
type tickRun struct {
	run     runs.Run
	cp      *pregel.Checkpoint // nil: the run has no checkpoint yet
	pending []pregel.TaskResult
	g       *pregel.Graph // nil: not deployed here
	tasks   []pregel.Task // the open step's, once planned
	planned bool
	adopted bool
}

// state is what decideTick needs of r, for a tick of step tickStep. The
// open step's tasks are planned once, when the tick names that step.
func (r *tickRun) state(tickStep int) tickState {
	s := tickState{
		found:    true,
		active:   r.run.Status == pregel.RunPending || r.run.Status == pregel.RunRunning,
		deployed: r.g != nil,
		started:  r.cp != nil,
		cancel:   r.run.CancelRequested,
		drain:    r.run.DrainRequested,
		tickStep: tickStep,
		recorded: len(r.pending),
		adopted:  r.adopted,
	}
	if r.g == nil || r.cp == nil {
		return s
	}
	s.openStep, s.maxSteps = r.cp.Step+1, r.g.MaxSteps()
	if !s.cancel && tickStep == s.openStep {
		if !r.planned {
			r.tasks, r.planned = r.g.Plan(r.cp), true
		}
		s.tasks = len(r.tasks)
	}
	return s
}

// tick is Tick for one step of a chain (ch nil: no chain): it reads the
// run, then acts on decideTick until an action ends the tick.
func (h *Handler) tick(ctx context.Context, t Tick, ch *chain) error {
	r := &tickRun{}
	var loadErr error
	r.run, r.cp, r.pending, loadErr = h.load(ctx, t.RunID)
	if loadErr != nil && !errors.Is(loadErr, runs.ErrNotFound) {
		return loadErr
	}
	r.adopted = r.run.GraphVersion == nil
	return h.decide(ctx, t, ch, r, loadErr)
}

// decide acts on decideTick, for what r holds (loadErr: the run was not
// found), until an action ends the tick.
func (h *Handler) decide(ctx context.Context, t Tick, ch *chain, r *tickRun, loadErr error) (err error) {
	log := h.log().With("run_id", t.RunID, "step", t.Step)
	traced := false
	for {
		var s tickState
		if loadErr == nil {
			s = r.state(t.Step)
		}
		act := decideTick(s)
		if act > tickStopped && !traced {
			traced = true
			var end func(error)
			ctx, end = h.beginTick(ctx, r, t)
			defer func() { end(err) }()
			if g, ok := h.Graphs.Get(r.run.Graph); ok {
				r.g = g
				r.adopted = r.adopted || r.run.GraphVersion.Fingerprint == g.Fingerprint()
				continue // decide with the graph
			}
		}
		switch act {
		case tickDrop:
			log.WarnContext(ctx, "tick for an unknown run; dropped")
			return nil
		case tickStopped:
			log.DebugContext(ctx, "tick for a run that is not running; no-op", "status", r.run.Status)
			return h.stopped(ctx, r.run) // finishes a hand-off cut short
		case tickNotDeployed:
			return h.finish(ctx, nil, r.run.ID, pregel.RunFailed, nil, fmt.Sprintf("graph %q is not deployed", r.run.Graph), "")
		case tickStart:
			if done, err := h.startRun(ctx, r); done || err != nil {
				return err
			}
		case tickCancel:
			return h.cancel(ctx, r.g, r.cp, r.pending)
		case tickResend, tickIgnore:
			// A duplicate or late tick. If the step it names is committed
			// but the next tick may not have been sent, send it again; the
			// queue drops it if it was.
			log.DebugContext(ctx, "tick does not match the open step; no-op", "open_step", r.cp.Step+1)
			if act == tickResend {
				return h.advance(ctx, r.g, r.cp, &r.run)
			}
			return nil
		case tickAdvance:
			return h.advance(ctx, r.g, r.cp, &r.run)
		case tickDrain:
			// The step has not started: stop at the boundary before it. A
			// step with recorded results is in progress: it is completed and
			// committed first, and advance stops the run after it.
			return h.finish(ctx, r.cp, r.run.ID, pregel.RunDrained, nil, "", "")
		case tickAdopt:
			cp, ok, err := h.adopt(ctx, r.g, r.run, r.cp, r.pending)
			if !ok {
				return err
			}
			r.cp, r.adopted = cp, true
		case tickMaxSteps:
			return h.finish(ctx, r.cp, r.run.ID, pregel.RunFailed, nil, fmt.Sprintf("run reached %d supersteps with work left; raise the graph's MaxSteps if the loop is meant to run longer", r.g.MaxSteps()), "")
		default:
			return h.execute(ctx, r, ch)
		}
	}
}

// beginTick starts the tick's span (with a Tracer) and notes the run for
// its events, once the tick knows the run is active.
func (h *Handler) beginTick(ctx context.Context, r *tickRun, t Tick) (context.Context, func(error)) {
	end := func(error) {}
	if h.Tracer != nil {
		label := t.Step
		if r.run.CancelRequested && r.cp != nil {
			label = r.cp.Step + 1 // a cancel tick names the step the run is at
		}
		ctx, end = h.Tracer.StartTick(ctx, r.run, label, time.Time{})
	}
	noteRun(ctx, r.run)
	return ctx, end
}

// startRun writes the step 0 of a run that has none (or starts a
// thread's run: then done is true). A run whose step 0 this code writes
// has its version's state, whatever its record says (a run created by
// other code).
func (h *Handler) startRun(ctx context.Context, r *tickRun) (done bool, err error) {
	if ok, err := h.startThreadRun(ctx, r.run); ok {
		return true, err
	}
	cp, err := r.g.Start(ctx, r.run.ID, r.run.Input)
	if err == nil {
		if err = h.Checkpoints.Commit(ctx, cp); errors.Is(err, pregel.ErrStepConflict) {
			// Another tick got there first and may have gone on.
			if cp, err = h.Checkpoints.Load(ctx, r.run.ID, pregel.Latest); err == nil {
				r.pending, err = h.Checkpoints.PendingTasks(ctx, r.run.ID, cp.Step+1)
			}
		}
	}
	if err != nil {
		return false, fmt.Errorf("load run %q: %w", r.run.ID, err)
	}
	r.cp = cp
	if cp.Step == 0 {
		st := r.g.Stamp()
		r.run.GraphVersion = &st
		r.adopted = true
	}
	return false, nil
}

// execute runs the open step of a tick that decided tickExecute: its
// inline tasks here, its remote ones sent to node handlers, and commits
// it when every task has settled.
func (h *Handler) execute(ctx context.Context, r *tickRun, ch *chain) (err error) {
	run, cp, pending, g, tasks := r.run, r.cp, r.pending, r.g, r.tasks
	step := cp.Step + 1
	h.annotate(ctx, len(tasks), "")
	starting := run.Status == pregel.RunPending
	if starting {
		if _, err := runs.Mutate(ctx, h.Runs, run.ID, func(r *runs.Run) error {
			if r.Status == pregel.RunPending {
				r.Status = pregel.RunRunning
			}
			return nil
		}); err != nil {
			return err
		}
		emit(ctx, pregel.Event{Type: pregel.EventRunStarted, Step: cp.Step})
	}
	if run.Resume != nil {
		if pending, err = h.answer(ctx, run, step, pending); err != nil {
			return err
		}
	}
	if len(pending) == 0 || starting {
		emit(ctx, pregel.Event{Type: pregel.EventStepStarted, Step: step, Tasks: len(tasks)})
	}
	settled := settledResults(pending)
	inline, remote := splitTasks(g, tasks, settled)
	sends := make([]NodeTask, 0, len(remote))
	for _, task := range remote {
		sends = append(sends, NodeTask{RunID: run.ID, Step: step, TaskID: task.ID})
	}
	if len(pending) == 0 && len(sends) > 0 {
		if err := h.shardStep(ctx, g, run.ID, step, tasks); err != nil { // fanout.go
			return err
		}
	}
	if err := h.sendTasks(ctx, sends); err != nil { // in batches: fanout.go
		return err
	}
	if len(inline) > 0 {
		if err := h.runInline(ctx, g, run, cp, tasks, inline, pending, settled); err != nil {
			return err
		}
	}
	if len(remote) > 0 {
		if len(inline) == 0 {
			// Every task left is a node handler's: the last one to
			// record its result sees the others' and commits.
			h.annotate(ctx, 0, "dispatched")
			return nil
		}
		// Node handlers may have finished while inline tasks ran, and
		// not seen their results: if all are in, commit now; otherwise
		// the last node handler commits.
		if all, err := h.allSettled(ctx, g, run.ID, step, tasks, settled); err != nil || !all {
			if err == nil {
				h.annotate(ctx, 0, "dispatched")
			}
			return err
		}
	}
	// When the commit goes on to send the next step's remote tasks, that
	// is a superstep span of the next step, linked to this one (as when a
	// node handler commits, see commitIfSettled).
	var end func(error)
	ctx, end = h.deferTick(ctx, run, step+1)
	defer func() { end(err) }()
	return h.commit(ctx, g, cp, tasks, settled, false, ch, &run)
}

// cancel ends a run whose cancel was requested, at the step boundary it is
// at. If every task of the open step has settled, the step is committed
// first and advance then ends the run; otherwise the run ends cancelled at
// its last committed step cp, and the open step's results are discarded.
// No task starts once a cancel is seen.
func (h *Handler) cancel(ctx context.Context, g *pregel.Graph, cp *pregel.Checkpoint, pending []pregel.TaskResult) error {
	tasks := g.Plan(cp)
	if len(tasks) == 0 {
		return h.advance(ctx, g, cp, nil)
	}
	settled := settledResults(pending)
	if !g.StepSettled(tasks, settled) {
		return h.finish(ctx, cp, cp.RunID, pregel.RunCancelled, nil, "", "")
	}
	return h.commit(ctx, g, cp, tasks, settled, true, nil, nil)
}

// settledResults indexes the results that settle their task for this
// step: final ones, and interrupts that have no answer waiting.
func settledResults(pending []pregel.TaskResult) map[string]pregel.TaskResult {
	out := make(map[string]pregel.TaskResult, len(pending))
	for _, p := range pending {
		if isSettled(p) {
			out[p.TaskID] = p
		}
	}
	return out
}

// isSettled reports whether a recorded result settles its task for the
// step: a final result, or an interrupt with no answer waiting.
func isSettled(p pregel.TaskResult) bool {
	return p.Final() || p.Status == pregel.NodeInterrupted && !answersAll(p)
}

// answersAll reports whether an interrupted result holds an answer for
// every one of its interrupts, so that running it again makes progress.
func answersAll(p pregel.TaskResult) bool {
	if p.Status != pregel.NodeInterrupted || len(p.Interrupts) == 0 {
		return false
	}
	for _, in := range p.Interrupts {
		if _, ok := p.Resume[in.ID]; !ok {
			return false
		}
	}
	return true
}

// answer records the run's resume values on its interrupted tasks and
// clears them from the run.
func (h *Handler) answer(ctx context.Context, run runs.Run, step int, pending []pregel.TaskResult) ([]pregel.TaskResult, error) {
	answered, err := pregel.Answer(run.ID, pending, run.Resume.Value, run.Resume.Values)
	if err != nil {
		// The API validated the request; what is left cannot succeed.
		h.log().WarnContext(ctx, "resume values do not fit the run; ignored", "run_id", run.ID, "err", err)
	}
	for i, p := range pending {
		if a, ok := answered[p.TaskID]; ok {
			stored, err := h.Checkpoints.RecordTask(ctx, run.ID, step, a)
			if err != nil {
				return nil, fmt.Errorf("record resume value: %w", err)
			}
			pending[i] = stored
		}
	}
	if _, err := runs.Mutate(ctx, h.Runs, run.ID, func(r *runs.Run) error {
		r.Resume, r.Interrupts = nil, nil
		return nil
	}); err != nil {
		return nil, err
	}
	return pending, nil
}

// splitTasks sorts the tasks of a step that have no settled result into
// those this handler executes and those node handlers do, in order.
func splitTasks(g *pregel.Graph, tasks []pregel.Task, settled map[string]pregel.TaskResult) (inline, remote []pregel.Task) {
	for _, task := range tasks {
		if _, ok := settled[task.ID]; ok {
			continue
		}
		if info, _ := g.Node(task.Node()); info.IsRemote() {
			remote = append(remote, task)
			continue
		}
		inline = append(inline, task)
	}
	return inline, remote
}

// runInline executes the inline tasks of a step (tasks, all of it; with
// the results recorded so far, pending) and adds their results to
// settled. It returns ErrClaimed when another handler holds some of them.
func (h *Handler) runInline(ctx context.Context, g *pregel.Graph, run runs.Run, cp *pregel.Checkpoint, tasks, inline []pregel.Task, pending []pregel.TaskResult, settled map[string]pregel.TaskResult) error {
	resume := map[string]map[string]json.RawMessage{}
	for _, p := range pending {
		if p.Status == pregel.NodeInterrupted {
			resume[p.TaskID] = p.Resume
		}
	}
	// Record each result unless the step has a single task: then the
	// commit follows at once and is the record. A single task needs no
	// lease either: the tick queue is FIFO per run, so no other tick of
	// the run runs at the same time, and its result is not recorded
	// before the step commits. That saves a write per superstep.
	multi := len(tasks) > 1
	results, err := h.executeInline(ctx, g, run, cp, inline, resume, multi, multi)
	if err != nil {
		return err
	}
	if len(results) < len(inline) {
		// Another handler executes some of them; come back later.
		h.annotate(ctx, 0, "claimed")
		return ErrClaimed
	}
	for _, r := range results {
		settled[r.TaskID] = r
	}
	return nil
}

// allSettled reads the results recorded for step into settled and
// reports whether every one of tasks has settled.
func (h *Handler) allSettled(ctx context.Context, g *pregel.Graph, runID string, step int, tasks []pregel.Task, settled map[string]pregel.TaskResult) (bool, error) {
	pending, err := h.Checkpoints.PendingTasks(ctx, runID, step)
	if err != nil {
		return false, err
	}
	for id, r := range settledResults(pending) {
		settled[id] = r
	}
	return g.StepSettled(tasks, settled), nil // fan-out policies: fanout.go
}

// executeInline runs tasks concurrently in this process.
func (h *Handler) executeInline(ctx context.Context, g *pregel.Graph, run runs.Run, cp *pregel.Checkpoint, tasks []pregel.Task, resume map[string]map[string]json.RawMessage, record, lease bool) ([]pregel.TaskResult, error) {
	results := make([]pregel.TaskResult, len(tasks))
	errs := make([]error, len(tasks))
	claimed := make([]bool, len(tasks))
	owner := pregel.NewRunID()
	var wg sync.WaitGroup
	for i, task := range tasks {
		wg.Go(func() {
			claimed[i] = true
			if lease {
				if claimed[i], errs[i] = h.claim(ctx, task, len(resume[task.ID]), owner); !claimed[i] {
					return
				}
			}
			emit(ctx, pregel.Event{Type: pregel.EventNodeStarted, Step: task.Step, Node: task.Node(), TaskID: task.ID, Arg: task.Trigger.Arg})
			tctx, end := h.startTask(nodeSink(ctx), run, task)
			res := g.ExecuteFrom(tctx, task, cp, resume[task.ID])
			end(res)
			if record || !res.Final() || res.Status == pregel.NodeFailed {
				res, errs[i] = h.Checkpoints.RecordTask(ctx, task.RunID, task.Step, res)
			}
			if errs[i] == nil {
				emitNodeFinished(ctx, task, res)
			}
			results[i] = res
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("record task results: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := results[:0]
	for i, r := range results {
		if claimed[i] {
			out = append(out, r)
		}
	}
	return out, nil
}

// commit applies the step's results, commits the checkpoint and moves the
// run on. cancelling (the run's cancel was requested) ends the run
// cancelled at cp when the step cannot be committed (it interrupts or
// fails). ch is the chain the step is part of (nil: none): when it allows,
// the next step follows in this call instead of its tick being sent. seen
// is the run record as read before the step's results were (nil: none),
// for advance.
func (h *Handler) commit(ctx context.Context, g *pregel.Graph, cp *pregel.Checkpoint, tasks []pregel.Task, settled map[string]pregel.TaskResult, cancelling bool, ch *chain, seen *runs.Run) error {
	results := make([]pregel.TaskResult, 0, len(tasks))
	for _, task := range tasks {
		results = append(results, settled[task.ID])
	}
	if need := g.ApplyReads(cp, results); len(need) > 0 {
		// Reducers of channels the step's tasks did not read.
		cl, ok := h.Loader.(ChannelLoader)
		if !ok {
			return fmt.Errorf("apply step %d of run %q: channels %v are not loaded and the loader cannot read them", cp.Step+1, cp.RunID, need)
		}
		whole, err := cl.LoadChannels(ctx, cp, need)
		if err != nil {
			return fmt.Errorf("apply step %d: %w", cp.Step+1, err)
		}
		cp = whole
	}
	out, err := g.Apply(cp, tasks, results)
	if err != nil {
		return fmt.Errorf("apply step %d: %w", cp.Step+1, err)
	}
	if cancelling && out.Checkpoint == nil {
		return h.finish(ctx, cp, cp.RunID, pregel.RunCancelled, nil, "", "")
	}
	switch out.Status {
	case pregel.RunInterrupted:
		emit(ctx, pregel.Event{Type: pregel.EventInterrupted, Step: cp.Step + 1, Interrupts: out.Interrupts})
		h.annotate(ctx, 0, "interrupted")
		return h.finish(ctx, cp, cp.RunID, pregel.RunInterrupted, out.Interrupts, "", "")
	case pregel.RunFailed:
		msg, node := failure(out.Err)
		last := *cp
		last.Counters = out.Counters // the failed step's tasks count
		return h.finish(ctx, &last, cp.RunID, pregel.RunFailed, nil, msg, node)
	}
	watched, stop, err := h.commitStop(ctx, out.Checkpoint)
	if err != nil {
		if errors.Is(err, pregel.ErrStepConflict) {
			h.log().DebugContext(ctx, "step committed by another tick", "run_id", cp.RunID, "step", out.Checkpoint.Step)
			return nil
		}
		return fmt.Errorf("commit step %d: %w", out.Checkpoint.Step, err)
	}
	emitStepCommitted(ctx, cp, out.Checkpoint, len(tasks))
	h.annotate(ctx, 0, "committed")
	if ch != nil && ch.committed != nil {
		*ch.committed = true
	}
	if stop {
		// A drain or cancel came since seen was read: advance reads the
		// record and stops the run at this boundary.
		seen = nil
	}
	switch {
	case !ch.next(g, out.Checkpoint):
	case ch.node:
		// A node handler's chain: the next step is one remote task.
		if r, ok := chainedRun(g, out.Checkpoint, seen, watched); ok {
			return h.chainNode(ctx, ch, r)
		}
		if !watched && seen != nil && seen.Status == pregel.RunRunning && !seen.DrainRequested && !seen.CancelRequested {
			// No stop reports: the task reads the run as its node task
			// would have.
			return h.chainNode(ctx, ch, &tickRun{cp: out.Checkpoint, g: g})
		}
	default:
		if r, ok := chainedRun(g, out.Checkpoint, seen, watched); ok {
			// The commit would have said if a drain or cancel had come
			// since seen was read (StopCommitter): the next step starts
			// from what this one has, without reading the run.
			return h.chainOn(ctx, ch, r)
		}
		// The next step's tick reads the run record afresh (drain,
		// cancel) with the open step's results, in one request with a
		// RunLoader, and is fenced and committed as any other.
		return h.tick(ctx, Tick{RunID: cp.RunID, Step: out.Checkpoint.Step + 1}, ch)
	}
	return h.advance(ctx, g, out.Checkpoint, seen)
}

func failure(err error) (msg, node string) {
	var ne *pregel.NodeError
	if errors.As(err, &ne) {
		return fmt.Sprintf("node %q failed after %d attempt(s): %s", ne.Node, ne.Attempts, ne.Message), ne.Node
	}
	return err.Error(), ""
}

// errUnchanged tells Mutate that the record needs no write.
var errUnchanged = errors.New("run record unchanged")

// advance either stops the run at the committed checkpoint cp or sends
// the tick of the next step. The run record is written only when its
// status changes: a running run's step and counters are read from its
// latest checkpoint, which saves a write per superstep.
//
// seen is the run record as the caller read it before it read the step's
// results (nil: none). When it shows a running run with no drain or
// cancel requested, and cp neither ends the run nor carries a node's drain
// request, the next tick is sent without reading the record again: that
// tick reads it first thing, and stops the run at this boundary if a
// drain or a cancel came since (a cancel also sends a tick of its own).
// Otherwise the record is read afresh.
//
// When every task of the next step is remote, advance sends their node
// tasks itself rather than a tick that would only send them. It reads the
// record first unless seen shows nothing to stop for and the Checkpointer
// is a StopCommitter (whose commit of cp would have reported a request
// that came since seen was read): a request that comes after the commit
// is seen by the node tasks, which read the record before executing, and
// stops the run at the same boundary.
func (h *Handler) advance(ctx context.Context, g *pregel.Graph, cp *pregel.Checkpoint, seen *runs.Run) error {
	remote := allRemote(g, cp)
	if seen != nil && seen.Status == pregel.RunRunning && !seen.DrainRequested && !seen.CancelRequested &&
		cp.DrainRequest == "" && !cp.Done() && cp.Step < g.MaxSteps() {
		if !remote {
			return h.Queue.SendTick(ctx, Tick{RunID: cp.RunID, Step: cp.Step + 1})
		}
		if _, watched := h.Checkpoints.(StopCommitter); watched {
			// The commit would have said if a drain or cancel had come
			// since seen was read (seen is nil then), and each node task
			// reads the record before it executes: a request that comes
			// after the commit stops the run at the same boundary, by the
			// first node task (not started: drained before the step) or
			// by the cancel's tick. So the record is not read again.
			return h.sendStep(ctx, g, cp)
		}
	}
	next := false
	rec, err := runs.Mutate(ctx, h.Runs, cp.RunID, func(r *runs.Run) error {
		next = false
		if r.Status != pregel.RunPending && r.Status != pregel.RunRunning {
			return errUnchanged
		}
		// A drain a node asked for in this step applies once: when the
		// record first catches up with the checkpoint.
		if cp.DrainRequest != "" && !r.DrainRequested && r.Step < cp.Step {
			r.DrainRequested, r.DrainReason = true, cp.DrainRequest
		}
		if r.Step < cp.Step {
			// This code committed the step: the run's state is its
			// version's now (migrations applied).
			if st := g.Stamp(); r.GraphVersion == nil || r.GraphVersion.Fingerprint != st.Fingerprint {
				r.GraphVersion = &st
			}
		}
		r.Step, r.Counters = cp.Step, cp.Counters
		switch {
		case cp.Done():
			r.Status = pregel.RunCompleted
		case r.CancelRequested:
			r.Status, r.CancelRequested = pregel.RunCancelled, false
		case r.DrainRequested:
			r.Status = pregel.RunDrained
		case cp.Step >= g.MaxSteps():
			r.Status, r.Error = pregel.RunFailed, fmt.Sprintf("run reached %d supersteps with work left; raise the graph's MaxSteps if the loop is meant to run longer", g.MaxSteps())
		default:
			next = true
			if r.Status == pregel.RunRunning {
				return errUnchanged
			}
			r.Status = pregel.RunRunning
		}
		return nil
	})
	if err != nil && !errors.Is(err, errUnchanged) {
		return err
	}
	if !next {
		if err == nil {
			emitRunStopped(ctx, rec)
			h.traceStopped(ctx, rec)
		}
		return h.stopped(ctx, rec)
	}
	if remote {
		return h.sendStep(ctx, g, cp)
	}
	return h.Queue.SendTick(ctx, Tick{RunID: cp.RunID, Step: cp.Step + 1})
}

// sendStep sends the node tasks of the step after cp, all of whose tasks
// are remote, as the tick of that step would (its superstep span, when
// deferred in ctx, and its step_started event).
func (h *Handler) sendStep(ctx context.Context, g *pregel.Graph, cp *pregel.Checkpoint) error {
	tasks := g.Plan(cp)
	ctx = h.openTick(ctx)
	h.annotate(ctx, len(tasks), "dispatched")
	emit(ctx, pregel.Event{Type: pregel.EventStepStarted, Step: cp.Step + 1, Tasks: len(tasks)})
	resent, _ := ctx.Value(resentKey{}).(bool)
	sends := make([]NodeTask, len(tasks))
	for i, t := range tasks {
		sends[i] = NodeTask{RunID: cp.RunID, Step: cp.Step + 1, TaskID: t.ID, Resent: resent}
	}
	if err := h.shardStep(ctx, g, cp.RunID, cp.Step+1, tasks); err != nil { // fanout.go
		return err
	}
	return h.sendTasks(ctx, sends) // in batches: fanout.go
}

// resentKey marks, in a context, node tasks sent again by a node handler
// whose own step was committed since (NodeTask.Resent).
type resentKey struct{}

// allRemote reports whether the step after cp has tasks and all of them
// are remote.
func allRemote(g *pregel.Graph, cp *pregel.Checkpoint) bool {
	if cp.Done() {
		return false
	}
	tasks := g.Plan(cp)
	for _, t := range tasks {
		if info, _ := g.Node(t.Node()); !info.IsRemote() {
			return false
		}
	}
	return len(tasks) > 0
}

// finish ends or pauses a run that is pending or running, at its last
// committed checkpoint cp (nil when none could be read).
func (h *Handler) finish(ctx context.Context, cp *pregel.Checkpoint, id string, status pregel.RunStatus, interrupts []pregel.InterruptInfo, msg, node string) error {
	stopped := false
	rec, err := runs.Mutate(ctx, h.Runs, id, func(r *runs.Run) error {
		stopped = false
		if r.Status != pregel.RunPending && r.Status != pregel.RunRunning {
			return nil
		}
		stopped = true
		if cp != nil {
			r.Step, r.Counters = cp.Step, cp.Counters
		}
		r.Status, r.Interrupts, r.Error, r.FailedNode = pausedOrCancelled(*r, status), interrupts, msg, node
		if r.Status == pregel.RunCancelled {
			r.CancelRequested, r.Interrupts = false, nil
		}
		return nil
	})
	if err != nil {
		return err
	}
	if stopped {
		emitRunStopped(ctx, rec)
		h.traceStopped(ctx, rec)
	}
	return h.stopped(ctx, rec)
}

// pausedOrCancelled is the status a run that stops with status ends
// with, given its record r as read in the write that stops it: a run
// that would pause (interrupted, drained) while a cancel of it was asked
// ends cancelled. The cancel may have arrived after the step read the
// record; paused with the request still set, nothing would ever act on
// it (the cancel of a paused run is carried out by the request itself).
func pausedOrCancelled(r runs.Run, status pregel.RunStatus) pregel.RunStatus {
	if r.CancelRequested && status.Resumable() {
		return pregel.RunCancelled
	}
	return status
}

// adopt checks, when the run's state was written by other code than g,
// that the run can continue here (pregel.Graph.Adopt), before anything
// runs. It returns the checkpoint to continue from; ok is false when the
// run cannot continue: adopt has then stopped it, drained with the
// reason, its checkpoints and recorded answers intact.
func (h *Handler) adopt(ctx context.Context, g *pregel.Graph, run runs.Run, cp *pregel.Checkpoint, pending []pregel.TaskResult) (_ *pregel.Checkpoint, ok bool, err error) {
	// The checkpoint's stamp names the code that wrote the state; the
	// record's stands in for checkpoints stored without one.
	prior := run.GraphVersion
	if cp.Stamp != nil {
		prior = cp.Stamp
	}
	if prior == nil || g.Unchanged(*prior) {
		return cp, true, nil
	}
	if len(cp.Unloaded) > 0 {
		// Renames and migrations need the whole state: read it, as
		// only the first step on new code does.
		if cp, err = h.Checkpoints.Load(ctx, run.ID, cp.Step); err != nil {
			return nil, false, fmt.Errorf("load run %q: %w", run.ID, err)
		}
	}
	adopted, applied, err := g.Adopt(ctx, *prior, cp, pending)
	if errors.Is(err, pregel.ErrIncompatible) {
		h.log().Warn("run stopped: its graph changed incompatibly", "run_id", run.ID, "error", err)
		return nil, false, h.stopIncompatible(ctx, cp, run.ID, err.Error())
	}
	if err != nil {
		return nil, false, err
	}
	if len(applied) > 0 {
		h.log().Info("run continues on a new graph version", "run_id", run.ID, "from", prior.Label(), "to", g.Stamp().Label(), "applied", applied)
	}
	return adopted, true, nil
}

// stopIncompatible stops a run that this code cannot continue: drained,
// with reason, resumable once compatible code is deployed.
func (h *Handler) stopIncompatible(ctx context.Context, cp *pregel.Checkpoint, id, reason string) error {
	stopped := false
	rec, err := runs.Mutate(ctx, h.Runs, id, func(r *runs.Run) error {
		stopped = false
		if r.Status != pregel.RunPending && r.Status != pregel.RunRunning {
			return nil
		}
		stopped = true
		r.Step, r.Counters = cp.Step, cp.Counters
		if r.Status, r.Interrupts = pausedOrCancelled(*r, pregel.RunDrained), nil; r.Status == pregel.RunCancelled {
			r.CancelRequested = false
			return nil
		}
		r.DrainRequested, r.DrainReason = true, reason
		return nil
	})
	if err != nil {
		return err
	}
	if stopped {
		emitRunStopped(ctx, rec)
	}
	return h.stopped(ctx, rec)
}

// Node executes one remote task and records its result once. When it is
// the last task of its step to settle, it commits the step and moves the
// run on as a tick would (see advance).
func (h *Handler) Node(ctx context.Context, nt NodeTask) error {
	if nt.RunID == "" || nt.TaskID == "" || nt.Step < 1 {
		return fmt.Errorf("%w: node task needs run_id, step >= 1 and task_id, got %+v", ErrBadMessage, nt)
	}
	ctx, flush := h.startEvents(ctx, nt.RunID)
	defer flush()
	return h.node(ctx, nt, h.Chain.startNode(ctx), nil)
}

// node is Node for one step of a chain (ch nil: no chain). pre, when set,
// is what the task starts from without reading the run: the run record
// the chain carries on and the checkpoint it committed (a chained step
// has no recorded result).
func (h *Handler) node(ctx context.Context, nt NodeTask, ch *chain, pre *tickRun) error {
	log := h.log().With("run_id", nt.RunID, "step", nt.Step, "task_id", nt.TaskID)
	var (
		run     runs.Run
		cp      *pregel.Checkpoint
		own     []pregel.TaskResult
		started bool
		err     error
	)
	if pre != nil {
		run, cp = pre.run, pre.cp
	} else {
		run, cp, own, started, err = h.loadTask(ctx, nt.RunID, nt.TaskID)
	}
	if errors.Is(err, runs.ErrNotFound) {
		log.WarnContext(ctx, "node task for an unknown run; dropped")
		return nil
	}
	if err != nil {
		return err
	}
	if run.Status != pregel.RunRunning && run.Status != pregel.RunPending {
		log.DebugContext(ctx, "node task for a run that is not running; no-op", "status", run.Status)
		return h.stopped(ctx, run) // finishes a hand-off cut short
	}
	if run.CancelRequested {
		// The task is not started, and no result of it will send the
		// commit tick: send the tick that ends the run instead.
		open := 1
		if cp != nil {
			open = cp.Step + 1
		}
		log.InfoContext(ctx, "node task of a run being cancelled: not executed; the tick handler ends the run")
		return h.Queue.SendTick(ctx, Tick{RunID: run.ID, Step: open, Nonce: "cancel"})
	}
	noteRun(ctx, run)
	g, ok := h.Graphs.Get(run.Graph)
	if !ok {
		// As the tick handler does: the run cannot go on here.
		return h.finish(ctx, cp, run.ID, pregel.RunFailed, nil, fmt.Sprintf("graph %q is not deployed", run.Graph), "")
	}
	if cp != nil && cp.Step == nt.Step {
		// The step is committed, maybe by an earlier delivery of this
		// task that failed after its commit, before the next tick was
		// sent: send it again (the queue drops a duplicate).
		log.DebugContext(ctx, "node task of a committed step; the next tick is sent again")
		return h.advance(ctx, g, cp, &run)
	}
	if cp != nil && cp.Step > nt.Step && !nt.Resent && !started && h.Chain.Steps > 1 {
		// The run went on past this task's step. If a node handler's
		// chain went on from it (see Chain) and stopped (a crash, the
		// deadline), this message, the chain's first, is all that is
		// left of it: the open step's work is sent again, marked so that
		// a copy finding the step committed in turn sends nothing. A
		// chain still running holds the lease of its step's task.
		log.InfoContext(ctx, "node task of a step committed since; the open step's work is sent again in case a chain stopped", "open_step", cp.Step+1)
		return h.advance(context.WithValue(ctx, resentKey{}, true), g, cp, &run)
	}
	if cp == nil || cp.Step != nt.Step-1 {
		log.DebugContext(ctx, "node task for a step that is not open; no-op")
		return nil
	}
	if cp, ok, err = h.adopt(ctx, g, run, cp, nil); !ok {
		return err
	}
	if run.DrainRequested && !started {
		// As a tick does: a step with no recorded result has not
		// started, so the run stops at the boundary before it. Its
		// tasks are sent again when the run resumes.
		log.InfoContext(ctx, "node task of a run being drained whose step has not started: not executed; the run stops before the step")
		return h.finish(ctx, cp, run.ID, pregel.RunDrained, nil, "", "")
	}
	tasks := h.plan(g, cp)
	var task *pregel.Task
	for i := range tasks {
		if tasks[i].ID == nt.TaskID {
			task = &tasks[i]
		}
	}
	if task == nil {
		return fmt.Errorf("%w: step %d of run %q has no task %s", ErrBadMessage, nt.Step, run.ID, nt.TaskID)
	}
	if info, _ := g.Node(task.Node()); !info.IsRemote() {
		// The tick handler executes it: a node task for it was not sent
		// by a handler, and executing it here would race the tick's.
		return fmt.Errorf("%w: task %s of step %d of run %q is of node %q, which is not remote (pregel.Remote); the tick handler executes it, not the node function", ErrBadMessage, nt.TaskID, nt.Step, run.ID, task.Node())
	}
	var resume map[string]json.RawMessage
	for _, p := range own {
		if isSettled(p) {
			// A delivery again: the first one may have stopped before
			// counting the result or committing.
			log.DebugContext(ctx, "task already settled; not executed again")
			if h.counting(g, tasks) {
				// Count again only if no handler holds the task's lease
				// unexpired. One that does counts the result itself, or
				// stops first: then this message must come back (after
				// the lease) and count, so it fails rather than succeed
				// and be deleted; if the other handler succeeds, it
				// deletes the message and this failure is moot.
				if held, err := h.leasedElsewhere(ctx, *task); err != nil {
					return err
				} else if held {
					return ErrClaimed
				}
			}
			return h.settle(ctx, g, cp, tasks, p, &run)
		}
		resume = p.Resume
	}
	if ok, err := h.claim(ctx, *task, len(resume), pregel.NewRunID()); err != nil {
		return err
	} else if !ok {
		return ErrClaimed
	}
	// The task's span stays in ctx: the commit tick sent below links to it.
	emit(ctx, pregel.Event{Type: pregel.EventNodeStarted, Step: task.Step, Node: task.Node(), TaskID: task.ID, Arg: task.Trigger.Arg})
	ctx, end := h.startTask(ctx, run, *task)
	res := g.ExecuteFrom(nodeSink(ctx), *task, cp, resume)
	end(res)
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(tasks) == 1 && res.Final() && res.Status != pregel.NodeFailed {
		return h.commitOnly(ctx, g, cp, *task, res, &run, ch)
	}
	stored, err := h.Checkpoints.RecordTask(ctx, run.ID, nt.Step, res)
	if errors.Is(err, pregel.ErrStepConflict) && g.FanOutMinimum(*task) > 0 {
		// The step committed while the task ran: its fan-out reached its
		// minimum, and the step records this task cancelled.
		log.DebugContext(ctx, "step committed while the task ran (its fan-out reached its minimum); result dropped")
		return nil
	}
	if err != nil {
		return fmt.Errorf("record task %s: %w", task.ID, err)
	}
	emitNodeFinished(ctx, *task, res)
	return h.settle(ctx, g, cp, tasks, stored, &run)
}

// commitOnly commits the step of a single remote task with its final
// result res, without recording the result first: as for a step of one
// inline task, the commit follows at once and is the record. That saves
// the result's write, the step fence read that goes with it, the read of
// the step's results and their deletion after the commit. The task's
// lease still keeps a second delivery from executing it meanwhile; a
// handler that stops before the commit leaves no result, so the task is
// executed again once its lease expires (a result is never recorded and
// then computed again). If the commit fails, the result is recorded after
// all (best effort), so that the delivery that comes back commits it
// rather than wait for the lease.
//
// With a chain (ch), when the step after it is one remote task too, the
// commit goes on to execute it in this call (see Chain); an error of a
// later step of the chain is not this step's.
func (h *Handler) commitOnly(ctx context.Context, g *pregel.Graph, cp *pregel.Checkpoint, task pregel.Task, res pregel.TaskResult, seen *runs.Run, ch *chain) error {
	emitNodeFinished(ctx, task, res)
	committed := false
	err := h.commitSettled(ctx, g, cp, []pregel.Task{task}, []pregel.TaskResult{res}, seen, ch, &committed)
	if err != nil && !committed {
		if _, rerr := h.Checkpoints.RecordTask(context.WithoutCancel(ctx), cp.RunID, cp.Step+1, res); rerr != nil {
			h.log().WarnContext(ctx, "record a task result after its commit failed", "run_id", cp.RunID, "task_id", task.ID, "err", rerr)
		}
	}
	return err
}

// SettleCounter is implemented by checkpointers that count the settled
// results of a step's remote tasks in one write, so that the node handler
// of each task learns whether it may be the last one in without reading
// every result of the step (which makes a step of n remote tasks read
// O(n²) results). CountSettled adds one to the count of step and returns
// the count after the addition.
//
// A handler counts each settled result it recorded, and counts again when
// a task's message is delivered again after its result was recorded and
// no other handler holds the task's lease unexpired (the first delivery
// may have stopped before counting), so the count is at least the number
// of remote tasks settled, and may be more. It is a
// hint: the handler whose count reaches the number of remote tasks of the
// step reads their results and commits only if all have settled, with the
// step's fence. Of the handlers that record the results, the one whose
// addition comes last sees a count at least that number, and reads after
// every result was recorded, so some handler commits.
type SettleCounter interface {
	CountSettled(ctx context.Context, runID string, step int) (int, error)
}

// CountSettledFrom is the number of remote tasks from which a step's
// node handlers count settled results (SettleCounter) rather than each
// reading every result of the step: under it, reading a few small results
// costs less than a write per task. It is a constant, not a setting: the
// handlers of a step must agree on whether they count.
const CountSettledFrom = 32

// settle is what a node handler does once the result of its task is
// recorded (stored, as the store returned it): when the step may have
// all its results, read them and commit it if they are all settled. With
// a SettleCounter and at least CountSettledFrom remote tasks in the step,
// only the handler whose count reaches their number reads them.
func (h *Handler) settle(ctx context.Context, g *pregel.Graph, cp *pregel.Checkpoint, tasks []pregel.Task, stored pregel.TaskResult, seen *runs.Run) error {
	step := cp.Step + 1
	if c, ok := h.Checkpoints.(SettleCounter); ok && h.counting(g, tasks) {
		if !isSettled(stored) {
			return nil // the step cannot commit before this task settles
		}
		n, early, err := h.countSettled(ctx, c, g, cp, tasks, stored)
		if err != nil {
			return err
		}
		if n < h.remoteTasks(g, tasks) && !early {
			return nil
		}
	}
	pending, err := h.Checkpoints.PendingTasks(ctx, cp.RunID, step)
	if err != nil {
		return err
	}
	return h.commitIfSettled(ctx, g, cp, tasks, pending, seen)
}

// leasedElsewhere takes the lease of the first execution of a settled
// task, and reports whether another handler holds it unexpired: that
// handler executed the task and counts its result itself. An expired
// lease is taken over: its handler stopped, maybe before counting.
func (h *Handler) leasedElsewhere(ctx context.Context, t pregel.Task) (bool, error) {
	if h.Claims == nil {
		return false, nil
	}
	now, ttl := h.leaseWindow()
	ok, _, err := h.Claims.Claim(ctx, t.RunID, t.Step, t.ID+".0", pregel.NewRunID(), now, now.Add(ttl))
	return !ok, err
}

// counting reports whether the node handlers of a step count its settled
// results (see SettleCounter).
func (h *Handler) counting(g *pregel.Graph, tasks []pregel.Task) bool {
	_, ok := h.Checkpoints.(SettleCounter)
	return ok && h.remoteTasks(g, tasks) >= CountSettledFrom
}

// remoteTasks counts the tasks of a step that node handlers execute.
func remoteTasks(g *pregel.Graph, tasks []pregel.Task) int {
	n := 0
	for _, t := range tasks {
		if info, _ := g.Node(t.Node()); info.IsRemote() {
			n++
		}
	}
	return n
}

// commitIfSettled commits the step after cp when every one of its tasks
// has a settled result, as the tick handler would: the last node handler
// to record a result commits, instead of sending a tick to commit. The
// commit is fenced on the step like any other, so node handlers finishing
// at once, and a tick handler seeing the same results, commit it once.
// seen is the run record as read before the results, for advance.
//
// With a Tracer, when the commit goes on to send the next step's remote
// tasks, that is a superstep span of the next step, as the tick that
// would have sent them: it links to the node span in ctx, and the next
// step's node spans are its children. A handler whose commit loses, or
// stops the run, opens no span (the run's end span links to it).
func (h *Handler) commitIfSettled(ctx context.Context, g *pregel.Graph, cp *pregel.Checkpoint, tasks []pregel.Task, pending []pregel.TaskResult, seen *runs.Run) (err error) {
	return h.commitSettled(ctx, g, cp, tasks, pending, seen, nil, nil)
}

// commitSettled is commitIfSettled in a chain ch (nil: none); committed,
// when set, is set once the step is committed.
func (h *Handler) commitSettled(ctx context.Context, g *pregel.Graph, cp *pregel.Checkpoint, tasks []pregel.Task, pending []pregel.TaskResult, seen *runs.Run, ch *chain, committed *bool) (err error) {
	settled := settledResults(pending)
	if !g.StepSettled(tasks, settled) { // fan-out policies: fanout.go
		return nil
	}
	if seen != nil {
		var end func(error)
		ctx, end = h.deferTick(ctx, *seen, cp.Step+2)
		defer func() { end(err) }()
	}
	if ch != nil {
		ch.committed = committed
	}
	return h.commit(ctx, g, cp, tasks, settled, false, ch, seen)
}

// Dispatcher starts and resumes runs by sending their next tick. It
// implements runs.Dispatcher for the serverless runtime.
type Dispatcher struct {
	Checkpoints pregel.Checkpointer
	Queue       Queue
	// Logger logs a cancel tick that could not be sent (default
	// slog.Default()).
	Logger *slog.Logger
}

// Dispatch sends the tick of the run's open step. The nonce, the record's
// version, keeps a resume from being taken for a duplicate of an earlier
// tick of the same step.
func (d *Dispatcher) Dispatch(ctx context.Context, r runs.Run) error {
	step := 1
	if cp, err := d.Checkpoints.Load(ctx, r.ID, pregel.Latest); err == nil {
		step = cp.Step + 1
	} else if !errors.Is(err, pregel.ErrNotFound) {
		return err
	}
	return d.Queue.SendTick(ctx, Tick{RunID: r.ID, Step: step, Nonce: "v" + strconv.FormatInt(r.Version, 10)})
}

// Signal sends a tick for a run whose cancel was requested, so that the
// tick handler ends it without waiting for the tasks in progress: it
// commits the open step if all its tasks have settled, and otherwise ends
// the run at its last committed step. A drain needs no message: the step
// in progress finishes, and ticks read the request at the next boundary.
//
// If the tick cannot be sent, the cancel still takes effect: node tasks of
// the run are no longer executed and send the tick, and a tick handler
// reads the request at the next boundary.
func (d *Dispatcher) Signal(ctx context.Context, r runs.Run) {
	if !r.CancelRequested {
		return
	}
	// A cancel tick ends the run whatever step it names; the nonce keeps
	// a later cancel request from being deduplicated with this one.
	t := Tick{RunID: r.ID, Step: r.Step + 1, Nonce: "cancel.v" + strconv.FormatInt(r.Version, 10)}
	if err := d.Queue.SendTick(ctx, t); err != nil {
		log := d.Logger
		if log == nil {
			log = slog.Default()
		}
		log.WarnContext(ctx, "send the tick of a cancel; the run ends at its next step boundary instead", "run_id", r.ID, "err", err)
	}
}
