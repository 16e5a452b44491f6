package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/store/sqlite"
)

// loopState is the state of the loop benchmark.
type loopState struct {
	Count int `json:"count"`
}

// loopSteps is the number of supersteps of the loop benchmark.
const loopSteps = 1000

// loopGraph runs one node, tick, that increments Count and routes back to
// itself until Count reaches steps: steps supersteps of one task, as the
// engine's BenchmarkLoop1000 has it.
func loopGraph(tb testing.TB, steps int) *pregel.Graph {
	tb.Helper()
	g := pregel.NewGraph[loopState]("bench-loop")
	g.AddFunc("tick", func(_ context.Context, s loopState) (loopState, error) {
		return loopState{Count: s.Count + 1}, nil
	}, pregel.Writes("count"))
	g.AddEdge(pregel.Start, "tick")
	g.AddConditionalEdges("tick", func(_ context.Context, s loopState) ([]string, error) {
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

// BenchmarkLoop1000 runs a graph of one node that routes back to itself
// for 1000 supersteps, checkpointing every step to a Store on a fresh file,
// and reports the wall time per superstep (ns/superstep, the engine's work
// included) and the CPU time the process spent per superstep
// (cpu-ns/superstep, all threads, user and system; on Unix), which depends
// less on what else the machine runs. Each iteration is one whole run,
// under a new run id, on one Store.
func BenchmarkLoop1000(b *testing.B) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "superstep.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	g := loopGraph(b, loopSteps)
	// One run before timing, checked through the store: every step is
	// committed and the last holds the final count.
	if _, err := g.Run(ctx, loopState{}, pregel.WithStore(s), pregel.WithRunID("check")); err != nil {
		b.Fatal(err)
	}
	last, err := s.Load(ctx, "check", pregel.Latest)
	if err != nil {
		b.Fatal(err)
	}
	if last.Step != loopSteps || string(last.Values["count"]) != fmt.Sprint(loopSteps) {
		b.Fatalf("stored run ends at step %d with count %s, want step %d and count %d", last.Step, last.Values["count"], loopSteps, loopSteps)
	}
	run := 0
	b.ReportAllocs()
	cpu := cpuTime()
	for b.Loop() {
		run++
		res, err := g.Run(ctx, loopState{}, pregel.WithStore(s), pregel.WithRunID(fmt.Sprint("loop-", run)))
		if err != nil {
			b.Fatal(err)
		}
		if res.Status != pregel.RunCompleted || res.Step != loopSteps {
			b.Fatalf("run ended %s at step %d, want %s at step %d", res.Status, res.Step, pregel.RunCompleted, loopSteps)
		}
	}
	steps := float64(b.N * loopSteps)
	b.ReportMetric(float64(b.Elapsed()/time.Nanosecond)/steps, "ns/superstep")
	if cpu := cpuTime() - cpu; cpu > 0 {
		b.ReportMetric(float64(cpu/time.Nanosecond)/steps, "cpu-ns/superstep")
	}
}
