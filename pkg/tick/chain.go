package tick

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// DefaultChainMargin is the time a chain of supersteps leaves before the
// deadline of its context when Chain.Margin is zero.
const DefaultChainMargin = 10 * time.Second

// Chain lets one tick message run several supersteps, opt-in. After a
// tick commits step N, it goes on to step N+1 in the same call, instead
// of sending the tick of N+1, when:
//
//   - every task of step N+1 is inline (a remote task ends the chain: its
//     node handler sends the tick that commits the step);
//   - step N ended with neither an interrupt nor a failure, did not
//     finish the run, did not request a drain and is under the graph's
//     MaxSteps;
//   - the tick has run fewer than Steps supersteps;
//   - the time since the tick began, plus the longest step of the chain
//     so far, is within Budget (if set);
//   - the time left before the context's deadline (on Lambda, the
//     function's timeout) is over Margin plus twice the longest step of
//     the chain so far.
//
// Each step of a chain commits with the same fence as a tick. With a
// Checkpoints that is a StopCommitter (the DynamoDB store), the steps
// after the first do not read the run: the commit of a step says whether
// a drain or cancel was requested since the step opened, and if so, or if
// the record last read showed one, the chain reads the record and stops
// the run at this boundary. Otherwise each step starts as the tick of
// that step would: it reads the run record (drain and cancel requests) and
// the open step's recorded results afresh, one request with a RunLoader.
// Either way a drain stops the run at the boundary after the step open
// when the request returned, a cancel ends it there, and a crash anywhere
// in a chain leaves the message of its first step, which a redelivery
// turns into the tick of the first step not committed. When the chain
// ends, the next tick is sent as without one.
//
// A node handler (Handler.Node) chains too, on the same terms, but to
// steps of exactly one remote task: after it commits a step whose next
// step is one remote task, it executes that task in the same call instead
// of sending its node task, and commits it. That saves the node task's
// three SQS requests, an invocation and the read of the run (with a
// StopCommitter). The chained task still takes its lease: a node task of
// the step sent again meanwhile (a late tick, a late copy of the chain's
// first message) does not execute it. A chained step that fails before
// its commit sends its node task; a handler killed in a chain leaves the
// chain's first message, whose redelivery finds the run past its step and
// sends the open step's work again (marked NodeTask.Resent, so that a
// copy finding its own step committed in turn sends nothing).
type Chain struct {
	// Steps is the most supersteps one tick message runs; 0 or 1 is one
	// superstep per message, the default.
	Steps int
	// Budget bounds the time a tick spends on a chain (zero: only the
	// deadline bounds it).
	Budget time.Duration
	// Margin is the time left before the context's deadline under which
	// no further step starts (zero: DefaultChainMargin).
	Margin time.Duration
}

// chain is the state of one tick's chain of supersteps.
type chain struct {
	cfg      Chain
	began    time.Time
	last     time.Time
	deadline time.Time
	limited  bool
	// steps is the number of steps committed in the chain.
	steps   int
	longest time.Duration
	// node: a node handler's chain, which goes on to steps of one remote
	// task (a tick's goes on to steps whose tasks are all inline).
	node bool
	// committed, when set, is set true by the commit of the step in
	// progress (see commitOnly).
	committed *bool
}

// start returns the state of a chain beginning now, or nil if chains are
// off.
func (c Chain) start(ctx context.Context) *chain {
	if c.Steps <= 1 {
		return nil
	}
	if c.Margin <= 0 {
		c.Margin = DefaultChainMargin
	}
	now := time.Now()
	ch := &chain{cfg: c, began: now, last: now}
	ch.deadline, ch.limited = ctx.Deadline()
	return ch
}

// startNode is start for a node handler: the chain goes on to steps of
// one remote task.
func (c Chain) startNode(ctx context.Context) *chain {
	ch := c.start(ctx)
	if ch != nil {
		ch.node = true
	}
	return ch
}

// next is called when the chain has committed cp; it reports whether the
// step after cp runs in this call. A nil chain never goes on.
func (c *chain) next(g *pregel.Graph, cp *pregel.Checkpoint) bool {
	if c == nil {
		return false
	}
	now := time.Now()
	c.longest = max(c.longest, now.Sub(c.last))
	c.last = now
	c.steps++
	switch {
	case c.steps >= c.cfg.Steps,
		cp.Done(), cp.DrainRequest != "", cp.Step >= g.MaxSteps(),
		c.cfg.Budget > 0 && now.Sub(c.began)+c.longest > c.cfg.Budget,
		c.limited && c.deadline.Sub(now) < c.cfg.Margin+2*c.longest:
		return false
	}
	tasks := g.Plan(cp)
	if len(tasks) == 0 {
		return false
	}
	if c.node {
		info, _ := g.Node(tasks[0].Node())
		return len(tasks) == 1 && info.IsRemote()
	}
	for _, t := range tasks {
		if info, _ := g.Node(t.Node()); info.IsRemote() {
			return false
		}
	}
	return true
}

