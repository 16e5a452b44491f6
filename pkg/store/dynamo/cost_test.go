package dynamo_test

import (
	"time"

	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/superstep/superstep/internal/awsmeter"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/store/dynamo"
	"github.com/superstep/superstep/pkg/tick"
)

// costSteps is the number of steps of the cost tests' loop.
const costSteps = 20

// usage is what a sequence of calls cost: requests and bytes as the meter
// counted them, request units as the capacity estimate has them.
type usage struct {
	calls awsmeter.Stats
	units capacityStats
}

// measure returns what fn cost on e.
func (e *env) measure(t *testing.T, fn func() error) usage {
	t.Helper()
	m, c := e.meter.Snapshot(), e.capacity.snapshot()
	if err := fn(); err != nil {
		t.Fatal(err)
	}
	return usage{calls: e.meter.Snapshot().Sub(m), units: e.capacity.snapshot().sub(c)}
}

// costRow accumulates the usage of one operation over several calls.
type costRow struct {
	n                     int
	requests, reqB, respB int64
	units                 units
	ops                   map[string]int64
}

func (r *costRow) add(u usage) {
	r.n++
	tot := u.calls.Total()
	r.requests += tot.Requests
	r.reqB += tot.RequestBytes
	r.respB += tot.ResponseBytes
	r.units.add(u.units.total())
	if r.ops == nil {
		r.ops = map[string]int64{}
	}
	for _, name := range u.calls.Names() {
		r.ops[name] += u.calls.Op(name).Requests
	}
}

func (r *costRow) String() string {
	n := float64(r.n)
	var ops []string
	for _, name := range slices.Sorted(maps.Keys(r.ops)) {
		ops = append(ops, fmt.Sprintf("%s %.2g", name, float64(r.ops[name])/n))
	}
	return fmt.Sprintf("%5.2f requests (%s), %6.0f B sent, %6.0f B received, %5.2f RRU, %5.2f WRU, $%.3f per million",
		float64(r.requests)/n, strings.Join(ops, ", "), float64(r.reqB)/n, float64(r.respB)/n, r.units.RRU/n, r.units.WRU/n, r.units.cost()/n)
}

// loopCheckpoints returns steps 0..n-1 of a one-channel loop as the engine
// builds them: step i sets count = i and plans the node again.
func loopCheckpoints(run string, n int) []*pregel.Checkpoint {
	var out []*pregel.Checkpoint
	for i := range n {
		cp := &pregel.Checkpoint{
			RunID:    run,
			Graph:    "loop",
			Step:     i,
			Values:   map[string]json.RawMessage{"count": json.RawMessage(fmt.Sprint(i))},
			Versions: map[string]int{"count": i},
			Next:     []pregel.Trigger{{Node: "count", From: []string{"count"}}},
			Counters: pregel.Counters{Completed: i},
		}
		if i > 0 {
			cp.Tasks = []pregel.TaskStatus{{TaskID: fmt.Sprintf("%s:%d:count:0123456789abcdef", run, i), Node: "count", Status: pregel.NodeCompleted, Attempts: 1}}
		} else {
			cp.Next[0].From = []string{pregel.Start}
		}
		out = append(out, cp)
	}
	return out
}

