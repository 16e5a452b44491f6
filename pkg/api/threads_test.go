package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/embedded"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// newThreadEnv serves the API over the embedded Scheduler with threads.
func newThreadEnv(t *testing.T) *env {
	t.Helper()
	reg, err := runs.NewRegistry(echoGraph(t), askGraph(t))
	if err != nil {
		t.Fatal(err)
	}
	store, cps := runs.NewMemoryStore(), pregel.NewMemoryStore()
	svc := &runs.Service{Graphs: reg, Runs: store, Checkpoints: cps, Threads: store, Logger: testLogger(t)}
	sched := embedded.NewScheduler(embedded.SchedulerConfig{Graphs: reg, Runs: store, Checkpoints: cps, Logger: testLogger(t), OnStop: svc.RunStopped, StartThreadRun: svc.StartThreadRun})
	svc.Dispatcher = sched
	if err := sched.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	e := startEnv(t, svc, cps)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := sched.Shutdown(ctx, 100*time.Millisecond); err != nil {
			t.Error(err)
		}
	})
	return e
}

func (e *env) threadState(id string) (runs.ThreadState, echoState) {
	e.t.Helper()
	var st runs.ThreadState
	e.do("GET", "/v1/threads/"+id+"/state", nil).ok(e.t, http.StatusOK, &st)
	var s echoState
	raw, _ := json.Marshal(st.Values)
	if err := json.Unmarshal(raw, &s); err != nil {
		e.t.Fatal(err)
	}
	return st, s
}

