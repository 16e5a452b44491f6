package embedded_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/embedded"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// St is the state of the test graphs.
type St struct {
	Log    []string `json:"log" reduce:"append"`
	Count  int      `json:"count"`
	Answer string   `json:"answer"`
}

// env is a Service wired to a Scheduler over memory stores.
type env struct {
	graphs *runs.Registry
	runs   *runs.MemoryStore
	cps    *pregel.MemoryStore
	sched  *embedded.Scheduler
	svc    *runs.Service
	// crash cancels the context given to the Scheduler's Start.
	crash context.CancelFunc
}

func newEnv(t *testing.T, concurrency int, graphs ...*pregel.Graph) *env {
	t.Helper()
	reg, err := runs.NewRegistry(graphs...)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{graphs: reg, runs: runs.NewMemoryStore(), cps: pregel.NewMemoryStore()}
	e.start(t, concurrency)
	return e
}

// start puts a new, started Scheduler in e, as a restarted process would.
func (e *env) start(t *testing.T, concurrency int) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	e.sched = embedded.NewScheduler(embedded.SchedulerConfig{Graphs: e.graphs, Runs: e.runs, Checkpoints: e.cps, Concurrency: concurrency, Logger: log})
	e.svc = &runs.Service{Graphs: e.graphs, Runs: e.runs, Checkpoints: e.cps, Dispatcher: e.sched, Logger: log}
	ctx, cancel := context.WithCancel(context.Background())
	e.crash = cancel
	sched := e.sched
	t.Cleanup(func() {
		cancel()
		ctx, stop := context.WithTimeout(context.Background(), 5*time.Second)
		defer stop()
		if err := sched.WaitIdle(ctx); err != nil {
			t.Errorf("scheduler goroutines still running at cleanup: %v", err)
		}
	})
	if err := e.sched.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
}

func (e *env) create(t *testing.T, graph string, input string) runs.Run {
	t.Helper()
	r, created, err := e.svc.Create(t.Context(), graph, runs.CreateRequest{Input: json.RawMessage(input)})
	if err != nil || !created {
		t.Fatalf("Create(%s) = %v, %v", graph, created, err)
	}
	return r
}

// wait polls the run's record until its status is want.
func (e *env) wait(t *testing.T, id string, want pregel.RunStatus) runs.Run {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r, err := e.runs.GetRun(t.Context(), id)
		if err != nil {
			t.Fatalf("GetRun(%s): %v", id, err)
		}
		if r.Status == want {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %s, want %s: %+v", id, r.Status, want, r)
		}
		time.Sleep(time.Millisecond)
	}
}

func (e *env) get(t *testing.T, id string) runs.Run {
	t.Helper()
	r, err := e.runs.GetRun(t.Context(), id)
	if err != nil {
		t.Fatalf("GetRun(%s): %v", id, err)
	}
	return r
}

// values returns the run's latest state.
func (e *env) values(t *testing.T, id string) map[string]json.RawMessage {
	t.Helper()
	cp, err := e.cps.Load(t.Context(), id, pregel.Latest)
	if err != nil {
		t.Fatalf("Load(%s): %v", id, err)
	}
	return cp.Values
}

func sameValues(a, b map[string]json.RawMessage) bool {
	return maps.EqualFunc(a, b, func(x, y json.RawMessage) bool { return bytes.Equal(x, y) })
}

func compile(t *testing.T, b *pregel.Builder[St]) *pregel.Graph {
	t.Helper()
	g, err := b.Compile()
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return g
}

// loopGraph increments count until it reaches limit, one step each; hook,
// if set, runs at the start of each step.
func loopGraph(t *testing.T, name string, limit int, hook func(ctx context.Context, count int) error) *pregel.Graph {
	b := pregel.NewGraph[St](name)
	b.AddFunc("inc", func(ctx context.Context, s St) (St, error) {
		if hook != nil {
			if err := hook(ctx, s.Count); err != nil {
				return St{}, err
			}
		}
		return St{Count: s.Count + 1, Log: []string{fmt.Sprintf("inc %d", s.Count+1)}}, nil
	})
	b.AddEdge(pregel.Start, "inc")
	b.AddConditionalEdges("inc", func(_ context.Context, s St) ([]string, error) {
		if s.Count < limit {
			return []string{"inc"}, nil
		}
		return []string{pregel.End}, nil
	}, "inc", pregel.End)
	return compile(t, b)
}

// gate blocks a node until it is opened or the node's context ends.
type gate struct {
	once    sync.Once
	entered chan struct{}
	open    chan struct{}
}

func newGate() *gate { return &gate{entered: make(chan struct{}), open: make(chan struct{})} }

// pass signals that a node arrived and waits for the gate to open.
func (g *gate) pass(ctx context.Context) error {
	g.once.Do(func() { close(g.entered) })
	select {
	case <-g.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gate) waitEntered(t *testing.T) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("no node reached the gate")
	}
}

