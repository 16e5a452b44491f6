package pregel_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/superstep/superstep/pkg/pregel"
)

type approval struct {
	Request  string   `json:"request"`
	Checks   []string `json:"checks,omitempty" reduce:"append"`
	Decision string   `json:"decision,omitempty"`
	Fail     bool     `json:"fail,omitempty"`
}

func approvalGraph(t *testing.T) *pregel.Graph {
	t.Helper()
	g := pregel.NewGraph[approval]("approval")
	g.AddFunc("check", func(_ context.Context, s approval) (approval, error) {
		if s.Fail {
			return approval{}, errors.New("the check service is down")
		}
		return approval{Checks: []string{"budget ok: " + s.Request}}, nil
	})
	g.AddFunc("review", func(ctx context.Context, s approval) (approval, error) {
		answer, err := pregel.Interrupt[string](ctx, "approve or reject?")
		if err != nil {
			return approval{}, err
		}
		return approval{Decision: answer + "d"}, nil
	})
	g.AddEdge(pregel.Start, "check").AddEdge("check", "review").AddEdge("review", pregel.End)
	graph, err := g.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return graph
}

// TestRunnable: Invoke and Resume return the run's state as the graph's
// own type, beside the run's status; a failed run gives its error and what
// state it had; a Runnable of another state type is refused.
func TestRunnable(t *testing.T) {
	ctx := context.Background()
	r, err := pregel.NewRunnable[approval](approvalGraph(t))
	if err != nil {
		t.Fatal(err)
	}
	if r.Graph().Name() != "approval" {
		t.Errorf("Graph() = %q", r.Graph().Name())
	}
	store := pregel.NewMemoryStore()
	res, err := r.Invoke(ctx, approval{Request: "laptop"}, pregel.WithStore(store), pregel.WithRunID("r1"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != pregel.RunInterrupted || res.State.Request != "laptop" || len(res.State.Checks) != 1 || res.State.Decision != "" {
		t.Fatalf("Invoke: status %s, state %+v; want interrupted with one check", res.Status, res.State)
	}
	res, err = r.Resume(ctx, "r1", pregel.WithStore(store), pregel.WithResume("approve"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != pregel.RunCompleted || res.State.Decision != "approved" || res.State.Checks[0] != "budget ok: laptop" {
		t.Fatalf("Resume: status %s, state %+v; want completed, approved", res.Status, res.State)
	}

	res, err = r.Invoke(ctx, approval{Request: "desk", Fail: true})
	if err == nil || !strings.Contains(err.Error(), "the check service is down") {
		t.Fatalf("Invoke of a failing run: %v; want the node's error", err)
	}
	if res == nil || res.Status != pregel.RunFailed || res.State.Request != "desk" {
		t.Fatalf("failed run's result %+v; want status failed with its input state", res)
	}

	if _, err := r.Resume(ctx, "no-such-run", pregel.WithStore(store)); !errors.Is(err, pregel.ErrNotFound) {
		t.Errorf("Resume of an unknown run: %v; want ErrNotFound", err)
	}

	type other struct {
		Request string `json:"request"`
	}
	if _, err := pregel.NewRunnable[other](approvalGraph(t)); err == nil || !strings.Contains(err.Error(), `graph "approval" has state type`) {
		t.Errorf("NewRunnable with another state type: %v; want an error naming the graph's type", err)
	}
	if _, err := pregel.NewRunnable[approval](nil); err == nil {
		t.Error("NewRunnable(nil) succeeded")
	}
	bad := pregel.NewGraph[approval]("bad")
	bad.AddEdge(pregel.Start, "nowhere")
	if _, err := bad.CompileRunnable(); !errors.Is(err, pregel.ErrInvalidGraph) {
		t.Errorf("CompileRunnable of an invalid graph: %v; want ErrInvalidGraph", err)
	}
}
