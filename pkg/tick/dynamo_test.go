package tick_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/superstep/superstep/internal/mototest"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/store/dynamo"
)

// The fault-injection cases again, on DynamoDB (moto_server) through the
// real aws-sdk-go-v2 client: run records, checkpoints, task results and
// leases all in one table, as deployed.
func TestTickFaultsDynamo(t *testing.T) {
	srv := mototest.Start(t)
	client := dynamodb.NewFromConfig(srv.Config)
	seeds := uint64(8)
	if testing.Short() {
		seeds = 3
	}
	for _, ask := range []bool{false, true} {
		ref := reference(t, ask)
		for seed := range seeds {
			t.Run(fmt.Sprintf("ask=%v/seed=%d", ask, seed), func(t *testing.T) {
				table := fmt.Sprintf("tick-%v-%d", ask, seed)
				if err := dynamo.CreateTable(t.Context(), client, table); err != nil {
					t.Fatal(err)
				}
				s := dynamo.New(client, table)
				faultCase(t, newEnvOn(t, ask, backend{checkpoints: s, runs: s, claims: s, loader: s}), ref, ask, seed)
			})
		}
	}
}

// Cancel and drain at every point of a remote step (every third with
// -short), on DynamoDB.
func TestTickStopDuringRemoteStepDynamo(t *testing.T) {
	srv := mototest.Start(t)
	client := dynamodb.NewFromConfig(srv.Config)
	ref := reference(t, false)
	for _, mode := range []string{"cancel", "drain"} {
		for i, p := range stopPoints() {
			if p.lostSignal && mode == "drain" || testing.Short() && i%3 != 0 {
				continue
			}
			t.Run(mode+"/"+p.name, func(t *testing.T) {
				table := fmt.Sprintf("stop-%s-%d", mode, i)
				if err := dynamo.CreateTable(t.Context(), client, table); err != nil {
					t.Fatal(err)
				}
				s := dynamo.New(client, table)
				stopCase(t, newEnvOn(t, false, backend{checkpoints: s, runs: s, claims: s, loader: s}), ref, mode, p, 1)
			})
		}
	}
}

// A crash at points of a chain of supersteps (every fourth store call and
// send; every eighth with -short; TestTickChainFaults tries them all), on DynamoDB: the tick that commits the
// remote step 2 runs the inline steps 3-6 in one call.
func TestTickChainFaultsDynamo(t *testing.T) {
	srv := mototest.Start(t)
	ddb := dynamodb.NewFromConfig(srv.Config)
	every := 4
	if testing.Short() {
		every = 8
	}
	ref := reference(t, false)
	type point struct {
		failAt, failSend int
		after            bool
	}
	var points []point
	for i := 1; i <= 24; i += every {
		points = append(points, point{failAt: i, after: i%4 == 1}, point{failAt: i + 1, after: i%4 != 1})
	}
	for i := 1; i <= 12; i += every {
		points = append(points, point{failSend: i})
	}
	for n, p := range points {
		t.Run(fmt.Sprintf("store call %d after=%v, send %d", p.failAt, p.after, p.failSend), func(t *testing.T) {
			table := fmt.Sprintf("chain-%d", n)
			if err := dynamo.CreateTable(t.Context(), ddb, table); err != nil {
				t.Fatal(err)
			}
			s := dynamo.New(ddb, table)
			e := newEnvOn(t, false, backend{checkpoints: s, runs: s, claims: s, loader: s})
			e.h.Chain = chained
			faultCaseAt(t, e, ref, false, rand.New(rand.NewPCG(uint64(n), 9)), p.failAt, p.after, p.failSend)
		})
	}
}

// spyLoader notes what a ChannelLoader was asked for and returned.
type spyLoader struct {
	*dynamo.Store
	mu       sync.Mutex
	partial  int      // checkpoints loaded in part
	appended []string // channels LoadChannels read
}

func (l *spyLoader) LoadRunReading(ctx context.Context, runID string, reads func(*pregel.Checkpoint) ([]string, bool)) (runs.Run, *pregel.Checkpoint, []pregel.TaskResult, error) {
	r, cp, pending, err := l.Store.LoadRunReading(ctx, runID, reads)
	if cp != nil && len(cp.Unloaded) > 0 {
		l.mu.Lock()
		l.partial++
		l.mu.Unlock()
	}
	return r, cp, pending, err
}

func (l *spyLoader) LoadChannels(ctx context.Context, cp *pregel.Checkpoint, channels []string) (*pregel.Checkpoint, error) {
	l.mu.Lock()
	l.appended = append(l.appended, channels...)
	l.mu.Unlock()
	return l.Store.LoadChannels(ctx, cp, channels)
}

// On DynamoDB, new Stores for every message (cold Lambdas): the ticks of
// steps whose nodes declare their reads load only those channels, read
// the doc that loop appends to before applying, and the run ends with the
// embedded run's state.
func TestTickReadsOnlyWhatTheStepReadsDynamo(t *testing.T) {
	srv := mototest.Start(t)
	client := dynamodb.NewFromConfig(srv.Config)
	if err := dynamo.CreateTable(t.Context(), client, "reads"); err != nil {
		t.Fatal(err)
	}
	ref := reference(t, false)
	s := dynamo.New(client, "reads", dynamo.WithCacheSize(0))
	spy := &spyLoader{Store: s}
	e := newEnvOn(t, false, backend{checkpoints: s, runs: s, claims: s, loader: spy})
	ctx := context.Background()
	if _, _, err := e.svc.Create(ctx, "tickgraph", runs.CreateRequest{RunID: "r"}); err != nil {
		t.Fatal(err)
	}
	e.drain(t, rand.New(rand.NewPCG(3, 4)), false)
	r, _ := e.svc.Get(ctx, "r")
	cp, err := dynamo.New(client, "reads").Load(ctx, "r", pregel.Latest)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != pregel.RunCompleted || r.Counters != ref.Counters || !equalJSON(cp.Values, ref.Values) {
		t.Fatalf("run %s %+v, values %s; want completed like %+v, %s", r.Status, r.Counters, cp.Values, ref.Counters, ref.Values)
	}
	if spy.partial == 0 {
		t.Error("no tick loaded a checkpoint in part")
	}
	if !slices.Contains(spy.appended, "doc") {
		t.Errorf("LoadChannels read %v; want the doc, which loop appends to without reading it", spy.appended)
	}
}
