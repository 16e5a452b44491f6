//go:build !superstep.lambda

package superstep

import (
	"context"
	"strings"
	"testing"

	"github.com/superstep/superstep/pkg/pregel"
)

// approvalGraph is graph "purchase" at version: prepare, then a node that
// waits for a person (review, or approval when renamed, the rename
// declared when declare is set).
func approvalGraph(t *testing.T, version string, renamed, declare bool) *pregel.Graph {
	t.Helper()
	type state struct {
		Decision string `json:"decision"`
	}
	node := "review"
	if renamed {
		node = "approval"
	}
	b := pregel.NewGraph[state]("purchase").Version(version)
	b.AddFunc("prepare", func(context.Context, state) (state, error) { return state{}, nil })
	b.AddFunc(node, func(ctx context.Context, _ state) (state, error) {
		a, err := pregel.Interrupt[string](ctx, "approve or reject?")
		return state{Decision: version + ":" + a}, err
	})
	if declare {
		b.RenameNode("review", "approval")
	}
	b.AddEdge(pregel.Start, "prepare").AddEdge("prepare", node).AddEdge(node, pregel.End)
	g, err := b.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestResumeOnOtherCode: `resume` on a binary whose graph cannot continue
// the run (the interrupted node renamed without a declared rename) stops
// it drained, exit code 4, the reason naming the node and both versions,
// the answer kept; the binary with the rename declared completes it with
// that answer. (TestTwoBuilds in pkg/internal/scaffold does the same with `go
// build`s of a scaffolded project.)
func TestResumeOnOtherCode(t *testing.T) {
	h := newHarness(t)
	h.opts = []Option{WithCompiledGraphs(approvalGraph(t, "v1", false, false))}
	res := decodeResult(t, h.local("run", "purchase", "--json", "-q").want(t, ExitInterrupted))
	id := res.RunID

	h.opts = []Option{WithCompiledGraphs(approvalGraph(t, "v2", true, false))}
	r := h.local("resume", id, "--answer", "approve", "--json").want(t, ExitDrained)
	res = decodeResult(t, r)
	if res.Status != pregel.RunDrained || !strings.Contains(res.DrainReason, `node "review"`) ||
		!strings.Contains(res.DrainReason, "v1 (") || !strings.Contains(res.DrainReason, "v2 (") {
		t.Fatalf("resume on v2: %s, reason %q; want drained naming node review, v1 and v2", res.Status, res.DrainReason)
	}
	if !strings.Contains(r.stderr, "resume "+id) {
		t.Errorf("no resume hint on stderr:\n%s", r.stderr)
	}

	h.opts = []Option{WithCompiledGraphs(approvalGraph(t, "v3", true, true))}
	res = decodeResult(t, h.local("resume", id, "--json", "-q").want(t, ExitOK))
	if got := value[string](t, res, "decision"); got != "v3:approve" {
		t.Fatalf("decision %q, want v3:approve (the answer given to v2)", got)
	}
}
