package runs

import (
	"errors"
	"reflect"
	"testing"

	"github.com/superstep/superstep/pkg/pregel"
)

func TestHandOffTable(t *testing.T) {
	h := &StepRef{RunID: "a", Step: 2}
	last := &StepRef{RunID: "b", Step: 3}
	tests := []struct {
		name    string
		in      Thread
		ev      HandOffEvent
		want    Thread
		eff     HandOffEffect
		wantErr error
	}{
		{"claim idle", Thread{ID: "t", Head: h}, HandOffEvent{Kind: HandOffClaim, Run: "b"},
			Thread{ID: "t", Head: h, Active: "b"}, HandOffEffect{Start: "b", Base: h}, nil},
		{"claim again", Thread{ID: "t", Active: "b"}, HandOffEvent{Kind: HandOffClaim, Run: "b", Strategy: StrategyEnqueue},
			Thread{ID: "t", Active: "b"}, HandOffEffect{}, errClaimedYet},
		{"claim busy reject", Thread{ID: "t", Active: "b"}, HandOffEvent{Kind: HandOffClaim, Run: "c"},
			Thread{ID: "t", Active: "b"}, HandOffEffect{}, ErrConflict},
		{"claim busy enqueue", Thread{ID: "t", Active: "b", Queue: []string{"x"}}, HandOffEvent{Kind: HandOffClaim, Run: "c", Strategy: StrategyEnqueue},
			Thread{ID: "t", Active: "b", Queue: []string{"x", "c"}}, HandOffEffect{Queued: true}, nil},
		{"claim busy interrupt", Thread{ID: "t", Active: "b"}, HandOffEvent{Kind: HandOffClaim, Run: "c", Strategy: StrategyInterrupt},
			Thread{ID: "t", Active: "b", Queue: []string{"c"}, Superseding: &Superseding{Run: "c", Strategy: StrategyInterrupt, Pending: true}}, HandOffEffect{Queued: true, Supersede: "b"}, nil},
		{"claim busy rollback", Thread{ID: "t", Active: "b"}, HandOffEvent{Kind: HandOffClaim, Run: "c", Strategy: StrategyRollback},
			Thread{ID: "t", Active: "b", Queue: []string{"c"}, Superseding: &Superseding{Run: "c", Strategy: StrategyRollback, Pending: true}}, HandOffEffect{Queued: true, Supersede: "b"}, nil},
		// The first interrupt or rollback supersedes the active run; while
		// its write on the run is pending, no run queues after it.
		{"claim superseded rollback", Thread{ID: "t", Active: "b", Queue: []string{"c"}, Superseding: &Superseding{Run: "c", Strategy: StrategyInterrupt}}, HandOffEvent{Kind: HandOffClaim, Run: "d", Strategy: StrategyRollback},
			Thread{ID: "t", Active: "b", Queue: []string{"c", "d"}, Superseding: &Superseding{Run: "c", Strategy: StrategyInterrupt}}, HandOffEffect{Queued: true}, nil},
		{"claim pending enqueue", Thread{ID: "t", Active: "b", Queue: []string{"c"}, Superseding: &Superseding{Run: "c", Strategy: StrategyRollback, Pending: true}}, HandOffEvent{Kind: HandOffClaim, Run: "d", Strategy: StrategyEnqueue},
			Thread{ID: "t", Active: "b", Queue: []string{"c"}, Superseding: &Superseding{Run: "c", Strategy: StrategyRollback, Pending: true}}, HandOffEffect{}, errSupersedePending},
		{"claim pending interrupt", Thread{ID: "t", Active: "b", Queue: []string{"c"}, Superseding: &Superseding{Run: "c", Strategy: StrategyRollback, Pending: true}}, HandOffEvent{Kind: HandOffClaim, Run: "d", Strategy: StrategyInterrupt},
			Thread{ID: "t", Active: "b", Queue: []string{"c"}, Superseding: &Superseding{Run: "c", Strategy: StrategyRollback, Pending: true}}, HandOffEffect{}, errSupersedePending},
		{"claim pending reject", Thread{ID: "t", Active: "b", Queue: []string{"c"}, Superseding: &Superseding{Run: "c", Strategy: StrategyRollback, Pending: true}}, HandOffEvent{Kind: HandOffClaim, Run: "d"},
			Thread{ID: "t", Active: "b", Queue: []string{"c"}, Superseding: &Superseding{Run: "c", Strategy: StrategyRollback, Pending: true}}, HandOffEffect{}, ErrConflict},
		{"claim deleting", Thread{ID: "t", Deleting: true}, HandOffEvent{Kind: HandOffClaim, Run: "c"},
			Thread{ID: "t", Deleting: true}, HandOffEffect{}, ErrInvalidState},
		{"pass on to queue", Thread{ID: "t", Head: h, Active: "b", Queue: []string{"c", "d"}, Superseding: &Superseding{Run: "d", Strategy: StrategyInterrupt}}, HandOffEvent{Kind: HandOffPassOn, Run: "b", Last: last},
			Thread{ID: "t", Head: last, Active: "c", Queue: []string{"d"}}, HandOffEffect{Start: "c", Base: last}, nil},
		{"pass on idle", Thread{ID: "t", Head: h, Active: "b"}, HandOffEvent{Kind: HandOffPassOn, Run: "b", Last: last},
			Thread{ID: "t", Head: last}, HandOffEffect{}, nil},
		// Issue 22 item 1: a discarded run, or one that committed no step,
		// leaves the head where it started.
		{"pass on discarded", Thread{ID: "t", Head: h, Active: "b", Queue: []string{"c"}}, HandOffEvent{Kind: HandOffPassOn, Run: "b", Last: last, Discarded: true},
			Thread{ID: "t", Head: h, Active: "c", Queue: []string{}}, HandOffEffect{Start: "c", Base: h}, nil},
		{"pass on unstarted", Thread{ID: "t", Head: h, Active: "b"}, HandOffEvent{Kind: HandOffPassOn, Run: "b"},
			Thread{ID: "t", Head: h}, HandOffEffect{}, nil},
		{"pass on not active", Thread{ID: "t", Active: "c"}, HandOffEvent{Kind: HandOffPassOn, Run: "b", Last: last},
			Thread{ID: "t", Active: "c"}, HandOffEffect{}, errNotActive},
		{"release active", Thread{ID: "t", Head: h, Active: "b", Queue: []string{"c"}, Superseding: &Superseding{Run: "c", Strategy: StrategyRollback, Pending: true}}, HandOffEvent{Kind: HandOffRelease, Run: "b"},
			Thread{ID: "t", Head: h, Active: "c"}, HandOffEffect{Start: "c", Base: h}, nil},
		{"release queued", Thread{ID: "t", Active: "b", Queue: []string{"c", "d"}}, HandOffEvent{Kind: HandOffRelease, Run: "c"},
			Thread{ID: "t", Active: "b", Queue: []string{"d"}}, HandOffEffect{}, nil},
		{"release unknown", Thread{ID: "t", Active: "b"}, HandOffEvent{Kind: HandOffRelease, Run: "z"},
			Thread{ID: "t", Active: "b"}, HandOffEffect{}, errStop},
		// A stale claim dropped (its run stored cancelled in its
		// creator's place): it leaves as a released run, the head stays,
		// and a pending supersede in its name goes with it.
		{"drop active", Thread{ID: "t", Head: h, Active: "b", Queue: []string{"c"}, Superseding: &Superseding{Run: "c", Strategy: StrategyInterrupt, Pending: true}}, HandOffEvent{Kind: HandOffDrop, Run: "b"},
			Thread{ID: "t", Head: h, Active: "c"}, HandOffEffect{Start: "c", Base: h}, nil},
		{"drop active alone", Thread{ID: "t", Head: h, Active: "b"}, HandOffEvent{Kind: HandOffDrop, Run: "b"},
			Thread{ID: "t", Head: h}, HandOffEffect{}, nil},
		{"drop queued superseding", Thread{ID: "t", Head: h, Active: "b", Queue: []string{"c", "d"}, Superseding: &Superseding{Run: "c", Strategy: StrategyRollback, Pending: true}}, HandOffEvent{Kind: HandOffDrop, Run: "c"},
			Thread{ID: "t", Head: h, Active: "b", Queue: []string{"d"}}, HandOffEffect{}, nil},
		{"drop queued after supersede written", Thread{ID: "t", Active: "b", Queue: []string{"c", "d"}, Superseding: &Superseding{Run: "c", Strategy: StrategyRollback}}, HandOffEvent{Kind: HandOffDrop, Run: "d"},
			Thread{ID: "t", Active: "b", Queue: []string{"c"}, Superseding: &Superseding{Run: "c", Strategy: StrategyRollback}}, HandOffEffect{}, nil},
		{"drop gone", Thread{ID: "t", Head: h, Active: "c"}, HandOffEvent{Kind: HandOffDrop, Run: "b"},
			Thread{ID: "t", Head: h, Active: "c"}, HandOffEffect{}, errStop},
		{"unknown event", Thread{ID: "t"}, HandOffEvent{Kind: "steal", Run: "z"},
			Thread{ID: "t"}, HandOffEffect{}, ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := cloneThread(tt.in)
			got, eff, err := HandOff(tt.in, tt.ev)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error %v, want %v", err, tt.wantErr)
			}
			if len(got.Queue) == 0 {
				got.Queue = nil
			}
			if len(tt.want.Queue) == 0 {
				tt.want.Queue = nil
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("thread %+v, want %+v", got, tt.want)
			}
			if !reflect.DeepEqual(eff, tt.eff) {
				t.Errorf("effect %+v, want %+v", eff, tt.eff)
			}
			if !reflect.DeepEqual(tt.in, in) {
				t.Errorf("HandOff changed its input thread: %+v, was %+v", tt.in, in)
			}
		})
	}
}

