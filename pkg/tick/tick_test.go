package tick_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/tick"
)

type St struct {
	Log   []string `json:"log" reduce:"append"`
	Total int      `json:"total" reduce:"sum"`
	Count int      `json:"count"`
	Items []int    `json:"items"`
	Reply string   `json:"reply"`
	// Doc is large (over what a DynamoDB step item holds inline) and
	// read by no node after prepare; loop adds a key to it. It is merged,
	// not appended: a channel of the append reducer is stored in
	// segments, which a tick always reads whole.
	Doc map[string]string `json:"doc" reduce:"merge"`
}

// executions counts node executions per task id and notes which results
// were recorded, to check that a recorded task never runs again.
type executions struct {
	mu       sync.Mutex
	runs     map[string]int
	recorded map[string]bool
	again    []string
	// hook, when set, is called by every node execution after ran.
	hook func(ctx context.Context)
}

func newExecutions() *executions {
	return &executions{runs: map[string]int{}, recorded: map[string]bool{}}
}

func (e *executions) ran(ctx context.Context) {
	info, _ := pregel.TaskFrom(ctx)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.runs[info.TaskID]++
	if e.recorded[info.TaskID] {
		e.again = append(e.again, info.TaskID+":"+info.Node+":"+fmt.Sprint(info.Step))
	}
	if hook := e.hook; hook != nil {
		e.mu.Unlock()
		hook(ctx)
		e.mu.Lock()
	}
}

// testGraph: prepare -> fan-out to remote workers and an inline side
// branch -> join -> loop of an inline node three times -> optional
// approval interrupt -> end. The inline nodes after prepare declare what
// they read (pregel.Reads), so on a ChannelLoader a tick loads only that,
// and reads the large doc that loop adds to only to apply the step.
func testGraph(t testing.TB, ex *executions, ask bool) *pregel.Graph {
	g := pregel.NewGraph[St]("tickgraph")
	g.AddFunc("prepare", func(ctx context.Context, s St) (St, error) {
		ex.ran(ctx)
		return St{Items: []int{1, 2, 3, 4}, Log: []string{"prepare"}, Doc: map[string]string{"prepare": strings.Repeat("d", 70<<10)}}, nil
	})
	g.AddFunc("work", func(ctx context.Context, s St) (St, error) {
		ex.ran(ctx)
		n, err := pregel.Arg[int](ctx)
		if err != nil {
			return St{}, err
		}
		return St{Total: n * 10, Log: []string{fmt.Sprint("work", n)}}, nil
	}, pregel.Remote())
	g.AddFunc("side", func(ctx context.Context, s St) (St, error) {
		ex.ran(ctx)
		return St{Log: []string{"side"}}, nil
	}, pregel.Reads("items"))
	g.AddFunc("join", func(ctx context.Context, s St) (St, error) {
		ex.ran(ctx)
		return St{Log: []string{fmt.Sprint("join", s.Total)}}, nil
	}, pregel.Reads("total"))
	g.AddFunc("loop", func(ctx context.Context, s St) (St, error) {
		ex.ran(ctx)
		return St{Count: s.Count + 1, Log: []string{fmt.Sprint("loop", s.Count)}, Doc: map[string]string{fmt.Sprint("loop", s.Count): "x"}}, nil
	}, pregel.Reads("count"))
	g.AddFunc("approve", func(ctx context.Context, s St) (St, error) {
		ex.ran(ctx)
		if !ask {
			return St{Reply: "auto"}, nil
		}
		v, err := pregel.Interrupt[string](ctx, "approve?")
		if err != nil {
			return St{}, err
		}
		return St{Reply: v}, nil
	}, pregel.Remote())
	g.AddEdge(pregel.Start, "prepare").AddEdge("prepare", "side")
	g.AddFanOut("prepare", "work", func(_ context.Context, s St) ([]any, error) {
		out := make([]any, len(s.Items))
		for i, v := range s.Items {
			out[i] = v
		}
		return out, nil
	})
	g.AddJoin("join", "work", "side").AddEdge("join", "loop")
	g.AddConditionalEdges("loop", func(_ context.Context, s St) ([]string, error) {
		if s.Count < 3 {
			return []string{"loop"}, nil
		}
		return []string{"approve"}, nil
	}, "loop", "approve")
	g.AddEdge("approve", pregel.End)
	cg, err := g.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return cg
}