// TestSuperstepCost commits the steps of a small one-channel loop with the
// calls the tick Lambda makes per superstep (Load(Latest), PendingTasks,
// Commit) and reports the requests, bytes and estimated request units of
// each. "warm" uses one Store throughout, as a Lambda container does;
// "cold" a new Store for each call, as if every tick ran in a new
// container.
func TestSuperstepCost(t *testing.T) {
	t.Parallel()
	for _, cold := range []bool{false, true} {
		name := "warm"
		if cold {
			name = "cold"
		}
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			e := newEnv(t)
			shared := e.store()
			store := func() *dynamo.Store {
				if cold {
					return e.store()
				}
				return shared
			}
			run := "cost-" + name
			cps := loopCheckpoints(run, costSteps)
			var load, pending, commit, step costRow
			first := e.measure(t, func() error { return store().Commit(ctx, cps[0]) })
			for _, cp := range cps[1:] {
				l := e.measure(t, func() error {
					got, err := store().Load(ctx, run, pregel.Latest)
					if err == nil && got.Step != cp.Step-1 {
						err = fmt.Errorf("Load(Latest) = step %d, want %d", got.Step, cp.Step-1)
					}
					return err
				})
				p := e.measure(t, func() error {
					got, err := store().PendingTasks(ctx, run, cp.Step)
					if err == nil && len(got) > 0 {
						err = fmt.Errorf("PendingTasks(%d) = %d results, want none", cp.Step, len(got))
					}
					return err
				})
				c := e.measure(t, func() error { return store().Commit(ctx, cp) })
				load.add(l)
				pending.add(p)
				commit.add(c)
				step.add(l)
				step.add(p)
				step.add(c)
				step.n -= 2
			}
			t.Logf("%s, means over steps 1-%d:", name, costSteps-1)
			t.Logf("  Commit(0)     %s", rowOf(first))
			t.Logf("  Load(Latest)  %s", &load)
			t.Logf("  PendingTasks  %s", &pending)
			t.Logf("  Commit        %s", &commit)
			t.Logf("  superstep     %s", &step)
			// The budget: a Query each for Load and PendingTasks, a
			// PutItem, and a GetItem of the previous step when the
			// Store has not seen it.
			n := float64(step.n)
			if wantReq := 3 + btof(cold); float64(step.requests)/n > wantReq || step.units.WRU/n > 1 || step.units.RRU/n > wantReq-1 {
				t.Errorf("a superstep costs %s; want at most %g requests, 1 WRU and %g RRU", &step, wantReq, wantReq-1)
			}
			checkSteps(t, e.store(), run, cps)
		})
	}
}

func rowOf(u usage) *costRow {
	var r costRow
	r.add(u)
	return &r
}

// checkSteps loads every step back with a Store of its own.
func checkSteps(t *testing.T, s *dynamo.Store, run string, cps []*pregel.Checkpoint) {
	t.Helper()
	for _, want := range cps {
		got, err := s.Load(t.Context(), run, want.Step)
		if err != nil {
			t.Fatal(err)
		}
		if !equalValues(got.Values, want.Values) || !maps.Equal(got.Versions, want.Versions) || got.Counters != want.Counters {
			t.Errorf("Load(%d) = %v %v, want %v %v", want.Step, got.Values, got.Versions, want.Values, want.Versions)
		}
	}
}

// TestMultiTaskStepCost reports what a step of two inline tasks costs:
// both results are recorded (RecordTask), then the step commits.
func TestMultiTaskStepCost(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEnv(t)
	s := e.store()
	run := "multi"
	cps := loopCheckpoints(run, 4)
	if err := s.Commit(ctx, cps[0]); err != nil {
		t.Fatal(err)
	}
	var load, pending, record, commit costRow
	for _, cp := range cps[1:] {
		load.add(e.measure(t, func() error { _, err := s.Load(ctx, run, pregel.Latest); return err }))
		pending.add(e.measure(t, func() error { _, err := s.PendingTasks(ctx, run, cp.Step); return err }))
		for i := range 2 {
			r := pregel.TaskResult{TaskID: fmt.Sprintf("%s:%d:n%d", run, cp.Step, i), Node: fmt.Sprint("n", i), Status: pregel.NodeCompleted, Attempts: 1,
				Writes: map[string]json.RawMessage{"count": json.RawMessage(fmt.Sprint(cp.Step))}}
			record.add(e.measure(t, func() error { _, err := s.RecordTask(ctx, run, cp.Step, r); return err }))
		}
		commit.add(e.measure(t, func() error { return s.Commit(ctx, cp) }))
	}
	t.Logf("means over steps 1-3 of two recorded tasks each:")
	t.Logf("  Load(Latest)  %s", &load)
	t.Logf("  PendingTasks  %s", &pending)
	t.Logf("  RecordTask    %s", &record)
	t.Logf("  Commit        %s", &commit)
	for _, cp := range cps[1:] {
		if got, err := s.PendingTasks(ctx, run, cp.Step); err != nil || len(got) != 0 {
			t.Errorf("PendingTasks(%d) after its commit = %v, %v", cp.Step, got, err)
		}
	}
	checkSteps(t, e.store(), run, cps)
}

// loopState is the state of the tick cost test's graph.
type loopState struct {
	Count int `json:"count"`
}

// sliceQueue holds the messages the tick handler sends.
type sliceQueue struct{ ticks []tick.Tick }

func (q *sliceQueue) SendTick(_ context.Context, t tick.Tick) error {
	q.ticks = append(q.ticks, t)
	return nil
}

func (q *sliceQueue) SendTask(context.Context, tick.NodeTask) error {
	return fmt.Errorf("the loop has no remote task")
}

