package pregel_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/superstep/superstep/pkg/pregel"
)

type St struct {
	Log    []string       `json:"log" reduce:"append"`
	Count  int            `json:"count"`
	Total  int            `json:"total" reduce:"sum"`
	Notes  map[string]any `json:"notes" reduce:"merge"`
	Answer string         `json:"answer"`
	Item   string         `json:"item"`
}

func noop(context.Context, St) (St, error) { return St{}, nil }

func logs(name string) func(context.Context, St) (St, error) {
	return func(context.Context, St) (St, error) { return St{Log: []string{name}}, nil }
}

func TestCompileErrors(t *testing.T) {
	cases := []struct {
		name  string
		build func(g *pregel.Builder[St])
		want  []string
	}{
		{"duplicate node", func(g *pregel.Builder[St]) {
			g.AddFunc("a", noop).AddFunc("a", noop).AddEdge(pregel.Start, "a").AddEdge("a", pregel.End)
		}, []string{`node "a" is added twice`}},
		{"unknown edge target", func(g *pregel.Builder[St]) {
			g.AddFunc("a", noop).AddEdge(pregel.Start, "a").AddEdge("a", "b")
		}, []string{`edge a -> b: no node named "b"`}},
		{"unknown router target", func(g *pregel.Builder[St]) {
			g.AddFunc("a", noop).AddEdge(pregel.Start, "a").AddConditionalEdges("a", func(context.Context, St) ([]string, error) { return nil, nil }, "zz", pregel.End)
		}, []string{`conditional edges from a: no node named "zz"`}},
		{"unreachable", func(g *pregel.Builder[St]) {
			g.AddFunc("a", noop).AddFunc("orphan", noop).AddEdge(pregel.Start, "a").AddEdge("a", pregel.End).AddEdge("orphan", pregel.End)
		}, []string{`node "orphan" cannot be reached from Start`}},
		{"cannot reach end", func(g *pregel.Builder[St]) {
			g.AddFunc("a", noop).AddFunc("b", noop).AddEdge(pregel.Start, "a").AddEdge("a", "b").AddEdge("b", "a").AddEdge("a", pregel.End)
			g.AddFunc("sink", noop).AddEdge("a", "sink")
		}, []string{`node "sink" cannot reach End`}},
		{"no start", func(g *pregel.Builder[St]) {
			g.AddFunc("a", noop).AddEdge("a", pregel.End)
		}, []string{"nothing starts the graph"}},
		{"parallel last-value writers", func(g *pregel.Builder[St]) {
			g.AddFunc("a", noop, pregel.Writes("answer")).AddFunc("b", noop, pregel.Writes("answer"))
			g.AddEdge(pregel.Start, "a").AddEdge(pregel.Start, "b").AddEdge("a", pregel.End).AddEdge("b", pregel.End)
		}, []string{`channel "answer" has no reducer but nodes "a" and "b" may write it in the same superstep`}},
		{"fan-out writes last value", func(g *pregel.Builder[St]) {
			g.AddFunc("split", noop).AddFunc("w", noop, pregel.Writes("answer"))
			g.AddEdge(pregel.Start, "split").AddFanOut("split", "w", func(context.Context, St) ([]any, error) { return nil, nil }).AddEdge("w", pregel.End).AddEdge("split", pregel.End)
		}, []string{`node "w", which runs as parallel fan-out tasks, writes it`}},
		{"unknown reducer", func(g *pregel.Builder[St]) {
			g.AddFunc("a", noop).AddEdge(pregel.Start, "a").AddEdge("a", pregel.End)
		}, nil}, // control case: compiles
		{"undeclared channel", func(g *pregel.Builder[St]) {
			g.AddFunc("a", noop, pregel.Writes("nope")).AddEdge(pregel.Start, "a").AddEdge("a", pregel.End)
		}, []string{`node "a" declares channel "nope", which the state does not have`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := pregel.NewGraph[St]("g")
			tc.build(g)
			_, err := g.Compile()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Compile: %v", err)
				}
				return
			}
			if !errors.Is(err, pregel.ErrInvalidGraph) {
				t.Fatalf("Compile error = %v, want ErrInvalidGraph", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Compile error\n%v\nlacks %q", err, w)
				}
			}
		})
	}
}

// Alternatives chosen by one router may write the same channel: they never
// run in the same superstep.
func TestCompileAllowsAlternativeWriters(t *testing.T) {
	g := pregel.NewGraph[St]("g")
	g.AddFunc("route", noop).AddFunc("a", noop, pregel.Writes("answer")).AddFunc("b", noop, pregel.Writes("answer"))
	g.AddEdge(pregel.Start, "route")
	g.AddConditionalEdges("route", func(context.Context, St) ([]string, error) { return []string{"a"}, nil }, "a", "b")
	g.AddEdge("a", pregel.End).AddEdge("b", pregel.End)
	if _, err := g.Compile(); err != nil {
		t.Fatal(err)
	}
}

func TestCompileBadReducerAndState(t *testing.T) {
	type bad struct {
		X []int `json:"x" reduce:"nosuch"`
	}
	g := pregel.NewGraph[bad]("g")
	g.AddFunc("a", func(context.Context, bad) (bad, error) { return bad{}, nil }).AddEdge(pregel.Start, "a").AddEdge("a", pregel.End)
	if _, err := g.Compile(); err == nil || !strings.Contains(err.Error(), `names reducer "nosuch"`) {
		t.Fatalf("Compile = %v, want unknown reducer error", err)
	}
	g2 := pregel.NewGraph[int]("g")
	if _, err := g2.Compile(); err == nil || !strings.Contains(err.Error(), "must be a struct") {
		t.Fatalf("Compile = %v, want struct error", err)
	}
}