// message is a tick or a node task in flight.
type message struct {
	tick *tick.Tick
	task *tick.NodeTask
}

// chaosQueue delivers messages in random order, sometimes twice, and
// deduplicates ticks by id like an SQS FIFO queue.
type chaosQueue struct {
	mu       sync.Mutex
	msgs     []message
	seen     map[string]bool
	failSend func() error
	// ticks counts the ticks sent (duplicates the queue drops included),
	// tasks the node tasks.
	ticks, tasks int
}

func (q *chaosQueue) push(m message) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.msgs = append(q.msgs, m)
}

func (q *chaosQueue) SendTick(_ context.Context, t tick.Tick) error {
	if q.failSend != nil {
		if err := q.failSend(); err != nil {
			return err
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.ticks++
	if q.seen[t.DedupID()] {
		return nil
	}
	q.seen[t.DedupID()] = true
	q.msgs = append(q.msgs, message{tick: &t})
	return nil
}

func (q *chaosQueue) SendTask(_ context.Context, t tick.NodeTask) error {
	if q.failSend != nil {
		if err := q.failSend(); err != nil {
			return err
		}
	}
	q.mu.Lock()
	q.tasks++
	q.mu.Unlock()
	q.push(message{task: &t})
	return nil
}

func (q *chaosQueue) pop(rng *rand.Rand) (message, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.msgs) == 0 {
		return message{}, false
	}
	i := rng.IntN(len(q.msgs))
	m := q.msgs[i]
	q.msgs = slices.Delete(q.msgs, i, i+1)
	return m, true
}

var errCrash = errors.New("simulated crash")

// crashStore fails one chosen call, before or after it reaches the store.
type crashStore struct {
	pregel.Checkpointer
	ex     *executions
	mu     sync.Mutex
	calls  int
	failAt int
	after  bool
	// afterCommit, when set, is called after each commit that succeeds.
	afterCommit func(cp *pregel.Checkpoint)
	// killed, when set and true, fails every call (a process killed in
	// the middle of a delivery).
	killed *atomic.Bool
}

func (c *crashStore) crash() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	return c.calls == c.failAt || c.killed != nil && c.killed.Load()
}

func (c *crashStore) Commit(ctx context.Context, cp *pregel.Checkpoint) error {
	_, err := c.commit(ctx, cp, func(ctx context.Context, cp *pregel.Checkpoint) (bool, error) {
		return false, c.Checkpointer.Commit(ctx, cp)
	})
	return err
}

// commit is Commit and CommitStop: commit is the inner store's.
func (c *crashStore) commit(ctx context.Context, cp *pregel.Checkpoint, commit func(context.Context, *pregel.Checkpoint) (bool, error)) (bool, error) {
	if c.crash() {
		if c.after {
			_, _ = commit(ctx, cp)
		}
		return false, errCrash
	}
	stop, err := commit(ctx, cp)
	if err == nil && c.afterCommit != nil {
		c.afterCommit(cp)
	}
	return stop, err
}

// stopCrashStore is a crashStore on a tick.StopCommitter (the DynamoDB
// store), which it is too.
type stopCrashStore struct{ *crashStore }

func (c stopCrashStore) CommitStop(ctx context.Context, cp *pregel.Checkpoint) (bool, error) {
	return c.commit(ctx, cp, c.Checkpointer.(tick.StopCommitter).CommitStop)
}

func (c *crashStore) RecordTask(ctx context.Context, runID string, step int, r pregel.TaskResult) (pregel.TaskResult, error) {
	crash := c.crash()
	if crash && !c.after {
		return pregel.TaskResult{}, errCrash
	}
	stored, err := c.Checkpointer.RecordTask(ctx, runID, step, r)
	if err == nil && stored.Final() {
		c.ex.mu.Lock()
		c.ex.recorded[stored.TaskID] = true
		c.ex.mu.Unlock()
	}
	if crash {
		return pregel.TaskResult{}, errCrash
	}
	return stored, err
}

type env struct {
	h     *tick.Handler
	svc   *runs.Service
	queue *chaosQueue
	store *crashStore
	ex    *executions
	clock *fakeClock
	// deadline, if set, is the deadline of the contexts drain delivers
	// messages with, from the start of drain (a Lambda's timeout).
	deadline time.Duration
	// delivered, when set, is called by drain after each delivery.
	delivered func()
}

// backend supplies the stores a test runs on.
type backend struct {
	checkpoints pregel.Checkpointer
	runs        runs.Store
	claims      tick.Claims
	loader      tick.RunLoader
}