func TestSchedulerCompletes(t *testing.T) {
	e := newEnv(t, 8, loopGraph(t, "loop", 5, nil))
	r := e.create(t, "loop", `{"count":0}`)
	got := e.wait(t, r.ID, pregel.RunCompleted)
	if got.Step != 5 || got.Counters != (pregel.Counters{Completed: 5}) {
		t.Errorf("completed run: step %d counters %+v, want step 5, 5 completed", got.Step, got.Counters)
	}
	if got.DrainRequested || got.CancelRequested || got.Error != "" || got.Resume != nil || got.Interrupts != nil {
		t.Errorf("completed run has leftovers: %+v", got)
	}
	if v := string(e.values(t, r.ID)["count"]); v != "5" {
		t.Errorf("count = %s, want 5", v)
	}
	checkEventTypes(t, got, "created/pending running/running completed/completed")
	for i, ev := range got.Events {
		if want := []int{0, 0, 5}; i < len(want) && ev.Step != want[i] {
			t.Errorf("event %d (%s) at step %d, want %d", i, ev.Type, ev.Step, want[i])
		}
		if ev.At.IsZero() || (i > 0 && ev.At.Before(got.Events[i-1].At)) {
			t.Errorf("event %d (%s) at %v, after %v", i, ev.Type, ev.At, got.Events[max(i-1, 0)].At)
		}
	}
	if got.EventsDropped != 0 {
		t.Errorf("%d events dropped", got.EventsDropped)
	}
}

// eventTypes lists the types, statuses and details of a run's events.
func eventTypes(r runs.Run) string {
	var b strings.Builder
	for _, ev := range r.Events {
		fmt.Fprintf(&b, "%s/%s", ev.Type, ev.Status)
		if ev.Detail != "" {
			fmt.Fprintf(&b, "(%s)", ev.Detail)
		}
		b.WriteByte(' ')
	}
	return strings.TrimSpace(b.String())
}

func checkEventTypes(t *testing.T, r runs.Run, want string) {
	t.Helper()
	if got := eventTypes(r); got != want {
		t.Errorf("run %s: events\n  %s\nwant\n  %s", r.ID, got, want)
	}
}

