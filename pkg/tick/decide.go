package tick

// This file holds the tick protocol's decision: what a tick does next,
// as a pure function of what it has read (tickState → tickAction). The
// Handler acts on it (Handler.tick); the guards' order is the protocol.

// tickAction is what a tick does next.
type tickAction int

const (
	// tickDrop: the run does not exist; the message is dropped.
	tickDrop tickAction = iota + 1
	// tickStopped: the run is not pending or running; only a thread
	// hand-off cut short is finished.
	tickStopped
	// tickNotDeployed: the run's graph is not deployed here; the run
	// fails.
	tickNotDeployed
	// tickStart: the run has no checkpoint; its step 0 is written (or a
	// thread's run started), then the tick decides again.
	tickStart
	// tickCancel: a cancel was requested; the run ends at this boundary
	// (the open step committed first if all its tasks settled).
	tickCancel
	// tickResend: the tick names a committed step (a duplicate or late
	// tick); the next tick is sent again, which the queue may drop.
	tickResend
	// tickIgnore: the tick names a step after the open one; no-op.
	tickIgnore
	// tickAdvance: the open step has no task; the run completes or moves
	// on (Handler.advance).
	tickAdvance
	// tickDrain: a drain was requested and the open step has not started
	// (no recorded result); the run stops before it.
	tickDrain
	// tickAdopt: the run's state was written by another graph version;
	// it is adopted (or the run stopped), then the tick decides again.
	tickAdopt
	// tickMaxSteps: the run is at its graph's MaxSteps with work left;
	// it fails.
	tickMaxSteps
	// tickExecute: the open step's tasks run (or are sent) and the step
	// commits once all have settled.
	tickExecute
)

func (a tickAction) String() string {
	names := [...]string{
		tickDrop: "drop", tickStopped: "stopped", tickNotDeployed: "not deployed",
		tickStart: "start", tickCancel: "cancel", tickResend: "resend",
		tickIgnore: "ignore", tickAdvance: "advance", tickDrain: "drain",
		tickAdopt: "adopt", tickMaxSteps: "max steps", tickExecute: "execute",
	}
	if a > 0 && int(a) < len(names) {
		return names[a]
	}
	return "unknown"
}

// tickState is what a tick has read that its next action depends on.
type tickState struct {
	// found: the run exists.
	found bool
	// active: the run is pending or running.
	active bool
	// deployed: the run's graph is deployed here.
	deployed bool
	// started: the run has a checkpoint (its step 0 at least).
	started bool
	// cancel and drain: requested on the run record.
	cancel, drain bool
	// tickStep is the step the tick names; openStep the one after the
	// newest checkpoint.
	tickStep, openStep int
	// tasks is the number of tasks of the open step (planned only when
	// the tick names it); recorded the number of its recorded results.
	tasks, recorded int
	// adopted: the run's state is this graph version's, or was adopted.
	adopted bool
	// maxSteps is the graph's MaxSteps.
	maxSteps int
}

// decideTick is the tick protocol's guards, in order: the first that
// holds decides. A tick acts on the action and, after tickStart or
// tickAdopt, decides again with what it has read since.
func decideTick(s tickState) tickAction {
	switch {
	case !s.found:
		return tickDrop
	case !s.active:
		return tickStopped
	case !s.deployed:
		return tickNotDeployed
	case !s.started:
		return tickStart
	case s.cancel:
		return tickCancel
	case s.tickStep < s.openStep:
		return tickResend
	case s.tickStep > s.openStep:
		return tickIgnore
	case s.tasks == 0:
		return tickAdvance
	case s.drain && s.recorded == 0:
		return tickDrain
	case !s.adopted:
		return tickAdopt
	case s.openStep-1 >= s.maxSteps:
		return tickMaxSteps
	default:
		return tickExecute
	}
}
