package tick_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/superstep/superstep/internal/mototest"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/store/dynamo"
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

// A drain or a cancel lands at every point of a chain: while each step
// of it executes, and just after each of its commits. A request made while
// step s executes stops the run after s; one made just after s commits,
// before the chain goes on, stops it after s on a store whose chain reads
// the run record before each step (memory), and after s+1, the step the
// commit opened, on DynamoDB, whose chained steps do not read the record
// and learn of the request from the commit of s+1 (tick.StopCommitter).
// Either way no step after that one starts, no recorded task runs again,
// and a drained run resumes to the embedded run's result.
func TestTickChainStopsAtEveryBoundary(t *testing.T) {
	srv := mototest.Start(t)
	ddb := dynamodb.NewFromConfig(srv.Config)
	ref := reference(t, false)
	type point struct {
		during bool
		step   int // the step executing, or the one just committed
	}
	var points []point
	for s := 3; s <= 6; s++ { // the chain: join, loop, loop, loop
		points = append(points, point{during: true, step: s})
	}
	for s := 2; s <= 6; s++ { // 2: the remote step before the chain
		points = append(points, point{step: s})
	}
	table := "chainstop"
	if err := dynamo.CreateTable(t.Context(), ddb, table); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, store := range []string{"memory", "dynamo"} {
		for _, mode := range []string{"drain", "cancel"} {
			for _, p := range points {
				n++
				id := fmt.Sprintf("s%d", n)
				name := fmt.Sprintf("%s/%s/after commit of %d", store, mode, p.step)
				if p.during {
					name = fmt.Sprintf("%s/%s/during %d", store, mode, p.step)
				}
				t.Run(name, func(t *testing.T) {
					be := memoryBackend(t)
					if store == "dynamo" { // one table, a run id per case
						t.Parallel() // moto answers requests concurrently
						s := dynamo.New(ddb, table)
						be = backend{checkpoints: s, runs: s, claims: s, loader: s}
					}
					e := newEnvOn(t, false, be)
					e.h.Chain = chained
					want := p.step
					if !p.during && store == "dynamo" && p.step >= 3 && p.step < 6 {
						want = p.step + 1 // the chain had opened it
					}
					chainStopCase(t, e, ref, id, mode, p.during, p.step, want)
				})
			}
		}
	}
}

// chainStopCase runs run id with a drain or cancel (mode) requested while
// step at executes (during) or just after it commits, and checks that the
// run stops after step want, and that a drained run resumes to ref.
func chainStopCase(t *testing.T, e *env, ref *pregel.Result, id, mode string, during bool, at, want int) {
	ctx := context.Background()
	var once sync.Once
	request := func() {
		once.Do(func() {
			var err error
			if mode == "cancel" {
				_, err = e.svc.Cancel(ctx, id)
			} else {
				_, err = e.svc.Drain(ctx, id, "maintenance")
			}
			if err != nil {
				t.Errorf("%s: %v", mode, err)
			}
		})
	}
	var mu sync.Mutex
	latest := 0 // the latest step a node executed in
	e.ex.hook = func(ctx context.Context) {
		info, _ := pregel.TaskFrom(ctx)
		mu.Lock()
		latest = max(latest, info.Step)
		mu.Unlock()
		if during && info.Step == at {
			request()
		}
	}
	if !during {
		e.store.afterCommit = func(cp *pregel.Checkpoint) {
			if cp.Step == at {
				request()
			}
		}
	}
	r := runToEnd(t, e, id)
	wantStatus := pregel.RunDrained
	if mode == "cancel" {
		wantStatus = pregel.RunCancelled
	}
	if r.Status != wantStatus || r.Step != want {
		t.Fatalf("run %s at step %d, want %s at step %d", r.Status, r.Step, wantStatus, want)
	}
	if latest != want {
		t.Errorf("a node executed in step %d; the run stopped after step %d", latest, want)
	}
	if len(e.ex.again) > 0 {
		t.Errorf("recorded tasks executed again: %v", e.ex.again)
	}
	if mode != "drain" {
		return
	}
	e.ex.hook, e.store.afterCommit = nil, nil
	if _, err := e.svc.Resume(ctx, id, runs.ResumeRequest{}); err != nil {
		t.Fatal(err)
	}
	e.drain(t, rand.New(rand.NewPCG(2, 2)), false)
	r, _ = e.svc.Get(ctx, id)
	cp, err := e.store.Load(ctx, id, pregel.Latest)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != pregel.RunCompleted || r.Step != ref.Step || !equalJSON(cp.Values, ref.Values) {
		t.Fatalf("after resume: %s at step %d with %s, want completed at %d with %s", r.Status, r.Step, cp.Values, ref.Step, ref.Values)
	}
}