// TestTickCost runs a one-node loop of 20 supersteps through the tick
// handler, with the Store as run store, checkpointer, task claims and run
// loader as the serverless runtime wires it, and reports what the
// DynamoDB calls of each tick cost: warm, one Store for every tick (one
// Lambda container), and cold, a new Store for each.
func TestTickCost(t *testing.T) {
	t.Parallel()
	g := pregel.NewGraph[loopState]("loop")
	g.AddFunc("count", func(_ context.Context, st loopState) (loopState, error) {
		return loopState{Count: st.Count + 1}, nil
	}, pregel.Writes("count"))
	g.AddEdge(pregel.Start, "count")
	g.AddConditionalEdges("count", func(_ context.Context, st loopState) ([]string, error) {
		if st.Count < costSteps {
			return []string{"count"}, nil
		}
		return []string{pregel.End}, nil
	}, "count", pregel.End)
	graph, err := g.Compile()
	if err != nil {
		t.Fatal(err)
	}
	reg, err := runs.NewRegistry(graph)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name         string
		cold, events bool
	}{{"warm", false, false}, {"cold", true, false}, {"warm with events", false, true}, {"cold with events", true, true}} {
		cold := tc.cold
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			e := newEnv(t)
			s := e.store()
			q := &sliceQueue{}
			handler := func() *tick.Handler {
				s := s
				if cold {
					s = e.store()
				}
				h := &tick.Handler{Graphs: reg, Runs: s, Checkpoints: s, Queue: q, Claims: s, Loader: s}
				if tc.events {
					// A step's own events, appended when its handler call
					// ends: no mid-node flush, whose number depends on how
					// long the node takes on a loaded machine.
					h.Events, h.EventFlush = s, time.Hour
				}
				return h
			}
			svc := &runs.Service{Graphs: reg, Runs: s, Checkpoints: s, Dispatcher: &tick.Dispatcher{Checkpoints: s, Queue: q}}
			create := e.measure(t, func() error {
				_, _, err := svc.Create(ctx, "loop", runs.CreateRequest{RunID: "tick-cost"})
				return err
			})
			var ticks []usage
			for len(q.ticks) > 0 {
				tk := q.ticks[0]
				q.ticks = q.ticks[1:]
				h := handler()
				ticks = append(ticks, e.measure(t, func() error { return h.Tick(ctx, tk) }))
			}
			r, err := s.GetRun(ctx, "tick-cost")
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != pregel.RunCompleted || r.Step != costSteps || len(ticks) != costSteps {
				t.Fatalf("run %s at step %d after %d ticks, want completed at step %d", r.Status, r.Step, len(ticks), costSteps)
			}
			var steady, all costRow
			for i, u := range ticks {
				all.add(u)
				if i > 0 && i < len(ticks)-1 {
					steady.add(u)
				}
			}
			t.Logf("create (CreateRun, Commit(0), dispatch): %s", rowOf(create))
			t.Logf("first tick:  %s", rowOf(ticks[0]))
			t.Logf("ticks 2-%d:  %s", costSteps-1, &steady)
			t.Logf("last tick:   %s", rowOf(ticks[len(ticks)-1]))
			t.Logf("all %d ticks: %s", costSteps, &all)
			t.Logf("a steady tick by operation: %s", ticks[1].units)
			// The budget of a tick, warm or cold: one Query for the run
			// record and the newest step (LoadRun), the PutItem of the
			// step, and the GetItem of the run record that reads drain
			// and cancel requests before the next tick is sent.
			//
			// With the run's events, one PutItem more (the step's
			// events in one batch item), and, cold, the Query of the
			// newest batch item before it.
			maxReq, maxRRU, maxWRU := 3.0, 2.0, 1.0
			if tc.events {
				maxReq, maxWRU = maxReq+1+btof(cold), maxWRU+1
				maxRRU += btof(cold)
			}
			n := float64(steady.n)
			if float64(steady.requests)/n > maxReq || steady.units.RRU/n > maxRRU || steady.units.WRU/n > maxWRU {
				t.Errorf("a tick costs %s; want at most %g requests, %g RRU and %g WRU", &steady, maxReq, maxRRU, maxWRU)
			}
			if tc.events {
				page, err := s.EventsSince(ctx, "tick-cost", 0, 0)
				if err != nil || len(page.Events) == 0 || page.Events[len(page.Events)-1].Type != pregel.EventRunFinished {
					t.Fatalf("the run's stream: %d events, %v; want it to end with run_finished", len(page.Events), err)
				}
				t.Logf("the run's stream: %d events", len(page.Events))
			}
		})
	}
}

func btof(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
