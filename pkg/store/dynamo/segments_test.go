package dynamo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/superstep/superstep/pkg/pregel"
)

type logState struct {
	Log []string `json:"log" reduce:"append"`
}

// TestSegmentsCost runs 300 steps that each append 500 bytes to an append
// channel (150 KB in the end) and checks what segments cost on DynamoDB:
// every commit is one PutItem whose write units do not grow with the
// channel, and a cold load of the latest step (a tick on a new Lambda
// instance) is one Query and one BatchGetItem.
func TestSegmentsCost(t *testing.T) {
	t.Parallel()
	g, err := pregel.NewGraph[logState]("log").
		AddFunc("w", func(context.Context, logState) (logState, error) { return logState{}, nil }).
		AddEdge(pregel.Start, "w").
		AddConditionalEdges("w", func(context.Context, logState) ([]string, error) { return []string{"w"}, nil }, "w", pregel.End).
		Compile(pregel.MaxSteps(1000))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	s := e.store()
	ctx := t.Context()
	cp, err := g.Start(ctx, "segments", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, cp); err != nil {
		t.Fatal(err)
	}
	const steps = 300
	wru := make([]float64, steps+1)
	for step := 1; step <= steps; step++ {
		tasks := g.Plan(cp)
		entry, _ := json.Marshal([]string{fmt.Sprintf("%04d %s", step, strings.Repeat("x", 494))})
		out, err := g.Apply(cp, tasks, []pregel.TaskResult{{
			TaskID: tasks[0].ID, Node: "w", Status: pregel.NodeCompleted, Attempts: 1,
			Writes: map[string]json.RawMessage{"log": entry},
			Routes: []pregel.Trigger{{Node: "w", From: []string{"w"}}},
		}})
		if err != nil || out.Checkpoint == nil {
			t.Fatalf("apply step %d: %v %s", step, err, out.Status)
		}
		cp = out.Checkpoint
		u := e.measure(t, func() error { return s.Commit(ctx, cp) })
		if n := u.calls.Total().Requests; n != 1 {
			t.Errorf("commit of step %d: %d requests (%v), want 1 PutItem", step, n, u.calls.Names())
		}
		wru[step] = u.units.total().WRU
	}
	mean := func(from, to int) float64 {
		sum := 0.0
		for _, v := range wru[from:to] {
			sum += v
		}
		return sum / float64(to-from)
	}
	early, late := mean(1, 101), mean(201, 301)
	t.Logf("WRU per commit: steps 1-100 %.2f, steps 201-300 %.2f (whole values: about 1 per KB, %.0f at step 300)", early, late, float64(len(cp.Values["log"]))/1024)
	if late > 1.5*early {
		t.Errorf("commits of steps 201-300 cost %.2f WRU, steps 1-100 %.2f: the cost grows with the channel", late, early)
	}

	cold := e.store()
	var loaded *pregel.Checkpoint
	u := e.measure(t, func() error {
		var err error
		loaded, err = cold.Load(ctx, "segments", pregel.Latest)
		return err
	})
	if string(loaded.Values["log"]) != string(cp.Values["log"]) {
		t.Fatalf("cold load: log of %d bytes, want %d", len(loaded.Values["log"]), len(cp.Values["log"]))
	}
	calls := u.calls.Total().Requests
	t.Logf("cold load of %d bytes: %d requests %v, %.1f RRU", len(cp.Values["log"]), calls, u.calls.Names(), u.units.total().RRU)
	if calls > 2 {
		t.Errorf("cold load: %d requests (%v), want a Query and a BatchGetItem", calls, u.calls.Names())
	}
}
