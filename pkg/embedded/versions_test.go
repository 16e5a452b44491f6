package embedded_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// deploy stops e's Scheduler and starts one over the same stores with
// other code (graphs), as a deploy of a new binary does.
func (e *env) deploy(t *testing.T, graphs ...*pregel.Graph) {
	t.Helper()
	if err := e.sched.Shutdown(t.Context(), time.Second); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	reg, err := runs.NewRegistry(graphs...)
	if err != nil {
		t.Fatal(err)
	}
	e.graphs = reg
	e.start(t, 8)
}

// askV is askGraph at version v, with its interrupted node named ask (or
// renamed to approval, declared when declare is set).
func askV(t *testing.T, version string, rename, declare bool) *pregel.Graph {
	node := "ask"
	if rename {
		node = "approval"
	}
	b := pregel.NewGraph[St]("ask").Version(version)
	b.AddFunc("prepare", func(context.Context, St) (St, error) { return St{Log: []string{"prepared"}}, nil })
	b.AddFunc(node, func(ctx context.Context, s St) (St, error) {
		answer, err := pregel.Interrupt[string](ctx, map[string]string{"question": "proceed?"})
		if err != nil {
			return St{}, err
		}
		return St{Answer: version + ":" + answer, Log: []string{"asked"}}, nil
	})
	if declare {
		b.RenameNode("ask", "approval")
	}
	b.AddEdge(pregel.Start, "prepare").AddEdge("prepare", node).AddEdge(node, pregel.End)
	return compile(t, b)
}

// TestSchedulerStopsIncompatibleRun: a run interrupted under v1, resumed
// with its answer on code where its node is gone, stops drained with a
// reason naming the node and both versions, before anything runs; under
// v1 again it completes with the answer it was given; on code that
// declares the rename it continues and records the adoption.
func TestSchedulerStopsIncompatibleRun(t *testing.T) {
	v1 := askV(t, "v1", false, false)
	e := newEnv(t, 8, v1)
	r := e.create(t, "ask", `{}`)
	if r.GraphVersion == nil || r.GraphVersion.Version != "v1" || r.GraphVersion.Fingerprint != v1.Fingerprint() {
		t.Fatalf("created run's graph version = %+v, want v1 %s", r.GraphVersion, v1.Fingerprint())
	}
	e.wait(t, r.ID, pregel.RunInterrupted)

	e.deploy(t, askV(t, "v2", true, false))
	if _, err := e.svc.Resume(t.Context(), r.ID, runs.ResumeRequest{Value: json.RawMessage(`"yes"`)}); err != nil {
		t.Fatalf("Resume on v2: %v", err)
	}
	stopped := e.wait(t, r.ID, pregel.RunDrained)
	for _, want := range []string{`node "ask"`, "v1 (", "v2 ("} {
		if !strings.Contains(stopped.DrainReason, want) {
			t.Errorf("drain reason %q does not name %s", stopped.DrainReason, want)
		}
	}
	if stopped.Step != 1 || stopped.GraphVersion.Version != "v1" {
		t.Errorf("stopped run: step %d version %+v; want step 1, still v1", stopped.Step, stopped.GraphVersion)
	}

	e.deploy(t, v1)
	if _, err := e.svc.Resume(t.Context(), r.ID, runs.ResumeRequest{}); err != nil {
		t.Fatalf("Resume on v1 again: %v", err)
	}
	e.wait(t, r.ID, pregel.RunCompleted)
	if v := string(e.values(t, r.ID)["answer"]); v != `"v1:yes"` {
		t.Errorf("answer = %s, want the answer given under v2, run by v1", v)
	}

	// A declared rename continues.
	r2 := e.create(t, "ask", `{}`)
	e.wait(t, r2.ID, pregel.RunInterrupted)
	v3 := askV(t, "v3", true, true)
	e.deploy(t, v3)
	if _, err := e.svc.Resume(t.Context(), r2.ID, runs.ResumeRequest{Value: json.RawMessage(`"ok"`)}); err != nil {
		t.Fatalf("Resume on v3: %v", err)
	}
	done := e.wait(t, r2.ID, pregel.RunCompleted)
	if v := string(e.values(t, r2.ID)["answer"]); v != `"v3:ok"` {
		t.Errorf("answer = %s, want \"v3:ok\"", v)
	}
	if done.GraphVersion == nil || done.GraphVersion.Fingerprint != v3.Fingerprint() {
		t.Errorf("graph version after continuing on v3 = %+v, want v3's", done.GraphVersion)
	}
	if !strings.Contains(eventTypes(done), "adopted") {
		t.Errorf("history %s has no adopted event", eventTypes(done))
	}
	page, err := e.svc.List(t.Context(), runs.Filter{Version: "v3"})
	if err != nil || len(page.Runs) != 1 || page.Runs[0].ID != r2.ID {
		t.Errorf("List(version v3) = %+v, %v; want %s", page.Runs, err, r2.ID)
	}
	if page, err := e.svc.List(t.Context(), runs.Filter{Version: "v9"}); err != nil || len(page.Runs) != 0 {
		t.Errorf("List(unknown version) = %+v, %v; want an empty page", page.Runs, err)
	}
}