func memoryBackend(testing.TB) backend {
	return backend{checkpoints: pregel.NewMemoryStore(), runs: runs.NewMemoryStore(), claims: &tick.MemoryClaims{}}
}

func newEnv(t testing.TB, ask bool) *env { return newEnvOn(t, ask, memoryBackend(t)) }

func newEnvOn(t testing.TB, ask bool, be backend) *env {
	ex := newExecutions()
	g := testGraph(t, ex, ask)
	reg, err := runs.NewRegistry(g)
	if err != nil {
		t.Fatal(err)
	}
	q := &chaosQueue{seen: map[string]bool{}}
	store := &crashStore{Checkpointer: be.checkpoints, ex: ex}
	rs := be.runs
	clock := &fakeClock{now: time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)}
	var cps pregel.Checkpointer = store
	if _, ok := be.checkpoints.(tick.StopCommitter); ok {
		cps = stopCrashStore{store}
	}
	h := &tick.Handler{Graphs: reg, Runs: rs, Checkpoints: cps, Queue: q, Claims: be.claims, Loader: be.loader, Now: clock.Now}
	svc := &runs.Service{Graphs: reg, Runs: rs, Checkpoints: store, Dispatcher: &tick.Dispatcher{Checkpoints: store, Queue: q}}
	return &env{h: h, svc: svc, queue: q, store: store, ex: ex, clock: clock}
}

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// redeliver models a message coming back after the visibility timeout,
// which outlasts any lease.
func (c *fakeClock) redeliver() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(time.Hour)
}

// drain delivers messages until none is left. Failed deliveries are
// redelivered; with dup, some are delivered twice, some concurrently.
func (e *env) drain(t testing.TB, rng *rand.Rand, dup bool) {
	ctx := context.Background()
	if e.deadline > 0 {
		c, cancel := context.WithTimeout(ctx, e.deadline)
		defer cancel()
		ctx = c
	}
	deliver := func(m message) error {
		if e.delivered != nil {
			defer e.delivered()
		}
		if m.tick != nil {
			return e.h.Tick(ctx, *m.tick)
		}
		return e.h.Node(ctx, *m.task)
	}
	for n := 0; ; n++ {
		if n > 10000 {
			t.Fatal("messages never stop: a run is stuck in a loop of ticks")
		}
		m, ok := e.queue.pop(rng)
		if !ok {
			return
		}
		if dup && rng.IntN(4) == 0 { // the same message twice at once
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i := range 2 {
				wg.Go(func() { errs[i] = deliver(m) })
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					e.clock.redeliver()
					e.queue.push(m)
				}
			}
			continue
		}
		if err := deliver(m); err != nil {
			if errors.Is(err, tick.ErrBadMessage) {
				t.Fatalf("bad message %+v: %v", m, err)
			}
			e.clock.redeliver()
			e.queue.push(m) // redelivery after the visibility timeout
			continue
		}
		if dup && rng.IntN(5) == 0 {
			e.queue.push(m) // a late duplicate
		}
	}
}

func reference(t *testing.T, ask bool) *pregel.Result {
	t.Helper()
	g := testGraph(t, newExecutions(), ask)
	ctx := context.Background()
	store := pregel.NewMemoryStore()
	res, err := g.Run(ctx, nil, pregel.WithStore(store), pregel.WithRunID("ref"), pregel.CheckReads())
	if err != nil {
		t.Fatal(err)
	}
	if ask {
		res, err = g.Resume(ctx, "ref", pregel.WithStore(store), pregel.WithResume("yes"))
		if err != nil {
			t.Fatal(err)
		}
	}
	return res
}

func equalJSON(a, b map[string]json.RawMessage) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func TestTickRunsToTheEmbeddedResult(t *testing.T) {
	ref := reference(t, false)
	e := newEnv(t, false)
	ctx := context.Background()
	if _, _, err := e.svc.Create(ctx, "tickgraph", runs.CreateRequest{RunID: "r1"}); err != nil {
		t.Fatal(err)
	}
	e.drain(t, rand.New(rand.NewPCG(1, 2)), false)
	r, _ := e.svc.Get(ctx, "r1")
	if r.Status != pregel.RunCompleted || r.Counters != ref.Counters || r.Step != ref.Step {
		t.Fatalf("run = %+v, want completed like %+v", r, ref)
	}
	cp, _ := e.store.Load(ctx, "r1", pregel.Latest)
	if !equalJSON(cp.Values, ref.Values) {
		t.Errorf("values %s, want %s", cp.Values, ref.Values)
	}
}

