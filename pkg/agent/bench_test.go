package agent_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/superstep/superstep/pkg/agent"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/store/sqlite"
)

// benchModel answers every request with the same short text.
var benchModel = agent.ScriptedTurns(answer(agent.Block{Text: "Your order has shipped and will arrive on Tuesday."}))

type bareState struct {
	Messages []agent.Message `json:"messages" reduce:"append"`
}

// BenchmarkBareModelNode is the baseline: a one-node graph whose node
// asks the same scripted model and appends its answer, on a MemoryStore.
func BenchmarkBareModelNode(b *testing.B) {
	g := pregel.NewGraph[bareState]("bare")
	g.AddFunc("model", func(ctx context.Context, st bareState) (bareState, error) {
		resp, err := benchModel.Generate(ctx, &agent.Request{Messages: st.Messages})
		if err != nil {
			return bareState{}, err
		}
		return bareState{Messages: []agent.Message{resp.Message}}, nil
	}, pregel.Writes("messages"))
	g.AddEdge(pregel.Start, "model")
	g.AddEdge("model", pregel.End)
	graph, err := g.Compile()
	if err != nil {
		b.Fatal(err)
	}
	in := bareState{Messages: []agent.Message{agent.UserText("where is my order?")}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := graph.Run(context.Background(), in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAgentTurn is one model turn of the prebuilt agent (streamed,
// each delta emitted, usage summed, the tools fan-out planned with no
// call, which ends the run) on a MemoryStore: its difference from BenchmarkBareModelNode
// is the overhead the agent loop adds per turn.
func BenchmarkAgentTurn(b *testing.B) {
	g, err := agent.New(agent.Config{Model: benchModel})
	if err != nil {
		b.Fatal(err)
	}
	in := agent.State{Messages: []agent.Message{agent.UserText("where is my order?")}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.Run(context.Background(), in); err != nil {
			b.Fatal(err)
		}
	}
}

// loopingModel calls the lookup tool on each of the first turns turns,
// then answers.
func loopingModel(turns int) *agent.Scripted {
	return &agent.Scripted{Reply: func(_ context.Context, req *agent.Request) (*agent.Response, error) {
		n := 0
		for _, m := range req.Messages {
			if m.Role == agent.RoleAssistant {
				n++
			}
		}
		r := answer(agent.Block{Text: "Let me check that order for you."}, toolCall(fmt.Sprint("call-", n), "lookup_order", `{"order_id":"A-1001"}`))
		if n >= turns {
			r = answer(agent.Block{Text: "All done: every order has shipped."})
		}
		return &r, nil
	}}
}

// BenchmarkStoredBytesPerTurn runs a conversation of 50 model turns that
// each call one tool (and a last one that answers) on SQLite, and reports
// the bytes the store keeps for turn 1, 10 and 50: the rows of the turn's
// model step and tool step, metadata and channel values. The store keeps
// the whole new value of each channel a step changed, so these grow with
// the conversation (see README.md).
func BenchmarkStoredBytesPerTurn(b *testing.B) {
	const turns = 50
	var perTurn []int
	for b.Loop() {
		perTurn = storedBytesPerTurn(b, turns)
	}
	for _, n := range []int{1, 10, 50} {
		b.ReportMetric(float64(perTurn[n-1]), fmt.Sprintf("bytes/turn-%d", n))
	}
}

func storedBytesPerTurn(tb testing.TB, turns int) []int {
	tb.Helper()
	ctx := context.Background()
	path := filepath.Join(tb.TempDir(), "agent.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		tb.Fatal(err)
	}
	defer s.Close()
	var c calls
	g, err := agent.New(agent.Config{Model: loopingModel(turns), Tools: []agent.Tool{lookupTool(tb, &c, nil)}, MaxTurns: turns + 1})
	if err != nil {
		tb.Fatal(err)
	}
	res, err := g.Run(ctx, agent.State{Messages: []agent.Message{agent.UserText("check A-1001 again and again")}}, pregel.WithStore(s), pregel.WithRunID("conv"))
	if err != nil || res.Status != pregel.RunCompleted {
		tb.Fatalf("run: %v %v", res.Status, err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT id & 4294967295, length(meta) + coalesce(length(changes), 0) FROM steps ORDER BY id`)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	perTurn := make([]int, turns+1)
	for rows.Next() {
		var step, n int
		if err := rows.Scan(&step, &n); err != nil {
			tb.Fatal(err)
		}
		if step > 0 { // step 2k-1 is turn k's model step, 2k its tool step
			perTurn[(step-1)/2] += n
		}
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return perTurn
}
