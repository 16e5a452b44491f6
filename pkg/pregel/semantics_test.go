package pregel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
)

func compile(t *testing.T, g *pregel.Builder[St], opts ...pregel.CompileOption) *pregel.Graph {
	t.Helper()
	cg, err := g.Compile(opts...)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return cg
}

func state(t *testing.T, res *pregel.Result) St {
	t.Helper()
	var s St
	if err := res.Decode(&s); err != nil {
		t.Fatalf("Decode: %v", err)
	}
	return s
}

// statuses returns node -> statuses over the run's history.
func statuses(t *testing.T, store pregel.Checkpointer, runID string) map[string][]pregel.NodeStatus {
	t.Helper()
	h, err := store.History(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]pregel.NodeStatus{}
	for _, s := range h {
		for _, ts := range s.Tasks {
			out[ts.Node] = append(out[ts.Node], ts.Status)
		}
	}
	return out
}

// skipper is a node that runs only when its condition holds.
type skipper struct {
	name string
	when func(St) bool
}

func (s skipper) Execute(context.Context, St) (St, error) { return St{Log: []string{s.name}}, nil }
func (s skipper) ShouldExecute(_ context.Context, st St) bool {
	return s.when(st)
}

func TestSkippedNode(t *testing.T) {
	// start -> a -> skip -> b -> end, and skip joins with c into d.
	g := pregel.NewGraph[St]("skip")
	g.AddFunc("a", logs("a"))
	g.AddNode("skip", skipper{"skip", func(s St) bool { return s.Count > 0 }})
	g.AddFunc("b", func(_ context.Context, s St) (St, error) {
		return St{Log: []string{fmt.Sprintf("b saw %d entries", len(s.Log))}}, nil
	})
	g.AddFunc("c", logs("c"))
	g.AddFunc("d", logs("d"))
	g.AddEdge(pregel.Start, "a").AddEdge("a", "skip").AddEdge("a", "c").AddEdge("skip", "b")
	g.AddJoin("d", "skip", "c")
	g.AddEdge("b", pregel.End).AddEdge("d", pregel.End)
	cg := compile(t, g)
	store := pregel.NewMemoryStore()
	res, err := cg.Run(context.Background(), St{}, pregel.WithStore(store), pregel.WithRunID("r1"))
	if err != nil || res.Status != pregel.RunCompleted {
		t.Fatalf("Run = %v, %v", res, err)
	}
	s := state(t, res)
	// b ran after the skipped node and saw no entry from it.
	want := []string{"a", "c", "b saw 2 entries", "d"}
	if !slices.Equal(s.Log, want) {
		t.Errorf("log = %q, want %q", s.Log, want)
	}
	if got := statuses(t, store, "r1")["skip"]; !slices.Equal(got, []pregel.NodeStatus{pregel.NodeSkipped}) {
		t.Errorf("skip statuses = %v", got)
	}
	want2 := pregel.Counters{Completed: 4, Skipped: 1}
	if res.Counters != want2 {
		t.Errorf("counters = %+v, want %+v", res.Counters, want2)
	}
}

func TestSkippedNodeRoutersFireAndLoopRevisits(t *testing.T) {
	// loop: inc -> maybe (skipped on odd counts) -> router back to inc until 4.
	g := pregel.NewGraph[St]("loop")
	g.AddFunc("inc", func(_ context.Context, s St) (St, error) { return St{Count: s.Count + 1}, nil })
	g.AddNode("maybe", skipper{"maybe", func(s St) bool { return s.Count%2 == 0 }})
	g.AddEdge(pregel.Start, "inc").AddEdge("inc", "maybe")
	g.AddConditionalEdges("maybe", func(_ context.Context, s St) ([]string, error) {
		if s.Count < 4 {
			return []string{"inc"}, nil
		}
		return []string{pregel.End}, nil
	}, "inc", pregel.End)
	cg := compile(t, g)
	store := pregel.NewMemoryStore()
	res, err := cg.Run(context.Background(), nil, pregel.WithStore(store), pregel.WithRunID("r"))
	if err != nil {
		t.Fatal(err)
	}
	got := statuses(t, store, "r")["maybe"]
	want := []pregel.NodeStatus{pregel.NodeSkipped, pregel.NodeCompleted, pregel.NodeSkipped, pregel.NodeCompleted}
	if !slices.Equal(got, want) {
		t.Errorf("maybe statuses = %v, want %v", got, want)
	}
	if res.Counters.Completed != 6 || res.Counters.Skipped != 2 {
		t.Errorf("counters = %+v", res.Counters)
	}
}