// Faults at every point of the protocol, duplicated, delayed and concurrent
// deliveries: every run ends as an undisturbed one, and no task whose
// result was recorded runs again.
func TestTickFaults(t *testing.T) {
	for _, ask := range []bool{false, true} {
		ref := reference(t, ask)
		for seed := range uint64(60) {
			t.Run(fmt.Sprintf("ask=%v/seed=%d", ask, seed), func(t *testing.T) {
				faultCase(t, newEnv(t, ask), ref, ask, seed)
			})
		}
	}
}

// faultCase runs one disturbed run of the test graph to its end and
// compares it with the reference.
func faultCase(t *testing.T, e *env, ref *pregel.Result, ask bool, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	failAt, after, failSend := 1+rng.IntN(20), rng.IntN(2) == 0, 1+rng.IntN(20)
	faultCaseAt(t, e, ref, ask, rng, failAt, after, failSend)
}

// faultCaseAt runs one disturbed run of the test graph to its end and
// compares it with the reference: the failAt-th store call fails (after
// reaching the store if after) and so does the failSend-th send; rng
// orders, duplicates and delays the deliveries.
func faultCaseAt(t *testing.T, e *env, ref *pregel.Result, ask bool, rng *rand.Rand, failAt int, after bool, failSend int) {
	e.store.failAt = failAt
	e.store.after = after
	var sends atomic.Int32
	e.queue.failSend = func() error {
		if sends.Add(1) == int32(failSend) {
			return errCrash
		}
		return nil
	}
	ctx := context.Background()
	if _, _, err := e.svc.Create(ctx, "tickgraph", runs.CreateRequest{RunID: "r"}); err != nil {
		// The crash hit the first tick: the client retries.
		if _, _, err := e.svc.Create(ctx, "tickgraph", runs.CreateRequest{RunID: "r"}); err != nil {
			t.Fatal(err)
		}
	}
	e.drain(t, rng, true)
	r, _ := e.svc.Get(ctx, "r")
	if ask {
		if r.Status != pregel.RunInterrupted {
			t.Fatalf("run = %+v, want interrupted", r)
		}
		if _, err := e.svc.Resume(ctx, "r", runs.ResumeRequest{Value: json.RawMessage(`"yes"`)}); err != nil {
			// The crash hit the resume's tick: the client retries.
			if _, err := e.svc.Resume(ctx, "r", runs.ResumeRequest{Value: json.RawMessage(`"yes"`)}); err != nil {
				t.Fatal(err)
			}
		}
		e.drain(t, rng, true)
		r, _ = e.svc.Get(ctx, "r")
	}
	if r.Status != pregel.RunCompleted || r.Counters != ref.Counters || r.Step != ref.Step {
		t.Fatalf("run = %+v\nwant completed with %+v at step %d", r, ref.Counters, ref.Step)
	}
	cp, _ := e.store.Load(ctx, "r", pregel.Latest)
	if !equalJSON(cp.Values, ref.Values) {
		t.Errorf("values %s\nwant %s", cp.Values, ref.Values)
	}
	if len(e.ex.again) > 0 {
		t.Errorf("tasks ran again after their result was recorded: %v", e.ex.again)
	}
}

