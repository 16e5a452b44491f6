package tick

import "testing"

// TestDecideTick lists the tick protocol's guards in their order: each
// row holds the guard before it false and its own true, and says what the
// tick does. The later rows check that an earlier guard wins.
func TestDecideTick(t *testing.T) {
	// ready is a tick of the open step 3 of a running run, at step 2 of
	// at most 10, with one task and nothing recorded.
	ready := tickState{found: true, active: true, deployed: true, started: true,
		tickStep: 3, openStep: 3, tasks: 1, adopted: true, maxSteps: 10}
	with := func(f func(*tickState)) tickState {
		s := ready
		f(&s)
		return s
	}
	tests := []struct {
		name string
		s    tickState
		want tickAction
	}{
		{"the run does not exist", tickState{}, tickDrop},
		{"the run is not pending or running", with(func(s *tickState) { s.active = false }), tickStopped},
		{"its graph is not deployed here", with(func(s *tickState) { s.deployed = false }), tickNotDeployed},
		{"it has no checkpoint", with(func(s *tickState) { s.started = false }), tickStart},
		{"a cancel was requested", with(func(s *tickState) { s.cancel = true }), tickCancel},
		{"the tick names a committed step", with(func(s *tickState) { s.tickStep = 2 }), tickResend},
		{"the tick names a later step", with(func(s *tickState) { s.tickStep = 4 }), tickIgnore},
		{"the open step has no task", with(func(s *tickState) { s.tasks = 0 }), tickAdvance},
		{"a drain before the step started", with(func(s *tickState) { s.drain = true }), tickDrain},
		{"another graph version wrote the state", with(func(s *tickState) { s.adopted = false }), tickAdopt},
		{"the run is at MaxSteps", with(func(s *tickState) { s.openStep, s.tickStep = 11, 11 }), tickMaxSteps},
		{"the step runs", ready, tickExecute},

		{"a drain once the step started: it finishes", with(func(s *tickState) { s.drain, s.recorded = true, 1 }), tickExecute},
		{"a cancel wins over a late tick", with(func(s *tickState) { s.cancel, s.tickStep = true, 1 }), tickCancel},
		{"a cancel wins over a drain", with(func(s *tickState) { s.cancel, s.drain = true, true }), tickCancel},
		{"a stopped run ignores a cancel", with(func(s *tickState) { s.active, s.cancel = false, true }), tickStopped},
		{"a late tick is not drained", with(func(s *tickState) { s.drain, s.tickStep = true, 2 }), tickResend},
		{"a drain stops before adopting", with(func(s *tickState) { s.drain, s.adopted = true, false }), tickDrain},
		{"adopting comes before MaxSteps", with(func(s *tickState) { s.adopted, s.openStep, s.tickStep = false, 11, 11 }), tickAdopt},
		{"a run with nothing left at MaxSteps advances (completes)", with(func(s *tickState) { s.tasks, s.openStep, s.tickStep = 0, 11, 11 }), tickAdvance},
	}
	for _, tt := range tests {
		if got := decideTick(tt.s); got != tt.want {
			t.Errorf("%s: decideTick(%+v) = %v, want %v", tt.name, tt.s, got, tt.want)
		}
	}
}
