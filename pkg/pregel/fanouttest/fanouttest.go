// Package fanouttest checks the completion policies of fan-outs
// (pregel.ToleratedFailures, ToleratedFailurePercent, MinSuccesses,
// FanOutOutcomes) on the embedded engine over a checkpoint store: tolerated
// failures reached and exceeded, a minimum of successes reached early with
// the rest cancelled, every item failing, and the node statuses, counters
// and outcomes a run keeps. Stores run it from their tests:
//
//	fanouttest.Run(t, func(t *testing.T) pregel.Checkpointer { return open(t) })
//
// The graphs and cases are exported for other runtimes (pkg/tick runs
// the same cases on the serverless path).
package fanouttest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/superstep/superstep/pkg/pregel"
)

// State is the state of the fan-out graph: items holds the fan-out's
// items, results what the items that completed appended, outcomes what
// happened to each item, and joined what the join saw.
type State struct {
	Items    []int                `json:"items"`
	Results  []int                `json:"results" reduce:"append"`
	Outcomes []pregel.ItemOutcome `json:"outcomes"`
	Joined   []int                `json:"joined"`
}

// Case is one completion-policy scenario: a fan-out over Items, of which
// the items in Fail fail, with Options; the run must end in Status with
// the given counters; Cancelled lists the items expected cancelled (nil:
// none) and ErrContains a piece of the error of a failed run.
type Case struct {
	Name    string
	Items   int
	Fail    []int
	Options []pregel.FanOutOption
	// Remote makes the fan-out's target a remote node (pregel.Remote).
	Remote bool

	Status      pregel.RunStatus
	Counters    pregel.Counters
	Succeeded   []int // items the join sees completed, sorted
	Cancelled   []int // items cancelled, sorted
	ErrContains string
}

// Cases are the scenarios every runtime passes. The minimum cases assume
// items run one at a time in order (pregel.Concurrency(1)) or are
// delivered in order.
func Cases() []Case {
	return []Case{
		{Name: "ToleratedReached", Items: 6, Fail: []int{1, 4}, Options: []pregel.FanOutOption{pregel.ToleratedFailures(2)},
			Status: pregel.RunCompleted, Counters: pregel.Counters{Completed: 6, Failed: 2}, Succeeded: []int{0, 2, 3, 5}},
		{Name: "ToleratedExceeded", Items: 6, Fail: []int{1, 3, 4}, Options: []pregel.FanOutOption{pregel.ToleratedFailures(2)},
			Status: pregel.RunFailed, Counters: pregel.Counters{Completed: 4, Failed: 3}, ErrContains: "3 of 6 items failed, more than the 2 tolerated"},
		{Name: "PercentReached", Items: 6, Fail: []int{0, 1, 2}, Options: []pregel.FanOutOption{pregel.ToleratedFailurePercent(50)},
			Status: pregel.RunCompleted, Counters: pregel.Counters{Completed: 5, Failed: 3}, Succeeded: []int{3, 4, 5}},
		{Name: "PercentExceeded", Items: 6, Fail: []int{0, 1, 2, 3}, Options: []pregel.FanOutOption{pregel.ToleratedFailurePercent(50)},
			Status: pregel.RunFailed, Counters: pregel.Counters{Completed: 3, Failed: 4}, ErrContains: "more than the 3 tolerated"},
		{Name: "MinimumEarly", Items: 6, Options: []pregel.FanOutOption{pregel.MinSuccesses(2)},
			Status: pregel.RunCompleted, Counters: pregel.Counters{Completed: 4, Cancelled: 4}, Succeeded: []int{0, 1}, Cancelled: []int{2, 3, 4, 5}},
		{Name: "MinimumAfterFailures", Items: 5, Fail: []int{0, 1}, Options: []pregel.FanOutOption{pregel.MinSuccesses(2)},
			Status: pregel.RunCompleted, Counters: pregel.Counters{Completed: 4, Failed: 2, Cancelled: 1}, Succeeded: []int{2, 3}, Cancelled: []int{4}},
		{Name: "MinimumUnreachable", Items: 4, Fail: []int{0, 1, 2}, Options: []pregel.FanOutOption{pregel.MinSuccesses(2)},
			Status: pregel.RunFailed, Counters: pregel.Counters{Completed: 2, Failed: 3}, ErrContains: "3 of 4 items failed, more than the 2 tolerated"},
		{Name: "AllFailing", Items: 4, Fail: []int{0, 1, 2, 3}, Options: []pregel.FanOutOption{pregel.ToleratedFailures(3)},
			Status: pregel.RunFailed, Counters: pregel.Counters{Completed: 1, Failed: 4}, ErrContains: "4 of 4 items failed"},
		{Name: "AllFailingTolerated", Items: 4, Fail: []int{0, 1, 2, 3}, Options: []pregel.FanOutOption{pregel.ToleratedFailurePercent(100)},
			Status: pregel.RunCompleted, Counters: pregel.Counters{Completed: 2, Failed: 4}, Succeeded: []int{}},
		{Name: "MinimumAboveItems", Items: 2, Options: []pregel.FanOutOption{pregel.MinSuccesses(3)},
			Status: pregel.RunFailed, Counters: pregel.Counters{Failed: 1}, ErrContains: "produced 2 items, fewer than its MinSuccesses(3)"},
	}
}

