package runstest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
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

// ThreadStores tests that the stores made by newStore keep the promises of
// [runs.ThreadStore]: records round-trip, CreateThread is idempotent,
// UpdateThread and DeleteThread are conditional on the version (so that of
// concurrent claims of an idle thread exactly one wins), listings page
// newest first, and records returned are copies.
func ThreadStores(t *testing.T, newStore func(t *testing.T) runs.ThreadStore) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s runs.ThreadStore)
	}{
		{"RoundTrip", testThreadRoundTrip},
		{"CreateIdempotent", testThreadCreateIdempotent},
		{"NotFound", testThreadNotFound},
		{"UpdateConflict", testThreadUpdateConflict},
		{"Delete", testThreadDelete},
		{"List", testThreadList},
		{"OneClaimWins", testThreadOneClaimWins},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			if s == nil {
				t.Fatal("newStore returned nil")
			}
			tt.fn(t, s)
		})
	}
}

func newThread(id string, offset time.Duration) runs.Thread {
	at := base.Add(offset)
	return runs.Thread{ID: id, CreatedAt: at, UpdatedAt: at}
}

func createThread(t *testing.T, s runs.ThreadStore, th runs.Thread) runs.Thread {
	t.Helper()
	got, created, err := s.CreateThread(t.Context(), th)
	if err != nil || !created {
		t.Fatalf("CreateThread(%s) = %v, %v", th.ID, created, err)
	}
	if got.Version != 1 {
		t.Fatalf("CreateThread(%s).Version = %d, want 1", th.ID, got.Version)
	}
	return got
}

func checkThread(t *testing.T, what string, got, want runs.Thread) {
	t.Helper()
	if got.ID != want.ID || got.Active != want.Active || !slices.Equal(got.Queue, want.Queue) || got.Version != want.Version {
		t.Errorf("%s: id, active, queue, version = %q %q %v %d; want %q %q %v %d", what, got.ID, got.Active, got.Queue, got.Version, want.ID, want.Active, want.Queue, want.Version)
	}
	if (got.Head == nil) != (want.Head == nil) || (got.Head != nil && *got.Head != *want.Head) {
		t.Errorf("%s: head = %v, want %v", what, got.Head, want.Head)
	}
	checkJSON(t, what+": metadata", got.Metadata, want.Metadata)
	checkTime(t, what+": created_at", got.CreatedAt, want.CreatedAt)
}

func testThreadRoundTrip(t *testing.T, s runs.ThreadStore) {
	id := uniq(t) + "t"
	th := newThread(id, 0)
	th.Metadata = json.RawMessage(`{"user":"ada","tags":["a","b"]}`)
	th.Head = &runs.StepRef{RunID: id + "-r0", Step: 7}
	th.Active = id + "-r1"
	th.Queue = []string{id + "-r2", id + "-r3"}
	stored := createThread(t, s, th)
	th.Version = 1
	checkThread(t, "created", stored, th)
	got, err := s.GetThread(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	checkThread(t, "read back", got, th)

	got.Head = &runs.StepRef{RunID: id + "-r1", Step: 3}
	got.Active, got.Queue = got.Queue[0], got.Queue[1:]
	updated, err := s.UpdateThread(t.Context(), got)
	if err != nil {
		t.Fatal(err)
	}
	want := got
	want.Version = 2
	checkThread(t, "updated", updated, want)
	again, err := s.GetThread(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	checkThread(t, "updated, read back", again, want)
}

func testThreadCreateIdempotent(t *testing.T, s runs.ThreadStore) {
	id := uniq(t) + "t"
	first := createThread(t, s, newThread(id, 0))
	other := newThread(id, time.Hour)
	other.Active = "someone-else"
	got, created, err := s.CreateThread(t.Context(), other)
	if err != nil || created {
		t.Fatalf("second CreateThread = %v, %v; want the stored thread and created=false", created, err)
	}
	checkThread(t, "second create", got, first)
}

func testThreadNotFound(t *testing.T, s runs.ThreadStore) {
	id := uniq(t) + "missing"
	if _, err := s.GetThread(t.Context(), id); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("GetThread = %v, want ErrNotFound", err)
	}
	if _, err := s.UpdateThread(t.Context(), runs.Thread{ID: id, Version: 1}); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("UpdateThread = %v, want ErrNotFound", err)
	}
	if err := s.DeleteThread(t.Context(), id, 1); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("DeleteThread = %v, want ErrNotFound", err)
	}
}

