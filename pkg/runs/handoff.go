package runs

import (
	"fmt"
	"slices"

	"github.com/superstep/superstep/pkg/pregel"
)

// The thread hand-off is a small state machine. A thread's record (Active,
// Queue, Head) is its state; each change of it is one of the named, pure
// transitions below, applied to the record read from the store and stored
// by one conditional write (MutateThread: UpdateThread at the version
// read), so that every store (memory, SQLite, DynamoDB) runs the same
// machine. A transition also says what must follow it (its Effect), which
// the Service carries out after the write. The records of the runs
// involved change by pure transitions too (supersedeRun, settleRun), each
// one conditional write of the run.

// HandOffKind names a transition of a thread's hand-off.
type HandOffKind string

// The transitions of a thread's hand-off.
const (
	// HandOffClaim: a new run asks for the thread. An idle thread becomes
	// the run's (effect: start it from the head); on a busy thread the
	// strategy decides: reject refuses, the others queue the run, and the
	// first interrupt or rollback to arrive while the active run holds
	// the thread supersedes it (effect: write the supersede on its
	// record; Thread.Superseding is pending until then, and refuses other
	// queueing claims with errSupersedePending).
	HandOffClaim HandOffKind = "claim"
	// HandOffPassOn: the active run left the thread (it ended, or was
	// superseded while paused). The head becomes its last committed step,
	// unless it was discarded or committed none (then the head stays where
	// the run started from); the first queued run becomes active (effect:
	// start it).
	HandOffPassOn HandOffKind = "pass_on"
	// HandOffRelease: a run that could not be stored, or a queued run that
	// was cancelled, leaves the thread without having held it for any step.
	HandOffRelease HandOffKind = "release"
	// HandOffDrop: the claim of a run whose creator stalled (or stopped)
	// for StaleClaim between claiming the thread and storing the run is
	// dropped. The caller first stores the run's record cancelled in its
	// creator's place (a create-if-absent write, see repairClaim): the
	// creator's own store of it then fails, so the run can never start.
	// The run leaves the thread as a released one does (the head stays; an
	// active one's place goes to the first queued run: effect start it),
	// and a pending supersede in its name is dropped with it.
	HandOffDrop HandOffKind = "drop"
)

// HandOffEvent is one event of a thread's hand-off.
type HandOffEvent struct {
	Kind HandOffKind
	// Run is the run the event is about.
	Run string
	// Strategy is a claim's strategy (empty: reject).
	Strategy Strategy
	// Last is the last committed step of a run passing the thread on (nil:
	// none); Discarded says its steps were rolled back.
	Last      *StepRef
	Discarded bool
}

// HandOffEffect is what must follow a transition once it is stored.
type HandOffEffect struct {
	// Start is a run that now holds the thread and must be started (its
	// step 0 built from Base and committed, then dispatched).
	Start string
	// Base is the step Start starts from (nil: the empty state).
	Base *StepRef
	// Supersede is the active run a claim with strategy interrupt or
	// rollback takes the thread from (Thread.Superseding names the claim,
	// pending); Queued is set when the claim queued.
	Supersede string
	Queued    bool
}

