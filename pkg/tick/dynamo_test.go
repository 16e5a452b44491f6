package tick_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/superstep/superstep/internal/mototest"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/store/dynamo"
	"github.com/superstep/superstep/pkg/tick"
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
// the doc that loop adds to before applying, and the run ends with the
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
		t.Errorf("LoadChannels read %v; want the doc, which loop adds to without reading it", spy.appended)
	}
}

type wideState struct {
	N       int   `json:"n"`
	Results []int `json:"results" reduce:"append"`
	Total   int   `json:"total"`
}

// wideGraph: split fans out n remote work tasks, each appending its item;
// collect sums them.
func wideGraph(t *testing.T, ex *executions) *pregel.Graph {
	g := pregel.NewGraph[wideState]("wide")
	g.AddFunc("split", func(ctx context.Context, _ wideState) (wideState, error) { return wideState{}, nil })
	g.AddFunc("work", func(ctx context.Context, _ wideState) (wideState, error) {
		ex.ran(ctx)
		n, err := pregel.Arg[int](ctx)
		return wideState{Results: []int{n}}, err
	}, pregel.Remote(), pregel.Reads("n"))
	g.AddFunc("collect", func(_ context.Context, s wideState) (wideState, error) {
		t := 0
		for _, v := range s.Results {
			t += v
		}
		return wideState{Total: t}, nil
	}, pregel.Reads("results"))
	g.AddEdge(pregel.Start, "split")
	g.AddFanOut("split", "work", func(_ context.Context, s wideState) ([]any, error) {
		out := make([]any, s.N)
		for i := range out {
			out[i] = i + 1
		}
		return out, nil
	})
	g.AddEdge("work", "collect").AddEdge("collect", pregel.End)
	cg, err := g.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return cg
}

// countingStore fails some CountSettled calls, before or after the count
// reaches the store, and counts the commits of each step.
type countingStore struct {
	*crashStore
	counter tick.SettleCounter
	mu      sync.Mutex
	counts  int
	commits map[int]int
	sharded bool
}

func (c *countingStore) CountSettled(ctx context.Context, runID string, step int) (int, error) {
	c.mu.Lock()
	c.counts++
	k := c.counts
	c.mu.Unlock()
	if k%7 == 3 {
		return 0, errCrash // before
	}
	n, err := c.counter.CountSettled(ctx, runID, step)
	if k%7 == 5 {
		return 0, errCrash // after
	}
	return n, err
}

// shardingStore is countingStore for a sharded step: SettledAll fails as
// CountSettled does, before or after the count.
type shardingStore struct {
	*countingStore
	s *dynamo.Store
}

func (c *shardingStore) ShardTasks(ctx context.Context, runID string, step int, ids []string) error {
	c.mu.Lock()
	c.sharded = true
	c.mu.Unlock()
	return c.s.ShardTasks(ctx, runID, step, ids)
}

func (c *shardingStore) SettledAll(ctx context.Context, runID string, step int, taskID string, remote int) (bool, error) {
	c.mu.Lock()
	c.counts++
	k := c.counts
	c.mu.Unlock()
	if k%7 == 3 {
		return false, errCrash // before
	}
	all, err := c.s.SettledAll(ctx, runID, step, taskID, remote)
	if k%7 == 5 {
		return false, errCrash // after
	}
	return all, err
}

func (c *countingStore) Commit(ctx context.Context, cp *pregel.Checkpoint) error {
	err := c.crashStore.Commit(ctx, cp)
	if err == nil {
		c.mu.Lock()
		c.commits[cp.Step]++
		c.mu.Unlock()
	}
	return err
}

