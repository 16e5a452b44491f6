package agent_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/superstep/superstep/internal/mototest"
	"github.com/superstep/superstep/pkg/agent"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/store/dynamo"
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

// BenchmarkStoredBytesPerTurn runs a conversation of 200 model turns that
// each call one tool (and a last one that answers) on SQLite and on
// DynamoDB (moto), and reports the bytes the store keeps for turns 1, 10,
// 50 and 200 (the rows or items of the turn's model step and tool step:
// metadata, manifest and channel values), and their mean over turns
// 191-200, which includes the steps that merge segments. The messages
// channel is stored in segments, so none of these grows with the
// conversation (see README.md).
func BenchmarkStoredBytesPerTurn(b *testing.B) {
	const turns = 200
	for _, store := range []string{"sqlite", "dynamo"} {
		b.Run(store, func(b *testing.B) {
			var perTurn []int
			for b.Loop() {
				perTurn = storedBytesPerTurn(b, store, turns)
			}
			for _, n := range []int{1, 10, 50, 200} {
				b.ReportMetric(float64(perTurn[n-1]), fmt.Sprintf("bytes/turn-%d", n))
			}
			b.ReportMetric(meanBytes(perTurn[turns-10:turns]), "bytes/turn-191-200")
		})
	}
}

func meanBytes(n []int) float64 {
	sum := 0
	for _, v := range n {
		sum += v
	}
	return float64(sum) / float64(len(n))
}

// TestStoredBytesPerTurnFlat holds SQLite to what the benchmark shows: the
// bytes stored per turn, on average over turns 101-200 (merges included),
// are at most 1.5 times those of turns 1-100 (a margin for the versions of
// sealed segments in each step's metadata). Storing whole values, the
// second mean was 2.9 times the first.
func TestStoredBytesPerTurnFlat(t *testing.T) {
	const turns = 200
	perTurn := storedBytesPerTurn(t, "sqlite", turns)
	early, late := meanBytes(perTurn[:100]), meanBytes(perTurn[100:turns])
	t.Logf("mean bytes per turn: turns 1-100 %.0f, turns 101-200 %.0f; turn 1 %d, 10 %d, 50 %d, 200 %d", early, late, perTurn[0], perTurn[9], perTurn[49], perTurn[turns-1])
	if late > 1.5*early {
		t.Errorf("turns 101-200 store %.0f bytes a turn, turns 1-100 %.0f: the stored bytes grow with the conversation", late, early)
	}
}

// storedBytesPerTurn runs the conversation on store ("sqlite" or
// "dynamo") and returns the bytes stored for each turn.
func storedBytesPerTurn(tb testing.TB, store string, turns int) []int {
	tb.Helper()
	ctx := context.Background()
	var (
		s       pregel.Checkpointer
		measure func() map[int]int // bytes by step
	)
	switch store {
	case "sqlite":
		path := filepath.Join(tb.TempDir(), "agent.db")
		ss, err := sqlite.Open(ctx, path)
		if err != nil {
			tb.Fatal(err)
		}
		defer ss.Close()
		s = ss
		measure = func() map[int]int { return sqliteStepBytes(tb, path) }
	case "dynamo":
		srv := mototest.Start(tb)
		client := dynamodb.NewFromConfig(srv.Config)
		if err := dynamo.CreateTable(ctx, client, "agent-bytes"); err != nil {
			tb.Fatal(err)
		}
		s = dynamo.New(client, "agent-bytes")
		measure = func() map[int]int { return dynamoStepBytes(tb, client, "agent-bytes") }
	}
	var c calls
	g, err := agent.New(agent.Config{Model: loopingModel(turns), Tools: []agent.Tool{lookupTool(tb, &c, nil)}, MaxTurns: turns + 1})
	if err != nil {
		tb.Fatal(err)
	}
	res, err := g.Run(ctx, agent.State{Messages: []agent.Message{agent.UserText("check A-1001 again and again")}}, pregel.WithStore(s), pregel.WithRunID("conv"))
	if err != nil || res.Status != pregel.RunCompleted {
		tb.Fatalf("run: %v %v", res.Status, err)
	}
	perTurn := make([]int, turns+1)
	for step, n := range measure() {
		if step > 0 { // step 2k-1 is turn k's model step, 2k its tool step
			perTurn[(step-1)/2] += n
		}
	}
	return perTurn
}

// sqliteStepBytes returns the bytes of each step row: metadata and values.
func sqliteStepBytes(tb testing.TB, path string) map[int]int {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT id & 4294967295, length(meta) + coalesce(length(changes), 0) FROM steps ORDER BY id`)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	out := map[int]int{}
	for rows.Next() {
		var step, n int
		if err := rows.Scan(&step, &n); err != nil {
			tb.Fatal(err)
		}
		out[step] += n
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

// dynamoStepBytes returns the size, as DynamoDB counts it, of each step
// item and of the blob chunks its commit wrote.
func dynamoStepBytes(tb testing.TB, client *dynamodb.Client, table string) map[int]int {
	ctx := context.Background()
	stepOf := map[string]int{} // commit id -> step
	blobs := map[string]int{}  // commit id -> bytes
	out := map[int]int{}
	p := dynamodb.NewScanPaginator(client, &dynamodb.ScanInput{TableName: aws.String(table)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			tb.Fatal(err)
		}
		for _, item := range page.Items {
			sk := item["sk"].(*types.AttributeValueMemberS).Value
			switch {
			case strings.HasPrefix(sk, "STEP#"):
				step, err := strconv.Atoi(strings.TrimPrefix(sk, "STEP#"))
				if err != nil {
					tb.Fatalf("step key %q: %v", sk, err)
				}
				stepOf[item["commit_id"].(*types.AttributeValueMemberS).Value] = step
				out[step] += dynamo.ItemSize(item)
			case strings.HasPrefix(sk, "BLOB#"):
				id, _, _ := strings.Cut(strings.TrimPrefix(sk, "BLOB#"), ".")
				blobs[id] += dynamo.ItemSize(item)
			}
		}
	}
	for id, n := range blobs {
		step, ok := stepOf[id]
		if !ok {
			tb.Fatalf("blob of commit %q, which wrote no step", id)
		}
		out[step] += n
	}
	return out
}