func TestSupersedeRunTable(t *testing.T) {
	tests := []struct {
		name string
		in   Run
		st   Strategy
		want Run
		stop bool
	}{
		{"running interrupt", Run{Status: pregel.RunRunning}, StrategyInterrupt,
			Run{Status: pregel.RunRunning, SupersededBy: "n", DrainRequested: true, DrainReason: "interrupted by run n on its thread"}, false},
		{"running rollback", Run{Status: pregel.RunRunning}, StrategyRollback,
			Run{Status: pregel.RunRunning, SupersededBy: "n", CancelRequested: true, Discarded: true}, false},
		{"interrupted interrupt", Run{Status: pregel.RunInterrupted, Interrupts: []pregel.InterruptInfo{{ID: "q"}}}, StrategyInterrupt,
			Run{Status: pregel.RunCancelled, SupersededBy: "n", DrainRequested: true, DrainReason: "interrupted by run n on its thread"}, false},
		{"drained rollback", Run{Status: pregel.RunDrained, DrainRequested: true, DrainReason: "shutdown"}, StrategyRollback,
			Run{Status: pregel.RunCancelled, SupersededBy: "n", Discarded: true, DrainRequested: true, DrainReason: "shutdown"}, false},
		{"completed", Run{Status: pregel.RunCompleted}, StrategyRollback, Run{Status: pregel.RunCompleted}, true},
		{"superseded before", Run{Status: pregel.RunRunning, SupersededBy: "m"}, StrategyRollback, Run{Status: pregel.RunRunning, SupersededBy: "m"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.in
			err := supersedeRun(&r, "n", tt.st)
			if errors.Is(err, errStop) != tt.stop {
				t.Fatalf("error %v, want stop %v", err, tt.stop)
			}
			if !tt.stop && !reflect.DeepEqual(r, tt.want) {
				t.Errorf("run %+v, want %+v", r, tt.want)
			}
		})
	}
}

