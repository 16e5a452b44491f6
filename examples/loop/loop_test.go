package loop

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
)

func compiled(t *testing.T) *pregel.Graph {
	t.Helper()
	g, err := Graph()
	if err != nil {
		t.Fatalf("Graph: %v", err)
	}
	return g
}

func decode(t *testing.T, res *pregel.Result) State {
	t.Helper()
	var s State
	if err := res.Decode(&s); err != nil {
		t.Fatalf("Decode: %v", err)
	}
	return s
}

func ticks(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

func TestCountsToLimit(t *testing.T) {
	g := compiled(t)
	for _, limit := range []int{1, 5, 100} {
		res, err := g.Run(context.Background(), State{Limit: limit})
		if err != nil || res.Status != pregel.RunCompleted {
			t.Fatalf("limit %d: Run = %+v, %v", limit, res, err)
		}
		s := decode(t, res)
		if res.Step != limit || s.Count != limit || !slices.Equal(s.Ticks, ticks(limit)) || res.Counters.Completed != limit {
			t.Errorf("limit %d: step %d, count %d, %d ticks, counters %+v; want %d of each", limit, res.Step, s.Count, len(s.Ticks), res.Counters, limit)
		}
	}
}

// A drained run stops at a step boundary and, resumed, ends as if it had
// never stopped.
func TestDrainAndResume(t *testing.T) {
	tests := []struct {
		name      string
		input     State
		drainStep int // when > 0, drain from outside once this step is committed
		wantStep  int
		wantWhy   string
	}{
		{name: "node requests it", input: State{Limit: 5, DrainAt: 2}, wantStep: 2, wantWhy: "drain_at 2 reached"},
		{name: "caller requests it", input: State{Limit: 5}, drainStep: 3, wantStep: 3, wantWhy: "deploy"},
		{name: "requested in the last step", input: State{Limit: 5, DrainAt: 5}, wantStep: 5, wantWhy: "drain_at 5 reached"},
	}
	g := compiled(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			store := pregel.NewMemoryStore()
			ctl := &pregel.Control{}
			obs := func(ev pregel.Event) {
				if ev.Type == pregel.EventStepFinished && ev.Step == tt.drainStep {
					ctl.RequestDrain("deploy")
				}
			}
			res, err := g.Run(ctx, tt.input, pregel.WithStore(store), pregel.WithRunID("r"), pregel.WithControl(ctl), pregel.WithObserver(obs))
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.Step != tt.wantStep || res.DrainReason != tt.wantWhy {
				t.Fatalf("Run stopped at step %d (%s, %q), want step %d, %q", res.Step, res.Status, res.DrainReason, tt.wantStep, tt.wantWhy)
			}
			if res.Step == tt.input.Limit {
				// Nothing was left to do: the run completes, the request visible.
				if res.Status != pregel.RunCompleted {
					t.Fatalf("status %s, want completed", res.Status)
				}
				return
			}
			if res.Status != pregel.RunDrained || decode(t, res).Count != tt.wantStep {
				t.Fatalf("Run = %s with count %d, want drained at %d", res.Status, decode(t, res).Count, tt.wantStep)
			}
			res, err = g.Resume(ctx, "r", pregel.WithStore(store))
			if err != nil || res.Status != pregel.RunCompleted {
				t.Fatalf("Resume = %+v, %v", res, err)
			}
			if s := decode(t, res); s.Count != 5 || !slices.Equal(s.Ticks, ticks(5)) || res.Counters.Completed != 5 {
				t.Errorf("resumed to count %d, ticks %v, counters %+v; want 5, [1..5], 5 completed", s.Count, s.Ticks, res.Counters)
			}
		})
	}
}

// delay_ms leaves time to cancel a run from outside.
func TestCancelDuringDelay(t *testing.T) {
	g := compiled(t)
	ctl := &pregel.Control{}
	obs := func(ev pregel.Event) {
		if ev.Type == pregel.EventNodeStarted && ev.Step == 2 {
			ctl.Cancel()
		}
	}
	start := time.Now()
	res, err := g.Run(context.Background(), State{Limit: 100, DelayMS: 20}, pregel.WithControl(ctl), pregel.WithObserver(obs))
	if err != nil || res.Status != pregel.RunCancelled || res.Step != 1 {
		t.Fatalf("Run = %+v, %v; want cancelled after step 1", res, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("cancel took %s; the delay must honour cancellation", d)
	}
}

func TestInvalidInput(t *testing.T) {
	g := compiled(t)
	for _, in := range []State{
		{},
		{Limit: MaxLimit + 1},
		{Limit: 3, DelayMS: -1},
		{Limit: 3, DelayMS: MaxDelayMS + 1},
		{Limit: 3, Count: 1},
	} {
		if _, err := g.Run(context.Background(), in); !errors.Is(err, pregel.ErrInvalidInput) {
			t.Errorf("Run(%+v) = %v, want ErrInvalidInput", in, err)
		}
	}
}
