package pregel_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/superstep/superstep/pkg/pregel"
)

// The engine benchmarks run whole graphs with Graph.Run on a fresh
// MemoryStore, so every superstep is planned, executed, applied and
// committed as in production, minus the cost of a durable store. Node
// bodies are trivial, so the time measured is engine overhead. Each
// benchmark reports ns/task (wall time per node task executed) and
// ns/superstep beside the usual ns/op; bench/README.md records the figures.

// benchChainState is the state of the chain benchmark: one last-value
// channel that every node overwrites.
type benchChainState struct {
	N int `json:"n"`
}

// benchFanOutState is the state of the fan-out benchmark: workers append
// to Results, the collector writes Total.
type benchFanOutState struct {
	Results []int `json:"results" reduce:"append"`
	Total   int   `json:"total"`
}

// benchLoopState is the state of the loop benchmark.
type benchLoopState struct {
	Count int `json:"count"`
}

const (
	benchChainLen   = 100
	benchFanOutSize = 100
	benchLoopSteps  = 1000
)

// benchChainGraph is Start -> n0 -> n1 -> ... -> n(size-1) -> End; each
// node increments N.
func benchChainGraph(tb testing.TB, size int) *pregel.Graph {
	tb.Helper()
	g := pregel.NewGraph[benchChainState]("bench-chain")
	inc := func(_ context.Context, s benchChainState) (benchChainState, error) {
		return benchChainState{N: s.N + 1}, nil
	}
	prev := pregel.Start
	for i := range size {
		name := "n" + strconv.Itoa(i)
		g.AddFunc(name, inc, pregel.Writes("n"))
		g.AddEdge(prev, name)
		prev = name
	}
	g.AddEdge(prev, pregel.End)
	graph, err := g.Compile(pregel.MaxSteps(size + 10))
	if err != nil {
		tb.Fatal(err)
	}
	return graph
}

// benchFanOutGraph is Start -> split, a fan-out of size work tasks from
// split, and an edge from work to collect: split (1 task), work (size
// tasks) and collect (1 task) run in three supersteps.
func benchFanOutGraph(tb testing.TB, size int) *pregel.Graph {
	tb.Helper()
	items := make([]any, size)
	for i := range items {
		items[i] = i
	}
	g := pregel.NewGraph[benchFanOutState]("bench-fanout")
	g.AddFunc("split", func(context.Context, benchFanOutState) (benchFanOutState, error) {
		return benchFanOutState{}, nil
	})
	g.AddFunc("work", func(ctx context.Context, _ benchFanOutState) (benchFanOutState, error) {
		i, err := pregel.Arg[int](ctx)
		if err != nil {
			return benchFanOutState{}, err
		}
		return benchFanOutState{Results: []int{i}}, nil
	}, pregel.Writes("results"))
	g.AddFunc("collect", func(_ context.Context, s benchFanOutState) (benchFanOutState, error) {
		return benchFanOutState{Total: len(s.Results)}, nil
	}, pregel.Writes("total"))
	g.AddEdge(pregel.Start, "split")
	g.AddFanOut("split", "work", func(context.Context, benchFanOutState) ([]any, error) {
		return items, nil
	})
	g.AddEdge("work", "collect")
	g.AddEdge("collect", pregel.End)
	graph, err := g.Compile()
	if err != nil {
		tb.Fatal(err)
	}
	return graph
}

// benchLoopGraph runs one node, tick, that increments Count and routes
// back to itself until Count reaches steps: steps supersteps of one task.
func benchLoopGraph(tb testing.TB, steps int) *pregel.Graph {
	tb.Helper()
	g := pregel.NewGraph[benchLoopState]("bench-loop")
	g.AddFunc("tick", func(_ context.Context, s benchLoopState) (benchLoopState, error) {
		return benchLoopState{Count: s.Count + 1}, nil
	}, pregel.Writes("count"))
	g.AddEdge(pregel.Start, "tick")
	g.AddConditionalEdges("tick", func(_ context.Context, s benchLoopState) ([]string, error) {
		if s.Count >= steps {
			return []string{pregel.End}, nil
		}
		return []string{"tick"}, nil
	}, "tick", pregel.End)
	graph, err := g.Compile(pregel.MaxSteps(steps + steps/10))
	if err != nil {
		tb.Fatal(err)
	}
	return graph
}