// Graph compiles the fan-out graph of c: Start -> split, a fan-out of one
// work task per item with c's options and the outcomes in "outcomes",
// work -> join, join -> End. Items in c.Fail fail; ran, when not nil,
// counts the executions of each item.
func Graph(t testing.TB, name string, c Case, ran *Executions, opts ...pregel.CompileOption) *pregel.Graph {
	t.Helper()
	g := pregel.NewGraph[State](name)
	g.AddFunc("split", func(context.Context, State) (State, error) { return State{}, nil })
	var workOpts []pregel.NodeOption
	if c.Remote {
		workOpts = append(workOpts, pregel.Remote())
	}
	g.AddFunc("work", func(ctx context.Context, _ State) (State, error) {
		n, err := pregel.Arg[int](ctx)
		if err != nil {
			return State{}, err
		}
		ran.add(n)
		if slices.Contains(c.Fail, n) {
			return State{}, fmt.Errorf("item %d failed", n)
		}
		return State{Results: []int{n}}, nil
	}, workOpts...)
	g.AddFunc("join", func(_ context.Context, s State) (State, error) {
		joined := []int{}
		for _, o := range s.Outcomes {
			if o.Succeeded() {
				joined = append(joined, o.Index)
			}
		}
		return State{Joined: joined}, nil
	})
	g.AddEdge(pregel.Start, "split")
	fanOpts := append([]pregel.FanOutOption{pregel.FanOutOutcomes("outcomes")}, c.Options...)
	g.AddFanOut("split", "work", func(_ context.Context, s State) ([]any, error) {
		out := make([]any, len(s.Items))
		for i, v := range s.Items {
			out[i] = v
		}
		return out, nil
	}, fanOpts...)
	g.AddEdge("work", "join").AddEdge("join", pregel.End)
	cg, err := g.Compile(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return cg
}

// Input is the run input of c.
func Input(c Case) State {
	s := State{Items: make([]int, c.Items)}
	for i := range s.Items {
		s.Items[i] = i
	}
	return s
}

// Executions counts the executions of each item; the zero value is ready
// and a nil one counts nothing.
type Executions struct {
	mu sync.Mutex
	n  map[int]int
}

func (e *Executions) add(item int) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n == nil {
		e.n = map[int]int{}
	}
	e.n[item]++
}

// Count returns how many times item ran.
func (e *Executions) Count(item int) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n[item]
}