func TestSchedulerDrainAndResume(t *testing.T) {
	g := newGate()
	var gated atomic.Bool
	graph := loopGraph(t, "loop", 5, func(ctx context.Context, count int) error {
		if count == 2 && gated.CompareAndSwap(false, true) {
			return g.pass(ctx)
		}
		return nil
	})
	e := newEnv(t, 8, graph)
	r := e.create(t, "loop", `{"count":0}`)
	g.waitEntered(t)
	// A duplicate dispatch of an executing run changes nothing.
	if err := e.sched.Dispatch(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Drain(t.Context(), r.ID, "maintenance"); err != nil {
		t.Fatalf("Drain: %v", err)
	}
	close(g.open)
	drained := e.wait(t, r.ID, pregel.RunDrained)
	if !drained.DrainRequested || drained.DrainReason != "maintenance" || drained.Step != 3 {
		t.Errorf("drained run: requested %v reason %q step %d; want true, maintenance, 3", drained.DrainRequested, drained.DrainReason, drained.Step)
	}
	if drained.Counters.Completed != 3 {
		t.Errorf("drained run: counters %+v, want 3 completed", drained.Counters)
	}

	if _, err := e.svc.Resume(t.Context(), r.ID, runs.ResumeRequest{}); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	done := e.wait(t, r.ID, pregel.RunCompleted)
	if done.Step != 5 || done.Counters.Completed != 5 || done.DrainRequested {
		t.Errorf("resumed run: step %d counters %+v drain %v; want 5, 5 completed, no drain", done.Step, done.Counters, done.DrainRequested)
	}
	checkEventTypes(t, done, "created/pending running/running drain_requested/running(maintenance) drained/drained(maintenance) "+
		"resume_requested/pending running/running completed/completed")
	if ev := done.Events[3]; ev.Step != 3 {
		t.Errorf("drained event at step %d, want 3", ev.Step)
	}

	// The same final state as a run left alone.
	other := e.create(t, "loop", `{"count":0}`)
	e.wait(t, other.ID, pregel.RunCompleted)
	if a, b := e.values(t, r.ID), e.values(t, other.ID); !sameValues(a, b) {
		t.Errorf("drained and resumed run ended with %s, undisturbed run with %s", a, b)
	}
}

func askGraph(t *testing.T) *pregel.Graph {
	b := pregel.NewGraph[St]("ask")
	b.AddFunc("prepare", func(context.Context, St) (St, error) { return St{Log: []string{"prepared"}}, nil })
	b.AddFunc("ask", func(ctx context.Context, s St) (St, error) {
		answer, err := pregel.Interrupt[string](ctx, map[string]string{"question": "proceed?"})
		if err != nil {
			return St{}, err
		}
		return St{Answer: answer, Log: []string{"asked"}}, nil
	})
	b.AddEdge(pregel.Start, "prepare").AddEdge("prepare", "ask").AddEdge("ask", pregel.End)
	return compile(t, b)
}

func TestSchedulerInterruptResume(t *testing.T) {
	e := newEnv(t, 8, askGraph(t))
	for _, byID := range []bool{false, true} {
		t.Run(fmt.Sprintf("byID=%v", byID), func(t *testing.T) {
			r := e.create(t, "ask", `{}`)
			in := e.wait(t, r.ID, pregel.RunInterrupted)
			if len(in.Interrupts) != 1 || in.Interrupts[0].Node != "ask" || string(in.Interrupts[0].Value) != `{"question":"proceed?"}` {
				t.Fatalf("interrupted run: interrupts %+v", in.Interrupts)
			}
			if in.Step != 1 {
				t.Errorf("interrupted run: step %d, want 1", in.Step)
			}
			if _, err := e.svc.Resume(t.Context(), r.ID, runs.ResumeRequest{}); !errors.Is(err, runs.ErrInvalid) {
				t.Errorf("Resume without a value: %v, want ErrInvalid", err)
			}
			wrong := runs.ResumeRequest{Value: json.RawMessage(`3`)}
			if byID {
				wrong = runs.ResumeRequest{Values: map[string]json.RawMessage{in.Interrupts[0].ID: json.RawMessage(`3`)}}
			}
			if _, err := e.svc.Resume(t.Context(), r.ID, wrong); !errors.Is(err, runs.ErrInvalid) || !strings.Contains(err.Error(), "wants a string") {
				t.Errorf("Resume with a number for a string: %v, want ErrInvalid saying a string is wanted", err)
			}
			if got := e.get(t, r.ID); got.Status != pregel.RunInterrupted || got.Resume != nil {
				t.Errorf("after a refused answer: status %s, resume %+v; want interrupted without one", got.Status, got.Resume)
			}
			req := runs.ResumeRequest{Value: json.RawMessage(`"yes"`)}
			if byID {
				req = runs.ResumeRequest{Values: map[string]json.RawMessage{in.Interrupts[0].ID: json.RawMessage(`"yes"`)}}
			}
			if _, err := e.svc.Resume(t.Context(), r.ID, req); err != nil {
				t.Fatalf("Resume: %v", err)
			}
			done := e.wait(t, r.ID, pregel.RunCompleted)
			if done.Resume != nil || done.Interrupts != nil || done.Step != 2 {
				t.Errorf("resumed run: resume %+v interrupts %+v step %d; want none, none, 2", done.Resume, done.Interrupts, done.Step)
			}
			answered := `(answer: "yes")`
			if byID {
				answered = `(answer to ` + in.Interrupts[0].ID + `: "yes")`
			}
			checkEventTypes(t, done, "created/pending running/running interrupted/interrupted("+in.Interrupts[0].ID+") "+
				"resume_requested/pending"+answered+" running/running completed/completed")
			if v := string(e.values(t, r.ID)["answer"]); v != `"yes"` {
				t.Errorf("answer = %s, want \"yes\"", v)
			}
		})
	}
}

func TestSchedulerFailedRun(t *testing.T) {
	b := pregel.NewGraph[St]("fail")
	b.AddFunc("ok", func(context.Context, St) (St, error) { return St{Count: 1}, nil })
	b.AddFunc("bad", func(context.Context, St) (St, error) { return St{}, errors.New("boom") })
	b.AddEdge(pregel.Start, "ok").AddEdge("ok", "bad").AddEdge("bad", pregel.End)
	e := newEnv(t, 8, compile(t, b))
	r := e.create(t, "fail", `{}`)
	got := e.wait(t, r.ID, pregel.RunFailed)
	if got.Error != `node "bad" failed after 1 attempt(s): boom` || got.FailedNode != "bad" {
		t.Errorf("failed run: error %q node %q", got.Error, got.FailedNode)
	}
	if got.Step != 1 {
		t.Errorf("failed run: step %d, want 1", got.Step)
	}
	if want := (pregel.Counters{Completed: 1, Failed: 1}); got.Counters != want {
		t.Errorf("failed run: counters %+v, want %+v", got.Counters, want)
	}
	checkEventTypes(t, got, `created/pending running/running failed/failed(node "bad" failed after 1 attempt(s): boom)`)
}

// blockGraph runs a, then block (which waits at g), then c.
func blockGraph(t *testing.T, name string, g *gate, runsOfBlock *atomic.Int32) *pregel.Graph {
	b := pregel.NewGraph[St](name)
	b.AddFunc("a", func(context.Context, St) (St, error) { return St{Log: []string{"a"}}, nil })
	b.AddFunc("block", func(ctx context.Context, s St) (St, error) {
		runsOfBlock.Add(1)
		if err := g.pass(ctx); err != nil {
			return St{}, err
		}
		return St{Log: []string{"block"}}, nil
	})
	b.AddFunc("c", func(context.Context, St) (St, error) { return St{Log: []string{"c"}}, nil })
	b.AddEdge(pregel.Start, "a").AddEdge("a", "block").AddEdge("block", "c").AddEdge("c", pregel.End)
	return compile(t, b)
}

func TestSchedulerCancelRunning(t *testing.T) {
	g := newGate()
	var n atomic.Int32
	e := newEnv(t, 8, blockGraph(t, "block", g, &n))
	r := e.create(t, "block", `{}`)
	g.waitEntered(t)
	if _, err := e.svc.Cancel(t.Context(), r.ID); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	got := e.wait(t, r.ID, pregel.RunCancelled)
	if got.CancelRequested || got.Step != 1 {
		t.Errorf("cancelled run: cancel requested %v, step %d; want false, 1", got.CancelRequested, got.Step)
	}
	checkEventTypes(t, got, "created/pending running/running cancel_requested/running cancelled/cancelled")
	cp, err := e.cps.Load(t.Context(), r.ID, pregel.Latest)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Step != 1 || string(cp.Values["log"]) != `["a"]` {
		t.Errorf("after cancel: step %d, log %s; want step 1, only a", cp.Step, cp.Values["log"])
	}
	if _, err := e.svc.Resume(t.Context(), r.ID, runs.ResumeRequest{}); !errors.Is(err, runs.ErrInvalidState) {
		t.Errorf("Resume of a cancelled run: %v, want ErrInvalidState", err)
	}
}

func TestSchedulerCancelQueued(t *testing.T) {
	g := newGate()
	var n atomic.Int32
	e := newEnv(t, 1, blockGraph(t, "block", g, &n))
	first := e.create(t, "block", `{}`)
	g.waitEntered(t)
	queued := e.create(t, "block", `{}`)
	if got := e.get(t, queued.ID); got.Status != pregel.RunPending {
		t.Fatalf("second run is %s, want pending behind the first", got.Status)
	}
	if _, err := e.svc.Cancel(t.Context(), queued.ID); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	if got := e.get(t, queued.ID); got.Status != pregel.RunCancelled || got.CancelRequested {
		t.Errorf("queued run after Cancel: %s, cancel requested %v; want cancelled at once", got.Status, got.CancelRequested)
	}
	close(g.open)
	e.wait(t, first.ID, pregel.RunCompleted)
	if err := e.sched.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := n.Load(); got != 1 {
		t.Errorf("block ran %d times, want once (for the first run only)", got)
	}
	if got := e.get(t, queued.ID); got.Status != pregel.RunCancelled || got.Step != 0 {
		t.Errorf("queued run: %s step %d, want cancelled at step 0", got.Status, got.Step)
	}
	checkEventTypes(t, e.get(t, queued.ID), "created/pending cancel_requested/pending cancelled/cancelled")
}

func TestSchedulerDrainQueued(t *testing.T) {
	g := newGate()
	var n atomic.Int32
	e := newEnv(t, 1, blockGraph(t, "block", g, &n))
	first := e.create(t, "block", `{}`)
	g.waitEntered(t)
	queued := e.create(t, "block", `{}`)
	if _, err := e.svc.Drain(t.Context(), queued.ID, "later"); err != nil {
		t.Fatalf("Drain: %v", err)
	}
	close(g.open)
	e.wait(t, first.ID, pregel.RunCompleted)
	got := e.wait(t, queued.ID, pregel.RunDrained)
	if got.Step != 0 || got.DrainReason != "later" {
		t.Errorf("queued run drained at step %d with reason %q, want 0 and later", got.Step, got.DrainReason)
	}
	if _, err := e.svc.Resume(t.Context(), queued.ID, runs.ResumeRequest{}); err != nil {
		t.Fatal(err)
	}
	e.wait(t, queued.ID, pregel.RunCompleted)
}

func TestSchedulerRecoversAfterCrash(t *testing.T) {
	// start, then a, b and c in one step, then a join.
	var counts sync.Map // node -> *atomic.Int32
	count := func(node string) *atomic.Int32 {
		v, _ := counts.LoadOrStore(node, new(atomic.Int32))
		return v.(*atomic.Int32)
	}
	g := newGate()
	var crashed atomic.Bool
	node := func(name string) func(context.Context, St) (St, error) {
		return func(ctx context.Context, s St) (St, error) {
			count(name).Add(1)
			if name == "c" && !crashed.Load() {
				if err := g.pass(ctx); err != nil {
					return St{}, err
				}
			}
			return St{Log: []string{name}}, nil
		}
	}
	b := pregel.NewGraph[St]("fan")
	for _, n := range []string{"start", "a", "b", "c", "join"} {
		b.AddFunc(n, node(n))
	}
	b.AddEdge(pregel.Start, "start").AddEdge("start", "a").AddEdge("start", "b").AddEdge("start", "c")
	b.AddJoin("join", "a", "b", "c")
	b.AddEdge("join", pregel.End)
	e := newEnv(t, 8, compile(t, b))

	r := e.create(t, "fan", `{}`)
	g.waitEntered(t)
	// Wait until a and b have recorded their results for step 2.
	deadline := time.Now().Add(5 * time.Second)
	for {
		pending, err := e.cps.PendingTasks(t.Context(), r.ID, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(pending) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a and b did not record their results: %+v", pending)
		}
		time.Sleep(time.Millisecond)
	}
	crashed.Store(true)
	e.crash()
	if err := e.sched.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := e.get(t, r.ID); got.Status != pregel.RunRunning || got.Step != 1 {
		t.Fatalf("after the crash the run is %s at step %d, want running at step 1", got.Status, got.Step)
	}

	e.start(t, 8)
	done := e.wait(t, r.ID, pregel.RunCompleted)
	want := map[string]int32{"start": 1, "a": 1, "b": 1, "c": 2, "join": 1}
	for n, w := range want {
		if got := count(n).Load(); got != w {
			t.Errorf("node %s ran %d times, want %d", n, got, w)
		}
	}
	if done.Step != 3 || done.Counters.Completed != 5 {
		t.Errorf("recovered run: step %d counters %+v, want 3, 5 completed", done.Step, done.Counters)
	}
	var st St
	raw, _ := json.Marshal(e.values(t, r.ID))
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(st.Log, []string{"start", "a", "b", "c", "join"}) {
		t.Errorf("log = %q", st.Log)
	}
}

func TestSchedulerShutdownDrains(t *testing.T) {
	g := newGate()
	var gated atomic.Bool
	graph := loopGraph(t, "loop", 4, func(ctx context.Context, count int) error {
		if count == 1 && gated.CompareAndSwap(false, true) {
			return g.pass(ctx)
		}
		return nil
	})
	e := newEnv(t, 1, graph)
	inflight := e.create(t, "loop", `{"count":0}`)
	g.waitEntered(t)
	queued := e.create(t, "loop", `{"count":0}`)

	errc := make(chan error, 1)
	go func() { errc <- e.sched.Shutdown(context.Background(), 5*time.Second) }()
	// Shutdown records its drain request, then waits for the step.
	deadline := time.Now().Add(5 * time.Second)
	for !e.get(t, inflight.ID).DrainRequested {
		if time.Now().After(deadline) {
			t.Fatal("Shutdown did not record a drain request")
		}
		time.Sleep(time.Millisecond)
	}
	close(g.open)
	if err := <-errc; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	got := e.get(t, inflight.ID)
	if got.Status != pregel.RunDrained || got.DrainReason != embedded.ShutdownReason || got.Step != 2 {
		t.Errorf("in-flight run after Shutdown: %s reason %q step %d; want drained, shutdown, 2", got.Status, got.DrainReason, got.Step)
	}
	if got := e.get(t, queued.ID); got.Status != pregel.RunPending || got.Step != 0 {
		t.Errorf("queued run after Shutdown: %s step %d; want pending at 0", got.Status, got.Step)
	}

	// The next process continues the pending run; the drained one waits.
	e.start(t, 1)
	e.wait(t, queued.ID, pregel.RunCompleted)
	if got := e.get(t, inflight.ID); got.Status != pregel.RunDrained {
		t.Errorf("drained run after restart: %s, want drained until resumed", got.Status)
	}
	if _, err := e.svc.Resume(t.Context(), inflight.ID, runs.ResumeRequest{}); err != nil {
		t.Fatal(err)
	}
	e.wait(t, inflight.ID, pregel.RunCompleted)
	if a, b := e.values(t, inflight.ID), e.values(t, queued.ID); !sameValues(a, b) {
		t.Errorf("drained run ended with %s, the other with %s", a, b)
	}
}

func TestSchedulerShutdownStopsAfterGrace(t *testing.T) {
	var stuck atomic.Bool
	stuck.Store(true)
	var entered = make(chan struct{}, 1)
	graph := loopGraph(t, "loop", 3, func(ctx context.Context, count int) error {
		if count == 1 && stuck.Load() {
			entered <- struct{}{}
			<-ctx.Done() // ignores drains; only a hard stop ends it
			return ctx.Err()
		}
		return nil
	})
	e := newEnv(t, 8, graph)
	r := e.create(t, "loop", `{"count":0}`)
	<-entered
	start := time.Now()
	if err := e.sched.Shutdown(t.Context(), 20*time.Millisecond); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Shutdown took %v with a 20ms grace", d)
	}
	got := e.get(t, r.ID)
	if got.Status != pregel.RunDrained || got.DrainReason != embedded.ShutdownReason || got.Step != 1 {
		t.Errorf("stopped run: %s reason %q step %d; want drained, shutdown, 1", got.Status, got.DrainReason, got.Step)
	}
	stuck.Store(false)
	e.start(t, 8)
	if _, err := e.svc.Resume(t.Context(), r.ID, runs.ResumeRequest{}); err != nil {
		t.Fatal(err)
	}
	if got := e.wait(t, r.ID, pregel.RunCompleted); got.Step != 3 {
		t.Errorf("resumed run: step %d, want 3", got.Step)
	}
}

