package tick_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/superstep/superstep/internal/mototest"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/store/dynamo"
	"github.com/superstep/superstep/pkg/tick"
)

// loopSt is the state of the remote loop.
type loopSt struct {
	Count int `json:"count"`
}

// remoteRuns watches the executions of the remote loop's tasks: none of
// a remote task may overlap another of the same task (the lease), or
// start once its step is committed. (An inline task of a step of one task
// takes no lease: the FIFO tick queue keeps two ticks of a run apart, which
// the test queue, delivering copies at once, does not.)
type remoteRuns struct {
	mu        sync.Mutex
	active    map[string]int
	committed map[int]bool
	bad       []string
	execs     int
	// hook, when set, is called by each execution with its step, while
	// it runs.
	hook func(step int)
}

func (r *remoteRuns) begin(ctx context.Context) func() {
	info, _ := pregel.TaskFrom(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.execs++
	if info.Node == "fin" {
		return func() {}
	}
	r.active[info.TaskID]++
	if r.active[info.TaskID] > 1 {
		r.bad = append(r.bad, fmt.Sprintf("task %s of step %d ran twice at once", info.Node, info.Step))
	}
	if r.committed[info.Step] {
		r.bad = append(r.bad, fmt.Sprintf("task %s of step %d ran after its step committed", info.Node, info.Step))
	}
	hook := r.hook
	r.mu.Unlock()
	if hook != nil {
		hook(info.Step)
	}
	r.mu.Lock()
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.active[info.TaskID]--
	}
}

// remoteLoopSteps is the number of steps of the remote loop graph: six
// steps of one remote task, an inline step, a remote one.
const remoteLoopSteps = 8

// remoteLoopGraph: Start -> step (remote, count+1) looping while count <
// 6 -> fin (inline, +100) -> last (remote, +1000) -> End.
func remoteLoopGraph(t testing.TB, rr *remoteRuns) *pregel.Graph {
	g := pregel.NewGraph[loopSt]("remoteloop")
	body := func(add int) func(context.Context, loopSt) (loopSt, error) {
		return func(ctx context.Context, s loopSt) (loopSt, error) {
			defer rr.begin(ctx)()
			return loopSt{Count: s.Count + add}, nil
		}
	}
	g.AddFunc("step", body(1), pregel.Remote())
	g.AddFunc("fin", body(100))
	g.AddFunc("last", body(1000), pregel.Remote())
	g.AddEdge(pregel.Start, "step")
	g.AddConditionalEdges("step", func(_ context.Context, s loopSt) ([]string, error) {
		if s.Count < 6 {
			return []string{"step"}, nil
		}
		return []string{"fin"}, nil
	}, "step", "fin")
	g.AddEdge("fin", "last").AddEdge("last", pregel.End)
	cg, err := g.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return cg
}

// newLoopEnv is newEnvOn for the remote loop graph.
func newLoopEnv(t testing.TB, be backend, chain tick.Chain) (*env, *remoteRuns) {
	rr := &remoteRuns{active: map[string]int{}, committed: map[int]bool{}}
	reg, err := runs.NewRegistry(remoteLoopGraph(t, rr))
	if err != nil {
		t.Fatal(err)
	}
	ex := newExecutions()
	q := &chaosQueue{seen: map[string]bool{}}
	store := &crashStore{Checkpointer: be.checkpoints, ex: ex}
	store.afterCommit = func(cp *pregel.Checkpoint) {
		rr.mu.Lock()
		defer rr.mu.Unlock()
		rr.committed[cp.Step] = true
	}
	clock := &fakeClock{now: time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)}
	var cps pregel.Checkpointer = store
	if _, ok := be.checkpoints.(tick.StopCommitter); ok {
		cps = stopCrashStore{store}
	}
	h := &tick.Handler{Graphs: reg, Runs: be.runs, Checkpoints: cps, Queue: q, Claims: be.claims, Loader: be.loader, Now: clock.Now, Chain: chain}
	svc := &runs.Service{Graphs: reg, Runs: be.runs, Checkpoints: store, Dispatcher: &tick.Dispatcher{Checkpoints: store, Queue: q}}
	return &env{h: h, svc: svc, queue: q, store: store, ex: ex, clock: clock}, rr
}