func TestTickDrainAndCancel(t *testing.T) {
	ref := reference(t, false)
	ctx := context.Background()
	t.Run("drain stops before the next step and resume completes", func(t *testing.T) {
		e := newEnv(t, false)
		rng := rand.New(rand.NewPCG(3, 4))
		if _, _, err := e.svc.Create(ctx, "tickgraph", runs.CreateRequest{RunID: "d"}); err != nil {
			t.Fatal(err)
		}
		// Deliver the first tick only, then ask for a drain.
		m, _ := e.queue.pop(rng)
		if err := e.h.Tick(ctx, *m.tick); err != nil {
			t.Fatal(err)
		}
		if _, err := e.svc.Drain(ctx, "d", "maintenance"); err != nil {
			t.Fatal(err)
		}
		e.drain(t, rng, false)
		r, _ := e.svc.Get(ctx, "d")
		if r.Status != pregel.RunDrained || r.DrainReason != "maintenance" || r.Step != 1 {
			t.Fatalf("run = %+v, want drained at step 1", r)
		}
		if _, err := e.svc.Resume(ctx, "d", runs.ResumeRequest{}); err != nil {
			t.Fatal(err)
		}
		e.drain(t, rng, false)
		r, _ = e.svc.Get(ctx, "d")
		cp, _ := e.store.Load(ctx, "d", pregel.Latest)
		if r.Status != pregel.RunCompleted || !equalJSON(cp.Values, ref.Values) {
			t.Fatalf("after resume: %+v %s", r, cp.Values)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		e := newEnv(t, false)
		rng := rand.New(rand.NewPCG(5, 6))
		if _, _, err := e.svc.Create(ctx, "tickgraph", runs.CreateRequest{RunID: "c"}); err != nil {
			t.Fatal(err)
		}
		m, _ := e.queue.pop(rng)
		if err := e.h.Tick(ctx, *m.tick); err != nil {
			t.Fatal(err)
		}
		if _, err := e.svc.Cancel(ctx, "c"); err != nil {
			t.Fatal(err)
		}
		e.drain(t, rng, false)
		r, _ := e.svc.Get(ctx, "c")
		if r.Status != pregel.RunCancelled || r.Step != 1 {
			t.Fatalf("run = %+v, want cancelled at step 1", r)
		}
	})
}

// TestCancelWhileTheStepInterrupts: a cancel asked while the step that
// interrupts runs (after the step read the run record) ends the run
// cancelled, not interrupted with the request pending: nothing acts on a
// request left on a paused run, and a client waiting for the run to end
// would wait forever (stop 33's CI, the serverless disorder check).
func TestCancelWhileTheStepInterrupts(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, true)
	var asked atomic.Bool
	e.ex.hook = func(nctx context.Context) {
		if info, _ := pregel.TaskFrom(nctx); info.Node == "approve" && asked.CompareAndSwap(false, true) {
			if _, err := e.svc.Cancel(ctx, "w"); err != nil {
				t.Errorf("cancel: %v", err)
			}
		}
	}
	if _, _, err := e.svc.Create(ctx, "tickgraph", runs.CreateRequest{RunID: "w"}); err != nil {
		t.Fatal(err)
	}
	e.drain(t, rand.New(rand.NewPCG(7, 8)), false)
	r, err := e.svc.Get(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	if !asked.Load() {
		t.Fatal("the approval node never ran")
	}
	if r.Status != pregel.RunCancelled || r.CancelRequested || len(r.Interrupts) > 0 {
		t.Fatalf("run = %s (cancel requested %v, interrupts %v), want cancelled with nothing pending", r.Status, r.CancelRequested, r.Interrupts)
	}
}

// take removes the first queued message that match accepts.
func (q *chaosQueue) take(match func(message) bool) (message, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, m := range q.msgs {
		if match(m) {
			q.msgs = slices.Delete(q.msgs, i, i+1)
			return m, true
		}
	}
	return message{}, false
}

func isTick(m message) bool { return m.tick != nil }
func isTask(m message) bool { return m.task != nil }

// stopPoint is when, in the test graph's remote step (step 2: four remote
// work tasks and the inline side task), a drain or cancel is requested.
type stopPoint struct {
	name string
	// before: requested before step 2's tick is delivered.
	before bool
	// finished: node tasks delivered (and finished) before the request.
	finished int
	// during: the node whose execution makes the request ("work": the
	// next node task after the finished ones; "side": the inline task,
	// while the remote ones are queued).
	during string
	// lostSignal: the cancel's own tick cannot be sent.
	lostSignal bool
}

func stopPoints() []stopPoint {
	ps := []stopPoint{{name: "before the step", before: true}, {name: "inline task executing, remote tasks queued", during: "side"}}
	for k := range 4 {
		ps = append(ps, stopPoint{name: fmt.Sprintf("%d of 4 remote tasks finished, the rest queued", k), finished: k})
	}
	ps = append(ps, stopPoint{name: "all 4 remote tasks finished, commit tick queued", finished: 4})
	for k := range 4 {
		ps = append(ps, stopPoint{name: fmt.Sprintf("%d of 4 remote tasks finished, one executing", k), finished: k, during: "work"})
	}
	ps = append(ps, stopPoint{name: "2 of 4 remote tasks finished, the rest queued, cancel tick lost", finished: 2, lostSignal: true})
	return ps
}

// A cancel or a drain at any point of a remote step ends the run: a cancel
// ends it cancelled (after committing the step only if all its tasks had
// finished), a drain commits the step in progress and stops after it, and
// resuming the drained run completes it like an undisturbed one. No
// message is left, nothing waits forever, and no recorded task runs again.
func TestTickStopDuringRemoteStep(t *testing.T) {
	ref := reference(t, false)
	for _, mode := range []string{"cancel", "drain"} {
		for _, p := range stopPoints() {
			if p.lostSignal && mode == "drain" {
				continue
			}
			for seed := range uint64(4) { // seed 0: no crash
				t.Run(fmt.Sprintf("%s/%s/seed=%d", mode, p.name, seed), func(t *testing.T) {
					stopCase(t, newEnv(t, false), ref, mode, p, seed)
				})
			}
		}
	}
}

// A node task for a task the tick handler executes (its node is not
// remote) is refused as a bad message, and nothing is executed or
// recorded.
func TestNodeRefusesInlineTasks(t *testing.T) {
	e := newEnv(t, false)
	ctx := context.Background()
	if _, _, err := e.svc.Create(ctx, "tickgraph", runs.CreateRequest{RunID: "n"}); err != nil {
		t.Fatal(err)
	}
	cp, err := e.store.Load(ctx, "n", pregel.Latest)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := e.h.Graphs.Get("tickgraph")
	tasks := g.Plan(cp) // step 1: prepare, inline
	if len(tasks) != 1 || tasks[0].Node() != "prepare" {
		t.Fatalf("step 1 plans %+v", tasks)
	}
	err = e.h.Node(ctx, tick.NodeTask{RunID: "n", Step: 1, TaskID: tasks[0].ID})
	if !errors.Is(err, tick.ErrBadMessage) || !strings.Contains(err.Error(), `node "prepare", which is not remote`) {
		t.Fatalf("node task for an inline task: %v, want a bad message naming the node", err)
	}
	if n := len(e.ex.runs); n != 0 {
		t.Errorf("%d tasks executed", n)
	}
	if pending, _ := e.store.PendingTasks(ctx, "n", 1); len(pending) != 0 {
		t.Errorf("results recorded: %+v", pending)
	}
}

// stopCase runs the test graph to the stop point p, requests the drain or
// cancel, delivers every message left (with seed > 0, one store call and
// one send failing as a crash would) and checks how the run ended.
func stopCase(t *testing.T, e *env, ref *pregel.Result, mode string, p stopPoint, seed uint64) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 11))
	const id = "s"
	var once sync.Once
	request := func() {
		once.Do(func() {
			var err error
			if mode == "cancel" {
				if p.lostSignal {
					e.queue.failSend = func() error { return errCrash }
				}
				_, err = e.svc.Cancel(ctx, id)
				e.queue.failSend = nil
			} else {
				_, err = e.svc.Drain(ctx, id, "maintenance")
			}
			if err != nil {
				t.Errorf("%s: %v", mode, err)
			}
		})
	}
	deliver := func(m message) {
		t.Helper()
		var err error
		if m.tick != nil {
			err = e.h.Tick(ctx, *m.tick)
		} else {
			err = e.h.Node(ctx, *m.task)
		}
		if err != nil {
			t.Fatalf("deliver %+v: %v", m, err)
		}
	}
	if _, _, err := e.svc.Create(ctx, "tickgraph", runs.CreateRequest{RunID: id}); err != nil {
		t.Fatal(err)
	}
	m, _ := e.queue.take(isTick)
	deliver(m) // step 1: prepare
	if p.before {
		request()
	} else {
		if p.during == "side" {
			e.ex.hook = func(ctx context.Context) {
				if info, _ := pregel.TaskFrom(ctx); info.Node == "side" {
					request()
				}
			}
		}
		m, _ = e.queue.take(isTick)
		deliver(m) // step 2: sends the work tasks, executes side
		for range p.finished {
			m, _ = e.queue.take(isTask)
			deliver(m)
		}
		switch p.during {
		case "work":
			e.ex.hook = func(ctx context.Context) { request() }
			m, _ = e.queue.take(isTask)
			deliver(m)
		case "":
			request()
		}
	}
	e.ex.hook = nil
	if seed > 0 {
		// From here on, a store call and a send fail once, as a crash
		// would; the message comes back.
		e.store.mu.Lock()
		e.store.failAt = e.store.calls + 1 + rng.IntN(8)
		e.store.mu.Unlock()
		e.store.after = rng.IntN(2) == 0
		var sends atomic.Int32
		failSend := int32(1 + rng.IntN(4))
		e.queue.failSend = func() error {
			if sends.Add(1) == failSend {
				return errCrash
			}
			return nil
		}
	}
	e.drain(t, rng, true)
	e.queue.failSend = nil

	r, err := e.svc.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(e.ex.again) > 0 {
		t.Errorf("tasks ran again after their result was recorded: %v", e.ex.again)
	}
	if mode == "cancel" {
		// The step commits only if all its tasks had finished; when the
		// last one was executing, either may happen.
		want := []int{1}
		switch {
		case p.finished == 4:
			want = []int{2}
		case p.finished == 3 && p.during == "work":
			want = []int{1, 2}
		}
		if r.Status != pregel.RunCancelled || r.CancelRequested || !slices.Contains(want, r.Step) {
			t.Fatalf("run = %s at step %d (cancel requested %v), want cancelled at step %v", r.Status, r.Step, r.CancelRequested, want)
		}
		if _, err := e.svc.Cancel(ctx, id); !errors.Is(err, runs.ErrInvalidState) {
			t.Errorf("second cancel: %v, want ErrInvalidState", err)
		}
		return
	}
	want := 2 // the step in progress is committed first
	if p.before {
		want = 1
	}
	if r.Status != pregel.RunDrained || r.Step != want || r.DrainReason != "maintenance" {
		t.Fatalf("run = %s at step %d (reason %q), want drained at step %d", r.Status, r.Step, r.DrainReason, want)
	}
	if _, err := e.svc.Resume(ctx, id, runs.ResumeRequest{}); err != nil {
		t.Fatal(err)
	}
	e.drain(t, rng, true)
	r, _ = e.svc.Get(ctx, id)
	cp, _ := e.store.Load(ctx, id, pregel.Latest)
	if r.Status != pregel.RunCompleted || r.Counters != ref.Counters || !equalJSON(cp.Values, ref.Values) {
		t.Fatalf("after resume: %s %+v %s\nwant completed with %+v %s", r.Status, r.Counters, cp.Values, ref.Counters, ref.Values)
	}
	if len(e.ex.again) > 0 {
		t.Errorf("tasks ran again after their result was recorded: %v", e.ex.again)
	}
}

