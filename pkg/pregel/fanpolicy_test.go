package pregel_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/pregel/fanouttest"
)

func TestFanOutPoliciesMemory(t *testing.T) {
	fanouttest.Run(t, func(*testing.T) pregel.Checkpointer { return pregel.NewMemoryStore() })
}

func TestFanOutPolicyRefusedAtCompile(t *testing.T) {
	type S struct {
		Results  []int                `json:"results" reduce:"append"`
		Outcomes []pregel.ItemOutcome `json:"outcomes"`
	}
	items := func(context.Context, S) ([]any, error) { return []any{1, 2}, nil }
	cases := []struct {
		name string
		add  func(b *pregel.Builder[S])
		want string
	}{
		{"PercentAbove100", func(b *pregel.Builder[S]) {
			b.AddFanOut("split", "work", items, pregel.ToleratedFailurePercent(101))
		}, "ToleratedFailurePercent(101) is outside 0..100"},
		{"PercentBelow0", func(b *pregel.Builder[S]) {
			b.AddFanOut("split", "work", items, pregel.ToleratedFailurePercent(-1))
		}, "ToleratedFailurePercent(-1) is outside 0..100"},
		{"NegativeCount", func(b *pregel.Builder[S]) {
			b.AddFanOut("split", "work", items, pregel.ToleratedFailures(-2))
		}, "ToleratedFailures(-2) is negative"},
		{"ZeroMinimum", func(b *pregel.Builder[S]) {
			b.AddFanOut("split", "work", items, pregel.MinSuccesses(0))
		}, "MinSuccesses(0) must be 1 or more"},
		{"MinimumAboveStaticItems", func(b *pregel.Builder[S]) {
			b.AddFanOutOver("split", "work", []any{1, 2, 3}, pregel.MinSuccesses(4))
		}, "MinSuccesses(4) is more than its 3 items"},
		{"OutcomesWithReducer", func(b *pregel.Builder[S]) {
			b.AddFanOut("split", "work", items, pregel.FanOutOutcomes("results"))
		}, `FanOutOutcomes channel "results" has a reducer`},
		{"OutcomesUnknown", func(b *pregel.Builder[S]) {
			b.AddFanOut("split", "work", items, pregel.FanOutOutcomes("nope"))
		}, `FanOutOutcomes names channel "nope"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := pregel.NewGraph[S]("bad")
			b.AddFunc("split", func(context.Context, S) (S, error) { return S{}, nil })
			b.AddFunc("work", func(context.Context, S) (S, error) { return S{}, nil })
			b.AddEdge(pregel.Start, "split").AddEdge("work", pregel.End)
			c.add(b)
			_, err := b.Compile()
			if !errors.Is(err, pregel.ErrInvalidGraph) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Compile: %v, want an invalid graph error saying %q", err, c.want)
			}
		})
	}
	// A static fan-out whose minimum fits compiles and runs.
	b := pregel.NewGraph[S]("fits")
	b.AddFunc("split", func(context.Context, S) (S, error) { return S{}, nil })
	b.AddFunc("work", func(ctx context.Context, _ S) (S, error) {
		n, err := pregel.Arg[int](ctx)
		return S{Results: []int{n}}, err
	})
	b.AddEdge(pregel.Start, "split").AddEdge("work", pregel.End)
	b.AddFanOutOver("split", "work", []any{1, 2, 3}, pregel.MinSuccesses(3), pregel.FanOutOutcomes("outcomes"))
	g, err := b.Compile()
	if err != nil {
		t.Fatal(err)
	}
	res, err := g.Run(t.Context(), S{})
	if err != nil || res.Status != pregel.RunCompleted || res.Counters.Completed != 4 {
		t.Fatalf("run: %v, %+v", err, res)
	}
}