func TestCancelledBranchEnds(t *testing.T) {
	g := pregel.NewGraph[St]("cancel")
	g.AddFunc("a", logs("a")).AddFunc("risky", logs("risky")).AddFunc("after", logs("after")).AddFunc("safe", logs("safe")).AddFunc("join", logs("join"))
	g.AddEdge(pregel.Start, "a").AddEdge("a", "risky").AddEdge("a", "safe").AddEdge("risky", "after")
	g.AddJoin("join", "after", "safe")
	g.AddEdge("after", pregel.End).AddEdge("safe", pregel.End).AddEdge("join", pregel.End)
	var reports []string
	var mu sync.Mutex
	g.BeforeNode(func(_ context.Context, n pregel.NodeInfo, _ St) pregel.Decision {
		if n.ID == "risky" {
			return pregel.Decision{Action: pregel.Cancel, Reason: "policy"}
		}
		return pregel.Decision{}
	})
	g.AfterNode(func(_ context.Context, r pregel.NodeReport, _ St) {
		mu.Lock()
		defer mu.Unlock()
		reports = append(reports, r.Info.ID+":"+string(r.Status)+":"+r.Reason)
	})
	cg := compile(t, g)
	store := pregel.NewMemoryStore()
	res, err := cg.Run(context.Background(), nil, pregel.WithStore(store), pregel.WithRunID("r"))
	if err != nil || res.Status != pregel.RunCompleted {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if s := state(t, res); !slices.Equal(s.Log, []string{"a", "safe"}) {
		t.Errorf("log = %q: nothing after the cancelled node may run", s.Log)
	}
	if res.Counters != (pregel.Counters{Completed: 2, Cancelled: 1}) {
		t.Errorf("counters = %+v", res.Counters)
	}
	if !slices.Contains(reports, "risky:cancelled:policy") {
		t.Errorf("after-hook reports = %q", reports)
	}
	h, _ := store.History(context.Background(), "r")
	if ts := h[2].Tasks; ts[0].Node != "risky" || ts[0].Reason != "policy" {
		t.Errorf("step 2 tasks = %+v", ts)
	}
}

func TestFanOutAndJoin(t *testing.T) {
	g := pregel.NewGraph[St]("mapreduce")
	g.AddFunc("split", noop)
	g.AddFunc("work", func(ctx context.Context, _ St) (St, error) {
		item, err := pregel.Arg[string](ctx)
		if err != nil {
			return St{}, err
		}
		time.Sleep(time.Duration(len(item)%3) * time.Millisecond) // finish out of order
		return St{Log: []string{strings.ToUpper(item)}, Total: len(item)}, nil
	})
	g.AddFunc("reduce", func(_ context.Context, s St) (St, error) {
		return St{Answer: strings.Join(s.Log, "+")}, nil
	})
	g.AddEdge(pregel.Start, "split")
	g.AddFanOut("split", "work", func(context.Context, St) ([]any, error) {
		return []any{"aaa", "b", "cc", "dddd"}, nil
	})
	g.AddEdge("work", "reduce").AddEdge("reduce", pregel.End)
	cg := compile(t, g, pregel.Concurrency(4))
	for i := range 5 { // parallel completion order never changes the result
		res, err := cg.Run(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		s := state(t, res)
		if s.Answer != "AAA+B+CC+DDDD" || s.Total != 10 {
			t.Fatalf("run %d: answer %q total %d", i, s.Answer, s.Total)
		}
		if res.Counters.Completed != 6 {
			t.Fatalf("counters %+v: reduce must run once", res.Counters)
		}
	}
}

func TestStepLimit(t *testing.T) {
	g := pregel.NewGraph[St]("forever")
	g.AddFunc("spin", func(_ context.Context, s St) (St, error) { return St{Count: s.Count + 1}, nil })
	g.AddEdge(pregel.Start, "spin")
	g.AddConditionalEdges("spin", func(context.Context, St) ([]string, error) { return []string{"spin"}, nil }, "spin", pregel.End)
	cg := compile(t, g, pregel.MaxSteps(7))
	res, err := cg.Run(context.Background(), nil)
	if !errors.Is(err, pregel.ErrStepLimit) || !strings.Contains(err.Error(), "7 supersteps") {
		t.Fatalf("err = %v, want ErrStepLimit naming 7", err)
	}
	if res.Status != pregel.RunFailed || res.Step != 7 {
		t.Errorf("result = %+v", res)
	}
}

// Nodes that declare no writes escape the compile-time check (it is judged
// from declared Writes, as the README says): the graph compiles and the
// conflict fails the run when it happens, naming both nodes.
func TestWriteConflictNamesBothNodes(t *testing.T) {
	g := pregel.NewGraph[St]("conflict")
	g.AddFunc("x", func(context.Context, St) (St, error) { return St{Answer: "x"}, nil })
	g.AddFunc("y", func(context.Context, St) (St, error) { return St{Answer: "y"}, nil })
	g.AddEdge(pregel.Start, "x").AddEdge(pregel.Start, "y").AddEdge("x", pregel.End).AddEdge("y", pregel.End)
	cg := compile(t, g)
	_, err := cg.Run(context.Background(), nil)
	if !errors.Is(err, pregel.ErrWriteConflict) || !strings.Contains(err.Error(), `nodes "x" and "y"`) {
		t.Fatalf("err = %v", err)
	}
}

type lifecycle struct {
	fails  int
	calls  atomic.Int32
	events *[]string
	mu     *sync.Mutex
}

func (l *lifecycle) log(s string) { l.mu.Lock(); *l.events = append(*l.events, s); l.mu.Unlock() }
func (l *lifecycle) Validate(_ context.Context, s St) error {
	if s.Item == "" {
		return errors.New("item is required; set it in the input")
	}
	return nil
}
func (l *lifecycle) BeforeExecute(context.Context, St) error { l.log("before"); return nil }
func (l *lifecycle) Execute(context.Context, St) (St, error) {
	n := l.calls.Add(1)
	if int(n) <= l.fails {
		return St{}, fmt.Errorf("flaky %d", n)
	}
	return St{Answer: "ok"}, nil
}
func (l *lifecycle) AfterExecute(_ context.Context, _ St, u St) error {
	l.log("after:" + u.Answer)
	return nil
}
func (l *lifecycle) OnFailure(_ context.Context, _ St, err error) { l.log("failure:" + err.Error()) }

func TestRetriesHooksAndFailure(t *testing.T) {
	fast := pregel.RetryPolicy{MaxAttempts: 3, InitialInterval: time.Millisecond, Jitter: 0.5}
	cases := []struct {
		name       string
		fails      int
		input      St
		policy     pregel.RetryPolicy
		wantStatus pregel.RunStatus
		wantEvents []string
		wantErr    string
	}{
		{"succeeds after retries", 2, St{Item: "x"}, fast, pregel.RunCompleted, []string{"before", "before", "before", "after:ok"}, ""},
		{"exhausts retries", 5, St{Item: "x"}, fast, pregel.RunFailed, []string{"before", "before", "before", "failure:flaky 3"}, `node "n" failed in step 1 after 3 attempt(s): flaky 3`},
		{"not retryable", 5, St{Item: "x"}, pregel.RetryPolicy{MaxAttempts: 3, RetryIf: func(error) bool { return false }}, pregel.RunFailed, []string{"before", "failure:flaky 1"}, "after 1 attempt(s)"},
		{"invalid input", 0, St{}, fast, pregel.RunFailed, nil, "item is required"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var events []string
			n := &lifecycle{fails: tc.fails, events: &events, mu: &sync.Mutex{}}
			g := pregel.NewGraph[St]("retry")
			g.AddNode("n", n, pregel.WithRetry(tc.policy))
			g.AddEdge(pregel.Start, "n").AddEdge("n", pregel.End)
			res, err := compile(t, g).Run(context.Background(), tc.input)
			if res.Status != tc.wantStatus {
				t.Fatalf("status = %s (%v), want %s", res.Status, err, tc.wantStatus)
			}
			if !slices.Equal(events, tc.wantEvents) {
				t.Errorf("events = %q, want %q", events, tc.wantEvents)
			}
			if tc.wantErr != "" {
				var ne *pregel.NodeError
				if !errors.As(err, &ne) || ne.Node != "n" || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("err = %v, want NodeError containing %q", err, tc.wantErr)
				}
			}
		})
	}
}