// A step of 40 remote tasks (over tick.CountSettledFrom) on DynamoDB,
// messages delivered in random order, some twice, some at once, and
// crashes before and after counting: every task runs once, every result
// is applied once, and the step commits once.
func TestWideFanOutDynamo(t *testing.T) {
	srv := mototest.Start(t)
	client := dynamodb.NewFromConfig(srv.Config)
	const n = 40
	if n < tick.CountSettledFrom {
		t.Fatalf("the fan-out of %d does not reach tick.CountSettledFrom (%d)", n, tick.CountSettledFrom)
	}
	// seed 0: one counter in the run's partition; seed 1: the task items
	// sharded over 6 partition key values (7 tasks a shard), each counting.
	for seed := range uint64(2) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			table := fmt.Sprint("wide-", seed)
			if err := dynamo.CreateTable(t.Context(), client, table); err != nil {
				t.Fatal(err)
			}
			s := dynamo.New(client, table, dynamo.WithTasksPerShard(7))
			ex := newExecutions()
			reg, err := runs.NewRegistry(wideGraph(t, ex))
			if err != nil {
				t.Fatal(err)
			}
			cs := &countingStore{crashStore: &crashStore{Checkpointer: s, ex: ex}, counter: s, commits: map[int]int{}}
			var cps pregel.Checkpointer = cs
			if seed == 1 {
				cps = &shardingStore{countingStore: cs, s: s}
			}
			q := &chaosQueue{seen: map[string]bool{}}
			clock := &fakeClock{now: time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)}
			h := &tick.Handler{Graphs: reg, Runs: s, Checkpoints: cps, Queue: q, Claims: s, Loader: s, Now: clock.Now}
			svc := &runs.Service{Graphs: reg, Runs: s, Checkpoints: cps, Dispatcher: &tick.Dispatcher{Checkpoints: cps, Queue: q}}
			e := &env{h: h, svc: svc, queue: q, store: cs.crashStore, ex: ex, clock: clock}
			ctx := context.Background()
			if _, _, err := svc.Create(ctx, "wide", runs.CreateRequest{RunID: "r", Input: json.RawMessage(fmt.Sprintf(`{"n": %d}`, n))}); err != nil {
				t.Fatal(err)
			}
			e.drain(t, rand.New(rand.NewPCG(seed, 11)), true)
			r, _ := svc.Get(ctx, "r")
			cp, err := dynamo.New(client, table).Load(ctx, "r", pregel.Latest)
			if err != nil {
				t.Fatal(err)
			}
			var st wideState
			_ = json.Unmarshal(cp.Values["results"], &st.Results)
			_ = json.Unmarshal(cp.Values["total"], &st.Total)
			slices.Sort(st.Results)
			if r.Status != pregel.RunCompleted || len(st.Results) != n || st.Total != n*(n+1)/2 || st.Results[0] != 1 || st.Results[n-1] != n {
				t.Fatalf("run %s (%s), %d results summing to %d; want completed, %d summing to %d", r.Status, r.Error, len(st.Results), st.Total, n, n*(n+1)/2)
			}
			if len(ex.runs) != n || len(ex.again) > 0 {
				t.Errorf("%d tasks executed, recorded ones again: %v", len(ex.runs), ex.again)
			}
			for id, k := range ex.runs {
				if k != 1 {
					t.Errorf("task %s executed %d times", id, k)
				}
			}
			if seed == 1 {
				// Every item of the step is gone with the commit, in
				// the run's partition and in the shards.
				for k := range 6 {
					out, err := client.Query(ctx, &dynamodb.QueryInput{
						TableName:                 aws.String(table),
						KeyConditionExpression:    aws.String("pk = :pk AND begins_with(sk, :p)"),
						ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":pk": &ddbtypes.AttributeValueMemberS{Value: fmt.Sprintf("RUN#r#T%d", k)}, ":p": &ddbtypes.AttributeValueMemberS{Value: "TASK#"}},
					})
					if err != nil {
						t.Fatal(err)
					}
					if out.Count != 0 {
						t.Errorf("shard %d keeps %d task results after the commit", k, out.Count)
					}
				}
				if !cs.sharded {
					t.Error("the step was not sharded")
				}
			}
			if cs.commits[2] != 1 || cs.counts < n {
				t.Errorf("step 2 committed %d times, %d counts; want once, at least %d", cs.commits[2], cs.counts, n)
			}
		})
	}
}
