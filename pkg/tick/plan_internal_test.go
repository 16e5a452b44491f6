package tick

import (
	"context"
	"reflect"
	"strconv"
	"testing"

	"github.com/superstep/superstep/pkg/pregel"
)

// fanCheckpoint is the checkpoint of run id at step 1 whose next step
// runs n fan-out tasks of node work, with items 1..n.
func fanCheckpoint(id string, n int) *pregel.Checkpoint {
	cp := &pregel.Checkpoint{RunID: id, Graph: "plan", Step: 1}
	for i := range n {
		cp.Next = append(cp.Next, pregel.Trigger{Node: "work", Send: true, Arg: []byte(strconv.Itoa(i + 1)), From: []string{"split"}})
	}
	return cp
}

func planGraph(t testing.TB) *pregel.Graph {
	t.Helper()
	type state struct {
		N int `json:"n"`
	}
	g := pregel.NewGraph[state]("plan")
	g.AddFunc("work", func(context.Context, state) (state, error) { return state{}, nil }, pregel.Remote())
	g.AddEdge(pregel.Start, "work").AddEdge("work", pregel.End)
	cg, err := g.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return cg
}

// A node handler's plan of a wide step is the graph's Plan, remembered
// for the next task of the same step only: another run, another step or
// other triggers (even changed in place) are planned again.
func TestPlanRemembersTheWideStep(t *testing.T) {
	g := planGraph(t)
	h := &Handler{}
	cp := fanCheckpoint("r", 100)
	first := h.plan(g, cp)
	if !reflect.DeepEqual(first, g.Plan(cp)) {
		t.Fatal("plan differs from Plan")
	}
	if again := h.plan(g, fanCheckpoint("r", 100)); &again[0] != &first[0] {
		t.Error("the same step (an equal checkpoint) was planned again")
	}
	for name, change := range map[string]func(*pregel.Checkpoint){
		"another run":       func(cp *pregel.Checkpoint) { cp.RunID = "other" },
		"another step":      func(cp *pregel.Checkpoint) { cp.Step = 2 },
		"another item":      func(cp *pregel.Checkpoint) { cp.Next[50].Arg = []byte("7") },
		"one task less":     func(cp *pregel.Checkpoint) { cp.Next = cp.Next[:99] },
		"another source":    func(cp *pregel.Checkpoint) { cp.Next[3].From = []string{"other"} },
		"a failure routed":  func(cp *pregel.Checkpoint) { cp.Next[9].Failure = &pregel.Failure{Node: "work", Error: "boom"} },
		"changed in place":  func(cp *pregel.Checkpoint) { cp.Next[0].Arg[0] = '9' },
		"a skipped trigger": func(cp *pregel.Checkpoint) { cp.Next[1].Skip = "empty" },
	} {
		t.Run(name, func(t *testing.T) {
			h := &Handler{}
			cp := fanCheckpoint("r", 100)
			first := h.plan(g, cp)
			change(cp)
			got := h.plan(g, cp)
			if &got[0] == &first[0] {
				t.Fatal("the remembered plan was used for another step")
			}
			if !reflect.DeepEqual(got, g.Plan(cp)) {
				t.Fatal("plan differs from Plan")
			}
		})
	}
	// The count of remote tasks is remembered with the plan.
	if got, want := h.remoteTasks(g, first), remoteTasks(g, first); got != want || want != 100 {
		t.Errorf("remote tasks of the remembered step: %d, want %d (100)", got, want)
	}
	if got := h.remoteTasks(g, first[:10]); got != 10 {
		t.Errorf("remote tasks of 10 of the step's tasks: %d, want 10", got)
	}
	// A narrow step is not remembered: planning it is cheap.
	small := fanCheckpoint("s", planMemoFrom-1)
	if a, b := h.plan(g, small), h.plan(g, small); &a[0] == &b[0] {
		t.Errorf("a step of %d tasks was remembered", planMemoFrom-1)
	}
}

// BenchmarkNodePlan10000 is what a node task of a 10,000-way step spends
// finding its task: the graph's Plan (every task's id hashed) or the
// handler's remembered plan (the triggers compared).
func BenchmarkNodePlan10000(b *testing.B) {
	g := planGraph(b)
	cp := fanCheckpoint("bench-fanout-b0-1795796821442441200", 10000)
	b.Run("Plan", func(b *testing.B) {
		for b.Loop() {
			g.Plan(cp)
		}
	})
	b.Run("remembered", func(b *testing.B) {
		h := &Handler{}
		h.plan(g, cp)
		for b.Loop() {
			h.plan(g, cp)
		}
	})
}

// TestSameTriggersComparesEveryField fails when pregel.Trigger gains a
// field: sameTriggers and cloneTriggers must then compare and copy it, or
// a node handler would take a step it remembered for a different one.
func TestSameTriggersComparesEveryField(t *testing.T) {
	compared := []string{"Node", "From", "Send", "Arg", "Failure", "Skip", "Fan"}
	typ := reflect.TypeFor[pregel.Trigger]()
	var fields []string
	for i := range typ.NumField() {
		fields = append(fields, typ.Field(i).Name)
	}
	if !reflect.DeepEqual(fields, compared) {
		t.Fatalf("pregel.Trigger has fields %v; sameTriggers and cloneTriggers handle %v: update them", fields, compared)
	}
}