// A run whose node ignores every stop outlives Shutdown's context; those
// following it are still told the server is going (their streams end and
// they reconnect) rather than waiting on a watch that never closes.
func TestSchedulerShutdownPastDeadlineEndsWatches(t *testing.T) {
	hold := make(chan struct{})
	entered := make(chan struct{}, 1)
	graph := loopGraph(t, "loop", 3, func(ctx context.Context, count int) error {
		if count == 1 {
			entered <- struct{}{}
			<-hold // ignores ctx
		}
		return nil
	})
	e := newEnv(t, 8, graph)
	r := e.create(t, "loop", `{"count":0}`)
	<-entered
	w := e.sched.WatchEvents(r.ID)
	defer w.Stop()
	defer close(hold)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := e.sched.Shutdown(ctx, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown past its deadline: %v, want deadline exceeded", err)
	}
	timeout := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-w.C:
			if ok {
				continue
			}
			if !errors.Is(w.Err(), runs.ErrWatchClosed) {
				t.Fatalf("watch ended with %v, want %v", w.Err(), runs.ErrWatchClosed)
			}
			return
		case <-timeout:
			t.Fatal("the watch is still open 10s after Shutdown gave up")
		}
	}
}

func TestSchedulerManyRuns(t *testing.T) {
	const n, concurrency = 200, 8
	var running, peak atomic.Int32
	b := pregel.NewGraph[St]("many")
	work := func(name string) func(context.Context, St) (St, error) {
		return func(context.Context, St) (St, error) {
			now := running.Add(1)
			defer running.Add(-1)
			for {
				p := peak.Load()
				if now <= p || peak.CompareAndSwap(p, now) {
					break
				}
			}
			time.Sleep(100 * time.Microsecond)
			return St{Log: []string{name}}, nil
		}
	}
	b.AddFunc("one", work("one")).AddFunc("two", work("two")).AddFunc("three", work("three"))
	b.AddEdge(pregel.Start, "one").AddEdge("one", "two").AddEdge("two", "three").AddEdge("three", pregel.End)
	e := newEnv(t, concurrency, compile(t, b))

	var wg sync.WaitGroup
	ids := make([]string, n)
	for i := range n {
		wg.Go(func() {
			r, _, err := e.svc.Create(t.Context(), "many", runs.CreateRequest{RunID: fmt.Sprintf("many-%03d", i)})
			if err != nil {
				t.Errorf("Create: %v", err)
				return
			}
			ids[i] = r.ID
		})
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Second)
	defer cancel()
	if err := e.sched.WaitIdle(ctx); err != nil {
		t.Fatalf("WaitIdle: %v", err)
	}
	var all []runs.Run
	f := runs.Filter{Graph: "many", Limit: 64}
	for {
		page, err := e.svc.List(t.Context(), f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page.Runs...)
		if page.NextPageToken == "" {
			break
		}
		f.PageToken = page.NextPageToken
	}
	if len(all) != n {
		t.Fatalf("%d runs listed, want %d", len(all), n)
	}
	for _, r := range all {
		if r.Status != pregel.RunCompleted || r.Step != 3 {
			t.Errorf("run %s: %s at step %d, want completed at 3", r.ID, r.Status, r.Step)
		}
	}
	if p := peak.Load(); p > concurrency {
		t.Errorf("%d runs executed at once, want at most %d", p, concurrency)
	}
}

