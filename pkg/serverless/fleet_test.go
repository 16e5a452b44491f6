package serverless_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/serverless"
)

type fleetState struct {
	Log []string `json:"log" reduce:"append"`
}

// fleetGraph is a -> b (remote) -> c, and with v2 a node d after c: a
// compatible change. Every completed execution is counted by task id.
func fleetGraph(t *testing.T, version string, count func(ctx context.Context)) *pregel.Graph {
	node := func(name string) func(context.Context, fleetState) (fleetState, error) {
		return func(ctx context.Context, _ fleetState) (fleetState, error) {
			count(ctx)
			return fleetState{Log: []string{name}}, nil
		}
	}
	g := pregel.NewGraph[fleetState]("fleet").Version(version)
	g.AddFunc("a", node("a"))
	g.AddFunc("b", node("b"), pregel.Remote())
	g.AddFunc("c", node("c"))
	g.AddEdge(pregel.Start, "a").AddEdge("a", "b").AddEdge("b", "c")
	if version == "v2" {
		g.AddFunc("d", node("d"))
		g.AddEdge("c", "d").AddEdge("d", pregel.End)
	} else {
		g.AddEdge("c", pregel.End)
	}
	cg, err := g.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return cg
}

// TestFleetDrainSwapResume is the deploy of issue 23 on the serverless
// handlers in process, over one table and its queues on moto: runs in
// flight on v1 (tick and node messages queued) are drained all at once
// through v1's API (POST /v1/runs/drain), v2's functions replace v1's, and
// v2's API resumes them all (POST /v1/runs/resume): every run completes on
// v2 (its record names v2, v2's added node ran), no task completes twice.
// With the real bootstraps under the Lambda runtime emulator and 100
// runs: TestTwoBuildsServerless (pkg/internal/scaffold, gated).
func TestFleetDrainSwapResume(t *testing.T) {
	t.Parallel()
	var (
		mu   sync.Mutex
		done = map[string]int{}
	)
	count := func(ctx context.Context) {
		info, _ := pregel.TaskFrom(ctx)
		mu.Lock()
		done[info.RunID+"/"+info.TaskID+"/"+info.Node]++
		mu.Unlock()
	}
	s := newStack(t, stackOptions{noPollers: true, graphs: []*pregel.Graph{fleetGraph(t, "v1", count)}})
	const n = 12
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("f-%02d", i)
		s.create("fleet", ids[i], nil)
	}
	// In flight: every run's first step, some runs' remote task sent
	// or done.
	for range n + n/2 {
		s.pump(s.cfg.TickQueueURL, s.app.HandleTick)
	}
	for range n / 3 {
		s.pump(s.cfg.NodeQueueURL, s.app.HandleNode)
	}
	var res api.FleetResult
	if st := s.do("POST", "/v1/runs/drain", map[string]string{"reason": "deploy"}, &res); st != http.StatusAccepted || len(res.Runs) != n {
		t.Fatalf("drain: %d %+v, want %d runs", st, res, n)
	}
	s.settle()
	for _, id := range ids {
		if r := s.get(id); r.Status != pregel.RunDrained {
			t.Fatalf("%s after the drain: %s at step %d, want drained", id, r.Status, r.Step)
		}
	}

	// v2 replaces v1: its functions and API on the same table and queues.
	reg := registry(t, nil, fleetGraph(t, "v2", count))
	opts := s.opts
	opts.Graphs = reg
	app2, err := serverless.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv2 := httptest.NewServer(app2)
	t.Cleanup(srv2.Close)
	s.app, s.url = app2, srv2.URL
	if st := s.do("POST", "/v1/runs/resume", map[string]any{"status": "drained"}, &res); st != http.StatusAccepted || len(res.Runs) != n {
		t.Fatalf("resume: %d %+v, want %d runs", st, res, n)
	}
	s.settle()
	for _, id := range ids {
		r := s.get(id)
		if r.Status != pregel.RunCompleted || r.GraphVersion == nil || r.GraphVersion.Version != "v2" {
			t.Errorf("%s on v2: %s, version %+v; want completed on v2", id, r.Status, r.GraphVersion)
		}
		if got := values[[]string](t, r, "log"); fmt.Sprint(got) != "[a b c d]" {
			t.Errorf("%s: log %v, want [a b c d]", id, got)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	nodes := map[string]int{}
	for task, k := range done {
		if k > 1 {
			t.Errorf("task %s completed %d times", task, k)
		}
		nodes[task[len(task)-1:]]++
	}
	if fmt.Sprint(nodes) != fmt.Sprintf("map[a:%d b:%d c:%d d:%d]", n, n, n, n) {
		t.Errorf("tasks by node %v, want %d of each", nodes, n)
	}
}
