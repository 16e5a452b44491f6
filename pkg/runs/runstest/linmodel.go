package runstest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/superstep/superstep/pkg/runs"
)

// The sequential model of a thread, checked by porcupine. A run of the
// suite's chat graph writes three messages: its input (its id) at step 0,
// "re:"+id, then "done"; a run whose id starts with "ask" stops after
// step 0 at an interrupt until a client resumes it. A configuration (cfg)
// is one state the thread can be in; the model's state is the set of
// configurations the operations linearized so far lead to, closed under
// the background events (a run commits a step, pauses, ends, passes the
// thread on), which happen between client operations. Configurations are
// immutable and carry their key, so that a set is compared and hashed by
// one string.

// lnode is the thread's lineage, the writes of the runs whose steps are in
// it, as a persistent list with the rolling hash of its messages.
type lnode struct {
	parent *lnode
	run    string
	n      int
	hash   uint64 // of every message up to and including this run's
	msgs   int
}

func (l *lnode) sum() (uint64, int) {
	if l == nil {
		return 0, 0
	}
	return l.hash, l.msgs
}

// extend is the rolling hash of a message sequence.
func extend(h uint64, msg string) uint64 { return fnvString(fnvUint(fnvOffset, h), msg) }

func chatWrites(run string) []string { return []string{run, "re:" + run, "done"} }

func (l *lnode) add(run string, n int) *lnode {
	if n == 0 {
		return l
	}
	h, m := l.sum()
	for _, w := range chatWrites(run)[:n] {
		h = extend(h, w)
	}
	return &lnode{parent: l, run: run, n: n, hash: h, msgs: m + n}
}

// tail describes the last few runs of a lineage.
func (l *lnode) tail(k int) string {
	var parts []string
	for ; l != nil && len(parts) < k; l = l.parent {
		parts = append(parts, fmt.Sprintf("%s×%d", l.run, l.n))
	}
	if l != nil {
		parts = append(parts, "…")
	}
	slices.Reverse(parts)
	return "[" + strings.Join(parts, " ") + "]"
}

// fin is a run's final status as a client sees it.
type fin struct{ run, status string }

// cfg is one configuration of a thread.
type cfg struct {
	lin    *lnode
	active string
	done   int  // writes of the active run committed
	paused bool // the active run waits at its interrupt
	resumd bool // the active run was resumed (it asks once)
	sup    runs.Strategy
	cancel bool   // a client asked to cancel the active run
	ended  string // the active run's final status, once its record says it ended; it holds the thread until it passes it on
	queue  []string
	final  []fin // sorted by run: the tracked runs that ended
	last   int32 // the Order of the last run that took the thread, if known
	claim  int32 // the Claim of the last run that claimed the thread, if known
	key    ckey
	h      uint64 // hash of key
}

// ckey identifies a configuration: the lineage, queue and final statuses
// by their hashes.
type ckey struct {
	lin                 uint64
	msgs                int32
	done                int8
	paused, resumd, cnc bool
	active, sup, ended  string
	queue, final        uint64
	last, claim         int32
}

func asks(run string) bool { return strings.HasPrefix(run, "ask") }

// fnv64 is FNV-1a, step by step.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * fnvPrime
	}
	return (h ^ 0xff) * fnvPrime // a separator
}

func fnvUint(h, v uint64) uint64 {
	for range 8 {
		h = (h ^ (v & 0xff)) * fnvPrime
		v >>= 8
	}
	return h
}