// A node task of a run whose graph this deployment does not serve fails
// the run, as a tick does, rather than leaving it running with its task
// in the dead-letter queue.
func TestNodeFailsRunOfUndeployedGraph(t *testing.T) {
	e := newEnv(t, false)
	ctx := context.Background()
	if _, _, err := e.svc.Create(ctx, "tickgraph", runs.CreateRequest{RunID: "u"}); err != nil {
		t.Fatal(err)
	}
	other, err := runs.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	h := *e.h
	h.Graphs = other
	if err := h.Node(ctx, tick.NodeTask{RunID: "u", Step: 1, TaskID: "t"}); err != nil {
		t.Fatal(err)
	}
	r, _ := e.svc.Get(ctx, "u")
	if r.Status != pregel.RunFailed || !strings.Contains(r.Error, `graph "tickgraph" is not deployed`) {
		t.Fatalf("run = %s (%q), want failed: graph not deployed", r.Status, r.Error)
	}
}

// A run left running with its cancel requested and no message in flight
// (as earlier versions left a run whose queued node tasks were skipped)
// ends when cancel is asked again.
func TestCancelAgainEndsAStuckRun(t *testing.T) {
	e := newEnv(t, false)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(9, 9))
	if _, _, err := e.svc.Create(ctx, "tickgraph", runs.CreateRequest{RunID: "k"}); err != nil {
		t.Fatal(err)
	}
	m, _ := e.queue.take(isTick)
	if err := e.h.Tick(ctx, *m.tick); err != nil {
		t.Fatal(err)
	}
	if _, err := runs.Mutate(ctx, e.h.Runs, "k", func(r *runs.Run) error {
		r.CancelRequested = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	e.queue.mu.Lock()
	e.queue.msgs = nil // the messages were lost
	e.queue.mu.Unlock()
	if _, err := e.svc.Cancel(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	e.drain(t, rng, false)
	if r, _ := e.svc.Get(ctx, "k"); r.Status != pregel.RunCancelled || r.Step != 1 {
		t.Fatalf("run = %s at step %d, want cancelled at step 1", r.Status, r.Step)
	}
}
