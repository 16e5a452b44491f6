package pregel_test

import (
	"context"
	"sync"
	"testing"

	"github.com/superstep/superstep/pkg/pregel"
)

type ctxKey struct{}

// Every observer given receives every event, and each task runs with the
// context WithTaskContext derives; the done function sees its result.
func TestObserversAndTaskContext(t *testing.T) {
	type S struct {
		Seen []string `json:"seen" reduce:"append"`
	}
	b := pregel.NewGraph[S]("task-context")
	for _, n := range []string{"a", "b"} {
		b.AddFunc(n, func(ctx context.Context, _ S) (S, error) {
			v, _ := ctx.Value(ctxKey{}).(string)
			return S{Seen: []string{v}}, nil
		})
		b.AddEdge(pregel.Start, n).AddEdge(n, pregel.End)
	}
	g, err := b.Compile()
	if err != nil {
		t.Fatal(err)
	}
	var first, second int
	var mu sync.Mutex
	done := map[string]pregel.NodeStatus{}
	res, err := g.Run(context.Background(), nil,
		pregel.WithObserver(func(pregel.Event) { first++ }),
		pregel.WithObserver(nil),
		pregel.WithObserver(func(pregel.Event) { second++ }),
		pregel.WithTaskContext(func(ctx context.Context, task pregel.Task) (context.Context, func(pregel.TaskResult)) {
			return context.WithValue(ctx, ctxKey{}, "ctx-of-"+task.Node()), func(r pregel.TaskResult) {
				mu.Lock()
				defer mu.Unlock()
				done[r.Node] = r.Status
			}
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	if first == 0 || first != second {
		t.Errorf("observers saw %d and %d events, want the same, non-zero", first, second)
	}
	var s S
	if err := res.Decode(&s); err != nil {
		t.Fatal(err)
	}
	if len(s.Seen) != 2 || s.Seen[0] != "ctx-of-a" || s.Seen[1] != "ctx-of-b" {
		t.Errorf("nodes saw %v, want [ctx-of-a ctx-of-b]", s.Seen)
	}
	if done["a"] != pregel.NodeCompleted || done["b"] != pregel.NodeCompleted {
		t.Errorf("done saw %v", done)
	}
}
