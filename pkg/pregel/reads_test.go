package pregel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/superstep/superstep/pkg/pregel"
)

type readsState struct {
	A   int      `json:"a"`
	B   int      `json:"b"`
	Log []string `json:"log" reduce:"append"`
	Out string   `json:"out"`
}

// readsGraph: Start -> narrow (Reads a, Writes log, a router reading log
// and b) -> wide (no declaration) -> End; seen notes what the router saw.
func readsGraph(t *testing.T, seen *[]string) *pregel.Graph {
	t.Helper()
	b := pregel.NewGraph[readsState]("reads")
	b.AddFunc("narrow", func(_ context.Context, st readsState) (readsState, error) {
		return readsState{Log: []string{fmt.Sprintf("narrow saw a=%d b=%d log=%d", st.A, st.B, len(st.Log))}}, nil
	}, pregel.Reads("a"), pregel.Writes("log"))
	b.AddFunc("wide", func(_ context.Context, st readsState) (readsState, error) {
		return readsState{Out: fmt.Sprintf("wide saw a=%d b=%d log=%d", st.A, st.B, len(st.Log))}, nil
	})
	b.AddEdge(pregel.Start, "narrow")
	b.AddConditionalEdges("narrow", func(_ context.Context, st readsState) ([]string, error) {
		*seen = append(*seen, fmt.Sprintf("router saw a=%d b=%d log=%d", st.A, st.B, len(st.Log)))
		return []string{"wide"}, nil
	}, "wide")
	b.AddEdge("wide", pregel.End)
	g, err := b.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// A node that declares Reads sees those channels only, in the embedded
// runtime as on a tick that loaded only them; its router sees its reads
// and writes, after its writes; a node that declares nothing sees all.
func TestReadsView(t *testing.T) {
	var seen []string
	g := readsGraph(t, &seen)
	res, err := g.Run(t.Context(), readsState{A: 1, B: 2, Log: []string{"input"}})
	if err != nil {
		t.Fatal(err)
	}
	var st readsState
	if err := res.Decode(&st); err != nil {
		t.Fatal(err)
	}
	want := readsState{A: 1, B: 2, Log: []string{"input", "narrow saw a=1 b=0 log=0"}, Out: "wide saw a=1 b=2 log=2"}
	if !slices.Equal(st.Log, want.Log) || st.Out != want.Out || st.A != 1 || st.B != 2 {
		t.Errorf("state %+v, want %+v", st, want)
	}
	if !slices.Equal(seen, []string{"router saw a=1 b=0 log=2"}) {
		t.Errorf("router saw %q, want a, and log after the write, not b", seen)
	}
}

func TestStepReads(t *testing.T) {
	b := pregel.NewGraph[readsState]("step-reads")
	nop := func(context.Context, readsState) (readsState, error) { return readsState{}, nil }
	b.AddFunc("ra", nop, pregel.Reads("a"))
	b.AddFunc("rb", nop, pregel.Reads("b"), pregel.Writes("log", "out"))
	b.AddFunc("rbplain", nop, pregel.Reads("b"), pregel.Writes("log"))
	b.AddFunc("all", nop, pregel.Writes("out"))
	b.AddEdge(pregel.Start, "ra").AddEdge("ra", "rbplain").AddEdge("rbplain", "all").AddEdge("all", "rb")
	b.AddConditionalEdges("rb", func(context.Context, readsState) ([]string, error) { return []string{pregel.End}, nil }, pregel.End)
	g, err := b.Compile()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		next  []string
		want  []string
		all   bool
		apply []string // ApplyReads when every channel but a is unloaded and the step appends to log
	}{
		{name: "one node", next: []string{"ra"}, want: []string{"a"}},
		{name: "no router: the reducer it writes is not read", next: []string{"rbplain"}, want: []string{"b"}, apply: []string{"log"}},
		{name: "router: the reducer it writes is read, not the last-value one", next: []string{"rb"}, want: []string{"b", "log"}},
		{name: "union", next: []string{"ra", "rbplain"}, want: []string{"a", "b"}, apply: []string{"log"}},
		{name: "a node that declares nothing reads all", next: []string{"ra", "all"}, all: true},
		{name: "a node not in the graph reads all", next: []string{"ghost"}, all: true},
		{name: "no task", next: nil, want: []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cp := &pregel.Checkpoint{RunID: "r", Step: 3}
			for _, n := range tt.next {
				cp.Next = append(cp.Next, pregel.Trigger{Node: n})
			}
			got, all := g.StepReads(cp)
			if all != tt.all || (!tt.all && !slices.Equal(got, tt.want)) {
				t.Errorf("StepReads = %v, %v; want %v, %v", got, all, tt.want, tt.all)
			}
			cp.Unloaded = map[string]bool{"b": true, "log": true, "out": true}
			var results []pregel.TaskResult
			for _, task := range g.Plan(cp) {
				results = append(results, pregel.TaskResult{TaskID: task.ID, Node: task.Node(), Status: pregel.NodeCompleted,
					Writes: map[string]json.RawMessage{"log": json.RawMessage(`["x"]`), "out": json.RawMessage(`"y"`)}})
			}
			if len(results) == 0 || tt.apply == nil {
				return
			}
			if got := g.ApplyReads(cp, results); !slices.Equal(got, tt.apply) {
				t.Errorf("ApplyReads = %v, want %v", got, tt.apply)
			}
		})
	}
}