func TestThreadConversation(t *testing.T) {
	e := newThreadEnv(t)
	var th api.Thread
	e.do("POST", "/v1/threads", map[string]any{"thread_id": "chat-1", "metadata": map[string]string{"user": "ada"}}).ok(t, http.StatusCreated, &th)
	if th.ThreadID != "chat-1" || th.Status != "idle" || string(th.Metadata) != `{"user":"ada"}` {
		t.Fatalf("created %+v", th)
	}
	e.do("POST", "/v1/threads", map[string]any{"thread_id": "chat-1", "metadata": map[string]string{"user": "ada"}}).ok(t, http.StatusOK, &th)

	var r1, r2 api.Run
	e.do("POST", "/v1/threads/chat-1/runs", map[string]any{"graph": "echo", "input": map[string]string{"text": "hi"}}).ok(t, http.StatusAccepted, &r1)
	if r1.ThreadID != "chat-1" {
		t.Errorf("run's thread_id = %q", r1.ThreadID)
	}
	e.await(r1.RunID, pregel.RunCompleted)
	e.do("POST", "/v1/threads/chat-1/runs", map[string]any{"graph": "echo", "input": map[string]string{"text": "yo"}}).ok(t, http.StatusAccepted, &r2)
	e.await(r2.RunID, pregel.RunCompleted)

	st, s := e.threadState("chat-1")
	if s.Text != "YO!" || !slices.Equal(s.Trail, []string{"upper", "exclaim", "upper", "exclaim"}) {
		t.Errorf("thread state %+v: want text YO! and the trail of both runs", s)
	}
	if st.RunID != r2.RunID || st.Step != 2 {
		t.Errorf("state at %s/%d, want %s/2", st.RunID, st.Step, r2.RunID)
	}
	var h api.ThreadHistory
	e.do("GET", "/v1/threads/chat-1/history", nil).ok(t, http.StatusOK, &h)
	if len(h.Steps) != 6 || h.Steps[0].RunID != r2.RunID || h.Steps[0].Step != 2 || h.Steps[5].RunID != r1.RunID || h.Steps[5].Step != 0 {
		t.Errorf("history has %d steps, want 6 newest first: %+v", len(h.Steps), h.Steps)
	}
	// In pages of 4: the same steps, the second page after the token.
	var p1, p2 api.ThreadHistory
	e.do("GET", "/v1/threads/chat-1/history?limit=4", nil).ok(t, http.StatusOK, &p1)
	if p1.NextPageToken == "" {
		t.Fatalf("first page of 4 of 6 steps has no next_page_token")
	}
	e.do("GET", "/v1/threads/chat-1/history?limit=4&page_token="+url.QueryEscape(p1.NextPageToken), nil).ok(t, http.StatusOK, &p2)
	if paged := append(p1.Steps, p2.Steps...); len(p1.Steps) != 4 || len(p2.Steps) != 2 || p2.NextPageToken != "" || fmt.Sprint(stepNames(paged)) != fmt.Sprint(stepNames(h.Steps)) {
		t.Errorf("history in pages of 4: %v then %v (token %q), want %v", stepNames(p1.Steps), stepNames(p2.Steps), p2.NextPageToken, stepNames(h.Steps))
	}
	var list api.RunList
	e.do("GET", "/v1/threads/chat-1/runs", nil).ok(t, http.StatusOK, &list)
	if len(list.Runs) != 2 || list.Runs[0].RunID != r2.RunID {
		t.Errorf("thread runs %+v, want both, newest first", list.Runs)
	}
	var threads api.ThreadList
	e.do("GET", "/v1/threads?limit=10", nil).ok(t, http.StatusOK, &threads)
	if len(threads.Threads) != 1 || threads.Threads[0].ThreadID != "chat-1" {
		t.Errorf("threads %+v", threads.Threads)
	}

	// Fork at the end of the first run and update its state as a node.
	var fork api.Thread
	e.do("POST", "/v1/threads/chat-1/fork", map[string]any{"run_id": r1.RunID, "step": 2, "thread_id": "chat-1b"}).ok(t, http.StatusCreated, &fork)
	if fork.Head == nil || fork.Head.RunID != r1.RunID || fork.Head.Step != 2 {
		t.Errorf("fork head %+v", fork.Head)
	}
	var upd runs.ThreadState
	e.do("POST", "/v1/threads/chat-1b/state", map[string]any{"graph": "echo", "as_node": "upper", "values": map[string]any{"trail": []string{"edited"}}}).ok(t, http.StatusOK, &upd)
	if _, s := e.threadState("chat-1b"); !slices.Equal(s.Trail, []string{"upper", "exclaim", "edited"}) || s.Text != "HI!" {
		t.Errorf("fork after update: %+v", s)
	}
	if _, s := e.threadState("chat-1"); len(s.Trail) != 4 {
		t.Errorf("the source of the fork changed: %+v", s)
	}

	e.do("DELETE", "/v1/threads/chat-1b", nil)
	e.do("GET", "/v1/threads/chat-1b", nil).problem(t, http.StatusNotFound, `"chat-1b" does not exist`)
}