// TestFleetDrainResume: runs in flight, drained together, resumed together
// on new code, all complete and no step of any run executes twice.
func TestFleetDrainResume(t *testing.T) {
	const n, steps = 100, 6
	var mu sync.Mutex
	executed := map[string]int{}
	count := func(ctx context.Context, c int) error {
		info, _ := pregel.TaskFrom(ctx)
		mu.Lock()
		executed[fmt.Sprintf("%s/%d", info.RunID, c)]++
		mu.Unlock()
		time.Sleep(2 * time.Millisecond)
		return nil
	}
	e := newEnv(t, 16, loopGraph(t, "loop", steps, count))
	ids := make([]string, n)
	for i := range ids {
		ids[i] = e.create(t, "loop", `{}`).ID
	}
	res, err := e.svc.DrainAll(t.Context(), runs.FleetFilter{Graph: "loop"}, "deploy")
	if err != nil || len(res.Runs) == 0 {
		t.Fatalf("DrainAll = %+v, %v", res, err)
	}
	if _, err := e.svc.DrainAll(t.Context(), runs.FleetFilter{}, ""); err == nil {
		t.Error("DrainAll without a reason succeeded")
	}
	drained := 0
	for _, id := range ids {
		deadline := time.Now().Add(10 * time.Second)
		for {
			r := e.get(t, id)
			if r.Status == pregel.RunDrained || r.Status == pregel.RunCompleted {
				if r.Status == pregel.RunDrained {
					drained++
					if r.DrainReason != "deploy" {
						t.Errorf("run %s drained with reason %q", id, r.DrainReason)
					}
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("run %s is %s after the drain", id, r.Status)
			}
			time.Sleep(time.Millisecond)
		}
	}
	if drained == 0 {
		t.Fatal("no run was drained; the test proves nothing")
	}
	e.deploy(t, loopGraph(t, "loop", steps, count))
	if _, err := e.svc.ResumeAll(t.Context(), runs.FleetFilter{}, pregel.RunInterrupted); err == nil {
		t.Error("ResumeAll of interrupted runs succeeded")
	}
	res, err = e.svc.ResumeAll(t.Context(), runs.FleetFilter{Graph: "loop"}, pregel.RunDrained)
	if err != nil || len(res.Runs) != drained {
		t.Fatalf("ResumeAll = %d runs (%+v), %v; want %d", len(res.Runs), res.Skipped, err, drained)
	}
	for _, id := range ids {
		e.wait(t, id, pregel.RunCompleted)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		for c := range steps {
			if got := executed[fmt.Sprintf("%s/%d", id, c)]; got != 1 {
				t.Errorf("run %s: step from count %d executed %d times, want once", id, c, got)
			}
		}
	}
}