func TestSchedulerSubscribe(t *testing.T) {
	e := newEnv(t, 8, loopGraph(t, "loop", 2, nil))
	events, stop := e.sched.Subscribe("sub-1")
	defer stop()
	if _, _, err := e.svc.Create(t.Context(), "loop", runs.CreateRequest{RunID: "sub-1", Input: json.RawMessage(`{"count":0}`)}); err != nil {
		t.Fatal(err)
	}
	var types []pregel.EventType
	timeout := time.After(5 * time.Second)
	for done := false; !done; {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("subscription closed early")
			}
			if ev.RunID != "sub-1" || ev.Graph != "loop" {
				t.Errorf("event for run %q graph %q", ev.RunID, ev.Graph)
			}
			types = append(types, ev.Type)
			if ev.Type == pregel.EventRunFinished {
				done = true
				if ev.RunStatus != pregel.RunCompleted || ev.Step != 2 {
					t.Errorf("run_finished: status %s step %d, want completed 2", ev.RunStatus, ev.Step)
				}
				// The record is final by the time run_finished arrives.
				if r := e.get(t, "sub-1"); r.Status != pregel.RunCompleted {
					t.Errorf("record at run_finished: %s, want completed", r.Status)
				}
			}
		case <-timeout:
			t.Fatalf("no run_finished; events so far: %v", types)
		}
	}
	want := []pregel.EventType{
		pregel.EventRunStarted,
		pregel.EventStepStarted, pregel.EventNodeStarted, pregel.EventNodeFinished, pregel.EventStateUpdated, pregel.EventStepFinished,
		pregel.EventStepStarted, pregel.EventNodeStarted, pregel.EventNodeFinished, pregel.EventStateUpdated, pregel.EventStepFinished,
		pregel.EventRunFinished,
	}
	if !slices.Equal(types, want) {
		t.Errorf("events = %v, want %v", types, want)
	}
	stop()
	stop() // idempotent
	if _, ok := <-events; ok {
		t.Error("channel still open after stop")
	}
}

