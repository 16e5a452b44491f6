package runs_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/superstep/superstep/pkg/pregel"
)

// loopState is the state of loopGraph.
type loopState struct {
	Log   []string `json:"log" reduce:"append"`
	Count int      `json:"count"`
}

// loopGraph increments count until it reaches limit, one step each; hook,
// if set, runs at the start of each step. (The Scheduler's tests in
// package embedded have its twin, over their own state type.)
func loopGraph(t *testing.T, name string, limit int, hook func(ctx context.Context, count int) error) *pregel.Graph {
	t.Helper()
	b := pregel.NewGraph[loopState](name)
	b.AddFunc("inc", func(ctx context.Context, s loopState) (loopState, error) {
		if hook != nil {
			if err := hook(ctx, s.Count); err != nil {
				return loopState{}, err
			}
		}
		return loopState{Count: s.Count + 1, Log: []string{fmt.Sprintf("inc %d", s.Count+1)}}, nil
	})
	b.AddEdge(pregel.Start, "inc")
	b.AddConditionalEdges("inc", func(_ context.Context, s loopState) ([]string, error) {
		if s.Count < limit {
			return []string{"inc"}, nil
		}
		return []string{pregel.End}, nil
	}, "inc", pregel.End)
	g, err := b.Compile()
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return g
}
