package tick_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/tick"
)

// A run that fails counts the node that failed it in its record, whether
// the node ran inline in the tick or remotely.
func TestTickFailedRunCountsTheFailedNode(t *testing.T) {
	for _, remote := range []bool{false, true} {
		t.Run(map[bool]string{false: "inline", true: "remote"}[remote], func(t *testing.T) {
			b := pregel.NewGraph[St]("failing")
			b.AddFunc("ok", func(context.Context, St) (St, error) { return St{Count: 1}, nil })
			var opts []pregel.NodeOption
			if remote {
				opts = append(opts, pregel.Remote())
			}
			b.AddFunc("bad", func(context.Context, St) (St, error) { return St{}, errors.New("boom") }, opts...)
			b.AddEdge(pregel.Start, "ok").AddEdge("ok", "bad").AddEdge("bad", pregel.End)
			g, err := b.Compile()
			if err != nil {
				t.Fatal(err)
			}
			reg, err := runs.NewRegistry(g)
			if err != nil {
				t.Fatal(err)
			}
			ex := newExecutions()
			q := &chaosQueue{seen: map[string]bool{}}
			store := &crashStore{Checkpointer: pregel.NewMemoryStore(), ex: ex}
			rs := runs.NewMemoryStore()
			clock := &fakeClock{now: time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)}
			e := &env{
				h:     &tick.Handler{Graphs: reg, Runs: rs, Checkpoints: store, Queue: q, Claims: &tick.MemoryClaims{}, Now: clock.Now},
				svc:   &runs.Service{Graphs: reg, Runs: rs, Checkpoints: store, Dispatcher: &tick.Dispatcher{Checkpoints: store, Queue: q}},
				queue: q, store: store, ex: ex, clock: clock,
			}
			ctx := context.Background()
			if _, _, err := e.svc.Create(ctx, "failing", runs.CreateRequest{RunID: "r"}); err != nil {
				t.Fatal(err)
			}
			e.drain(t, rand.New(rand.NewPCG(1, 2)), false)
			r, err := e.svc.Get(ctx, "r")
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != pregel.RunFailed || r.FailedNode != "bad" {
				t.Fatalf("run = %s (failed node %q), want failed by bad", r.Status, r.FailedNode)
			}
			if want := (pregel.Counters{Completed: 1, Failed: 1}); r.Counters != want {
				t.Errorf("counters = %+v, want %+v", r.Counters, want)
			}
		})
	}
}