func TestSchedulerSlowSubscriber(t *testing.T) {
	// A subscriber that never reads does not hold the run up, and still
	// finds run_finished among the newest events.
	e := newEnv(t, 8, loopGraph(t, "loop", 100, nil))
	events, stop := e.sched.Subscribe("slow")
	defer stop()
	if _, _, err := e.svc.Create(t.Context(), "loop", runs.CreateRequest{RunID: "slow", Input: json.RawMessage(`{"count":0}`)}); err != nil {
		t.Fatal(err)
	}
	e.wait(t, "slow", pregel.RunCompleted)
	if err := e.sched.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	var last pregel.Event
	n := 0
	for len(events) > 0 {
		last = <-events
		n++
	}
	if n == 0 || n > 256 || last.Type != pregel.EventRunFinished {
		t.Errorf("slow subscriber got %d buffered events ending with %s; want at most 256 ending with run_finished", n, last.Type)
	}
}

func TestSchedulerDispatchBeforeStart(t *testing.T) {
	reg, err := runs.NewRegistry(loopGraph(t, "loop", 2, nil))
	if err != nil {
		t.Fatal(err)
	}
	store, cps := runs.NewMemoryStore(), pregel.NewMemoryStore()
	sched := embedded.NewScheduler(embedded.SchedulerConfig{Graphs: reg, Runs: store, Checkpoints: cps, Logger: slog.New(slog.DiscardHandler)})
	svc := &runs.Service{Graphs: reg, Runs: store, Checkpoints: cps, Dispatcher: sched}
	r, _, err := svc.Create(t.Context(), "loop", runs.CreateRequest{Input: json.RawMessage(`{"count":0}`)})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := store.GetRun(t.Context(), r.ID); got.Status != pregel.RunPending {
		t.Fatalf("run before Start: %s, want pending", got.Status)
	}
	if err := sched.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := sched.Start(t.Context()); err == nil {
		t.Error("second Start succeeded")
	}
	if err := sched.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, _ := store.GetRun(t.Context(), r.ID); got.Status != pregel.RunCompleted {
		t.Errorf("run after Start: %s, want completed", got.Status)
	}
	if err := sched.Shutdown(t.Context(), time.Second); err != nil {
		t.Fatal(err)
	}
}

