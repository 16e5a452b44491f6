// Package loop is the "counter" example graph: one node, "count", that
// routes back to itself until the count reaches the limit given in the
// input. Each turn of the loop is one superstep, so a run of limit N takes
// exactly N supersteps and leaves N committed checkpoints: a predictable
// shape for testing drain, cancel and resume in every runtime.
//
// Input (all but limit optional):
//
//	{"limit": 5}                    count to 5 in 5 supersteps
//	{"limit": 5, "drain_at": 2}     the node asks the run to drain once the count is 2
//	{"limit": 5, "delay_ms": 200}   each step sleeps 200 ms (honouring cancellation),
//	                                leaving time to drain or cancel from outside
//
// A drained run resumed to its end has the same state as one never
// stopped: count == limit and ticks == [1, 2, ..., limit], each tick
// recorded once.
package loop

import (
	"context"
	"fmt"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
)

// Name is the name the graph is registered under.
const Name = "counter"

// Bounds of the input.
const (
	MaxLimit   = 1000
	MaxDelayMS = 10_000
)

// State is the counter's state.
type State struct {
	// Limit is where counting stops (input, 1 to MaxLimit).
	Limit int `json:"limit"`
	// DrainAt, when positive, makes the node request a drain once the
	// count reaches it (input).
	DrainAt int `json:"drain_at,omitempty"`
	// DelayMS is how long each step sleeps, in milliseconds (input).
	DelayMS int `json:"delay_ms,omitempty"`

	// Count is the number of steps taken so far.
	Count int `json:"count"`
	// Ticks lists every count reached, one entry per step.
	Ticks []int `json:"ticks,omitempty" reduce:"append"`
}

// Graph builds and compiles the counter graph.
func Graph() (*pregel.Graph, error) {
	g := pregel.NewGraph[State](Name).
		Describe("Count from 1 to the input's limit, one superstep per count; for drain and resume tests.").
		ValidateInput(validate)
	g.AddFunc("count", count, pregel.Writes("count", "ticks"))
	g.AddEdge(pregel.Start, "count")
	g.AddConditionalEdges("count", again, "count", pregel.End)
	return g.Compile(pregel.MaxSteps(MaxLimit))
}

func validate(s State) error {
	switch {
	case s.Limit < 1 || s.Limit > MaxLimit:
		return fmt.Errorf("limit must be between 1 and %d, got %d; e.g. {\"limit\": 5}", MaxLimit, s.Limit)
	case s.DelayMS < 0 || s.DelayMS > MaxDelayMS:
		return fmt.Errorf("delay_ms must be between 0 and %d, got %d", MaxDelayMS, s.DelayMS)
	case s.Count != 0 || len(s.Ticks) > 0:
		return fmt.Errorf("count and ticks are outputs; give only limit, drain_at and delay_ms")
	}
	return nil
}

// count takes one step.
func count(ctx context.Context, s State) (State, error) {
	if s.DelayMS > 0 {
		t := time.NewTimer(time.Duration(s.DelayMS) * time.Millisecond)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return State{}, ctx.Err()
		case <-t.C:
		}
	}
	n := s.Count + 1
	if n == s.DrainAt {
		pregel.RequestDrain(ctx, fmt.Sprintf("drain_at %d reached", n))
	}
	return State{Count: n, Ticks: []int{n}}, nil
}

// again is the router after count: loop until the limit.
func again(_ context.Context, s State) ([]string, error) {
	if s.Count < s.Limit {
		return []string{"count"}, nil
	}
	return []string{pregel.End}, nil
}