func TestThreadBusy(t *testing.T) {
	e := newThreadEnv(t)
	e.do("POST", "/v1/threads", map[string]any{"thread_id": "t"}).ok(t, http.StatusCreated, nil)
	var ask api.Run
	e.do("POST", "/v1/threads/t/runs", map[string]any{"graph": "ask"}).ok(t, http.StatusAccepted, &ask)
	e.await(ask.RunID, pregel.RunInterrupted)

	// An interrupted run holds its thread.
	res := e.do("POST", "/v1/threads/t/runs", map[string]any{"graph": "echo", "input": map[string]string{"text": "x"}})
	res.problem(t, http.StatusConflict, ask.RunID, "enqueue")
	var busy api.BusyProblem
	if err := json.Unmarshal(res.body, &busy); err != nil || busy.ActiveRunID != ask.RunID {
		t.Errorf("409 names active run %q (%v), want %s", busy.ActiveRunID, err, ask.RunID)
	}
	var th api.Thread
	e.do("GET", "/v1/threads/t", nil).ok(t, http.StatusOK, &th)
	if th.Status != "busy" || th.ActiveRunID != ask.RunID {
		t.Errorf("thread %+v, want busy with %s", th, ask.RunID)
	}
	e.do("DELETE", "/v1/threads/t", nil).problem(t, http.StatusConflict, "cancel")

	var queued api.Run
	e.do("POST", "/v1/threads/t/runs", map[string]any{"graph": "echo", "input": map[string]string{"text": "x"}, "strategy": "enqueue"}).ok(t, http.StatusAccepted, &queued)
	if queued.Status != pregel.RunPending {
		t.Errorf("queued run is %s", queued.Status)
	}
	e.do("POST", "/v1/runs/"+ask.RunID+"/resume", map[string]any{"resume": "ada"}).ok(t, http.StatusAccepted, nil)
	e.await(ask.RunID, pregel.RunCompleted)
	e.await(queued.RunID, pregel.RunCompleted)
	if _, s := e.threadState("t"); s.Text != "X!" || !slices.Equal(s.Trail, []string{"ask", "upper", "exclaim"}) {
		t.Errorf("state after the queue ran: %+v", s)
	}

	// Rollback: the interrupted run is cancelled and its steps discarded.
	var ask2, rb api.Run
	e.do("POST", "/v1/threads/t/runs", map[string]any{"graph": "ask"}).ok(t, http.StatusAccepted, &ask2)
	e.await(ask2.RunID, pregel.RunInterrupted)
	e.do("POST", "/v1/threads/t/runs", map[string]any{"graph": "echo", "input": map[string]string{"text": "z"}, "strategy": "rollback"}).ok(t, http.StatusAccepted, &rb)
	e.await(rb.RunID, pregel.RunCompleted)
	if d := e.await(ask2.RunID, pregel.RunCancelled); d.Status != pregel.RunCancelled {
		t.Errorf("rolled back run is %s", d.Status)
	}
	if _, s := e.threadState("t"); !slices.Equal(s.Trail, []string{"ask", "upper", "exclaim", "upper", "exclaim"}) {
		t.Errorf("state after rollback: %+v", s)
	}
	var view api.Run
	e.do("GET", "/v1/runs/"+ask2.RunID, nil).ok(t, http.StatusOK, &view)
	if view.SupersededBy != rb.RunID || !view.Discarded {
		t.Errorf("rolled back run's view: superseded_by %q discarded %v; want %s, true", view.SupersededBy, view.Discarded, rb.RunID)
	}
	e.do("POST", "/v1/runs/"+ask2.RunID+"/resume", map[string]any{"resume": "ada"}).problem(t, http.StatusConflict, "superseded by run", rb.RunID)

	// Interrupt: the interrupted run ends for good (it would otherwise
	// look resumable forever), its steps kept, naming its successor.
	var ask3, in api.Run
	e.do("POST", "/v1/threads/t/runs", map[string]any{"graph": "ask"}).ok(t, http.StatusAccepted, &ask3)
	e.await(ask3.RunID, pregel.RunInterrupted)
	e.do("POST", "/v1/threads/t/runs", map[string]any{"graph": "echo", "input": map[string]string{"text": "w"}, "strategy": "interrupt"}).ok(t, http.StatusAccepted, &in)
	e.await(in.RunID, pregel.RunCompleted)
	view = api.Run{}
	e.do("GET", "/v1/runs/"+ask3.RunID, nil).ok(t, http.StatusOK, &view)
	if view.Status != pregel.RunCancelled || view.SupersededBy != in.RunID || view.Discarded || len(view.Interrupts) > 0 {
		t.Errorf("interrupted run superseded by interrupt: %s superseded_by %q discarded %v interrupts %v; want cancelled, %s, false, none", view.Status, view.SupersededBy, view.Discarded, view.Interrupts, in.RunID)
	}
	e.do("POST", "/v1/runs/"+ask3.RunID+"/resume", map[string]any{"resume": "ada"}).problem(t, http.StatusConflict, "superseded by run", in.RunID)
	if _, s := e.threadState("t"); !slices.Equal(s.Trail, []string{"ask", "upper", "exclaim", "upper", "exclaim", "upper", "exclaim"}) {
		t.Errorf("state after interrupt (the interrupted run had committed no write): %+v", s)
	}
}

