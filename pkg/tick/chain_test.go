package tick_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/tick"
)

// chained is the chain the tests below turn on: long enough for the test
// graph's inline steps 3-6 (join, loop three times) to run in one tick.
var chained = tick.Chain{Steps: 100}

// runToEnd creates run id and delivers its messages, in order, until none
// is left; it returns the run.
func runToEnd(t *testing.T, e *env, id string) runs.Run {
	t.Helper()
	ctx := context.Background()
	if _, _, err := e.svc.Create(ctx, "tickgraph", runs.CreateRequest{RunID: id}); err != nil {
		t.Fatal(err)
	}
	e.drain(t, rand.New(rand.NewPCG(1, 1)), false)
	r, err := e.svc.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A chained tick runs the inline steps after a remote one in one call and
// ends where an unchained run ends, with fewer ticks.
func TestTickChainRunsToTheEmbeddedResult(t *testing.T) {
	ref := reference(t, false)
	plain := newEnv(t, false)
	runToEnd(t, plain, "p")
	e := newEnv(t, false)
	e.h.Chain = chained
	r := runToEnd(t, e, "c")
	if r.Status != pregel.RunCompleted || r.Counters != ref.Counters || r.Step != ref.Step {
		t.Fatalf("run = %+v, want completed like %+v", r, ref)
	}
	cp, _ := e.store.Load(context.Background(), "c", pregel.Latest)
	if !equalJSON(cp.Values, ref.Values) {
		t.Errorf("values %s, want %s", cp.Values, ref.Values)
	}
	// Steps 3-6 are inline after the remote step 2: the tick of step 3,
	// which the node handler committing step 2 sends, runs them, so the
	// ticks of steps 4-6 are never sent.
	if got, want := e.queue.ticks, plain.queue.ticks-3; got != want {
		t.Errorf("%d ticks sent with a chain, %d without; want %d", got, plain.queue.ticks, want)
	}
}

// The chain's budgets: a step count, a time budget and the margin before
// the context's deadline each end it; the next tick is then sent.
func TestTickChainBudgets(t *testing.T) {
	plain := newEnv(t, false)
	runToEnd(t, plain, "p")
	for _, tc := range []struct {
		name  string
		chain tick.Chain
		// deadline, if set, is the context's deadline from now.
		deadline time.Duration
		saved    int
	}{
		{"no chain", tick.Chain{}, 0, 0},
		{"one step is no chain", tick.Chain{Steps: 1}, 0, 0},
		{"two steps a tick", tick.Chain{Steps: 2}, 0, 2},   // 3+4, 5+6
		{"three steps a tick", tick.Chain{Steps: 3}, 0, 2}, // 3+4+5, 6
		{"unbounded", chained, 0, 3},
		{"deadline inside the margin", tick.Chain{Steps: 100, Margin: time.Hour}, 30 * time.Minute, 0},
		{"deadline far", tick.Chain{Steps: 100, Margin: time.Second}, time.Hour, 3},
		{"time budget spent", tick.Chain{Steps: 100, Budget: time.Nanosecond}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, false)
			e.h.Chain = tc.chain
			e.deadline = tc.deadline
			if r := runToEnd(t, e, "b"); r.Status != pregel.RunCompleted {
				t.Fatalf("run %s", r.Status)
			}
			if got, want := e.queue.ticks, plain.queue.ticks-tc.saved; got != want {
				t.Errorf("%d ticks sent, want %d (%d unchained)", got, want, plain.queue.ticks)
			}
		})
	}
}

// A crash at every point of a chain — before or after each store call
// (commits, recorded results), and each send (the tick that hands over
// at the chain's end) — ends like an undisturbed run, and no task whose
// result was recorded runs again.
func TestTickChainFaults(t *testing.T) {
	for _, ask := range []bool{false, true} {
		ref := reference(t, ask)
		for failAt := 1; failAt <= 24; failAt++ {
			for _, after := range []bool{false, true} {
				t.Run(fmt.Sprintf("ask=%v/store call %d, after=%v", ask, failAt, after), func(t *testing.T) {
					e := newEnv(t, ask)
					e.h.Chain = chained
					faultCaseAt(t, e, ref, ask, rand.New(rand.NewPCG(uint64(failAt), 3)), failAt, after, 0)
				})
			}
		}
		for failSend := 1; failSend <= 16; failSend++ {
			t.Run(fmt.Sprintf("ask=%v/send %d", ask, failSend), func(t *testing.T) {
				e := newEnv(t, ask)
				e.h.Chain = chained
				faultCaseAt(t, e, ref, ask, rand.New(rand.NewPCG(uint64(failSend), 5)), 0, false, failSend)
			})
		}
	}
}

// A drain or a cancel requested while a step of a chain executes stops
// the run at the boundary after that step, as it does without a chain.
func TestTickChainStops(t *testing.T) {
	for _, mode := range []string{"drain", "cancel"} {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t, false)
			e.h.Chain = chained
			ctx := context.Background()
			const id = "s"
			loops := 0
			e.ex.hook = func(ctx context.Context) {
				if info, _ := pregel.TaskFrom(ctx); info.Node != "loop" {
					return
				}
				if loops++; loops != 2 { // the loop's second step: step 5
					return
				}
				var err error
				if mode == "drain" {
					_, err = e.svc.Drain(ctx, id, "maintenance")
				} else {
					_, err = e.svc.Cancel(ctx, id)
				}
				if err != nil {
					t.Errorf("%s: %v", mode, err)
				}
			}
			r := runToEnd(t, e, id)
			want := pregel.RunDrained
			if mode == "cancel" {
				want = pregel.RunCancelled
			}
			if r.Status != want || r.Step != 5 {
				t.Fatalf("run %s at step %d, want %s at step 5 (the step in progress is committed, the next one not started)", r.Status, r.Step, want)
			}
			if loops != 2 {
				t.Errorf("loop ran %d times, want 2", loops)
			}
			if mode == "drain" {
				e.ex.hook = nil
				if _, err := e.svc.Resume(ctx, id, runs.ResumeRequest{}); err != nil {
					t.Fatal(err)
				}
				e.drain(t, rand.New(rand.NewPCG(2, 2)), false)
				ref := reference(t, false)
				r, _ = e.svc.Get(ctx, id)
				cp, _ := e.store.Load(ctx, id, pregel.Latest)
				if r.Status != pregel.RunCompleted || !equalJSON(cp.Values, ref.Values) {
					t.Fatalf("after resume: %s %s, want completed with %s", r.Status, cp.Values, ref.Values)
				}
			}
		})
	}
}