// taskCount is the number of node tasks sent.
func (q *chaosQueue) taskCount() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.tasks
}

// runLoop runs the remote loop to its end and checks its result.
func runLoop(t *testing.T, e *env, rr *remoteRuns, id string, rng *rand.Rand, dup bool) {
	t.Helper()
	ctx := context.Background()
	if _, _, err := e.svc.Create(ctx, "remoteloop", runs.CreateRequest{RunID: id}); err != nil {
		if _, _, err := e.svc.Create(ctx, "remoteloop", runs.CreateRequest{RunID: id}); err != nil {
			t.Fatal(err)
		}
	}
	e.drain(t, rng, dup)
	r, err := e.svc.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != pregel.RunCompleted || r.Step != remoteLoopSteps {
		t.Fatalf("run = %s at step %d (%q), want completed at step %d", r.Status, r.Step, r.Error, remoteLoopSteps)
	}
	cp, err := e.store.Load(ctx, id, pregel.Latest)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(cp.Values["count"]); got != "1106" {
		t.Errorf("count %s, want 1106", got)
	}
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if len(rr.bad) > 0 {
		t.Errorf("executions: %v", rr.bad)
	}
}

// A node handler whose step is followed by a step of one remote task runs
// it in the same call (Chain): the loop ends as without a chain, with a
// node task sent per chain instead of per step.
func TestNodeChain(t *testing.T) {
	for _, tc := range []struct {
		name  string
		chain tick.Chain
		// tasks is the node tasks sent: steps 1-6 and 8 are remote.
		tasks int
	}{
		{"no chain", tick.Chain{}, 7},
		{"chains of 3", tick.Chain{Steps: 3}, 3},     // 1-3, 4-6, 8
		{"chains of 100", tick.Chain{Steps: 100}, 2}, // 1-6, 8
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, rr := newLoopEnv(t, memoryBackend(t), tc.chain)
			runLoop(t, e, rr, "n", rand.New(rand.NewPCG(1, 1)), false)
			if got := e.queue.taskCount(); got != tc.tasks {
				t.Errorf("%d node tasks sent, want %d", got, tc.tasks)
			}
			if rr.execs != remoteLoopSteps {
				t.Errorf("%d executions, want %d", rr.execs, remoteLoopSteps)
			}
		})
	}
}

// A crash at every store call and every send of a chained remote loop,
// with duplicated, reordered and concurrent deliveries, ends like an
// undisturbed run: no task runs while another execution of it runs, none
// after its step committed, and a chain cut short is taken up by the
// redelivery of its first message.
func TestNodeChainFaults(t *testing.T) {
	nodeChainFaults(t, func(t *testing.T) backend { return memoryBackend(t) }, 1, 40, 12)
}

// TestNodeChainDynamo is the node chain's tests on DynamoDB (moto), whose
// commits report stop requests, so that chained steps read nothing: the
// faults at every third store call and send, a kill in each chained step,
// and the lease of a chained step; one emulator for all (make test).
func TestNodeChainDynamo(t *testing.T) {
	srv := mototest.Start(t)
	be := func(t *testing.T) backend { return dynamoLoopBackend(t, srv.Config) }
	t.Run("faults", func(t *testing.T) { nodeChainFaults(t, be, 3, 14, 6) })
	t.Run("killed", func(t *testing.T) { nodeChainKilled(t, be) })
	t.Run("leases", func(t *testing.T) { nodeChainLeases(t, be) })
}

var tableSeq atomic.Int64