// HandOff applies event ev to thread t: it returns the thread's next
// state and the effect to carry out, or an error saying why the event does
// not apply (then t is returned unchanged): a *BusyError, errClaimedYet,
// errSupersedePending, errNotActive, errStop (nothing to change) or a
// thread being deleted.
func HandOff(t Thread, ev HandOffEvent) (Thread, HandOffEffect, error) {
	t = cloneThread(t)
	var eff HandOffEffect
	switch ev.Kind {
	case HandOffClaim:
		if t.Active == ev.Run || slices.Contains(t.Queue, ev.Run) {
			return t, eff, errClaimedYet
		}
		if t.Deleting {
			return t, eff, errDeleting(t.ID)
		}
		if t.Active == "" {
			t.Active, t.Superseding = ev.Run, nil
			eff.Start, eff.Base = ev.Run, cloneRef(t.Head)
			return t, eff, nil
		}
		st := ev.Strategy
		if st == "" {
			st = StrategyReject
		}
		if st == StrategyReject {
			return t, eff, &BusyError{Thread: t.ID, ActiveRun: t.Active}
		}
		if t.Superseding != nil && t.Superseding.Pending {
			// A run queued before this one supersedes the active run
			// and has not written it yet: what it does (or finds it
			// too late to do) comes first.
			return t, eff, errSupersedePending
		}
		if (st == StrategyInterrupt || st == StrategyRollback) && t.Superseding == nil {
			t.Superseding = &Superseding{Run: ev.Run, Strategy: st, Pending: true}
			eff.Supersede = t.Active
		}
		t.Queue = append(t.Queue, ev.Run)
		eff.Queued = true
		return t, eff, nil
	case HandOffPassOn:
		if t.Active != ev.Run {
			return t, eff, errNotActive
		}
		// The head does not move while a run holds the thread: it is the
		// step the run started from, which a run that is discarded, or
		// that committed nothing, leaves it at.
		if ev.Last != nil && !ev.Discarded {
			t.Head = cloneRef(ev.Last)
		}
		t.Active, t.Superseding = "", nil
		if len(t.Queue) > 0 {
			t.Active, t.Queue = t.Queue[0], t.Queue[1:]
			eff.Start, eff.Base = t.Active, cloneRef(t.Head)
		}
		return t, eff, nil
	case HandOffRelease, HandOffDrop:
		if ev.Kind == HandOffDrop && t.Superseding != nil && t.Superseding.Pending && t.Superseding.Run == ev.Run {
			// A run that will never exist supersedes nothing.
			t.Superseding = nil
		}
		switch {
		case t.Active == ev.Run:
			t.Active, t.Superseding = "", nil
			if len(t.Queue) > 0 {
				t.Active, t.Queue = t.Queue[0], t.Queue[1:]
				eff.Start, eff.Base = t.Active, cloneRef(t.Head)
			}
		case slices.Contains(t.Queue, ev.Run):
			t.Queue = slices.DeleteFunc(t.Queue, func(id string) bool { return id == ev.Run })
		default:
			return t, eff, errStop
		}
		if len(t.Queue) == 0 {
			t.Queue = nil
		}
		return t, eff, nil
	}
	return t, eff, fmt.Errorf("hand-off event %q is not one of claim, pass_on, release, drop: %w", ev.Kind, ErrInvalid)
}

func cloneRef(r *StepRef) *StepRef {
	if r == nil {
		return nil
	}
	c := *r
	return &c
}

// supersedeRun is the transition of a run's record when run by takes its
// thread with strategy interrupt or rollback. A pending or running run is
// asked to drain (interrupt: its committed steps stay in the thread) or to
// cancel with its steps discarded (rollback); a paused (interrupted,
// drained) one ends at once, cancelled: it can never be resumed, and says
// which run superseded it. errStop: nothing to change (superseded before,
// or ended: its end passes the thread on).
func supersedeRun(r *Run, by string, st Strategy) error {
	if r.SupersededBy != "" {
		return errStop
	}
	switch r.Status {
	case pregel.RunPending, pregel.RunRunning:
		r.SupersededBy = by
		if st == StrategyInterrupt {
			if !r.DrainRequested && !r.CancelRequested {
				r.DrainRequested, r.DrainReason = true, supersedeReason(by, st)
			}
		} else {
			r.CancelRequested, r.Discarded = true, true
		}
	case pregel.RunInterrupted, pregel.RunDrained:
		r.SupersededBy = by
		r.Discarded = st == StrategyRollback
		if !r.DrainRequested {
			r.DrainRequested, r.DrainReason = true, supersedeReason(by, st)
		}
		settleRun(r)
	default:
		return errStop
	}
	return nil
}

func supersedeReason(by string, st Strategy) string {
	if st == StrategyRollback {
		return fmt.Sprintf("rolled back by run %s on its thread", by)
	}
	return fmt.Sprintf("interrupted by run %s on its thread", by)
}

// settleRun makes a run's status agree with its thread, whatever wrote
// it (every run update goes through it, see Mutate): a superseded run that
// paused (drained, interrupted) has ended, cancelled, as it can never be
// resumed; a discarded run (rolled back) that completed anyway, its last
// step done as the cancel arrived, is cancelled too, as its writes are not
// in the thread. Both keep SupersededBy naming the run that replaced them.
func settleRun(r *Run) {
	switch {
	case r.SupersededBy != "" && (r.Status == pregel.RunDrained || r.Status == pregel.RunInterrupted):
	case r.Discarded && r.Status == pregel.RunCompleted:
	default:
		return
	}
	r.Status, r.Interrupts, r.Resume, r.CancelRequested = pregel.RunCancelled, nil, nil, false
}

// supersededError refuses to resume a superseded run, naming its
// successor.
func supersededError(r Run) error {
	what := "its committed steps stay in the thread"
	if r.Discarded {
		what = "its steps were discarded"
	}
	return fmt.Errorf("run %q was superseded by run %q on its thread (%s) and cannot be resumed; continue with run %q, or create a new run on the thread: %w", r.ID, r.SupersededBy, what, r.SupersededBy, ErrInvalidState)
}
