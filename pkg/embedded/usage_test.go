package embedded_test

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
// tokens it names; judge waits for gate when one is given. It declares its
// usage channel unless plain is set.
func meteredGraph(t *testing.T, name string, plain bool, gate *gate) *pregel.Graph {
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
	b.AddFunc("judge", func(ctx context.Context, _ metered) (metered, error) {
		if gate != nil {
			if err := gate.pass(ctx); err != nil {
				return metered{}, err
			}
		}
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

func TestRunUsage(t *testing.T) {
	g := newGate()
	e := newEnv(t, 2, meteredGraph(t, "metered", false, g), meteredGraph(t, "plain", true, nil))
	id := e.create(t, "metered", `{}`).ID

	// A running run: Get reads the usage so far from the checkpoint it
	// loads for the step.
	g.waitEntered(t)
	r, err := e.svc.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	ask := pregel.TokenUsage{InputTokens: 20, OutputTokens: 4, TotalTokens: 24}
	if r.Usage == nil || r.Usage.Total != ask || len(r.Usage.ByNode) != 1 || r.Usage.ByNode["ask"] != ask {
		t.Fatalf("usage of the running run = %+v, want %+v for node ask", r.Usage, ask)
	}
	close(g.open)

	// A finished run: AddUsage reads it from the latest checkpoint.
	e.wait(t, id, pregel.RunCompleted)
	if r, err = e.svc.Get(t.Context(), id); err != nil || r.Usage != nil {
		t.Fatalf("Get of a finished run: usage %+v, %v; it loads no checkpoint", r.Usage, err)
	}
	cp, err := e.svc.Checkpoint(t.Context(), id, pregel.Latest)
	if err != nil {
		t.Fatal(err)
	}
	e.svc.AddUsage(t.Context(), &r, cp)
	want := pregel.UsageTotals{
		Total: pregel.TokenUsage{InputTokens: 25, OutputTokens: 5, TotalTokens: 30},
		ByNode: map[string]pregel.TokenUsage{
			"ask":   ask,
			"judge": {InputTokens: 5, OutputTokens: 1, TotalTokens: 6},
		},
	}
	if r.Usage == nil || r.Usage.Total != want.Total || len(r.Usage.ByNode) != 2 || r.Usage.ByNode["ask"] != want.ByNode["ask"] || r.Usage.ByNode["judge"] != want.ByNode["judge"] {
		t.Fatalf("usage of the completed run = %+v, want %+v", r.Usage, want)
	}
	if stored := e.get(t, id); stored.Usage != nil {
		t.Fatalf("the store kept usage %+v; it is read from the checkpoint", stored.Usage)
	}

	// A graph that declares no usage channel shows none, though its
	// state has one.
	id = e.create(t, "plain", `{}`).ID
	e.wait(t, id, pregel.RunCompleted)
	if cp, err = e.svc.Checkpoint(t.Context(), id, pregel.Latest); err != nil {
		t.Fatal(err)
	}
	r = e.get(t, id)
	if e.svc.AddUsage(t.Context(), &r, cp); r.Usage != nil {
		t.Fatalf("usage of an undeclared graph's run: %+v; want none", r.Usage)
	}
}