// nodeChainFaults runs the remote loop with chains of 3 and a crash at
// every every-th store call up to calls (before and after it reaches the
// store) and every every-th send up to sends.
func nodeChainFaults(t *testing.T, be func(*testing.T) backend, every, calls, sends int) {
	chain := tick.Chain{Steps: 3}
	for failAt := 1; failAt <= calls; failAt += every {
		for _, after := range []bool{false, true} {
			t.Run(fmt.Sprintf("store call %d, after=%v", failAt, after), func(t *testing.T) {
				e, rr := newLoopEnv(t, be(t), chain)
				e.store.failAt, e.store.after = failAt, after
				runLoop(t, e, rr, "f", rand.New(rand.NewPCG(uint64(failAt), 3)), true)
			})
		}
	}
	for failSend := 1; failSend <= sends; failSend += every {
		t.Run(fmt.Sprintf("send %d", failSend), func(t *testing.T) {
			e, rr := newLoopEnv(t, be(t), chain)
			var n atomic.Int32
			e.queue.failSend = func() error {
				if n.Add(1) == int32(failSend) {
					return errCrash
				}
				return nil
			}
			runLoop(t, e, rr, "s", rand.New(rand.NewPCG(uint64(failSend), 5)), true)
		})
	}
}

// A node handler killed in the middle of a chain (no store call or send
// succeeds after that point) leaves only the chain's first message; its
// redelivery finds the run past its step and sends the open step's node
// task, so the run ends as undisturbed, whichever chained step it died in.
func TestNodeChainKilledMidChain(t *testing.T) {
	nodeChainKilled(t, func(t *testing.T) backend { return memoryBackend(t) })
}

func nodeChainKilled(t *testing.T, be func(*testing.T) backend) {
	for killAt := 2; killAt <= 6; killAt++ {
		t.Run(fmt.Sprintf("killed in step %d", killAt), func(t *testing.T) {
			e, rr := newLoopEnv(t, be(t), tick.Chain{Steps: 10})
			var killed atomic.Bool
			e.store.killed = &killed
			e.queue.failSend = func() error {
				if killed.Load() {
					return errCrash
				}
				return nil
			}
			e.delivered = func() { killed.Store(false) }
			var fired atomic.Bool
			rr.hook = func(step int) {
				if step == killAt && fired.CompareAndSwap(false, true) {
					killed.Store(true)
				}
			}
			runLoop(t, e, rr, "k", rand.New(rand.NewPCG(uint64(killAt), 9)), false)
		})
	}
}

// A node task of a chained step delivered while the chain executes it (a
// late tick or a late copy of the chain's first message sends one) does
// not execute it: the chained step holds the task's lease.
func TestNodeChainLeasesChainedSteps(t *testing.T) {
	nodeChainLeases(t, func(t *testing.T) backend { return memoryBackend(t) })
}

func nodeChainLeases(t *testing.T, be func(*testing.T) backend) {
	e, rr := newLoopEnv(t, be(t), tick.Chain{Steps: 10})
	var fired atomic.Bool
	var copyErr error
	rr.hook = func(step int) {
		if step != 3 || !fired.CompareAndSwap(false, true) {
			return // (the copy, if it executes, does not wait)
		}
		ctx := context.Background()
		cp, err := e.store.Load(ctx, "l", 2)
		if err != nil {
			copyErr = err
			return
		}
		g, _ := e.h.Graphs.Get("remoteloop")
		copyErr = e.h.Node(ctx, tick.NodeTask{RunID: "l", Step: 3, TaskID: g.Plan(cp)[0].ID})
	}
	runLoop(t, e, rr, "l", rand.New(rand.NewPCG(1, 1)), false)
	if !errors.Is(copyErr, tick.ErrClaimed) {
		t.Errorf("the copy of the chained step's node task returned %v, want tick.ErrClaimed", copyErr)
	}
}

// dynamoLoopBackend is a backend on a new table of the emulator at cfg.
func dynamoLoopBackend(t *testing.T, cfg aws.Config) backend {
	client := dynamodb.NewFromConfig(cfg)
	table := fmt.Sprintf("nodechain-%d", tableSeq.Add(1))
	if err := dynamo.CreateTable(t.Context(), client, table); err != nil {
		t.Fatal(err)
	}
	s := dynamo.New(client, table)
	return backend{checkpoints: s, runs: s, claims: s, loader: s}
}
