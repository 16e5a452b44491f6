package runs_test

import (
	"context"
	"testing"

	"github.com/superstep/superstep/pkg/pregel"
)

// metered is the state of a graph that counts tokens as a model would.
type metered struct {
	Turns int                `json:"turns"`
	Usage pregel.UsageTotals `json:"usage" reduce:"tokens"`
}

// meteredGraph runs "ask" twice and "judge" once, each call costing the
// tokens it names; it declares its usage channel unless plain is set.
func meteredGraph(t *testing.T, name string, plain bool) *pregel.Graph {
	t.Helper()
	cost := func(node string, in, out int) pregel.UsageTotals {
		u := pregel.TokenUsage{InputTokens: in, OutputTokens: out, TotalTokens: in + out}
		return pregel.UsageTotals{Total: u, ByNode: map[string]pregel.TokenUsage{node: u}}
	}
	sum := pregel.ReducerOf(func(cur, upd pregel.UsageTotals) pregel.UsageTotals {
		out := pregel.UsageTotals{Total: cur.Total.Add(upd.Total), ByNode: map[string]pregel.TokenUsage{}}
		for n, u := range cur.ByNode {
			out.ByNode[n] = u
		}
		for n, u := range upd.ByNode {
			out.ByNode[n] = out.ByNode[n].Add(u)
		}
		return out
	})
	b := pregel.NewGraph[metered](name).Reducer("tokens", sum)
	b.AddFunc("ask", func(_ context.Context, st metered) (metered, error) {
		return metered{Turns: st.Turns + 1, Usage: cost("ask", 10, 2)}, nil
	})
	b.AddFunc("judge", func(context.Context, metered) (metered, error) {
		return metered{Usage: cost("judge", 5, 1)}, nil
	})
	b.AddEdge(pregel.Start, "ask")
	b.AddConditionalEdges("ask", func(_ context.Context, st metered) ([]string, error) {
		if st.Turns < 2 {
			return []string{"ask"}, nil
		}
		return []string{"judge"}, nil
	}, "ask", "judge")
	b.AddEdge("judge", pregel.End)
	var opts []pregel.CompileOption
	if !plain {
		opts = append(opts, pregel.UsageChannel("usage"))
	}
	g, err := b.Compile(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestServiceGetShowsUsage(t *testing.T) {
	e := newEnv(t, 2, meteredGraph(t, "metered", false), meteredGraph(t, "plain", true))
	id := e.create(t, "metered", `{}`).ID
	e.wait(t, id, pregel.RunCompleted)
	r, err := e.svc.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	want := pregel.UsageTotals{
		Total: pregel.TokenUsage{InputTokens: 25, OutputTokens: 5, TotalTokens: 30},
		ByNode: map[string]pregel.TokenUsage{
			"ask":   {InputTokens: 20, OutputTokens: 4, TotalTokens: 24},
			"judge": {InputTokens: 5, OutputTokens: 1, TotalTokens: 6},
		},
	}
	if r.Usage == nil || r.Usage.Total != want.Total || len(r.Usage.ByNode) != 2 || r.Usage.ByNode["ask"] != want.ByNode["ask"] || r.Usage.ByNode["judge"] != want.ByNode["judge"] {
		t.Fatalf("usage of a completed run = %+v, want %+v", r.Usage, want)
	}
	if stored := e.get(t, id); stored.Usage != nil {
		t.Fatalf("the store kept usage %+v; it is read from the checkpoint", stored.Usage)
	}

	// A graph that declares no usage channel shows none, though its
	// state has one.
	id = e.create(t, "plain", `{}`).ID
	e.wait(t, id, pregel.RunCompleted)
	if r, err := e.svc.Get(t.Context(), id); err != nil || r.Usage != nil {
		t.Fatalf("Get of an undeclared graph's run: usage %+v, %v; want none", r.Usage, err)
	}
}
