package pregel_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
)

func TestEdgesAndPolicies(t *testing.T) {
	type S struct {
		Items []string `json:"items" reduce:"append"`
	}
	nop := func(context.Context, S) (S, error) { return S{}, nil }
	b := pregel.NewGraph[S]("shape")
	b.AddFunc("a", nop, pregel.WithRetry(pregel.RetryPolicy{MaxAttempts: 3}), pregel.WithTimeout(2*time.Second), pregel.OnError("fix"))
	b.AddFunc("b", nop)
	b.AddFunc("c", nop)
	b.AddFunc("d", nop)
	b.AddFunc("fix", nop)
	b.AddEdge(pregel.Start, "a")
	b.AddConditionalEdges("a", func(context.Context, S) ([]string, error) { return []string{"b"}, nil }, "b", pregel.End)
	b.AddFanOut("a", "c", func(context.Context, S) ([]any, error) { return nil, nil })
	b.AddJoin("d", "b", "c")
	b.AddEdge("d", pregel.End).AddEdge("fix", pregel.End)
	g, err := b.Compile()
	if err != nil {
		t.Fatal(err)
	}
	zero := 0
	want := []pregel.Edge{
		{From: pregel.Start, To: "a", Kind: pregel.EdgeStatic},
		{From: "a", To: "b", Kind: pregel.EdgeConditional},
		{From: "a", To: pregel.End, Kind: pregel.EdgeConditional},
		{From: "a", To: "c", Kind: pregel.EdgeFanOut},
		{From: "a", To: "fix", Kind: pregel.EdgeOnError},
		{From: "d", To: pregel.End, Kind: pregel.EdgeStatic},
		{From: "fix", To: pregel.End, Kind: pregel.EdgeStatic},
		{From: "b", To: "d", Kind: pregel.EdgeJoin, Join: &zero},
		{From: "c", To: "d", Kind: pregel.EdgeJoin, Join: &zero},
	}
	if got := g.Edges(); !reflect.DeepEqual(got, want) {
		t.Errorf("Edges:\n got %+v\nwant %+v", got, want)
	}
	pol := g.Policies()
	if got, want := pol["a"], (pregel.NodePolicy{MaxAttempts: 3, TimeoutMS: 2000, OnError: "fix"}); got != want {
		t.Errorf("policy of a = %+v, want %+v", got, want)
	}
	if got, want := pol["b"], (pregel.NodePolicy{MaxAttempts: 1}); got != want {
		t.Errorf("policy of b = %+v, want %+v", got, want)
	}
}