func (c *cfg) seal() *cfg {
	h, m := c.lin.sum()
	k := ckey{lin: h, msgs: int32(m), done: int8(c.done), paused: c.paused, resumd: c.resumd, cnc: c.cancel, active: c.active, sup: string(c.sup), ended: c.ended, last: c.last, claim: c.claim}
	q := uint64(fnvOffset)
	for _, r := range c.queue {
		q = fnvString(q, r)
	}
	k.queue = q
	f := uint64(fnvOffset)
	for _, e := range c.final {
		f = fnvString(fnvString(f, e.run), e.status)
	}
	k.final = f
	c.key = k
	x := fnvUint(fnvUint(fnvUint(fnvOffset, k.lin), k.queue), k.final)
	x = fnvUint(x, uint64(k.claim)<<40|uint64(k.last)<<24|uint64(k.msgs)<<16|uint64(k.done)<<8|uint64(b2u(k.paused))<<2|uint64(b2u(k.resumd))<<1|uint64(b2u(k.cnc)))
	c.h = fnvString(fnvString(fnvString(x, k.active), k.sup), k.ended)
	return c
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

func (c *cfg) String() string {
	s := fmt.Sprintf("lineage %s", c.lin.tail(4))
	if c.active != "" {
		s += fmt.Sprintf(" active %s done %d", c.active, c.done)
		for _, f := range []struct {
			on   bool
			what string
		}{{c.paused, "paused"}, {c.resumd, "resumed"}, {c.sup == runs.StrategyInterrupt, "drain asked"}, {c.sup == runs.StrategyRollback, "rolled back"}, {c.cancel, "cancel asked"}, {c.ended != "", "ended " + c.ended}} {
			if f.on {
				s += " " + f.what
			}
		}
	}
	if len(c.queue) > 0 {
		s += fmt.Sprintf(" queue %v", c.queue)
	}
	if len(c.final) > 0 {
		s += fmt.Sprintf(" final %v", c.final)
	}
	return s
}

func (c *cfg) clone() *cfg {
	n := *c
	n.key, n.h = ckey{}, 0
	return &n
}

func cmpFin(f fin, r string) int { return strings.Compare(f.run, r) }

func (c *cfg) finalOf(run string) (string, bool) {
	i, ok := slices.BinarySearchFunc(c.final, run, cmpFin)
	if !ok {
		return "", false
	}
	return c.final[i].status, true
}

func (c *cfg) setFinal(run, status string) {
	i, ok := slices.BinarySearchFunc(c.final, run, cmpFin)
	f := slices.Clone(c.final)
	if ok {
		f[i].status = status
	} else {
		f = slices.Insert(f, i, fin{run, status})
	}
	c.final = f
}

func (c *cfg) dropFinal(run string) {
	if i, ok := slices.BinarySearchFunc(c.final, run, cmpFin); ok {
		c.final = slices.Delete(slices.Clone(c.final), i, i+1)
	}
}

// linModel is the model of one history: tracked lists the runs that a
// later operation asks about (the others' final statuses are not kept);
// facts says how each run ended, as its record and checkpoints said once
// the clients had stopped.
type linModel struct {
	tracked map[string]bool
	facts   map[string]runFact
}

// runFact is how a run ended: its final status (see finalStatus) and the
// number of its writes in its last committed step. The model lets each
// run end only so (a prophecy: it takes only the branches the history
// took; a run whose record and checkpoints disagree with what clients saw
// of it still makes the history illegal).
//
// Claim is the run's place in the order in which its thread's runs claimed
// the thread (queued, or took it idle), and Order its place in the order
// in which they took the thread (1 for the first; 0 if it never did, or
// it is not known: see orderLog). The model lets creates claim only in
// the Claim order, and activates runs only in the Order.
type runFact struct {
	Status string
	Writes int
	Order  int `json:",omitempty"`
	Claim  int `json:",omitempty"`
}

// end records that the active run of n (a clone) ended with status: its
// record says so, and it still holds the thread until it passes it on.
// It reports false if the run did not end so.
func (lm *linModel) end(n *cfg, status string) bool {
	if f, ok := lm.facts[n.active]; ok && (f.Status != status || f.Writes != n.done) {
		return false
	}
	n.ended, n.paused = status, false
	if lm.tracked[n.active] {
		n.setFinal(n.active, status)
	}
	return true
}

// mayCommit reports whether the active run of c may commit another write.
func (lm *linModel) mayCommit(c *cfg) bool {
	f, ok := lm.facts[c.active]
	return c.done < 3 && (!ok || c.done < f.Writes)
}

// passOn takes the ended active run off the thread, its writes in the
// lineage unless it was discarded, and makes the next queued run active.
// It returns nil if that run did not take the thread next (its Order).
func (lm *linModel) passOn(c *cfg) *cfg {
	n := c.clone()
	if n.ended != "discarded" {
		n.lin = n.lin.add(n.active, n.done)
	}
	n.active, n.done, n.paused, n.resumd, n.sup, n.cancel, n.ended = "", 0, false, false, "", false, ""
	if len(n.queue) > 0 {
		n.active, n.queue = n.queue[0], slices.Clone(n.queue[1:])
		if !lm.activate(n) {
			return nil
		}
	}
	return n.seal()
}

// activate records that the active run of n (a clone) took the thread,
// and reports false if it did so out of its Order.
func (lm *linModel) activate(n *cfg) bool {
	o := int32(lm.facts[n.active].Order)
	if o == 0 {
		return true
	}
	if o <= n.last {
		return false
	}
	n.last = o
	return true
}

// claims records that run claimed the thread of n (a clone), and reports
// false if it did so out of its Claim order.
func (lm *linModel) claims(n *cfg, run string) bool {
	o := int32(lm.facts[run].Claim)
	if o == 0 {
		return true
	}
	if o <= n.claim {
		return false
	}
	n.claim = o
	return true
}

// mayQueue reports whether run may queue on c: it took the thread after
// the active run and the queued runs, as far as their Orders are known.
func (lm *linModel) mayQueue(c *cfg, run string) bool {
	o := lm.facts[run].Order
	if o == 0 {
		return true
	}
	if o <= int(c.last) {
		return false
	}
	for _, q := range c.queue {
		if lm.facts[q].Order > o {
			return false
		}
	}
	return true
}

// internal lists the configurations one background event leads to: the
// active run commits a step, pauses at its interrupt, ends, or passes
// the thread on.
func (lm *linModel) internal(c *cfg) []*cfg {
	switch {
	case c.active == "":
		return nil
	case c.ended != "":
		if n := lm.passOn(c); n != nil {
			return []*cfg{n}
		}
		return nil
	case c.paused:
		return nil // until a client resumes or cancels it, or a newer run supersedes it
	}
	var out []*cfg
	if lm.mayCommit(c) && !(asks(c.active) && c.done == 1 && !c.resumd) {
		n := c.clone()
		n.done++
		out = append(out, n.seal())
	}
	if asks(c.active) && c.done == 1 && !c.resumd && !c.cancel && c.sup == "" {
		n := c.clone()
		n.paused = true
		out = append(out, n.seal())
	}
	ends := func(status string) {
		n := c.clone()
		if lm.end(n, status) {
			out = append(out, n.seal())
		}
	}
	switch {
	case c.sup == runs.StrategyRollback:
		ends("discarded") // even with its last step done: it says so
	case c.done == 3:
		ends("completed")
		if c.cancel {
			// The cancel came as its last step was done, before its
			// record said completed (the executor checks for a cancel
			// before it finds nothing left to run, and a run whose
			// last step was committed before a SIGKILL is cancelled
			// when dev starts again): it ends cancelled, its steps in
			// the thread, as a run cancelled earlier keeps its steps.
			if c.sup == runs.StrategyInterrupt {
				ends("kept")
			} else {
				ends("cancelled")
			}
		}
	case c.sup == runs.StrategyInterrupt && (c.done > 0 || c.cancel):
		ends("kept") // drained at a boundary, or cancelled: its steps stay
	case c.cancel:
		ends("cancelled")
	}
	return out
}

// apply returns the configuration operation in with output out leads to
// from c, or nil if c cannot give that output.
func (lm *linModel) apply(c *cfg, in linInput, out linOutput) *cfg {
	n := lm.applyOp(c, in, out)
	if n != nil && in.Last && in.Run != "" && in.Op != "create" {
		if _, ok := n.finalOf(in.Run); ok {
			if n == c {
				n = c.clone()
			}
			n.dropFinal(in.Run)
			n.seal()
		}
	}
	return n
}

func (lm *linModel) applyOp(c *cfg, in linInput, out linOutput) *cfg {
	switch in.Op {
	case "create":
		switch {
		case c.active == "":
			if out.Err != "" {
				return nil
			}
			n := c.clone()
			n.active = in.Run
			if !lm.claims(n, in.Run) || !lm.activate(n) {
				return nil
			}
			return n.seal()
		case in.Strategy == runs.StrategyReject:
			// Busy also while the active run has ended but not yet
			// passed the thread on (its end raced the claim).
			if out.Err != "busy" {
				return nil
			}
			return c
		case out.Err != "" || !lm.mayQueue(c, in.Run):
			return nil
		}
		n := c.clone()
		if !lm.claims(n, in.Run) {
			return nil
		}
		n.queue = append(slices.Clone(n.queue), in.Run)
		// The first interrupt or rollback supersedes a run that has
		// not ended; one that has ended (its end raced the claim) is
		// left as it ended.
		if (in.Strategy == runs.StrategyInterrupt || in.Strategy == runs.StrategyRollback) && n.sup == "" && n.ended == "" {
			n.sup = in.Strategy
			if n.paused {
				// A paused run has no boundary to wait for: it ends.
				status := "kept"
				if in.Strategy == runs.StrategyRollback {
					status = "discarded"
				}
				if !lm.end(n, status) {
					return nil
				}
			}
		}
		return n.seal()
	case "read":
		// A read passes on a run that has ended before it reads.
		if out.Err != "" || c.ended != "" {
			return nil
		}
		h, m := c.lin.sum()
		if c.active != "" {
			for _, w := range chatWrites(c.active)[:c.done] {
				h = extend(h, w)
			}
			m += c.done
		}
		if m != len(out.Messages) || h != out.hash() {
			return nil
		}
		return c
	case "cancel":
		switch {
		case slices.Contains(c.queue, in.Run):
			if out.Err != "" {
				return nil
			}
			n := c.clone()
			n.queue = slices.DeleteFunc(slices.Clone(n.queue), func(r string) bool { return r == in.Run })
			if f, ok := lm.facts[in.Run]; ok && (f.Status != "cancelled" || f.Writes != 0) {
				return nil
			}
			if lm.tracked[in.Run] {
				n.setFinal(in.Run, "cancelled")
			}
			return n.seal()
		case c.active == in.Run && c.ended == "":
			if out.Err != "" {
				return nil
			}
			n := c.clone()
			if n.paused {
				if !lm.end(n, "cancelled") {
					return nil
				}
			} else {
				n.cancel = true
			}
			return n.seal()
		}
		if out.Err != "invalid" {
			return nil
		}
		return c
	case "resume":
		if c.active == in.Run && c.ended == "" && c.paused {
			if out.Err != "" {
				return nil
			}
			n := c.clone()
			n.paused, n.resumd = false, true
			return n.seal()
		}
		if out.Err != "invalid" {
			return nil
		}
		return c
	default: // wait: the run's status
		if out.Err != "" {
			return nil
		}
		running := c.active == in.Run && c.ended == ""
		switch out.Status {
		case "interrupted":
			if !running || !c.paused {
				return nil
			}
		case "waiting":
			if !(running && !c.paused) && !slices.Contains(c.queue, in.Run) {
				return nil
			}
		default:
			if f, ok := c.finalOf(in.Run); !ok || f != out.Status {
				return nil
			}
		}
		return c
	}
}

// cset is the model's state: a set of configurations, sorted by hash.
type cset struct {
	members []*cfg
	hash    uint64
}

func newCset(cs []*cfg) *cset {
	slices.SortFunc(cs, func(a, b *cfg) int { return cmp.Compare(a.h, b.h) })
	cs = slices.CompactFunc(cs, func(a, b *cfg) bool { return a.key == b.key })
	var h uint64
	for _, c := range cs {
		h += c.h
	}
	return &cset{members: cs, hash: h}
}

func (s *cset) equal(o *cset) bool {
	if s.hash != o.hash || len(s.members) != len(o.members) {
		return false
	}
	for i, c := range s.members {
		if c.key != o.members[i].key {
			return false
		}
	}
	return true
}

// closure adds to s every configuration background events lead to.
func (lm *linModel) closure(ctx context.Context, s *cset) []*cfg {
	seen := make(map[ckey]bool, 2*len(s.members))
	all := make([]*cfg, 0, 2*len(s.members))
	for _, c := range s.members {
		if !seen[c.key] {
			seen[c.key] = true
			all = append(all, c)
		}
	}
	for i := 0; i < len(all) && ctx.Err() == nil; i++ {
		for _, n := range lm.internal(all[i]) {
			if !seen[n.key] {
				seen[n.key] = true
				all = append(all, n)
			}
		}
	}
	return all
}

func (lm *linModel) step(ctx context.Context, state, input, output any) (bool, any) {
	s, in, out := state.(*cset), input.(linInput), output.(linOutput)
	var next []*cfg
	for _, c := range lm.closure(ctx, s) {
		if n := lm.apply(c, in, out); n != nil {
			next = append(next, n)
		}
	}
	if len(next) == 0 || ctx.Err() != nil {
		return false, nil
	}
	return true, newCset(next)
}

// model is the porcupine model of a history: per thread partitions, the
// runs that later operations ask about tracked.
func (lm *linModel) model() porcupine.Model {
	return porcupine.Model{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			by := map[string][]porcupine.Operation{}
			var order []string
			for _, op := range history {
				th := op.Input.(linInput).Thread
				if _, ok := by[th]; !ok {
					order = append(order, th)
				}
				by[th] = append(by[th], op)
			}
			out := make([][]porcupine.Operation, 0, len(order))
			for _, th := range order {
				out = append(out, by[th])
			}
			return out
		},
		Init: func() any { return newCset([]*cfg{(&cfg{}).seal()}) },
		Step: func(state, input, output any) (bool, any) {
			return lm.step(context.Background(), state, input, output)
		},
		StepContext: lm.step,
		Equal:       func(a, b any) bool { return a.(*cset).equal(b.(*cset)) },
		Hash:        func(s any) uint64 { return s.(*cset).hash },
		DescribeOperation: func(input, output any) string {
			in, out := input.(linInput), output.(linOutput)
			switch in.Op {
			case "create":
				res := "ok"
				if out.Err != "" {
					res = out.Err
				}
				return fmt.Sprintf("create %s %s → %s", in.Run, in.Strategy, res)
			case "read":
				return fmt.Sprintf("read → %v", out.Messages)
			case "cancel", "resume":
				res := "ok"
				if out.Err != "" {
					res = out.Err
				}
				return fmt.Sprintf("%s %s → %s", in.Op, in.Run, res)
			}
			return fmt.Sprintf("status %s → %s", in.Run, out.Status)
		},
		DescribeState: func(state any) string {
			s := state.(*cset)
			parts := make([]string, len(s.members))
			for i, c := range s.members {
				parts[i] = c.String()
			}
			return fmt.Sprintf("%d configurations: %s", len(parts), strings.Join(parts, " ‖ "))
		},
	}
}

// newLinModel prepares the model of history: it marks each operation that
// is the last to ask about its run, and tracks the runs asked about.
func newLinModel(history []porcupine.Operation, facts map[string]runFact) *linModel {
	lm := &linModel{tracked: map[string]bool{}, facts: facts}
	last := map[string]int{}
	for i, op := range history {
		in := op.Input.(linInput)
		if in.Op == "create" || in.Run == "" {
			continue
		}
		lm.tracked[in.Run] = true
		if j, ok := last[in.Run]; !ok || history[j].Call < op.Call {
			last[in.Run] = i
		}
	}
	for _, i := range last {
		in := history[i].Input.(linInput)
		in.Last = true
		history[i].Input = in
	}
	return lm
}