// failingDispatcher fails its first Dispatch.
type failingDispatcher struct {
	runs.Dispatcher
	failed atomic.Bool
}

func (d *failingDispatcher) Dispatch(ctx context.Context, r runs.Run) error {
	if d.failed.CompareAndSwap(false, true) {
		return errors.New("queue unavailable")
	}
	return d.Dispatcher.Dispatch(ctx, r)
}

func TestServiceCreateRetryDispatches(t *testing.T) {
	e := newEnv(t, 8, loopGraph(t, "loop", 2, nil))
	e.svc.Dispatcher = &failingDispatcher{Dispatcher: e.sched}
	req := runs.CreateRequest{RunID: "retry-1", Input: json.RawMessage(`{"count":0}`)}
	if _, _, err := e.svc.Create(t.Context(), "loop", req); err == nil {
		t.Fatal("Create with a failing dispatcher succeeded")
	}
	r, created, err := e.svc.Create(t.Context(), "loop", req)
	if err != nil || created {
		t.Fatalf("retried Create = %v, %v; want the existing run", created, err)
	}
	if r.ID != "retry-1" {
		t.Fatalf("retried Create returned run %q", r.ID)
	}
	e.wait(t, "retry-1", pregel.RunCompleted)
}

func TestSchedulerStartsRunWithoutStepZero(t *testing.T) {
	// A run recorded without its step 0 checkpoint (the creating process
	// stopped in between) starts from its input.
	e := newEnv(t, 8, loopGraph(t, "loop", 3, nil))
	now := time.Now()
	r, _, err := e.runs.CreateRun(t.Context(), runs.Run{ID: "no-step-0", Graph: "loop", Status: pregel.RunPending, Input: json.RawMessage(`{"count":1}`), CreatedAt: now, UpdatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.sched.Dispatch(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	if got := e.wait(t, r.ID, pregel.RunCompleted); got.Step != 2 {
		t.Errorf("run: step %d, want 2", got.Step)
	}
}

func TestSchedulerRecoversInterruptedRun(t *testing.T) {
	// The process stopped after the engine recorded an interrupt but before
	// the record said so: the next Start finds the run waiting.
	graph := askGraph(t)
	e := newEnv(t, 8, graph)
	e.crash()
	if err := e.sched.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	res, err := graph.Run(t.Context(), json.RawMessage(`{}`), pregel.WithRunID("asked"), pregel.WithStore(e.cps))
	if err != nil || res.Status != pregel.RunInterrupted {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	now := time.Now()
	if _, _, err := e.runs.CreateRun(t.Context(), runs.Run{ID: "asked", Graph: "ask", Status: pregel.RunRunning, Input: json.RawMessage(`{}`), CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	e.start(t, 8)
	got := e.wait(t, "asked", pregel.RunInterrupted)
	if len(got.Interrupts) != 1 || got.Interrupts[0].ID != res.Interrupts[0].ID {
		t.Errorf("recovered interrupts %+v, want %+v", got.Interrupts, res.Interrupts)
	}
	if _, err := e.svc.Resume(t.Context(), "asked", runs.ResumeRequest{Value: json.RawMessage(`"ok"`)}); err != nil {
		t.Fatal(err)
	}
	e.wait(t, "asked", pregel.RunCompleted)
}

// failingStore fails commits of steps after the first.
type failingStore struct {
	pregel.Checkpointer
}

func (f failingStore) Commit(ctx context.Context, cp *pregel.Checkpoint) error {
	if cp.Step > 1 {
		return errors.New("disk on fire")
	}
	return f.Checkpointer.Commit(ctx, cp)
}

func TestSchedulerInternalError(t *testing.T) {
	reg, err := runs.NewRegistry(loopGraph(t, "loop", 3, nil))
	if err != nil {
		t.Fatal(err)
	}
	store, cps := runs.NewMemoryStore(), failingStore{pregel.NewMemoryStore()}
	var logs bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(&lockedWriter{&mu, &logs}, nil))
	sched := embedded.NewScheduler(embedded.SchedulerConfig{Graphs: reg, Runs: store, Checkpoints: cps, Logger: log})
	svc := &runs.Service{Graphs: reg, Runs: store, Checkpoints: cps, Dispatcher: sched}
	if err := sched.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer sched.Shutdown(context.Background(), time.Second)
	r, _, err := svc.Create(t.Context(), "loop", runs.CreateRequest{Input: json.RawMessage(`{"count":0}`)})
	if err != nil {
		t.Fatal(err)
	}
	if err := sched.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	got, _ := store.GetRun(t.Context(), r.ID)
	if got.Status != pregel.RunFailed || got.Error != "internal error" || got.FailedNode != "" || got.Step != 1 {
		t.Errorf("run: %s error %q node %q step %d; want failed, internal error, no node, step 1", got.Status, got.Error, got.FailedNode, got.Step)
	}
	mu.Lock()
	defer mu.Unlock()
	if !bytes.Contains(logs.Bytes(), []byte("disk on fire")) {
		t.Errorf("the real error was not logged: %s", logs.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestSchedulerStepLimit(t *testing.T) {
	b := pregel.NewGraph[St]("forever")
	b.AddFunc("spin", func(_ context.Context, s St) (St, error) { return St{Count: s.Count + 1}, nil })
	b.AddEdge(pregel.Start, "spin")
	b.AddConditionalEdges("spin", func(context.Context, St) ([]string, error) { return []string{"spin"}, nil }, "spin", pregel.End)
	g, err := b.Compile(pregel.MaxSteps(3))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, 8, g)
	r := e.create(t, "forever", `{}`)
	got := e.wait(t, r.ID, pregel.RunFailed)
	if !strings.HasPrefix(got.Error, "superstep limit reached") || got.Step != 3 {
		t.Errorf("run: error %q step %d; want the step limit at 3", got.Error, got.Step)
	}
}