func TestRetryBackoffWaits(t *testing.T) {
	var times []time.Time
	g := pregel.NewGraph[St]("backoff")
	g.AddFunc("n", func(context.Context, St) (St, error) {
		times = append(times, time.Now())
		if len(times) < 3 {
			return St{}, errors.New("again")
		}
		return St{}, nil
	}, pregel.WithRetry(pregel.RetryPolicy{MaxAttempts: 3, InitialInterval: 20 * time.Millisecond, Multiplier: 2}))
	g.AddEdge(pregel.Start, "n").AddEdge("n", pregel.End)
	if _, err := compile(t, g).Run(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if d1, d2 := times[1].Sub(times[0]), times[2].Sub(times[1]); d1 < 20*time.Millisecond || d2 < 40*time.Millisecond {
		t.Errorf("waits %v, %v; want >= 20ms, >= 40ms", d1, d2)
	}
}

func TestTimeoutAndErrorHandler(t *testing.T) {
	g := pregel.NewGraph[St]("timeout")
	g.AddFunc("slow", func(ctx context.Context, _ St) (St, error) {
		select {
		case <-ctx.Done():
			return St{}, ctx.Err()
		case <-time.After(5 * time.Second):
			return St{Answer: "late"}, nil
		}
	}, pregel.WithTimeout(20*time.Millisecond), pregel.WithRetry(pregel.RetryPolicy{MaxAttempts: 2, InitialInterval: time.Millisecond}), pregel.OnError("fallback"))
	g.AddFunc("fallback", func(ctx context.Context, _ St) (St, error) {
		f, ok := pregel.FailureFrom(ctx)
		if !ok {
			return St{}, errors.New("no failure in context")
		}
		return St{Answer: fmt.Sprintf("fallback after %s failed %d times: %s", f.Node, f.Attempts, f.Error)}, nil
	})
	g.AddEdge(pregel.Start, "slow").AddEdge("slow", pregel.End).AddEdge("fallback", pregel.End)
	start := time.Now()
	res, err := compile(t, g).Run(context.Background(), nil)
	if err != nil || res.Status != pregel.RunCompleted {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if time.Since(start) > 2*time.Second {
		t.Errorf("timeout not honoured: took %v", time.Since(start))
	}
	s := state(t, res)
	if !strings.Contains(s.Answer, "fallback after slow failed 2 times: timed out after 20ms") {
		t.Errorf("answer = %q", s.Answer)
	}
	if res.Counters != (pregel.Counters{Completed: 1, Failed: 1}) {
		t.Errorf("counters = %+v", res.Counters)
	}
}

func TestPanicFailsNode(t *testing.T) {
	g := pregel.NewGraph[St]("panic")
	g.AddFunc("boom", func(context.Context, St) (St, error) { panic("kaboom") })
	g.AddEdge(pregel.Start, "boom").AddEdge("boom", pregel.End)
	_, err := compile(t, g).Run(context.Background(), nil)
	if err == nil || !strings.Contains(err.Error(), "kaboom") {
		t.Fatalf("err = %v", err)
	}
}

// interruptGraph: a and b run in parallel; b asks for approval.
func interruptGraph(t *testing.T, runs *sync.Map) *pregel.Graph {
	count := func(name string) {
		v, _ := runs.LoadOrStore(name, new(atomic.Int32))
		v.(*atomic.Int32).Add(1)
	}
	g := pregel.NewGraph[St]("approve")
	g.AddFunc("a", func(context.Context, St) (St, error) { count("a"); return St{Log: []string{"a"}}, nil })
	g.AddFunc("b", func(ctx context.Context, _ St) (St, error) {
		count("b")
		ans, err := pregel.Interrupt[string](ctx, map[string]string{"question": "approve?"})
		if err != nil {
			return St{}, err
		}
		return St{Answer: ans}, nil
	})
	g.AddEdge(pregel.Start, "a").AddEdge(pregel.Start, "b").AddEdge("a", pregel.End).AddEdge("b", pregel.End)
	return compile(t, g)
}

func TestInterruptAndResume(t *testing.T) {
	var runs sync.Map
	cg := interruptGraph(t, &runs)
	store := pregel.NewMemoryStore()
	ctx := context.Background()
	res, err := cg.Run(ctx, nil, pregel.WithStore(store), pregel.WithRunID("r"))
	if err != nil || res.Status != pregel.RunInterrupted {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if len(res.Interrupts) != 1 || string(res.Interrupts[0].Value) != `{"question":"approve?"}` || res.Interrupts[0].Node != "b" {
		t.Fatalf("interrupts = %+v", res.Interrupts)
	}
	// Resuming without a value is refused and changes nothing.
	if _, err := cg.Resume(ctx, "r", pregel.WithStore(store)); !errors.Is(err, pregel.ErrInvalidResume) {
		t.Fatalf("Resume without value: %v", err)
	}
	if _, err := cg.Resume(ctx, "r", pregel.WithStore(store), pregel.WithResumeByID(map[string]any{"nope": 1})); !errors.Is(err, pregel.ErrInvalidResume) {
		t.Fatalf("Resume with unknown id: %v", err)
	}
	res, err = cg.Resume(ctx, "r", pregel.WithStore(store), pregel.WithResumeByID(map[string]any{res.Interrupts[0].ID: "yes"}))
	if err != nil || res.Status != pregel.RunCompleted {
		t.Fatalf("Resume = %+v, %v", res, err)
	}
	s := state(t, res)
	if s.Answer != "yes" || !slices.Equal(s.Log, []string{"a"}) {
		t.Errorf("state = %+v", s)
	}
	a, _ := runs.Load("a")
	b, _ := runs.Load("b")
	if a.(*atomic.Int32).Load() != 1 || b.(*atomic.Int32).Load() != 2 {
		t.Errorf("a ran %d times (want 1), b ran %d times (want 2)", a.(*atomic.Int32).Load(), b.(*atomic.Int32).Load())
	}
}

func TestTwoInterruptsInOneNode(t *testing.T) {
	g := pregel.NewGraph[St]("two")
	g.AddFunc("ask", func(ctx context.Context, _ St) (St, error) {
		first, err := pregel.Interrupt[string](ctx, "first?")
		if err != nil {
			return St{}, err
		}
		second, err := pregel.Interrupt[string](ctx, "second?")
		if err != nil {
			return St{}, err
		}
		return St{Answer: first + "+" + second}, nil
	})
	g.AddEdge(pregel.Start, "ask").AddEdge("ask", pregel.End)
	cg := compile(t, g)
	store := pregel.NewMemoryStore()
	ctx := context.Background()
	_, _ = cg.Run(ctx, nil, pregel.WithStore(store), pregel.WithRunID("r"))
	res, _ := cg.Resume(ctx, "r", pregel.WithStore(store), pregel.WithResume("one"))
	if res.Status != pregel.RunInterrupted || string(res.Interrupts[0].Value) != `"second?"` {
		t.Fatalf("after first answer: %+v", res)
	}
	res, err := cg.Resume(ctx, "r", pregel.WithStore(store), pregel.WithResume("two"))
	if err != nil || state(t, res).Answer != "one+two" {
		t.Fatalf("Resume = %+v, %v", res, err)
	}
}

// counterGraph loops "inc" until Count reaches limit.
func counterGraph(t *testing.T, limit int, onStep func(ctx context.Context, s St)) *pregel.Graph {
	g := pregel.NewGraph[St]("counter")
	g.AddFunc("inc", func(ctx context.Context, s St) (St, error) {
		if onStep != nil {
			onStep(ctx, s)
		}
		return St{Count: s.Count + 1, Log: []string{fmt.Sprint(s.Count)}}, nil
	})
	g.AddEdge(pregel.Start, "inc")
	g.AddConditionalEdges("inc", func(_ context.Context, s St) ([]string, error) {
		if s.Count < limit {
			return []string{"inc"}, nil
		}
		return []string{pregel.End}, nil
	}, "inc", pregel.End)
	return compile(t, g)
}

func TestDrain(t *testing.T) {
	ctx := context.Background()
	ref, err := counterGraph(t, 5, nil).Run(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("mid-run drains and resumes to the same state", func(t *testing.T) {
		ctl := &pregel.Control{}
		cg := counterGraph(t, 5, func(_ context.Context, s St) {
			if s.Count == 2 {
				ctl.RequestDrain("deploy")
			}
		})
		store := pregel.NewMemoryStore()
		res, err := cg.Run(ctx, nil, pregel.WithStore(store), pregel.WithRunID("r"), pregel.WithControl(ctl))
		if err != nil || res.Status != pregel.RunDrained || res.DrainReason != "deploy" || res.Step != 3 {
			t.Fatalf("Run = %+v, %v; want drained at step 3", res, err)
		}
		res, err = cg.Resume(ctx, "r", pregel.WithStore(store))
		if err != nil || res.Status != pregel.RunCompleted {
			t.Fatalf("Resume = %+v, %v", res, err)
		}
		if !jsonEqual(res.Values, ref.Values) || res.Counters != ref.Counters {
			t.Errorf("resumed %s %+v, undisturbed %s %+v", res.Values, res.Counters, ref.Values, ref.Counters)
		}
	})
	t.Run("during the last step completes with the request visible", func(t *testing.T) {
		ctl := &pregel.Control{}
		cg := counterGraph(t, 5, func(_ context.Context, s St) {
			if s.Count == 4 {
				ctl.RequestDrain("late")
			}
		})
		res, err := cg.Run(ctx, nil, pregel.WithControl(ctl))
		if err != nil || res.Status != pregel.RunCompleted || res.DrainReason != "late" {
			t.Fatalf("Run = %+v, %v", res, err)
		}
	})
	t.Run("a node requests it", func(t *testing.T) {
		cg := counterGraph(t, 5, func(ctx context.Context, s St) {
			if s.Count == 1 {
				pregel.RequestDrain(ctx, "budget")
			}
		})
		store := pregel.NewMemoryStore()
		res, err := cg.Run(ctx, nil, pregel.WithStore(store), pregel.WithRunID("r"))
		if err != nil || res.Status != pregel.RunDrained || res.DrainReason != "budget" || res.Step != 2 {
			t.Fatalf("Run = %+v, %v", res, err)
		}
		res, err = cg.Resume(ctx, "r", pregel.WithStore(store))
		if err != nil || !jsonEqual(res.Values, ref.Values) {
			t.Fatalf("Resume = %+v, %v", res, err)
		}
	})
	t.Run("a subgraph's drain stops its parent", func(t *testing.T) {
		child := counterGraph(t, 3, func(ctx context.Context, s St) {
			if s.Count == 1 {
				pregel.RequestDrain(ctx, "child says stop")
			}
		})
		g := pregel.NewGraph[St]("parent")
		g.AddNode("sub", pregel.Subgraph(child, func(St) St { return St{} }, func(_ St, c St) St { return St{Total: c.Count} }))
		g.AddFunc("after", logs("after"))
		g.AddEdge(pregel.Start, "sub").AddEdge("sub", "after").AddEdge("after", pregel.End)
		cg := compile(t, g)
		store := pregel.NewMemoryStore()
		res, err := cg.Run(ctx, nil, pregel.WithStore(store), pregel.WithRunID("p"))
		if err != nil || res.Status != pregel.RunDrained || res.DrainReason != "child says stop" {
			t.Fatalf("Run = %+v, %v", res, err)
		}
		if s := state(t, res); s.Total != 3 {
			t.Errorf("the subgraph ran to its end before the parent drained: total = %d", s.Total)
		}
		res, err = cg.Resume(ctx, "p", pregel.WithStore(store))
		if err != nil || res.Status != pregel.RunCompleted || !slices.Equal(state(t, res).Log, []string{"after"}) {
			t.Fatalf("Resume = %+v, %v", res, err)
		}
	})
}

func TestCancel(t *testing.T) {
	ctx := context.Background()
	started := make(chan struct{})
	var sawCancel atomic.Bool
	g := pregel.NewGraph[St]("cancel")
	g.AddFunc("first", logs("first"))
	g.AddFunc("long", func(ctx context.Context, _ St) (St, error) {
		close(started)
		<-ctx.Done()
		sawCancel.Store(true)
		return St{}, ctx.Err()
	})
	g.AddFunc("quick", func(context.Context, St) (St, error) { return St{Log: []string{"quick"}}, nil })
	g.AddEdge(pregel.Start, "first").AddEdge("first", "long").AddEdge("first", "quick").AddEdge("long", pregel.End).AddEdge("quick", pregel.End)
	cg := compile(t, g)
	ctl := &pregel.Control{}
	store := pregel.NewMemoryStore()
	go func() { <-started; ctl.Cancel() }()
	res, err := cg.Run(ctx, nil, pregel.WithStore(store), pregel.WithRunID("r"), pregel.WithControl(ctl))
	if err != nil || res.Status != pregel.RunCancelled {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if !sawCancel.Load() {
		t.Error("the running node did not see its context cancelled")
	}
	cp, _ := store.Load(ctx, "r", pregel.Latest)
	if cp.Step != 1 || slices.Contains(state(t, res).Log, "quick") {
		t.Errorf("the unfinished step was applied: step %d, log %q", cp.Step, state(t, res).Log)
	}
}

func TestSubgraphInterrupt(t *testing.T) {
	cg := interruptGraph(t, &sync.Map{})
	g := pregel.NewGraph[St]("outer")
	g.AddNode("inner", pregel.Subgraph(cg, func(St) St { return St{} }, func(_ St, c St) St { return St{Answer: "inner said " + c.Answer} }))
	g.AddEdge(pregel.Start, "inner").AddEdge("inner", pregel.End)
	outer := compile(t, g)
	store := pregel.NewMemoryStore()
	ctx := context.Background()
	res, err := outer.Run(ctx, nil, pregel.WithStore(store), pregel.WithRunID("o"))
	if err != nil || res.Status != pregel.RunInterrupted || string(res.Interrupts[0].Value) != `{"question":"approve?"}` {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	res, err = outer.Resume(ctx, "o", pregel.WithStore(store), pregel.WithResume("fine"))
	if err != nil || state(t, res).Answer != `inner said fine` {
		t.Fatalf("Resume = %+v, %v", res, err)
	}
}

// The three steps run over serialised data, as separate processes would.
func TestPlanExecuteApplyOverJSON(t *testing.T) {
	g := pregel.NewGraph[St]("pea")
	g.AddFunc("a", logs("a")).AddFunc("b", logs("b")).AddFunc("c", func(_ context.Context, s St) (St, error) {
		return St{Answer: strings.Join(s.Log, ",")}, nil
	})
	g.AddEdge(pregel.Start, "a").AddEdge(pregel.Start, "b").AddJoin("c", "a", "b").AddEdge("c", pregel.End)
	cg := compile(t, g)
	ctx := context.Background()
	ref, err := cg.Run(ctx, nil, pregel.WithRunID("r"))
	if err != nil {
		t.Fatal(err)
	}
	roundTrip := func(v, out any) {
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatal(err)
		}
	}
	cp, err := cg.Start(ctx, "r", nil)
	if err != nil {
		t.Fatal(err)
	}
	for !cp.Done() {
		tasks := cg.Plan(cp)
		if again := cg.Plan(cp); !slices.EqualFunc(tasks, again, func(a, b pregel.Task) bool { return a.ID == b.ID }) {
			t.Fatal("planning twice gave different task ids")
		}
		var results []pregel.TaskResult
		for i := len(tasks) - 1; i >= 0; i-- { // reverse order: apply must not care
			var task pregel.Task
			var snap pregel.Checkpoint
			roundTrip(tasks[i], &task)
			roundTrip(cp, &snap)
			var r pregel.TaskResult
			roundTrip(cg.Execute(ctx, task, snap.Values, nil), &r)
			results = append(results, r)
		}
		out, err := cg.Apply(cp, tasks, results)
		if err != nil || out.Checkpoint == nil {
			t.Fatalf("Apply = %+v, %v", out, err)
		}
		var next pregel.Checkpoint
		roundTrip(out.Checkpoint, &next)
		cp = &next
	}
	if !jsonEqual(cp.Values, ref.Values) {
		t.Errorf("stepwise %s, Run %s", cp.Values, ref.Values)
	}
}

func TestEvents(t *testing.T) {
	var mu sync.Mutex
	var got []string
	obs := func(e pregel.Event) {
		mu.Lock()
		defer mu.Unlock()
		s := string(e.Type)
		if e.Node != "" {
			s += ":" + e.Node
		}
		if e.Status != "" {
			s += ":" + string(e.Status)
		}
		if e.RunStatus != "" {
			s += ":" + string(e.RunStatus)
		}
		got = append(got, s)
	}
	_, err := counterGraph(t, 2, nil).Run(context.Background(), nil, pregel.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"run_started",
		"step_started", "node_started:inc", "node_finished:inc:completed", "state_updated", "step_finished",
		"step_started", "node_started:inc", "node_finished:inc:completed", "state_updated", "step_finished",
		"run_finished:completed"}
	if !slices.Equal(got, want) {
		t.Errorf("events\n%q\nwant\n%q", got, want)
	}
}

func TestInputValidation(t *testing.T) {
	g := pregel.NewGraph[St]("input")
	g.AddFunc("a", noop).AddEdge(pregel.Start, "a").AddEdge("a", pregel.End)
	g.ValidateInput(func(s St) error {
		if s.Count < 0 {
			return errors.New("count must not be negative")
		}
		return nil
	})
	cg := compile(t, g)
	for _, in := range []string{`{"nope":1}`, `{"count":"x"}`, `[1]`, `{"count":-1}`} {
		if _, err := cg.Run(context.Background(), json.RawMessage(in)); !errors.Is(err, pregel.ErrInvalidInput) {
			t.Errorf("input %s: err = %v, want ErrInvalidInput", in, err)
		}
	}
}

func jsonEqual(a, b map[string]json.RawMessage) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	var u, v any
	_ = json.Unmarshal(x, &u)
	_ = json.Unmarshal(y, &v)
	return fmt.Sprint(u) == fmt.Sprint(v)
}

// A node skipped in a step that was interrupted is restored as skipped on
// resume, not run and not counted as completed.
func TestSkippedRestoredOnResume(t *testing.T) {
	var skipperRuns atomic.Int32
	g := pregel.NewGraph[St]("restore")
	g.AddNode("never", skipper{"never", func(St) bool { skipperRuns.Add(1); return false }})
	g.AddFunc("ask", func(ctx context.Context, _ St) (St, error) {
		v, err := pregel.Interrupt[string](ctx, "?")
		return St{Answer: v}, err
	})
	g.AddFunc("x", noop)
	g.AddEdge(pregel.Start, "never").AddEdge(pregel.Start, "ask").AddEdge("never", "x").AddEdge("ask", pregel.End).AddEdge("x", pregel.End)
	cg := compile(t, g)
	store := pregel.NewMemoryStore()
	ctx := context.Background()
	if res, err := cg.Run(ctx, nil, pregel.WithStore(store), pregel.WithRunID("r")); err != nil || res.Status != pregel.RunInterrupted {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	res, err := cg.Resume(ctx, "r", pregel.WithStore(store), pregel.WithResume("ok"))
	if err != nil || res.Status != pregel.RunCompleted {
		t.Fatalf("Resume = %+v, %v", res, err)
	}
	if skipperRuns.Load() != 1 {
		t.Errorf("ShouldExecute asked %d times; the recorded skip must be reused", skipperRuns.Load())
	}
	if got := statuses(t, store, "r")["never"]; !slices.Equal(got, []pregel.NodeStatus{pregel.NodeSkipped}) {
		t.Errorf("statuses = %v", got)
	}
	if res.Counters != (pregel.Counters{Completed: 2, Skipped: 1}) {
		t.Errorf("counters = %+v", res.Counters)
	}
}

// A fan-out with no items plans one skipped task, so the join after it
// still fires.
func TestEmptyFanOutStillJoins(t *testing.T) {
	g := pregel.NewGraph[St]("empty")
	g.AddFunc("split", noop).AddFunc("other", logs("other")).AddFunc("work", logs("work")).AddFunc("collect", logs("collect"))
	g.AddEdge(pregel.Start, "split").AddEdge("split", "other")
	g.AddFanOut("split", "work", func(context.Context, St) ([]any, error) { return nil, nil })
	g.AddJoin("collect", "work", "other").AddEdge("collect", pregel.End)
	store := pregel.NewMemoryStore()
	res, err := compile(t, g).Run(context.Background(), nil, pregel.WithStore(store), pregel.WithRunID("r"))
	if err != nil || res.Status != pregel.RunCompleted {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if s := state(t, res); !slices.Equal(s.Log, []string{"other", "collect"}) {
		t.Errorf("log = %q", s.Log)
	}
	if got := statuses(t, store, "r")["work"]; !slices.Equal(got, []pregel.NodeStatus{pregel.NodeSkipped}) {
		t.Errorf("work statuses = %v", got)
	}
}

// With EmptyFanOutEnds, a fan-out with no items plans nothing: the run
// ends after its source, in one superstep less, and nothing after the
// target runs; with items it fans out as usual.
func TestEmptyFanOutEnds(t *testing.T) {
	for _, tc := range []struct {
		name      string
		items     []any
		wantLog   []string
		wantSteps int
	}{
		{"no items", nil, []string{"split"}, 1},
		{"two items", []any{"a", "b"}, []string{"split", "work", "work", "collect"}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := pregel.NewGraph[St]("ends")
			g.AddFunc("split", logs("split")).AddFunc("work", logs("work")).AddFunc("collect", logs("collect"))
			g.AddEdge(pregel.Start, "split")
			g.AddFanOut("split", "work", func(context.Context, St) ([]any, error) { return tc.items, nil }, pregel.EmptyFanOutEnds())
			g.AddEdge("work", "collect").AddEdge("collect", pregel.End)
			cg := compile(t, g)
			if !slices.Contains(cg.Edges(), pregel.Edge{From: "split", To: pregel.End, Kind: pregel.EdgeConditional}) {
				t.Errorf("edges %+v lack split -> End", cg.Edges())
			}
			store := pregel.NewMemoryStore()
			res, err := cg.Run(context.Background(), nil, pregel.WithStore(store), pregel.WithRunID("r"))
			if err != nil || res.Status != pregel.RunCompleted {
				t.Fatalf("Run = %+v, %v", res, err)
			}
			if s := state(t, res); !slices.Equal(s.Log, tc.wantLog) || res.Step != tc.wantSteps {
				t.Errorf("log %q at step %d, want %q at step %d", s.Log, res.Step, tc.wantLog, tc.wantSteps)
			}
			if got := statuses(t, store, "r")["work"]; len(tc.items) == 0 && len(got) != 0 {
				t.Errorf("work statuses = %v, want none", got)
			}
		})
	}
}

// A typed input writes only its non-zero fields.
func TestTypedInputWritesNonZeroFields(t *testing.T) {
	g := pregel.NewGraph[St]("typed")
	g.AddFunc("a", noop).AddEdge(pregel.Start, "a").AddEdge("a", pregel.End)
	cg := compile(t, g)
	store := pregel.NewMemoryStore()
	if _, err := cg.Run(context.Background(), St{Item: "x"}, pregel.WithStore(store), pregel.WithRunID("r")); err != nil {
		t.Fatal(err)
	}
	cp, _ := store.Load(context.Background(), "r", 0)
	if got := cp.Changed(); !slices.Equal(got, []string{"item"}) {
		t.Errorf("step 0 wrote %q, want only item", got)
	}
}

// An empty update to a reducer channel that has no value yet (a node that
// declares its writes and leaves them empty, as the tasks of a fan-out that
// found nothing do) leaves the channel without a value: the state stays
// decodable and the next node runs.
func TestEmptyUpdatesOfEveryReducer(t *testing.T) {
	cases := []struct {
		name    string
		channel string
		write   St
	}{
		{"append nil slice", "log", St{}},
		{"append empty slice", "log", St{Log: []string{}}},
		{"merge nil map", "notes", St{}},
		{"merge empty map", "notes", St{Notes: map[string]any{}}},
		{"sum zero", "total", St{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := pregel.NewGraph[St]("empty-" + tc.channel)
			g.AddFunc("split", noop)
			g.AddFunc("work", func(context.Context, St) (St, error) { return tc.write, nil }, pregel.Writes(tc.channel))
			g.AddFunc("after", func(_ context.Context, s St) (St, error) { return St{Item: "after ran"}, nil })
			g.AddEdge(pregel.Start, "split")
			g.AddFanOut("split", "work", func(context.Context, St) ([]any, error) { return []any{1, 2}, nil })
			g.AddEdge("work", "after").AddEdge("after", pregel.End)
			store := pregel.NewMemoryStore()
			res, err := compile(t, g).Run(context.Background(), nil, pregel.WithStore(store), pregel.WithRunID("r"))
			if err != nil || res.Status != pregel.RunCompleted {
				t.Fatalf("Run = %s, %v; want completed", res.Status, err)
			}
			if s := state(t, res); s.Item != "after ran" {
				t.Errorf("state = %+v", s)
			}
			for step := 0; step <= res.Step; step++ {
				cp, err := store.Load(context.Background(), "r", step)
				if err != nil {
					t.Fatal(err)
				}
				for ch, v := range cp.Values {
					if !json.Valid(v) {
						t.Errorf("step %d stores channel %q as %q, which is not JSON", step, ch, v)
					}
				}
			}
		})
	}
}

// A node with retries that asks a question and then fails an attempt gets
// the answer again on its next attempt instead of asking anew.
func TestRetriedNodeKeepsItsAnswer(t *testing.T) {
	var attempts, asked atomic.Int32
	g := pregel.NewGraph[St]("retry-ask")
	g.AddFunc("ask", func(ctx context.Context, _ St) (St, error) {
		n, err := pregel.Interrupt[int](ctx, "how many?")
		if err != nil {
			asked.Add(1)
			return St{}, err
		}
		if attempts.Add(1) == 1 {
			return St{}, errors.New("flaky")
		}
		return St{Count: n}, nil
	}, pregel.WithRetry(pregel.RetryPolicy{MaxAttempts: 3, InitialInterval: time.Millisecond}))
	g.AddEdge(pregel.Start, "ask").AddEdge("ask", pregel.End)
	cg := compile(t, g)
	store := pregel.NewMemoryStore()
	ctx := context.Background()
	res, err := cg.Run(ctx, nil, pregel.WithStore(store), pregel.WithRunID("r"))
	if err != nil || res.Status != pregel.RunInterrupted {
		t.Fatalf("Run = %s, %v; want interrupted", res.Status, err)
	}
	id := res.Interrupts[0].ID
	res, err = cg.Resume(ctx, "r", pregel.WithStore(store), pregel.WithResumeByID(map[string]any{id: 3}))
	if err != nil || res.Status != pregel.RunCompleted {
		t.Fatalf("Resume = %s %+v, %v; want completed", res.Status, res.Interrupts, err)
	}
	if s := state(t, res); s.Count != 3 {
		t.Errorf("count = %d, want 3", s.Count)
	}
	if attempts.Load() != 2 || asked.Load() != 1 {
		t.Errorf("%d attempts with an answer and %d questions; want 2 and 1", attempts.Load(), asked.Load())
	}
}

// A run that fails counts the node that failed it, and the other tasks of
// its last step, in its Result and in Apply's Outcome.
func TestFailedRunCountsTheFailedNode(t *testing.T) {
	tests := []struct {
		name  string
		build func(g *pregel.Builder[St])
		want  pregel.Counters
	}{
		{"Start -> F -> End", func(g *pregel.Builder[St]) {
			g.AddFunc("f", func(context.Context, St) (St, error) { return St{}, errors.New("boom") })
			g.AddEdge(pregel.Start, "f").AddEdge("f", pregel.End)
		}, pregel.Counters{Failed: 1}},
		{"a, then f beside a completed and a skipped sibling", func(g *pregel.Builder[St]) {
			g.AddFunc("a", logs("a")).AddFunc("ok", logs("ok")).AddNode("skip", skipper{name: "skip", when: func(St) bool { return false }})
			g.AddFunc("f", func(context.Context, St) (St, error) { return St{}, errors.New("boom") })
			g.AddEdge(pregel.Start, "a").AddEdge("a", "ok").AddEdge("a", "f").AddEdge("a", "skip")
			g.AddJoin("end", "ok", "f", "skip").AddFunc("end", noop).AddEdge("end", pregel.End)
		}, pregel.Counters{Completed: 2, Skipped: 1, Failed: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := pregel.NewGraph[St]("fail")
			tc.build(g)
			cg := compile(t, g)
			res, err := cg.Run(context.Background(), nil)
			if err == nil || res.Status != pregel.RunFailed {
				t.Fatalf("Run = %s, %v; want failed", res.Status, err)
			}
			if res.Counters != tc.want {
				t.Errorf("counters = %+v, want %+v", res.Counters, tc.want)
			}
		})
	}
}

// Apply counts a task whose result it refuses as failed, and a write
// conflict counts the step's tasks as they ended.
func TestApplyCountsRefusedResults(t *testing.T) {
	g := pregel.NewGraph[St]("apply")
	g.AddFunc("a", noop).AddFunc("b", noop)
	g.AddEdge(pregel.Start, "a").AddEdge(pregel.Start, "b").AddEdge("a", pregel.End).AddEdge("b", pregel.End)
	cg := compile(t, g)
	cp, err := cg.Start(context.Background(), "r", nil)
	if err != nil {
		t.Fatal(err)
	}
	tasks := cg.Plan(cp)
	result := func(i int, writes string) pregel.TaskResult {
		r := pregel.TaskResult{TaskID: tasks[i].ID, Node: tasks[i].Node(), Status: pregel.NodeCompleted, Attempts: 1}
		if writes != "" {
			if err := json.Unmarshal([]byte(writes), &r.Writes); err != nil {
				t.Fatal(err)
			}
		}
		return r
	}
	tests := []struct {
		name    string
		results []pregel.TaskResult
		want    pregel.Counters
	}{
		{"a channel that does not exist", []pregel.TaskResult{result(0, `{"nope":1}`), result(1, "")}, pregel.Counters{Completed: 1, Failed: 1}},
		{"a merge of a non-object", []pregel.TaskResult{result(0, ""), result(1, `{"notes":[1]}`)}, pregel.Counters{Completed: 1, Failed: 1}},
		{"a write conflict", []pregel.TaskResult{result(0, `{"count":1}`), result(1, `{"count":2}`)}, pregel.Counters{Completed: 2}},
	}
	for _, tc := range tests {
		out, err := cg.Apply(cp, tasks, tc.results)
		if err != nil || out.Status != pregel.RunFailed {
			t.Fatalf("%s: Apply = %s, %v; want failed", tc.name, out.Status, err)
		}
		if out.Counters != tc.want {
			t.Errorf("%s: counters %+v, want %+v", tc.name, out.Counters, tc.want)
		}
	}
}