func testThreadUpdateConflict(t *testing.T, s runs.ThreadStore) {
	id := uniq(t) + "t"
	th := createThread(t, s, newThread(id, 0))
	th.Active = "a"
	if _, err := s.UpdateThread(t.Context(), th); err != nil {
		t.Fatal(err)
	}
	th.Active = "b" // still at version 1
	if _, err := s.UpdateThread(t.Context(), th); !errors.Is(err, runs.ErrConflict) {
		t.Fatalf("stale UpdateThread = %v, want ErrConflict", err)
	}
	got, err := s.GetThread(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if got.Active != "a" || got.Version != 2 {
		t.Errorf("after a refused update: active %q version %d, want a, 2", got.Active, got.Version)
	}
}

func testThreadDelete(t *testing.T, s runs.ThreadStore) {
	id := uniq(t) + "t"
	createThread(t, s, newThread(id, 0))
	if err := s.DeleteThread(t.Context(), id, 7); !errors.Is(err, runs.ErrConflict) {
		t.Fatalf("DeleteThread at a stale version = %v, want ErrConflict", err)
	}
	if _, err := s.GetThread(t.Context(), id); err != nil {
		t.Fatalf("a refused delete deleted the thread: %v", err)
	}
	if err := s.DeleteThread(t.Context(), id, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetThread(t.Context(), id); !errors.Is(err, runs.ErrNotFound) {
		t.Fatalf("GetThread after delete = %v, want ErrNotFound", err)
	}
	// The id can be used again.
	createThread(t, s, newThread(id, time.Minute))
}

func testThreadList(t *testing.T, s runs.ThreadStore) {
	// Threads far in the future, so that other sub-tests' threads in a
	// shared store come after them.
	p := uniq(t)
	const n = 7
	var want []string
	for i := range n {
		id := fmt.Sprintf("%s-t%d", p, i)
		createThread(t, s, newThread(id, 1000*time.Hour*24+time.Duration(i)*time.Second))
		want = append([]string{id}, want...)
	}
	var got []string
	tok := ""
	for range n {
		page, err := s.ListThreads(t.Context(), runs.ThreadFilter{Limit: 3, PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		for _, th := range page.Threads {
			if strings.HasPrefix(th.ID, p+"-") {
				got = append(got, th.ID)
			}
		}
		if len(got) >= n || page.NextPageToken == "" {
			break
		}
		tok = page.NextPageToken
	}
	if !slices.Equal(got, want) {
		t.Errorf("listed %v, want %v (newest first, pages of 3)", got, want)
	}
	if _, err := s.ListThreads(t.Context(), runs.ThreadFilter{PageToken: "not-a-token"}); !errors.Is(err, runs.ErrInvalid) {
		t.Errorf("bad page token: %v, want ErrInvalid", err)
	}
}

func testThreadOneClaimWins(t *testing.T, s runs.ThreadStore) {
	id := uniq(t) + "t"
	createThread(t, s, newThread(id, 0))
	var wg sync.WaitGroup
	var wins atomic.Int32
	errs := make(chan error, concurrency)
	for i := range concurrency {
		wg.Go(func() {
			_, err := runs.MutateThread(t.Context(), s, id, func(th *runs.Thread) error {
				if th.Active != "" {
					return errBusy
				}
				th.Active = fmt.Sprintf("run-%d", i)
				return nil
			})
			switch {
			case err == nil:
				wins.Add(1)
			case !errors.Is(err, errBusy):
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if wins.Load() != 1 {
		t.Errorf("%d of %d concurrent claims of an idle thread won, want exactly 1", wins.Load(), concurrency)
	}
}

var errBusy = errors.New("busy")

// ThreadEnv is what the strategy suite runs threads on.
type ThreadEnv struct {
	Runs        runs.Store
	Threads     runs.ThreadStore
	Checkpoints pregel.Checkpointer
}

// Strategies tests threads end to end on the stores made by newEnv, with a
// Service and an embedded Scheduler: runs continue from the thread's
// state, each strategy does what it promises with one run waiting, and
// with n concurrent creates on one thread (n = 50 in the proof)
// there is never more than one active run, enqueue runs them all in
// arrival order, reject refuses all but one, and interrupt and rollback
// leave the state their promises make.
func Strategies(t *testing.T, n int, newEnv func(t *testing.T) ThreadEnv) {
	t.Helper()
	t.Run("Continue", func(t *testing.T) { testContinue(t, newThreadEnv(t, newEnv)) })
	t.Run("HistoryForkUpdate", func(t *testing.T) { testHistoryForkUpdate(t, newThreadEnv(t, newEnv)) })
	t.Run("BadInput", func(t *testing.T) { testBadInput(t, newThreadEnv(t, newEnv)) })
	t.Run("Delete", func(t *testing.T) { testDelete(t, newThreadEnv(t, newEnv)) })
	t.Run("LostHandOff", func(t *testing.T) { testLostHandOff(t, newThreadEnv(t, newEnv)) })
	t.Run("CancelCutShort", func(t *testing.T) {
		cut := &cutRuns{}
		testCancelCutShort(t, newThreadEnv(t, func(t *testing.T) ThreadEnv {
			env := newEnv(t)
			cut.Store, env.Runs = env.Runs, cut
			return env
		}), cut)
	})
	t.Run("StalledCreator", func(t *testing.T) {
		stall := &stallRuns{}
		testStalledCreator(t, newThreadEnv(t, func(t *testing.T) ThreadEnv {
			env := newEnv(t)
			stall.Store, env.Runs = env.Runs, stall
			return env
		}), stall)
	})
	t.Run("CancelRacesStart", func(t *testing.T) {
		stall := &stallSeed{}
		testCancelRacesStart(t, newThreadEnv(t, func(t *testing.T) ThreadEnv {
			env := newEnv(t)
			env.Checkpoints = stall.wrap(env.Checkpoints)
			return env
		}), stall)
	})
	for _, st := range []runs.Strategy{runs.StrategyReject, runs.StrategyEnqueue, runs.StrategyInterrupt, runs.StrategyRollback} {
		t.Run("One/"+string(st), func(t *testing.T) { testOneWaiting(t, newThreadEnv(t, newEnv), st) })
	}
	// Asking again with the same run_id (parallel: on moto each costs
	// a second or so of waiting).
	for _, st := range []runs.Strategy{runs.StrategyReject, runs.StrategyEnqueue, runs.StrategyInterrupt, runs.StrategyRollback} {
		t.Run("RunIDIdempotent/"+string(st), func(t *testing.T) {
			t.Parallel()
			testRunIDIdempotent(t, newThreadEnv(t, newEnv), st)
		})
	}
	t.Run("RunIDConcurrent", func(t *testing.T) {
		t.Parallel()
		testRunIDConcurrent(t, newThreadEnv(t, newEnv), 8)
	})
	for _, st := range []runs.Strategy{runs.StrategyEnqueue, runs.StrategyInterrupt, runs.StrategyRollback} {
		t.Run("ClaimCut/"+string(st), func(t *testing.T) {
			t.Parallel()
			testClaimCut(t, newThreadEnv(t, newEnv), st)
		})
	}
	for _, st := range []runs.Strategy{runs.StrategyReject, runs.StrategyEnqueue, runs.StrategyInterrupt, runs.StrategyRollback} {
		t.Run(fmt.Sprintf("Concurrent%d/%s", n, st), func(t *testing.T) {
			t.Parallel()
			testConcurrent(t, newThreadEnv(t, newEnv), st, n)
		})
	}
}

// tenv is a Service and Scheduler on a ThreadEnv, with the chat graph.
type tenv struct {
	svc   *runs.Service
	sched *embedded.Scheduler
	gate  chan struct{} // closing it lets "block" messages through
	once  sync.Once
	// inside counts the reply nodes executing, max the most at once.
	inside, max atomic.Int32
	// order keeps the thread records' versions (the order in which
	// runs took their threads).
	order *orderLog
	// skew moves the Service's clock ahead of the wall clock (a
	// time.Duration): a test ages a claim without waiting.
	skew atomic.Int64
}

// chatState is the state of the suite's graph.
type chatState struct {
	Messages []string `json:"messages" reduce:"append"`
}

func newThreadEnv(t *testing.T, newEnv func(t *testing.T) ThreadEnv) *tenv {
	t.Helper()
	st := newEnv(t)
	e := &tenv{gate: make(chan struct{})}
	g := pregel.NewGraph[chatState]("chat")
	g.AddFunc("reply", func(ctx context.Context, s chatState) (chatState, error) {
		if n := e.inside.Add(1); n > e.max.Load() {
			e.max.Store(n)
		}
		defer e.inside.Add(-1)
		last := s.Messages[len(s.Messages)-1]
		if strings.HasPrefix(last, "ask") {
			// The linearizability check's runs that wait for an answer.
			if _, err := pregel.Interrupt[string](ctx, "go on?"); err != nil {
				return chatState{}, err
			}
		}
		if strings.HasPrefix(last, "block") {
			select {
			case <-e.gate:
			case <-ctx.Done():
				return chatState{}, ctx.Err()
			}
		}
		return chatState{Messages: []string{"re:" + last}}, nil
	})
	g.AddFunc("done", func(context.Context, chatState) (chatState, error) {
		return chatState{Messages: []string{"done"}}, nil
	})
	g.AddEdge(pregel.Start, "reply").AddEdge("reply", "done").AddEdge("done", pregel.End)
	graph, err := g.Compile()
	if err != nil {
		t.Fatal(err)
	}
	reg, err := runs.NewRegistry(graph)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	e.order = newOrderLog(st.Threads)
	e.svc = &runs.Service{Graphs: reg, Runs: st.Runs, Checkpoints: st.Checkpoints, Threads: e.order, Logger: log,
		Now: func() time.Time { return time.Now().Add(time.Duration(e.skew.Load())) }}
	e.sched = embedded.NewScheduler(embedded.SchedulerConfig{Graphs: reg, Runs: st.Runs, Checkpoints: st.Checkpoints, Concurrency: 4, Logger: log, OnStop: e.svc.RunStopped, StartThreadRun: e.svc.StartThreadRun})
	e.svc.Dispatcher = e.sched
	ctx, cancel := context.WithCancel(context.Background())
	if err := e.sched.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.open()
		wctx, stop := context.WithTimeout(context.Background(), 30*time.Second)
		defer stop()
		_ = e.sched.WaitIdle(wctx)
		cancel()
	})
	return e
}

func (e *tenv) open() { e.once.Do(func() { close(e.gate) }) }

func (e *tenv) thread(t *testing.T) string {
	t.Helper()
	th, created, err := e.svc.CreateThread(t.Context(), runs.CreateThreadRequest{ThreadID: uniq(t) + "thread"})
	if err != nil || !created {
		t.Fatalf("CreateThread = %v, %v", created, err)
	}
	return th.ID
}

func (e *tenv) run(ctx context.Context, thread, msg string, st runs.Strategy) (runs.Run, error) {
	r, _, err := e.svc.CreateOnThread(ctx, thread, runs.ThreadRunRequest{Graph: "chat", Input: json.RawMessage(fmt.Sprintf(`{"messages":[%q]}`, msg)), Strategy: st})
	return r, err
}

func (e *tenv) idle(t *testing.T) {
	t.Helper()
	ctx, stop := context.WithTimeout(t.Context(), 60*time.Second)
	defer stop()
	if err := e.sched.WaitIdle(ctx); err != nil {
		t.Fatalf("runs did not finish: %v", err)
	}
}

func (e *tenv) messages(t *testing.T, thread string) []string {
	t.Helper()
	st, err := e.svc.State(t.Context(), thread)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	if raw, ok := st.Values["messages"]; ok {
		if err := json.Unmarshal(raw, &msgs); err != nil {
			t.Fatal(err)
		}
	}
	return msgs
}

func (e *tenv) get(t *testing.T, id string) runs.Run {
	t.Helper()
	r, err := e.svc.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// waitStatus waits until run id has one of the statuses.
func (e *tenv) waitStatus(t *testing.T, id string, sts ...pregel.RunStatus) runs.Run {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := e.get(t, id)
		if slices.Contains(sts, r.Status) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %s, want one of %v", id, r.Status, sts)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitInside waits until a reply node is executing (a block message holds
// it there).
func (e *tenv) waitInside(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for e.inside.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no reply node started")
		}
		time.Sleep(time.Millisecond)
	}
}

func testContinue(t *testing.T, e *tenv) {
	e.open()
	th := e.thread(t)
	first, err := e.run(t.Context(), th, "hello", "")
	if err != nil {
		t.Fatal(err)
	}
	e.idle(t)
	second, err := e.run(t.Context(), th, "again", "")
	if err != nil {
		t.Fatal(err)
	}
	e.idle(t)
	want := []string{"hello", "re:hello", "done", "again", "re:again", "done"}
	if got := e.messages(t, th); !slices.Equal(got, want) {
		t.Errorf("thread state = %v, want %v (the second run continues the first)", got, want)
	}
	r2 := e.get(t, second.ID)
	last := e.get(t, first.ID)
	if r2.Status != pregel.RunCompleted || r2.Base == nil || *r2.Base != (runs.StepRef{RunID: first.ID, Step: last.Step}) {
		t.Errorf("second run: status %s base %v, want completed from %s step %d", r2.Status, r2.Base, first.ID, last.Step)
	}
	thr, err := e.svc.GetThread(t.Context(), th)
	if err != nil {
		t.Fatal(err)
	}
	if thr.Active != "" || len(thr.Queue) != 0 || thr.Head == nil || thr.Head.RunID != second.ID {
		t.Errorf("idle thread: active %q queue %v head %v; want no run, head at %s", thr.Active, thr.Queue, thr.Head, second.ID)
	}
	// The run's own checkpoints hold the whole state.
	cp, err := e.svc.Checkpoint(t.Context(), second.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	if err := json.Unmarshal(cp.Values["messages"], &msgs); err != nil || !slices.Equal(msgs, want[:4]) {
		t.Errorf("second run's step 0 messages = %v (%v), want %v", msgs, err, want[:4])
	}
}

func testOneWaiting(t *testing.T, e *tenv, st runs.Strategy) {
	th := e.thread(t)
	first, err := e.run(t.Context(), th, "block", "")
	if err != nil {
		t.Fatal(err)
	}
	e.waitInside(t)
	second, err := e.run(t.Context(), th, "two", st)
	if st == runs.StrategyReject {
		var busy *runs.BusyError
		if !errors.As(err, &busy) || busy.ActiveRun != first.ID || !errors.Is(err, runs.ErrConflict) {
			t.Fatalf("reject on a busy thread: %v, want a BusyError naming %s", err, first.ID)
		}
	} else if err != nil {
		t.Fatal(err)
	} else if st != runs.StrategyRollback && second.Status != pregel.RunPending {
		// (A rollback's cancel may free the thread at once.)
		t.Errorf("waiting run is %s, want pending", second.Status)
	}
	if st == runs.StrategyRollback {
		// The cancel stops the blocked node without the gate.
		e.waitStatus(t, first.ID, pregel.RunCancelled)
	}
	e.open()
	e.idle(t)

	var want []string
	wantFirst := pregel.RunCompleted
	switch st {
	case runs.StrategyReject:
		want = []string{"block", "re:block", "done"}
	case runs.StrategyEnqueue:
		want = []string{"block", "re:block", "done", "two", "re:two", "done"}
	case runs.StrategyInterrupt:
		// Drained, then ended: superseded, it can never be resumed.
		wantFirst = pregel.RunCancelled
		want = []string{"block", "re:block", "two", "re:two", "done"}
	case runs.StrategyRollback:
		wantFirst = pregel.RunCancelled
		want = []string{"two", "re:two", "done"}
	}
	if got := e.messages(t, th); !slices.Equal(got, want) {
		t.Errorf("%s: thread state = %v, want %v", st, got, want)
	}
	r1 := e.get(t, first.ID)
	if r1.Status != wantFirst {
		t.Errorf("%s: first run is %s, want %s", st, r1.Status, wantFirst)
	}
	if st == runs.StrategyReject {
		if _, err := e.svc.Get(t.Context(), second.ID); second.ID != "" || err == nil {
			t.Errorf("a refused run was stored")
		}
		return
	}
	if r2 := e.get(t, second.ID); r2.Status != pregel.RunCompleted {
		t.Errorf("%s: second run is %s, want completed", st, r2.Status)
	}
	if st == runs.StrategyInterrupt || st == runs.StrategyRollback {
		if r1.SupersededBy != second.ID {
			t.Errorf("%s: first run superseded by %q, want %s", st, r1.SupersededBy, second.ID)
		}
	}
	if st == runs.StrategyInterrupt || st == runs.StrategyRollback {
		if r1.Discarded != (st == runs.StrategyRollback) {
			t.Errorf("%s: first run discarded = %v", st, r1.Discarded)
		}
		_, err := e.svc.Resume(t.Context(), first.ID, runs.ResumeRequest{})
		if !errors.Is(err, runs.ErrInvalidState) || !strings.Contains(err.Error(), second.ID) {
			t.Errorf("resuming a run that gave its thread away: %v, want ErrInvalidState naming %s", err, second.ID)
		}
	}
	if e.max.Load() > 1 {
		t.Errorf("%d reply nodes of one thread executed at once", e.max.Load())
	}
}

func testConcurrent(t *testing.T, e *tenv, st runs.Strategy, n int) {
	th := e.thread(t)
	var run0 runs.Run
	if st != runs.StrategyReject {
		// The thread is busy while the n runs arrive.
		var err error
		if run0, err = e.run(t.Context(), th, "block-0", ""); err != nil {
			t.Fatal(err)
		}
		e.waitInside(t)
	}
	created := make([]runs.Run, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		msg := fmt.Sprintf("m%02d", i+1)
		if st == runs.StrategyReject {
			msg = "block-" + msg
		}
		wg.Go(func() { created[i], errs[i] = e.run(t.Context(), th, msg, st) })
	}
	wg.Wait()
	var accepted []runs.Run
	refused := 0
	for i, err := range errs {
		var busy *runs.BusyError
		switch {
		case err == nil:
			accepted = append(accepted, created[i])
		case st == runs.StrategyReject && errors.As(err, &busy):
			refused++
		default:
			t.Fatalf("create %d: %v", i, err)
		}
	}
	thr, err := e.svc.GetThread(t.Context(), th)
	if err != nil {
		t.Fatal(err)
	}
	arrival := append([]string{thr.Active}, thr.Queue...)
	if st != runs.StrategyRollback {
		// Nothing can have moved yet: the active run is blocked.
		wantActive := run0.ID
		if st == runs.StrategyReject {
			wantActive = accepted[0].ID
		}
		if thr.Active != wantActive {
			t.Fatalf("active run %q, want %q", thr.Active, wantActive)
		}
	}
	e.open()
	e.idle(t)

	if st == runs.StrategyReject {
		if len(accepted) != 1 || refused != n-1 {
			t.Fatalf("reject: %d accepted, %d refused; want 1 and %d", len(accepted), refused, n-1)
		}
		var in chatState
		if err := json.Unmarshal(accepted[0].Input, &in); err != nil {
			t.Fatal(err)
		}
		msg := in.Messages[0]
		if got, want := e.messages(t, th), []string{msg, "re:" + msg, "done"}; !slices.Equal(got, want) {
			t.Errorf("reject: state %v, want the accepted run's messages only, %v", got, want)
		}
		return
	}
	if len(accepted) != n {
		t.Fatalf("%s: %d of %d accepted", st, len(accepted), n)
	}
	if st == runs.StrategyEnqueue || st == runs.StrategyInterrupt {
		if len(arrival) != n+1 {
			t.Fatalf("%s: thread holds %d runs, want %d", st, len(arrival), n+1)
		}
	}
	// Walk the thread's runs from its head back through their bases: the
	// lineage of the state, newest last.
	thr, err = e.svc.GetThread(t.Context(), th)
	if err != nil {
		t.Fatal(err)
	}
	if thr.Active != "" || len(thr.Queue) > 0 {
		t.Fatalf("%s: thread still has run %q active and %v queued", st, thr.Active, thr.Queue)
	}
	var lineage []runs.Run
	for ref := thr.Head; ref != nil; {
		r := e.get(t, ref.RunID)
		lineage = append([]runs.Run{r}, lineage...)
		ref = r.Base
	}
	var want []string
	for _, r := range lineage {
		var in chatState
		if err := json.Unmarshal(r.Input, &in); err != nil {
			t.Fatal(err)
		}
		msg := in.Messages[0]
		switch r.Status {
		case pregel.RunCompleted:
			want = append(want, msg, "re:"+msg, "done")
		case pregel.RunCancelled:
			// Superseded by an interrupt: what it committed stays.
			if r.Discarded || r.SupersededBy == "" {
				t.Errorf("%s: cancelled run %s in the thread's lineage (discarded %v, superseded by %q)", st, r.ID, r.Discarded, r.SupersededBy)
			}
			want = append(want, msg, "re:"+msg)
		default:
			t.Errorf("%s: run %s in the thread's lineage is %s", st, r.ID, r.Status)
		}
	}
	if got := e.messages(t, th); !slices.Equal(got, want) {
		t.Errorf("%s: thread state\n%v\nwant (from its lineage)\n%v", st, got, want)
	}
	// Every run has ended, and only rollback discards.
	ended := 0
	for _, id := range append([]string{run0.ID}, ids(accepted)...) {
		r := e.get(t, id)
		switch {
		case r.Status == pregel.RunCompleted:
			ended++
		case r.Status == pregel.RunCancelled && st == runs.StrategyInterrupt && id == run0.ID && !r.Discarded && r.SupersededBy != "":
			ended++
		case r.Status == pregel.RunCancelled && st == runs.StrategyRollback && r.Discarded:
			ended++
		default:
			t.Errorf("%s: run %s ended %s (discarded %v)", st, id, r.Status, r.Discarded)
		}
	}
	if ended != n+1 {
		t.Errorf("%s: %d of %d runs ended as promised", st, ended, n+1)
	}
	switch st {
	case runs.StrategyEnqueue, runs.StrategyInterrupt:
		// All of them ran, in arrival order.
		var order []string
		for _, r := range lineage {
			order = append(order, r.ID)
		}
		if !slices.Equal(order, arrival) {
			t.Errorf("%s: runs executed in order\n%v\nwant arrival order\n%v", st, order, arrival)
		}
	case runs.StrategyRollback:
		if e.get(t, run0.ID).Status != pregel.RunCancelled {
			t.Errorf("rollback: the busy run was not cancelled")
		}
	}
	if e.max.Load() > 1 {
		t.Errorf("%s: %d reply nodes of one thread executed at once", st, e.max.Load())
	}
}

func (e *tenv) mustRun(t *testing.T, thread, msg string) runs.Run {
	t.Helper()
	r, err := e.run(t.Context(), thread, msg, "")
	if err != nil {
		t.Fatal(err)
	}
	e.idle(t)
	return e.get(t, r.ID)
}

func decodeMessages(t *testing.T, values map[string]json.RawMessage) []string {
	t.Helper()
	var msgs []string
	if raw, ok := values["messages"]; ok {
		if err := json.Unmarshal(raw, &msgs); err != nil {
			t.Fatal(err)
		}
	}
	return msgs
}

func testHistoryForkUpdate(t *testing.T, e *tenv) {
	e.open()
	ctx := t.Context()
	th := e.thread(t)
	r1 := e.mustRun(t, th, "hello")
	r2 := e.mustRun(t, th, "again")

	h, err := e.svc.ThreadHistory(ctx, th, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range h {
		got = append(got, fmt.Sprintf("%s/%d", s.RunID, s.Step))
	}
	var want []string
	for _, r := range []runs.Run{r2, r1} {
		for step := r.Step; step >= 0; step-- {
			want = append(want, fmt.Sprintf("%s/%d", r.ID, step))
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("history = %v, want %v (newest first, every step of both runs)", got, want)
	}
	if msgs := decodeMessages(t, h[r2.Step].Values); !slices.Equal(msgs, []string{"hello", "re:hello", "done", "again"}) {
		t.Errorf("history: the second run's step 0 holds %v", msgs)
	}
	if h, err := e.svc.ThreadHistory(ctx, th, 2); err != nil || len(h) != 2 {
		t.Errorf("history with limit 2: %d steps, %v", len(h), err)
	}
	// Paged, the history is the same steps, each once, across the runs.
	for _, limit := range []int{1, 2, 3, len(want) - 1, len(want)} {
		if got := threadHistoryPaged(t, e, th, limit); !slices.Equal(got, want) {
			t.Errorf("history in pages of %d = %v, want %v", limit, got, want)
		}
	}
	if first, err := e.svc.ThreadHistoryPage(ctx, th, runs.ThreadHistoryFilter{Limit: 1}); err != nil || first.NextPageToken == "" {
		t.Errorf("first page of 1: %+v, %v; want a token", first, err)
	} else if _, err := e.svc.ThreadHistoryPage(ctx, th+"-other", runs.ThreadHistoryFilter{PageToken: first.NextPageToken}); !errors.Is(err, runs.ErrInvalid) {
		t.Errorf("a token of thread %s on another thread: %v, want ErrInvalid", th, err)
	}

	// Fork at the end of the first run, and take the conversation
	// elsewhere: the same as a fresh thread that said the same.
	step := r1.Step
	fork, err := e.svc.Fork(ctx, th, runs.ForkRequest{RunID: r1.ID, Step: &step, ThreadID: th + "-fork"})
	if err != nil {
		t.Fatal(err)
	}
	e.mustRun(t, fork.ID, "other")
	// The fork's history goes on into the source's run from the step it
	// forked at, in pages as whole.
	if whole, err := e.svc.ThreadHistory(ctx, fork.ID, runs.MaxHistory); err != nil {
		t.Fatal(err)
	} else {
		var want []string
		for _, s := range whole {
			want = append(want, fmt.Sprintf("%s/%d", s.RunID, s.Step))
		}
		if got := threadHistoryPaged(t, e, fork.ID, 2); !slices.Equal(got, want) || !slices.Contains(got, fmt.Sprintf("%s/%d", r1.ID, step)) {
			t.Errorf("the fork's history in pages of 2 = %v, want %v, through step %d of %s", got, want, step, r1.ID)
		}
	}
	fresh := e.thread(t) + "-fresh"
	if _, _, err := e.svc.CreateThread(ctx, runs.CreateThreadRequest{ThreadID: fresh}); err != nil {
		t.Fatal(err)
	}
	e.mustRun(t, fresh, "hello")
	e.mustRun(t, fresh, "other")
	if got, want := e.messages(t, fork.ID), e.messages(t, fresh); !slices.Equal(got, want) {
		t.Errorf("fork continued: %v; a fresh thread with the same messages: %v", got, want)
	}
	if got, want := e.messages(t, th), []string{"hello", "re:hello", "done", "again", "re:again", "done"}; !slices.Equal(got, want) {
		t.Errorf("the forked thread changed: %v, want %v", got, want)
	}

	// Update the state as the reply node, then go on from it.
	st, err := e.svc.UpdateState(ctx, th, runs.UpdateStateRequest{Graph: "chat", AsNode: "reply", Values: json.RawMessage(`{"messages":["edited"]}`)})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := decodeMessages(t, st.Values), []string{"hello", "re:hello", "done", "again", "re:again", "done", "edited"}; !slices.Equal(got, want) {
		t.Errorf("state after update = %v, want %v (appended by the reducer)", got, want)
	}
	h, err = e.svc.ThreadHistory(ctx, th, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 1 || len(h[0].Tasks) != 1 || h[0].Tasks[0].Node != "reply" || h[0].Tasks[0].Status != pregel.NodeCompleted || !slices.Equal(h[0].Changed, []string{"messages"}) {
		t.Errorf("newest history entry after update = %+v, want a step where reply completed and wrote messages", h)
	}
	e.mustRun(t, th, "x")
	if got := e.messages(t, th); !slices.Equal(got[6:], []string{"edited", "x", "re:x", "done"}) {
		t.Errorf("run after update: %v", got)
	}
}

func testBadInput(t *testing.T, e *tenv) {
	e.open()
	ctx := t.Context()
	th := e.thread(t)
	r := e.mustRun(t, th, "hello")
	before, err := e.svc.GetThread(ctx, th)
	if err != nil {
		t.Fatal(err)
	}
	countRuns := func() int {
		p, err := e.svc.ThreadRuns(ctx, th, runs.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		return len(p.Runs)
	}
	nruns := countRuns()
	step9 := 99
	neg := -2
	for _, tc := range []struct {
		name string
		want error
		do   func() error
	}{
		{"unknown thread", runs.ErrNotFound, func() error {
			_, _, err := e.svc.CreateOnThread(ctx, th+"-nope", runs.ThreadRunRequest{Graph: "chat"})
			return err
		}},
		{"invalid thread id", runs.ErrInvalid, func() error {
			_, _, err := e.svc.CreateOnThread(ctx, "not a valid id!", runs.ThreadRunRequest{Graph: "chat"})
			return err
		}},
		{"unknown strategy", runs.ErrInvalid, func() error {
			_, _, err := e.svc.CreateOnThread(ctx, th, runs.ThreadRunRequest{Graph: "chat", Strategy: "later"})
			return err
		}},
		{"unknown graph", runs.ErrNotFound, func() error {
			_, _, err := e.svc.CreateOnThread(ctx, th, runs.ThreadRunRequest{Graph: "nope"})
			return err
		}},
		{"unknown channel", runs.ErrInvalid, func() error {
			_, _, err := e.svc.CreateOnThread(ctx, th, runs.ThreadRunRequest{Graph: "chat", Input: json.RawMessage(`{"nope":1}`)})
			return err
		}},
		{"input of the wrong type", runs.ErrInvalid, func() error {
			_, _, err := e.svc.CreateOnThread(ctx, th, runs.ThreadRunRequest{Graph: "chat", Input: json.RawMessage(`{"messages":3}`)})
			return err
		}},
		{"fork of a missing step", runs.ErrNotFound, func() error {
			_, err := e.svc.Fork(ctx, th, runs.ForkRequest{RunID: r.ID, Step: &step9, ThreadID: th + "-f1"})
			return err
		}},
		{"fork of a negative step", runs.ErrInvalid, func() error {
			_, err := e.svc.Fork(ctx, th, runs.ForkRequest{RunID: r.ID, Step: &neg, ThreadID: th + "-f2"})
			return err
		}},
		{"fork of another thread's run", runs.ErrNotFound, func() error {
			_, err := e.svc.Fork(ctx, th, runs.ForkRequest{RunID: "someone-else", ThreadID: th + "-f3"})
			return err
		}},
		{"update of an unknown node", runs.ErrInvalid, func() error {
			_, err := e.svc.UpdateState(ctx, th, runs.UpdateStateRequest{Graph: "chat", AsNode: "nope", Values: json.RawMessage(`{"messages":["x"]}`)})
			return err
		}},
		{"update of an unknown channel", runs.ErrInvalid, func() error {
			_, err := e.svc.UpdateState(ctx, th, runs.UpdateStateRequest{Graph: "chat", AsNode: "reply", Values: json.RawMessage(`{"nope":["x"]}`)})
			return err
		}},
		{"update without values", runs.ErrInvalid, func() error {
			_, err := e.svc.UpdateState(ctx, th, runs.UpdateStateRequest{Graph: "chat", AsNode: "reply"})
			return err
		}},
		{"fork with metadata not an object", runs.ErrInvalid, func() error {
			_, err := e.svc.Fork(ctx, th, runs.ForkRequest{ThreadID: th + "-f4", Metadata: json.RawMessage(`"x"`)})
			return err
		}},
		{"fork onto an existing thread", runs.ErrConflict, func() error {
			_, err := e.svc.Fork(ctx, th, runs.ForkRequest{ThreadID: th})
			return err
		}},
		{"thread with metadata not an object", runs.ErrInvalid, func() error {
			_, _, err := e.svc.CreateThread(ctx, runs.CreateThreadRequest{ThreadID: th + "-m", Metadata: json.RawMessage(`[1]`)})
			return err
		}},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			err := tc.do()
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			after, gerr := e.svc.GetThread(ctx, th)
			if gerr != nil {
				t.Fatal(gerr)
			}
			if after.Version != before.Version || after.Active != "" || len(after.Queue) > 0 {
				t.Errorf("a refused request changed the thread: version %d -> %d, active %q, queue %v", before.Version, after.Version, after.Active, after.Queue)
			}
			if n := countRuns(); n != nruns {
				t.Errorf("a refused request stored a run: %d runs, had %d", n, nruns)
			}
			for _, id := range []string{th + "-f1", th + "-f2", th + "-f3", th + "-f4", th + "-m"} {
				if _, err := e.svc.GetThread(ctx, id); !errors.Is(err, runs.ErrNotFound) {
					t.Errorf("a refused request created thread %s", id)
				}
			}
		})
	}
}

// testDelete: deleting a thread deletes its runs with their checkpoints,
// task results and events, and only them; it is refused, with nothing
// changed, while a run of the thread is active or a fork of it exists; a
// thread whose deletion began takes no run, and deleting it again finishes.
func testDelete(t *testing.T, e *tenv) {
	ctx := t.Context()
	th := e.thread(t)
	busy, err := e.run(ctx, th, "block", "")
	if err != nil {
		t.Fatal(err)
	}
	e.waitInside(t)
	if err := e.svc.DeleteThread(ctx, th); !errors.Is(err, runs.ErrInvalidState) || !strings.Contains(err.Error(), busy.ID) {
		t.Errorf("delete with an active run: %v, want ErrInvalidState naming %s", err, busy.ID)
	}
	e.open()
	e.idle(t)
	r2 := e.mustRun(t, th, "again")
	mine := []string{busy.ID, r2.ID}
	// A run that is not the thread's but shares its id as context stays.
	other, _, err := e.svc.Create(ctx, "chat", runs.CreateRequest{ContextID: th, Input: json.RawMessage(`{"messages":["other"]}`)})
	if err != nil {
		t.Fatal(err)
	}
	e.idle(t)
	// A task result recorded for a step that never committed goes too.
	last := e.get(t, r2.ID)
	if _, err := e.svc.Checkpoints.RecordTask(ctx, r2.ID, last.Step+1, pregel.TaskResult{TaskID: "stray", Node: "reply", Status: pregel.NodeCompleted}); err != nil {
		t.Fatal(err)
	}
	var events runs.EventLog
	if el, ok := e.svc.Runs.(runs.EventLog); ok {
		events = el
		if _, err := el.AppendEvents(ctx, r2.ID, []pregel.Event{{Type: pregel.EventRunStarted, RunID: r2.ID, Time: time.Now()}}); err != nil {
			t.Fatal(err)
		}
	}

	// A fork keeps its source.
	fork, err := e.svc.Fork(ctx, th, runs.ForkRequest{ThreadID: th + "-fork"})
	if err != nil {
		t.Fatal(err)
	}
	forkRun := e.mustRun(t, fork.ID, "forked")
	before, err := e.svc.GetThread(ctx, th)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.svc.DeleteThread(ctx, th); !errors.Is(err, runs.ErrInvalidState) || !strings.Contains(err.Error(), fork.ID) {
		t.Fatalf("delete with a fork: %v, want ErrInvalidState naming %s", err, fork.ID)
	}
	if after, err := e.svc.GetThread(ctx, th); err != nil || after.Version != before.Version {
		t.Errorf("a refused delete changed the thread: version %d -> %d (%v)", before.Version, after.Version, err)
	}
	for _, id := range mine {
		if _, err := e.svc.Get(ctx, id); err != nil {
			t.Errorf("a refused delete deleted run %s: %v", id, err)
		}
	}
	if err := e.svc.DeleteThread(ctx, fork.ID); err != nil {
		t.Fatalf("delete the fork: %v", err)
	}
	if _, err := e.svc.Get(ctx, forkRun.ID); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("the fork's run after its deletion: %v, want ErrNotFound", err)
	}
	if src, err := e.svc.GetThread(ctx, th); err != nil || slices.Contains(src.Forks, fork.ID) {
		t.Errorf("the source still lists the deleted fork: %+v %v", src, err)
	}
	if got := e.messages(t, th); len(got) != 6 {
		t.Errorf("deleting the fork changed its source: %v", got)
	}

	// A deletion cut short: runs cannot take the thread; deleting again
	// finishes.
	if _, err := runs.MutateThread(ctx, e.svc.Threads, th, func(t *runs.Thread) error { t.Deleting = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := e.run(ctx, th, "late", runs.StrategyEnqueue); !errors.Is(err, runs.ErrInvalidState) {
		t.Errorf("a run on a thread being deleted: %v, want ErrInvalidState", err)
	}
	if err := e.svc.DeleteThread(ctx, th); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := e.svc.GetThread(ctx, th); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("thread after its deletion: %v, want ErrNotFound", err)
	}
	if err := e.svc.DeleteThread(ctx, th); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("deleting a deleted thread: %v, want ErrNotFound", err)
	}
	for _, id := range mine {
		if _, err := e.svc.Runs.GetRun(ctx, id); !errors.Is(err, runs.ErrNotFound) {
			t.Errorf("run %s after its thread's deletion: %v, want ErrNotFound", id, err)
		}
		if _, err := e.svc.Checkpoints.Load(ctx, id, pregel.Latest); !errors.Is(err, pregel.ErrNotFound) {
			t.Errorf("checkpoints of run %s after its thread's deletion: %v, want ErrNotFound", id, err)
		}
	}
	if p, err := e.svc.Checkpoints.PendingTasks(ctx, r2.ID, last.Step+1); err != nil && !errors.Is(err, pregel.ErrNotFound) || len(p) > 0 {
		t.Errorf("task results of a deleted run: %v %v", p, err)
	}
	if events != nil {
		if p, err := events.EventsSince(ctx, r2.ID, 0, 0); err != nil || len(p.Events) > 0 {
			t.Errorf("events of a deleted run: %d, %v", len(p.Events), err)
		}
	}
	if r, err := e.svc.Get(ctx, other.ID); err != nil || r.Status != pregel.RunCompleted {
		t.Errorf("a run that shared the thread's id as context: %+v %v, want it kept", r, err)
	}
	if _, err := e.svc.Checkpoints.Load(ctx, other.ID, pregel.Latest); err != nil {
		t.Errorf("checkpoints of a run that shared the thread's id as context: %v, want kept", err)
	}
	// The id can name a new thread, which starts empty.
	if _, created, err := e.svc.CreateThread(ctx, runs.CreateThreadRequest{ThreadID: th}); err != nil || !created {
		t.Fatalf("create the thread again: %v %v", created, err)
	}
	if got := e.messages(t, th); len(got) != 0 {
		t.Errorf("a new thread of a deleted one's id has state %v", got)
	}
}

// testLostHandOff: a thread still held by a run that ended, whose hand-off
// never happened (the executor failed and nothing called RunStopped
// again), is passed on by the next create: a run that has ended holds no
// thread, so the create does not wait for the claim to go stale.
func testLostHandOff(t *testing.T, e *tenv) {
	e.open()
	ctx := t.Context()
	th := e.thread(t)
	first := e.mustRun(t, th, "hello")
	// The hand-off undone: the thread names the ended run again.
	if _, err := runs.MutateThread(ctx, e.svc.Threads, th, func(t *runs.Thread) error {
		t.Active, t.Head = first.ID, first.Base
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	second, err := e.run(ctx, th, "again", "")
	if err != nil {
		t.Fatalf("create on a thread held by a run that ended: %v, want the thread passed on", err)
	}
	e.idle(t)
	if r := e.get(t, second.ID); r.Status != pregel.RunCompleted || r.Base == nil || r.Base.RunID != first.ID {
		t.Errorf("run after the repair: %s from %v, want completed from %s", r.Status, r.Base, first.ID)
	}
	if got, want := e.messages(t, th), []string{"hello", "re:hello", "done", "again", "re:again", "done"}; !slices.Equal(got, want) {
		t.Errorf("state after the repair: %v, want %v", got, want)
	}
}

// cutRuns is a run store whose next update of one run fails, as when the
// process is killed (or the store call fails) between two writes.
type cutRuns struct {
	runs.Store
	mu  sync.Mutex
	cut string
}

var errCut = errors.New("cut short")

func (c *cutRuns) arm(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = id
}

// UpdateRun implements runs.Store.
func (c *cutRuns) UpdateRun(ctx context.Context, r runs.Run) (runs.Run, error) {
	c.mu.Lock()
	cut := c.cut != "" && c.cut == r.ID
	if cut {
		c.cut = ""
	}
	c.mu.Unlock()
	if cut {
		return runs.Run{}, errCut
	}
	return c.Store.UpdateRun(ctx, r)
}

// testCancelCutShort: a cancel of a queued run cut short between its two
// writes (the thread's queue, then the run's record) leaves the run
// pending on no thread; asking again ends it, cancelled, and the thread
// goes on without it (issue 22: queued runs left pending for ever after
// their cancel was asked).
func testCancelCutShort(t *testing.T, e *tenv, cut *cutRuns) {
	ctx := t.Context()
	th := e.thread(t)
	first, err := e.run(ctx, th, "block", "")
	if err != nil {
		t.Fatal(err)
	}
	queued, err := e.run(ctx, th, "gone", runs.StrategyEnqueue)
	if err != nil {
		t.Fatal(err)
	}
	last, err := e.run(ctx, th, "last", runs.StrategyEnqueue)
	if err != nil {
		t.Fatal(err)
	}
	cut.arm(queued.ID)
	if _, err := e.svc.Cancel(ctx, queued.ID); !errors.Is(err, errCut) {
		t.Fatalf("cancel cut short: %v, want the cut", err)
	}
	r, err := e.svc.Cancel(ctx, queued.ID)
	if err != nil {
		t.Fatalf("cancel asked again: %v", err)
	}
	if r = e.get(t, queued.ID); r.Status != pregel.RunCancelled {
		t.Fatalf("queued run is %s (cancel requested %v) after its cancel was asked again; it is on no thread, so nothing else ends it", r.Status, r.CancelRequested)
	}
	e.open()
	e.idle(t)
	for _, id := range []string{first.ID, last.ID} {
		if r := e.get(t, id); r.Status != pregel.RunCompleted {
			t.Errorf("run %s is %s, want completed", id, r.Status)
		}
	}
	if got, want := e.messages(t, th), []string{"block", "re:block", "done", "last", "re:last", "done"}; !slices.Equal(got, want) {
		t.Errorf("thread after the cut cancel: %v, want %v", got, want)
	}
}

// threadHistoryPaged reads a thread's whole history in pages of limit,
// as run/step names.
func threadHistoryPaged(t *testing.T, e *tenv, th string, limit int) []string {
	t.Helper()
	var got []string
	f := runs.ThreadHistoryFilter{Limit: limit}
	for range 1000 {
		page, err := e.svc.ThreadHistoryPage(t.Context(), th, f)
		if err != nil {
			t.Fatalf("history page of %d (token %q): %v", limit, f.PageToken, err)
		}
		if len(page.Steps) > limit || (page.NextPageToken != "" && len(page.Steps) != limit) {
			t.Fatalf("history page of %d: %d steps, token %q", limit, len(page.Steps), page.NextPageToken)
		}
		for _, s := range page.Steps {
			got = append(got, fmt.Sprintf("%s/%d", s.RunID, s.Step))
		}
		if f.PageToken = page.NextPageToken; f.PageToken == "" {
			return got
		}
	}
	t.Fatalf("history pages of %d never end", limit)
	return nil
}

// testRunIDIdempotent: a client that names its run (run_id) may ask
// again after a lost answer: the same request returns the run it created
// (created false: nothing done twice, its writes in the thread once), a
// different request under that id is a conflict that says so, and an id
// that is not valid is refused with what is allowed. With strategy
// reject, a refused create stored nothing: asking again is refused again.
func testRunIDIdempotent(t *testing.T, e *tenv, st runs.Strategy) {
	ctx := t.Context()
	th := e.thread(t)
	first, err := e.run(ctx, th, "block", "")
	if err != nil {
		t.Fatal(err)
	}
	e.waitInside(t)
	id := uniq(t) + "-two"
	req := runs.ThreadRunRequest{Graph: "chat", RunID: id, Input: json.RawMessage(`{"messages":["two"]}`), Strategy: st}
	r1, created1, err1 := e.svc.CreateOnThread(ctx, th, req)
	r2, created2, err2 := e.svc.CreateOnThread(ctx, th, req)
	if st == runs.StrategyReject {
		var busy *runs.BusyError
		if !errors.As(err1, &busy) || !errors.As(err2, &busy) {
			t.Fatalf("reject on a busy thread, twice: %v, %v; want BusyErrors", err1, err2)
		}
		if _, err := e.svc.Get(ctx, id); !errors.Is(err, runs.ErrNotFound) {
			t.Errorf("a refused run was stored: %v", err)
		}
	} else {
		if err1 != nil || err2 != nil {
			t.Fatalf("create, then the same again: %v, %v", err1, err2)
		}
		if !created1 || created2 || r1.ID != id || r2.ID != id {
			t.Errorf("create, then the same again: created %v (run %s), %v (run %s); want true, false, both %s", created1, r1.ID, created2, r2.ID, id)
		}
	}
	for _, tc := range []struct {
		name   string
		thread string
		req    runs.ThreadRunRequest
		want   error
		says   string
	}{
		{"other input", th, runs.ThreadRunRequest{Graph: "chat", RunID: id, Input: json.RawMessage(`{"messages":["three"]}`), Strategy: st}, runs.ErrConflict, "already exists with a different"},
		{"invalid id", th, runs.ThreadRunRequest{Graph: "chat", RunID: "-no", Input: json.RawMessage(`{"messages":["x"]}`), Strategy: st}, runs.ErrInvalid, "letters, digits"},
		{"too long id", th, runs.ThreadRunRequest{Graph: "chat", RunID: strings.Repeat("a", 129), Input: json.RawMessage(`{"messages":["x"]}`), Strategy: st}, runs.ErrInvalid, "1 to 128"},
	} {
		if st == runs.StrategyReject && tc.want == runs.ErrConflict {
			continue // nothing stored under the id
		}
		_, _, err := e.svc.CreateOnThread(ctx, tc.thread, tc.req)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want %v saying %q", tc.name, err, tc.want, tc.says)
		}
	}
	e.open()
	e.idle(t)
	// A create asked again after its run ended: the same run, as it ended.
	if st != runs.StrategyReject {
		r3, created3, err := e.svc.CreateOnThread(ctx, th, req)
		if err != nil || created3 || r3.ID != id || r3.Status != pregel.RunCompleted {
			t.Errorf("the same create after the run ended: %s %s created %v, %v; want %s completed, not created", r3.ID, r3.Status, created3, err, id)
		}
		e.idle(t)
	}
	var want []string
	switch st {
	case runs.StrategyReject:
		want = []string{"block", "re:block", "done"}
	case runs.StrategyEnqueue:
		want = []string{"block", "re:block", "done", "two", "re:two", "done"}
	case runs.StrategyInterrupt:
		want = []string{"block", "re:block", "two", "re:two", "done"}
	case runs.StrategyRollback:
		want = []string{"two", "re:two", "done"}
	}
	if got := e.messages(t, th); !slices.Equal(got, want) {
		t.Errorf("%s asked twice: thread state = %v, want %v (its writes once)", st, got, want)
	}
	page, err := e.svc.ThreadRuns(ctx, th, runs.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if wantRuns := 1 + b2i(st != runs.StrategyReject); len(page.Runs) != wantRuns {
		t.Errorf("%d runs on the thread, want %d (first %s)", len(page.Runs), wantRuns, first.ID)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// testRunIDConcurrent: n clients asking at once for the same named run,
// on a thread and off one: one creates it, the others get it; it runs
// once.
func testRunIDConcurrent(t *testing.T, e *tenv, n int) {
	e.open()
	ctx := t.Context()
	th := e.thread(t)
	p := uniq(t)
	type answer struct {
		id      string
		created bool
		err     error
	}
	ask := func(create func() (runs.Run, bool, error)) []answer {
		out := make([]answer, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				r, c, err := create()
				out[i] = answer{r.ID, c, err}
			})
		}
		wg.Wait()
		return out
	}
	check := func(what, id string, as []answer) {
		created := 0
		for _, a := range as {
			if a.err != nil {
				t.Errorf("%s: %v", what, a.err)
				continue
			}
			if a.id != id {
				t.Errorf("%s: run %s, want %s", what, a.id, id)
			}
			if a.created {
				created++
			}
		}
		if created != 1 {
			t.Errorf("%s: %d of %d answers say created, want 1", what, created, n)
		}
	}
	onThread := p + "-on"
	check("on a thread", onThread, ask(func() (runs.Run, bool, error) {
		return e.svc.CreateOnThread(ctx, th, runs.ThreadRunRequest{Graph: "chat", RunID: onThread, Input: json.RawMessage(`{"messages":["x"]}`), Strategy: runs.StrategyEnqueue})
	}))
	alone := p + "-alone"
	check("off threads", alone, ask(func() (runs.Run, bool, error) {
		return e.svc.Create(ctx, "chat", runs.CreateRequest{RunID: alone, Input: json.RawMessage(`{"messages":["y"]}`)})
	}))
	e.idle(t)
	if got, want := e.messages(t, th), []string{"x", "re:x", "done"}; !slices.Equal(got, want) {
		t.Errorf("thread after %d creates of one run: %v, want %v", n, got, want)
	}
	if r := e.get(t, onThread); r.Status != pregel.RunCompleted {
		t.Errorf("run %s is %s, want completed", onThread, r.Status)
	}
	r := e.get(t, alone)
	if r.Status != pregel.RunCompleted {
		t.Errorf("run %s is %s, want completed", alone, r.Status)
	}
	cp, err := e.svc.Checkpoint(ctx, alone, pregel.Latest)
	if err != nil {
		t.Fatal(err)
	}
	if got := decodeMessages(t, cp.Values); !slices.Equal(got, []string{"y", "re:y", "done"}) {
		t.Errorf("run %s created by %d clients at once: %v, want it run once", alone, n, got)
	}
}

// testClaimCut: a create cut between its two writes (the thread's claim,
// then the run's record), as when the server is killed there, asked
// again with the same run id: the run is stored and does what its
// strategy promises (an interrupt or rollback supersedes the active run),
// as if the first request had finished. (A dev server started again
// drops such a claim first: Service.RecoverClaims; the serverless api
// does not, so the retry finds it.)
func testClaimCut(t *testing.T, e *tenv, st runs.Strategy) {
	ctx := t.Context()
	th := e.thread(t)
	first, err := e.run(ctx, th, "block", "")
	if err != nil {
		t.Fatal(err)
	}
	e.waitInside(t)
	id := uniq(t) + "-two"
	// The first request's claim, and nothing after it.
	if _, err := runs.MutateThread(ctx, e.svc.Threads, th, func(t *runs.Thread) error {
		next, _, err := runs.HandOff(*t, runs.HandOffEvent{Kind: runs.HandOffClaim, Run: id, Strategy: st})
		*t = next
		return err
	}); err != nil {
		t.Fatal(err)
	}
	r, created, err := e.svc.CreateOnThread(ctx, th, runs.ThreadRunRequest{Graph: "chat", RunID: id, Input: json.RawMessage(`{"messages":["two"]}`), Strategy: st})
	if err != nil || !created || r.ID != id {
		t.Fatalf("create asked again after a cut claim: %s created %v, %v; want %s created", r.ID, created, err, id)
	}
	if st == runs.StrategyRollback {
		e.waitStatus(t, first.ID, pregel.RunCancelled) // its cancel stops the blocked node
	}
	e.open()
	e.idle(t)
	want := map[runs.Strategy][]string{
		runs.StrategyEnqueue:   {"block", "re:block", "done", "two", "re:two", "done"},
		runs.StrategyInterrupt: {"block", "re:block", "two", "re:two", "done"},
		runs.StrategyRollback:  {"two", "re:two", "done"},
	}[st]
	if got := e.messages(t, th); !slices.Equal(got, want) {
		t.Errorf("%s asked again after a cut claim: thread state = %v, want %v", st, got, want)
	}
	if r := e.get(t, id); r.Status != pregel.RunCompleted {
		t.Errorf("run %s is %s, want completed", id, r.Status)
	}
	if st != runs.StrategyEnqueue {
		if r1 := e.get(t, first.ID); r1.SupersededBy != id {
			t.Errorf("%s: first run superseded by %q, want %s", st, r1.SupersededBy, id)
		}
	}
}

// stallRuns is a run store whose next creation of one run's record waits
// until released: a creator stalled between claiming its thread and
// storing its run.
type stallRuns struct {
	runs.Store
	mu               sync.Mutex
	id               string
	reached, release chan struct{}
}

// arm stalls the next CreateRun of run id: reached is closed when it
// starts waiting, closing release lets it go on.
func (s *stallRuns) arm(id string) (reached, release chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.id, s.reached, s.release = id, make(chan struct{}), make(chan struct{})
	return s.reached, s.release
}

// CreateRun implements runs.Store.
func (s *stallRuns) CreateRun(ctx context.Context, r runs.Run) (runs.Run, bool, error) {
	s.mu.Lock()
	stall := s.id != "" && s.id == r.ID
	reached, release := s.reached, s.release
	if stall {
		s.id = ""
	}
	s.mu.Unlock()
	if stall {
		close(reached)
		select {
		case <-release:
		case <-ctx.Done():
			return runs.Run{}, false, ctx.Err()
		}
	}
	return s.Store.CreateRun(ctx, r)
}

// testStalledCreator: a creator that stalls for over StaleClaim between
// claiming its thread and storing its run loses its claim to the next
// create (dropStaleClaim), and must then neither store nor start its run:
// it gets a conflict, the run is recorded cancelled, never executes, and
// the thread has one active run at a time (issue 22: a stalled creator
// stored its run after its claim was dropped and started it beside the
// thread's new active run).
func testStalledCreator(t *testing.T, e *tenv, stall *stallRuns) {
	e.open()
	ctx := t.Context()
	th := e.thread(t)
	e.mustRun(t, th, "hello")
	id := uniq(t) + "stalled"
	reached, release := stall.arm(id)
	type result struct {
		r   runs.Run
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, _, err := e.svc.CreateOnThread(ctx, th, runs.ThreadRunRequest{Graph: "chat", RunID: id, Input: json.RawMessage(`{"messages":["stalled"]}`)})
		done <- result{r, err}
	}()
	select {
	case <-reached:
	case <-time.After(30 * time.Second):
		t.Fatal("the stalled create never reached storing its run")
	}
	if got, err := e.svc.Threads.GetThread(ctx, th); err != nil || got.Active != id {
		t.Fatalf("thread before the stall ends: active %q (%v), want the stalled run %s", got.Active, err, id)
	}
	// The creator stalls past StaleClaim: the next create drops its claim.
	e.skew.Store(int64(runs.StaleClaim + time.Minute))
	second, err := e.run(ctx, th, "second", "")
	if err != nil {
		t.Fatalf("create on a thread whose claim is stale: %v, want the claim dropped", err)
	}
	close(release)
	var res result
	select {
	case res = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the stalled create did not return after its store call went on")
	}
	if !errors.Is(res.err, runs.ErrConflict) {
		t.Errorf("stalled create after its claim was dropped: run %q %s, err %v; want a conflict (the thread went on without it)", res.r.ID, res.r.Status, res.err)
	}
	e.idle(t)
	if r := e.get(t, id); r.Status != pregel.RunCancelled {
		t.Errorf("stalled run is %s, want cancelled: its claim was dropped", r.Status)
	}
	if _, err := e.svc.Checkpoints.Load(ctx, id, 0); !errors.Is(err, pregel.ErrNotFound) {
		t.Errorf("stalled run's step 0: %v, want none: a run whose claim was dropped must not start", err)
	}
	if r := e.get(t, second.ID); r.Status != pregel.RunCompleted {
		t.Errorf("run after the drop is %s, want completed", r.Status)
	}
	if got, want := e.messages(t, th), []string{"hello", "re:hello", "done", "second", "re:second", "done"}; !slices.Equal(got, want) {
		t.Errorf("thread after the stalled create: %v, want %v", got, want)
	}
	if got, err := e.svc.Threads.GetThread(ctx, th); err != nil || got.Active != "" || len(got.Queue) > 0 {
		t.Errorf("thread after the runs: active %q, queue %v (%v), want idle", got.Active, got.Queue, err)
	}
	// Its retry gets the same answer: the run id stays taken, cancelled.
	if _, _, err := e.svc.CreateOnThread(ctx, th, runs.ThreadRunRequest{Graph: "chat", RunID: id, Input: json.RawMessage(`{"messages":["stalled"]}`)}); !errors.Is(err, runs.ErrConflict) {
		t.Errorf("retry of the stalled create: %v, want a conflict", err)
	}
}

// stallSeed stalls the commit of one run's step 0, the step a thread run
// is started from (Service.start), until the test releases it.
type stallSeed struct {
	pregel.Checkpointer
	mu               sync.Mutex
	id               string
	reached, release chan struct{}
}

// stallSeeder is a stallSeed over a store that seeds step 0 from its base
// (runs.Seeder), which the Service uses when it can.
type stallSeeder struct {
	*stallSeed
	seeder runs.Seeder
}

// CommitFrom implements runs.Seeder.
func (s stallSeeder) CommitFrom(ctx context.Context, cp *pregel.Checkpoint, base runs.StepRef) error {
	if err := s.wait(ctx, cp); err != nil {
		return err
	}
	return s.seeder.CommitFrom(ctx, cp, base)
}

// wrap returns the store to give the Service: s over cp, a runs.Seeder if
// cp is one.
func (s *stallSeed) wrap(cp pregel.Checkpointer) pregel.Checkpointer {
	s.Checkpointer = cp
	if sd, ok := cp.(runs.Seeder); ok {
		return stallSeeder{s, sd}
	}
	return s
}

// arm stalls the next commit of run id's step 0: reached is closed when it
// starts waiting, closing release lets it go on.
func (s *stallSeed) arm(id string) (reached, release chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.id, s.reached, s.release = id, make(chan struct{}), make(chan struct{})
	return s.reached, s.release
}

func (s *stallSeed) wait(ctx context.Context, cp *pregel.Checkpoint) error {
	s.mu.Lock()
	stall := s.id != "" && s.id == cp.RunID && cp.Step == 0
	reached, release := s.reached, s.release
	if stall {
		s.id = ""
	}
	s.mu.Unlock()
	if !stall {
		return nil
	}
	close(reached)
	select {
	case <-release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Commit implements pregel.Checkpointer.
func (s *stallSeed) Commit(ctx context.Context, cp *pregel.Checkpoint) error {
	if err := s.wait(ctx, cp); err != nil {
		return err
	}
	return s.Checkpointer.Commit(ctx, cp)
}

// testCancelRacesStart: a client cancels a run that its thread's hand-off
// made active while the hand-off is starting it, between the starter's
// check that the run is pending and its commit of the run's step 0. The
// cancel ends the never-started run itself (Cancel, startIfActive) and
// passes the thread on; the starter then commits step 0 anyway. The run's
// record and its thread must agree: its step 0 (its input, which its
// values show) is in the thread, or it has none (issue 22, found by the
// dev SIGKILL linearizability run: a cancelled run superseded by an
// interrupt, "kept" with one write, whose write no read of its thread
// ever showed).
func testCancelRacesStart(t *testing.T, e *tenv, stall *stallSeed) {
	e.open()
	ctx := t.Context()
	th := e.thread(t)
	e.mustRun(t, th, "hello")
	// a waits at its interrupt, holding the thread; b queues behind it.
	a, err := e.run(ctx, th, "ask-a", runs.StrategyEnqueue)
	if err != nil {
		t.Fatal(err)
	}
	e.waitStatus(t, a.ID, pregel.RunInterrupted)
	b := uniq(t) + "b"
	if _, _, err := e.svc.CreateOnThread(ctx, th, runs.ThreadRunRequest{Graph: "chat", RunID: b, Input: json.RawMessage(`{"messages":["b"]}`), Strategy: runs.StrategyEnqueue}); err != nil {
		t.Fatal(err)
	}
	// a's cancel passes the thread on to b and starts it; the start
	// stalls before it commits b's step 0.
	reached, release := stall.arm(b)
	done := make(chan error, 1)
	go func() {
		_, err := e.svc.Cancel(ctx, a.ID)
		done <- err
	}()
	select {
	case <-reached:
	case err := <-done:
		t.Fatalf("a's cancel returned (%v) without starting b", err)
	case <-time.After(30 * time.Second):
		t.Fatal("b's start never reached committing its step 0")
	}
	// b is cancelled meanwhile: active, never started.
	if _, err := e.svc.Cancel(ctx, b); err != nil {
		t.Fatalf("cancel b: %v", err)
	}
	close(release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("cancel a: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a's cancel did not return after b's step 0 went on")
	}
	e.idle(t)
	rb := e.waitStatus(t, b, pregel.RunCancelled, pregel.RunCompleted, pregel.RunFailed)
	if rb.Status != pregel.RunCancelled || rb.Discarded {
		t.Errorf("b is %s (discarded %v), want cancelled: a client cancelled it", rb.Status, rb.Discarded)
	}
	msgs := e.messages(t, th)
	var own []string // b's messages, as its values show them
	switch cp, err := e.svc.Checkpoint(ctx, b, pregel.Latest); {
	case errors.Is(err, runs.ErrNotFound) || errors.Is(err, pregel.ErrNotFound):
	case err != nil:
		t.Fatal(err)
	default:
		if raw, ok := cp.Values["messages"]; ok {
			if err := json.Unmarshal(raw, &own); err != nil {
				t.Fatal(err)
			}
		}
	}
	if shows, inThread := slices.Contains(own, "b"), slices.Contains(msgs, "b"); shows != inThread {
		t.Errorf("b is cancelled, not discarded; its values %v (its step 0 committed: %v) and its thread %v disagree: a run's writes are in its thread, or its record says they were discarded", own, shows, msgs)
	}
	if got, want := msgs[:4], []string{"hello", "re:hello", "done", "ask-a"}; !slices.Equal(got, want) {
		t.Errorf("thread %v, want it to start with %v", msgs, want)
	}
	if got, err := e.svc.Threads.GetThread(ctx, th); err != nil || got.Active != "" || len(got.Queue) > 0 {
		t.Errorf("thread after the runs: active %q, queue %v (%v), want idle", got.Active, got.Queue, err)
	}
	// The thread goes on from where it is.
	e.mustRun(t, th, "after")
	if got := e.messages(t, th); !slices.Equal(got[len(got)-3:], []string{"after", "re:after", "done"}) {
		t.Errorf("thread after one more run: %v", got)
	}
}