// Apply refuses to reduce into a channel that was not loaded, replaces a
// last-value one, and carries the rest of Unloaded to the next checkpoint.
func TestApplyUnloaded(t *testing.T) {
	var seen []string
	g := readsGraph(t, &seen)
	cp := &pregel.Checkpoint{
		RunID: "r", Graph: "reads", Step: 1,
		Values:   map[string]json.RawMessage{"a": json.RawMessage(`1`)},
		Versions: map[string]int{"a": 0, "b": 0, "log": 0, "out": 0},
		Next:     []pregel.Trigger{{Node: "wide"}},
		Unloaded: map[string]bool{"b": true, "log": true, "out": true},
	}
	task := g.Plan(cp)[0]
	tests := []struct {
		name    string
		writes  map[string]json.RawMessage
		err     string
		wantOut map[string]bool
	}{
		{name: "append to an unloaded channel", writes: map[string]json.RawMessage{"log": json.RawMessage(`["x"]`)}, err: `channel "log", which task ` + task.ID + ` (node "wide") writes, was not loaded`},
		{name: "replace an unloaded last-value channel", writes: map[string]json.RawMessage{"out": json.RawMessage(`"y"`)}, wantOut: map[string]bool{"b": true, "log": true}},
		{name: "write a loaded channel", writes: map[string]json.RawMessage{"a": json.RawMessage(`5`)}, wantOut: map[string]bool{"b": true, "log": true, "out": true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := g.Apply(cp, []pregel.Task{task}, []pregel.TaskResult{{TaskID: task.ID, Node: "wide", Status: pregel.NodeCompleted, Writes: tt.writes}})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Apply: %v, want an error containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !mapsEqual(out.Checkpoint.Unloaded, tt.wantOut) {
				t.Errorf("next Unloaded = %v, want %v", out.Checkpoint.Unloaded, tt.wantOut)
			}
			if len(cp.Unloaded) != 3 {
				t.Errorf("Apply changed the Unloaded of its input: %v", cp.Unloaded)
			}
		})
	}
}

func mapsEqual(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// A task whose node reads a channel that was not loaded fails, naming the
// node and the channel; it never runs on an empty value.
func TestExecuteFromUnloaded(t *testing.T) {
	var seen []string
	g := readsGraph(t, &seen)
	tests := []struct {
		name     string
		node     string
		unloaded map[string]bool
		err      string
	}{
		{name: "declared read not loaded", node: "narrow", unloaded: map[string]bool{"a": true}, err: `node "narrow" reads channel "a", which was not loaded`},
		{name: "undeclared node, anything not loaded", node: "wide", unloaded: map[string]bool{"b": true}, err: `node "wide" reads channel "b", which was not loaded`},
		{name: "what it does not read is not loaded", node: "narrow", unloaded: map[string]bool{"b": true, "out": true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cp := &pregel.Checkpoint{
				RunID: "r", Graph: "reads", Step: 1,
				Values:   map[string]json.RawMessage{"a": json.RawMessage(`1`), "log": json.RawMessage(`["x"]`)},
				Versions: map[string]int{"a": 0, "b": 0, "log": 0, "out": 0},
				Next:     []pregel.Trigger{{Node: tt.node}},
				Unloaded: tt.unloaded,
			}
			res := g.ExecuteFrom(t.Context(), g.Plan(cp)[0], cp, nil)
			if tt.err == "" {
				if res.Status != pregel.NodeCompleted {
					t.Fatalf("status %s (%s), want completed", res.Status, res.Error)
				}
				return
			}
			if res.Status != pregel.NodeFailed || !strings.Contains(res.Error, tt.err) {
				t.Fatalf("status %s, error %q; want failed with %q", res.Status, res.Error, tt.err)
			}
		})
	}
}

// CheckReads fails a task whose writes depend on a channel its node does
// not declare, naming both; honest nodes, and nodes that pass their state
// back, pass.
func TestCheckReads(t *testing.T) {
	tests := []struct {
		name string
		fn   func(context.Context, readsState) (readsState, error)
		err  string
	}{
		{name: "reads what it declares", fn: func(_ context.Context, st readsState) (readsState, error) {
			return readsState{Out: fmt.Sprint(st.A)}, nil
		}},
		{name: "passes its state back", fn: func(_ context.Context, st readsState) (readsState, error) {
			st.Out = fmt.Sprint(st.A)
			return st, nil
		}},
		{name: "reads an undeclared channel", fn: func(_ context.Context, st readsState) (readsState, error) {
			return readsState{Out: fmt.Sprint(st.A, st.B)}, nil
		}, err: `node "sneaky" reads channel "b", which it does not declare`},
		{name: "fails on an undeclared channel", fn: func(_ context.Context, st readsState) (readsState, error) {
			if len(st.Log) > 0 {
				return readsState{}, fmt.Errorf("log is not empty")
			}
			return readsState{Out: "ok"}, nil
		}, err: `node "sneaky" reads channel "log"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := pregel.NewGraph[readsState]("check")
			b.AddFunc("sneaky", tt.fn, pregel.Reads("a"))
			b.AddEdge(pregel.Start, "sneaky").AddEdge("sneaky", pregel.End)
			g, err := b.Compile()
			if err != nil {
				t.Fatal(err)
			}
			in := readsState{A: 1, B: 2, Log: []string{"x"}}
			_, err = g.Run(t.Context(), in, pregel.CheckReads())
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("Run with CheckReads: %v", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("Run with CheckReads: %v; want an error containing %q", err, tt.err)
			}
			// Without the check, the run completes on the declared view.
			if _, err := g.Run(t.Context(), in); err != nil {
				t.Fatalf("Run without CheckReads: %v", err)
			}
		})
	}
}
