package tick

import (
	"context"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
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
// Each step of a chain starts as the tick of that step would: it reads
// the run record (drain and cancel requests) and the open step's recorded
// results afresh, one request with a RunLoader, and commits with the same
// fence. So a drain still stops the run at the next boundary, a cancel
// ends it there, and a crash anywhere in a chain leaves the message of
// its first step, which a redelivery turns into the tick of the first
// step not committed. When the chain ends, the next tick is sent as
// without one.
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
	for _, t := range tasks {
		if info, _ := g.Node(t.Node()); info.IsRemote() {
			return false
		}
	}
	return true
}