// TestSettleRun: whatever executor writes a run's end, its status agrees
// with its thread (issue 22 items 2 and 3).
func TestSettleRun(t *testing.T) {
	tests := []struct {
		name string
		in   Run
		want pregel.RunStatus
	}{
		{"completed under rollback", Run{Status: pregel.RunCompleted, Discarded: true, SupersededBy: "n"}, pregel.RunCancelled},
		{"drained under interrupt", Run{Status: pregel.RunDrained, SupersededBy: "n"}, pregel.RunCancelled},
		{"interrupted under interrupt", Run{Status: pregel.RunInterrupted, SupersededBy: "n", Interrupts: []pregel.InterruptInfo{{ID: "q"}}}, pregel.RunCancelled},
		{"completed under interrupt", Run{Status: pregel.RunCompleted, SupersededBy: "n"}, pregel.RunCompleted},
		{"drained alone", Run{Status: pregel.RunDrained}, pregel.RunDrained},
		{"running under rollback", Run{Status: pregel.RunRunning, Discarded: true, SupersededBy: "n"}, pregel.RunRunning},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.in
			settleRun(&r)
			if r.Status != tt.want || (r.Status == pregel.RunCancelled && len(r.Interrupts) > 0) {
				t.Errorf("status %s interrupts %v, want %s", r.Status, r.Interrupts, tt.want)
			}
		})
	}
}