// Check checks what a run of c ended with: its status, error, counters,
// the statuses of the fan-out's step (step 2) in history, and what the
// join saw. res is the run's final values decoded; history its committed
// steps; runErr the error it failed with.
func Check(t testing.TB, c Case, status pregel.RunStatus, counters pregel.Counters, runErr string, history []pregel.StepInfo, final State) {
	t.Helper()
	if status != c.Status {
		t.Fatalf("run ended %s (error %q), want %s", status, runErr, c.Status)
	}
	if c.ErrContains != "" && !strings.Contains(runErr, c.ErrContains) {
		t.Errorf("run error %q does not say %q", runErr, c.ErrContains)
	}
	if counters != c.Counters {
		t.Errorf("counters %+v, want %+v", counters, c.Counters)
	}
	if c.Status != pregel.RunCompleted {
		return
	}
	var fanStep *pregel.StepInfo
	for i := range history {
		if history[i].Step == 2 {
			fanStep = &history[i]
		}
	}
	if fanStep == nil {
		t.Fatalf("no step 2 in history %+v", history)
	}
	if len(fanStep.Tasks) != c.Items {
		t.Fatalf("step 2 has %d task statuses, want %d", len(fanStep.Tasks), c.Items)
	}
	byItem := map[int]pregel.ItemOutcome{}
	for _, o := range final.Outcomes {
		byItem[o.Index] = o
	}
	if len(final.Outcomes) != c.Items {
		t.Fatalf("%d outcomes, want one per item (%d): %+v", len(final.Outcomes), c.Items, final.Outcomes)
	}
	for i, ts := range fanStep.Tasks {
		o := byItem[i]
		want := pregel.NodeCompleted
		switch {
		case slices.Contains(c.Fail, i) && !slices.Contains(c.Cancelled, i):
			want = pregel.NodeFailed
			if !strings.Contains(ts.Error, fmt.Sprintf("item %d failed", i)) || o.Error != ts.Error {
				t.Errorf("item %d: error %q (outcome %q), want the node's error", i, ts.Error, o.Error)
			}
		case slices.Contains(c.Cancelled, i):
			want = pregel.NodeCancelled
			if !strings.Contains(ts.Reason, "reached its minimum") || o.Reason != ts.Reason {
				t.Errorf("item %d: reason %q (outcome %q), want the fan-out's minimum named", i, ts.Reason, o.Reason)
			}
		}
		if ts.Status != want || o.Status != want {
			t.Errorf("item %d: status %s, outcome %s, want %s", i, ts.Status, o.Status, want)
		}
		if o.TaskID != ts.TaskID || string(o.Item) != fmt.Sprint(i) {
			t.Errorf("item %d: outcome %+v does not name task %s and item %d", i, o, ts.TaskID, i)
		}
	}
	if !slices.Equal(final.Joined, c.Succeeded) {
		t.Errorf("the join saw items %v succeed, want %v", final.Joined, c.Succeeded)
	}
	results := slices.Sorted(slices.Values(final.Results))
	if !slices.Equal(results, c.Succeeded) && !(len(results) == 0 && len(c.Succeeded) == 0) {
		t.Errorf("results %v, want those of the items that succeeded %v", results, c.Succeeded)
	}
}

// Run runs every case on the embedded engine over the stores newStore
// returns, one item at a time (pregel.Concurrency(1)), and checks that no
// cancelled item ran.
func Run(t *testing.T, newStore func(t *testing.T) pregel.Checkpointer) {
	for _, c := range Cases() {
		t.Run(c.Name, func(t *testing.T) {
			store := newStore(t)
			ex := &Executions{}
			g := Graph(t, "fanout-policy", c, ex, pregel.Concurrency(1))
			res, err := g.Run(t.Context(), Input(c), pregel.WithStore(store))
			if res == nil {
				t.Fatalf("run: %v", err)
			}
			msg := ""
			if err != nil {
				msg = err.Error()
			}
			if (err != nil) != (c.Status == pregel.RunFailed) {
				t.Fatalf("run returned error %v with status %s", err, res.Status)
			}
			hist, herr := store.History(t.Context(), res.RunID)
			if herr != nil {
				t.Fatal(herr)
			}
			var final State
			if derr := res.Decode(&final); derr != nil {
				t.Fatal(derr)
			}
			Check(t, c, res.Status, res.Counters, msg, hist, final)
			for _, i := range c.Cancelled {
				if n := ex.Count(i); n != 0 {
					t.Errorf("cancelled item %d ran %d times", i, n)
				}
			}
			var ne *pregel.NodeError
			if c.Status == pregel.RunFailed && !errors.As(err, &ne) {
				t.Errorf("error %v does not name the failed node (pregel.NodeError)", err)
			}
		})
	}
}
