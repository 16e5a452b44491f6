package tick_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/superstep/superstep/internal/mototest"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/store/dynamo"
)

// TestTickStopsIncompatibleRun: on the serverless path, a run interrupted
// at approve and resumed with an answer on code where approve is gone
// stops drained with the reason at its next tick, before anything runs;
// resumed on the old code again it completes with the answer it was given.
func TestTickStopsIncompatibleRun(t *testing.T) { stopsIncompatibleRun(t, newEnv(t, true)) }

// TestTickStopsIncompatibleRunDynamo is the same with the two codes'
// handlers over one DynamoDB table (moto_server, the real SDK client), as
// two deployed builds share it.
func TestTickStopsIncompatibleRunDynamo(t *testing.T) {
	srv := mototest.Start(t)
	client := dynamodb.NewFromConfig(srv.Config)
	if err := dynamo.CreateTable(t.Context(), client, "versions"); err != nil {
		t.Fatal(err)
	}
	s := dynamo.New(client, "versions")
	stopsIncompatibleRun(t, newEnvOn(t, true, backend{checkpoints: s, runs: s, claims: s, loader: s}))
}

func stopsIncompatibleRun(t *testing.T, e *env) {
	ctx := context.Background()
	v1 := e.h.Graphs
	if _, _, err := e.svc.Create(ctx, "tickgraph", runs.CreateRequest{RunID: "r1"}); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	e.drain(t, rng, false)
	if r, _ := e.svc.Get(ctx, "r1"); r.Status != pregel.RunInterrupted {
		t.Fatalf("run is %s, want interrupted", r.Status)
	}

	// v2: the same graph without approve.
	b := pregel.NewGraph[St]("tickgraph").Version("v2")
	b.AddFunc("prepare", func(context.Context, St) (St, error) { return St{}, nil })
	b.AddEdge(pregel.Start, "prepare").AddEdge("prepare", pregel.End)
	g2, err := b.Compile()
	if err != nil {
		t.Fatal(err)
	}
	reg2, err := runs.NewRegistry(g2)
	if err != nil {
		t.Fatal(err)
	}
	e.h.Graphs, e.svc.Graphs = reg2, reg2
	if _, err := e.svc.Resume(ctx, "r1", runs.ResumeRequest{Value: json.RawMessage(`"yes"`)}); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	e.drain(t, rng, false)
	r, _ := e.svc.Get(ctx, "r1")
	if r.Status != pregel.RunDrained || !strings.Contains(r.DrainReason, `node "approve"`) || !strings.Contains(r.DrainReason, "v2 (") {
		t.Fatalf("run on v2: %s, reason %q; want drained naming approve and v2", r.Status, r.DrainReason)
	}

	e.h.Graphs, e.svc.Graphs = v1, v1
	if _, err := e.svc.Resume(ctx, "r1", runs.ResumeRequest{}); err != nil {
		t.Fatalf("Resume on v1: %v", err)
	}
	e.drain(t, rng, false)
	r, _ = e.svc.Get(ctx, "r1")
	cp, err := e.store.Load(ctx, "r1", pregel.Latest)
	if r.Status != pregel.RunCompleted || err != nil || string(cp.Values["reply"]) != `"yes"` {
		t.Fatalf("run on v1 again: %s, reply %s, %v; want completed with the answer", r.Status, cp.Values["reply"], err)
	}
}