func TestThreadBadInput(t *testing.T) {
	e := newThreadEnv(t)
	e.do("POST", "/v1/threads", map[string]any{"thread_id": "t"}).ok(t, http.StatusCreated, nil)
	var r api.Run
	e.do("POST", "/v1/threads/t/runs", map[string]any{"graph": "echo", "input": map[string]string{"text": "hi"}}).ok(t, http.StatusAccepted, &r)
	e.await(r.RunID, pregel.RunCompleted)
	var before api.Thread
	e.do("GET", "/v1/threads/t", nil).ok(t, http.StatusOK, &before)

	for _, tc := range []struct {
		name, method, path string
		body               any
		status             int
		want               []string
	}{
		{"unknown thread", "POST", "/v1/threads/nope/runs", map[string]any{"graph": "echo"}, 404, []string{`thread "nope" does not exist`}},
		{"invalid thread id", "POST", "/v1/threads/-bad/runs", map[string]any{"graph": "echo"}, 400, []string{"thread id", "letters, digits"}},
		{"invalid thread id on create", "POST", "/v1/threads", map[string]any{"thread_id": "a b"}, 400, []string{"thread id"}},
		{"unknown strategy", "POST", "/v1/threads/t/runs", map[string]any{"graph": "echo", "strategy": "later"}, 400, []string{`"later"`, "reject, enqueue, interrupt, rollback"}},
		{"missing graph", "POST", "/v1/threads/t/runs", map[string]any{"input": map[string]string{}}, 400, []string{"graph is missing", "echo"}},
		{"unknown graph", "POST", "/v1/threads/t/runs", map[string]any{"graph": "nope"}, 404, []string{`"nope" is not registered`}},
		{"unknown channel", "POST", "/v1/threads/t/runs", map[string]any{"graph": "echo", "input": map[string]int{"nope": 1}}, 400, []string{`"nope" is not a channel`}},
		{"unknown field", "POST", "/v1/threads/t/runs", map[string]any{"graph": "echo", "strategie": "enqueue"}, 400, []string{"strategie"}},
		{"fork of a missing step", "POST", "/v1/threads/t/fork", map[string]any{"run_id": r.RunID, "step": 9}, 404, []string{"no step 9"}},
		{"fork of an unknown run", "POST", "/v1/threads/t/fork", map[string]any{"run_id": "other"}, 404, []string{`"other"`}},
		{"update of an unknown node", "POST", "/v1/threads/t/state", map[string]any{"graph": "echo", "as_node": "nope", "values": map[string]string{"text": "x"}}, 400, []string{`no node "nope"`, "upper"}},
		{"update of an unknown channel", "POST", "/v1/threads/t/state", map[string]any{"graph": "echo", "as_node": "upper", "values": map[string]string{"nope": "x"}}, 400, []string{`"nope" is not a channel`}},
		{"history limit", "GET", "/v1/threads/t/history?limit=0", nil, 400, []string{"limit"}},
		{"history token", "GET", "/v1/threads/t/history?page_token=bm9wZQ", nil, 400, []string{`page token "bm9wZQ" is not one this thread's history issued`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.do(tc.method, tc.path, tc.body).problem(t, tc.status, tc.want...)
			var after api.Thread
			e.do("GET", "/v1/threads/t", nil).ok(t, http.StatusOK, &after)
			if !after.UpdatedAt.Equal(before.UpdatedAt) || after.Status != "idle" || *after.Head != *before.Head {
				t.Errorf("a refused request changed the thread: %+v, was %+v", after, before)
			}
			var list api.RunList
			e.do("GET", "/v1/threads/t/runs", nil).ok(t, http.StatusOK, &list)
			if len(list.Runs) != 1 {
				t.Errorf("a refused request stored a run: %d runs", len(list.Runs))
			}
			var threads api.ThreadList
			e.do("GET", "/v1/threads", nil).ok(t, http.StatusOK, &threads)
			if len(threads.Threads) != 1 {
				t.Errorf("a refused request created a thread: %d threads", len(threads.Threads))
			}
		})
	}
}

func stepNames(steps []runs.ThreadStep) []string {
	var out []string
	for _, s := range steps {
		out = append(out, fmt.Sprintf("%s/%d", s.RunID, s.Step))
	}
	return out
}