// benchRun runs g once to completion on a fresh MemoryStore.
func benchRun(ctx context.Context, g *pregel.Graph, input any) (*pregel.Result, error) {
	res, err := g.Run(ctx, input, pregel.WithStore(pregel.NewMemoryStore()), pregel.WithRunID("bench"))
	if err != nil {
		return nil, err
	}
	if res.Status != pregel.RunCompleted {
		return nil, fmt.Errorf("run ended %s, want %s", res.Status, pregel.RunCompleted)
	}
	return res, nil
}

// benchGraph runs g b.N times and reports ns/task and ns/superstep. It
// checks one run first: that it completes with the expected number of
// node tasks and supersteps, and that check reports the expected state.
func benchGraph(b *testing.B, g *pregel.Graph, input any, tasks, steps int, check func(*pregel.Result) error) {
	b.Helper()
	ctx := context.Background()
	res, err := benchRun(ctx, g, input)
	if err != nil {
		b.Fatal(err)
	}
	if got := res.Counters.Completed; got != tasks {
		b.Fatalf("run completed %d node tasks, want %d", got, tasks)
	}
	if res.Step != steps {
		b.Fatalf("run took %d supersteps, want %d", res.Step, steps)
	}
	if err := check(res); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := benchRun(ctx, g, input); err != nil {
			b.Fatal(err)
		}
	}
	total := float64(b.Elapsed().Nanoseconds())
	b.ReportMetric(total/float64(b.N*tasks), "ns/task")
	b.ReportMetric(total/float64(b.N*steps), "ns/superstep")
}

// BenchmarkChain100 runs a chain of 100 nodes: 100 supersteps of one task.
func BenchmarkChain100(b *testing.B) {
	g := benchChainGraph(b, benchChainLen)
	benchGraph(b, g, benchChainState{}, benchChainLen, benchChainLen, func(res *pregel.Result) error {
		var s benchChainState
		if err := res.Decode(&s); err != nil {
			return err
		}
		if s.N != benchChainLen {
			return fmt.Errorf("n = %d, want %d", s.N, benchChainLen)
		}
		return nil
	})
}

// BenchmarkFanOut100 runs split, a 100-way fan-out of work tasks appending
// to an append-reduced channel, and a collector: 102 tasks in 3 supersteps.
func BenchmarkFanOut100(b *testing.B) {
	g := benchFanOutGraph(b, benchFanOutSize)
	benchGraph(b, g, benchFanOutState{}, benchFanOutSize+2, 3, func(res *pregel.Result) error {
		var s benchFanOutState
		if err := res.Decode(&s); err != nil {
			return err
		}
		if s.Total != benchFanOutSize || len(s.Results) != benchFanOutSize {
			return fmt.Errorf("total = %d with %d results, want %d", s.Total, len(s.Results), benchFanOutSize)
		}
		return nil
	})
}

// BenchmarkLoop1000 runs one node that routes back to itself 1000 times:
// 1000 supersteps of one task.
func BenchmarkLoop1000(b *testing.B) {
	g := benchLoopGraph(b, benchLoopSteps)
	benchGraph(b, g, benchLoopState{}, benchLoopSteps, benchLoopSteps, func(res *pregel.Result) error {
		var s benchLoopState
		if err := res.Decode(&s); err != nil {
			return err
		}
		if s.Count != benchLoopSteps {
			return fmt.Errorf("count = %d, want %d", s.Count, benchLoopSteps)
		}
		return nil
	})
}