// StopCommitter is a Checkpointer whose commit also says whether a drain
// or a cancel of the run was requested since the step it commits became
// the open one: stop is true if so, or if it cannot tell. A request that
// returned before the commit began must be reported by that commit or by
// an earlier commit of the run. A Handler whose Checkpoints implements it
// runs the steps of a chain after the first without reading the run
// record: a chained superstep is its commit's one write (see Chain).
type StopCommitter interface {
	CommitStop(ctx context.Context, cp *pregel.Checkpoint) (stop bool, err error)
}

// commitStop commits cp, with CommitStop when the Checkpointer has it
// (watched true), otherwise with Commit (watched and stop false).
func (h *Handler) commitStop(ctx context.Context, cp *pregel.Checkpoint) (watched, stop bool, err error) {
	if sc, ok := h.Checkpoints.(StopCommitter); ok {
		stop, err = sc.CommitStop(ctx, cp)
		return true, stop, err
	}
	return false, false, h.Checkpoints.Commit(ctx, cp)
}

// chainedRun returns what the next step of a chain starts from without
// reading the run, when it may: the commit of cp was watched for stop
// requests (StopCommitter) and reported none, and seen, the record the
// chain last read or carried on, shows a running run with no drain or
// cancel requested. The run's record as the next tick would read it is
// seen: its status is running (execute wrote it), and resume values were
// consumed by the step that had them; the step's results are cp's.
func chainedRun(g *pregel.Graph, cp *pregel.Checkpoint, seen *runs.Run, watched bool) (*tickRun, bool) {
	if !watched || seen == nil || seen.DrainRequested || seen.CancelRequested ||
		(seen.Status != pregel.RunRunning && seen.Status != pregel.RunPending) {
		return nil, false
	}
	run := *seen
	run.Status, run.Resume, run.Interrupts = pregel.RunRunning, nil, nil
	return &tickRun{run: run, cp: cp, g: g, adopted: true}, true
}

// chainOn runs the next step of a chain from r without reading the run:
// the channels its tasks read that cp did not load are read first (with
// a ChannelLoader), then the step is decided and acted on as by its tick.
func (h *Handler) chainOn(ctx context.Context, ch *chain, r *tickRun) error {
	if len(r.cp.Unloaded) > 0 {
		var need []string
		chs, all := r.g.StepReads(r.cp)
		if all {
			chs = slices.Collect(maps.Keys(r.cp.Unloaded))
		}
		for _, c := range chs {
			if r.cp.Unloaded[c] {
				need = append(need, c)
			}
		}
		if len(need) > 0 {
			cl, ok := h.Loader.(ChannelLoader)
			if !ok {
				return h.tick(ctx, Tick{RunID: r.cp.RunID, Step: r.cp.Step + 1}, ch)
			}
			cp, err := cl.LoadChannels(ctx, r.cp, slices.Sorted(slices.Values(need)))
			if err != nil {
				return fmt.Errorf("step %d of run %q: %w", r.cp.Step+1, r.cp.RunID, err)
			}
			r.cp = cp
		}
	}
	return h.decide(ctx, Tick{RunID: r.cp.RunID, Step: r.cp.Step + 1}, ch, r, nil)
}

// chainNode runs the next step of a node handler's chain, one remote task,
// in this call (see Chain), from r: the run as the chain carries it on
// (r.run set) or, with r.run unset, as its node task would read it. The
// task takes its lease as a delivered one would: a node task of the step
// sent again (by a late tick, or a late copy of the chain's first
// message) does not execute it meanwhile. If the step fails before its
// commit (an error, or the function's deadline), its node task is sent,
// so that a delivery goes on from it; if that send fails too, the error
// is returned, and the redelivery of the chain's first message sends it
// (see Handler.node).
func (h *Handler) chainNode(ctx context.Context, ch *chain, r *tickRun) error {
	tasks := r.g.Plan(r.cp)
	nt := NodeTask{RunID: r.cp.RunID, Step: r.cp.Step + 1, TaskID: tasks[0].ID}
	if n, ok := h.Checkpoints.(UnshardedNoter); ok {
		n.NoteUnsharded(nt.RunID, nt.Step) // one task: never sharded
	}
	ctx = h.openTick(ctx)
	h.annotate(ctx, 1, "chained")
	emit(ctx, pregel.Event{Type: pregel.EventStepStarted, Step: nt.Step, Tasks: 1})
	pre := r
	if r.run.ID == "" {
		pre = nil
	}
	err := h.node(ctx, nt, ch, pre)
	var handed *chainError
	switch {
	case err == nil, errors.Is(err, ErrClaimed):
		// ErrClaimed: another handler executes the task, and commits.
		return nil
	case errors.As(err, &handed):
		return err // a later step's, which could not hand it off
	}
	h.log().WarnContext(ctx, "a chained step failed; its node task is sent", "run_id", nt.RunID, "step", nt.Step, "err", err)
	if serr := h.sendTasks(context.WithoutCancel(ctx), []NodeTask{nt}); serr != nil {
		return &chainError{fmt.Errorf("chained step %d: %w; its node task was not sent: %w", nt.Step, err, serr)}
	}
	return nil
}

// chainError is the error of a chained step that could not be handed off
// to a node task of its own.
type chainError struct{ err error }

func (e *chainError) Error() string { return e.err.Error() }
func (e *chainError) Unwrap() error { return e.err }
