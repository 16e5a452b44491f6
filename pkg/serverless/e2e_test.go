package serverless_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/superstep/superstep/examples/loop"
	"github.com/superstep/superstep/examples/triage"
	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/tick"
)

// RemoteState is the state of the test graph with remote nodes.
type RemoteState struct {
	Items []int    `json:"items"`
	Total int      `json:"total" reduce:"sum"`
	Log   []string `json:"log" reduce:"append"`
	Reply string   `json:"reply"`
}

// remoteGraph fans out to remote workers next to an inline branch, joins
// them, and ends with a remote node that asks for approval: the node
// queue carries both plain tasks and an interrupt and its resume.
// work, when not nil, is called by every execution of a work task.
func remoteGraph(t testing.TB, work func(ctx context.Context)) *pregel.Graph {
	g := pregel.NewGraph[RemoteState]("remote-fanout")
	g.AddFunc("prepare", func(context.Context, RemoteState) (RemoteState, error) {
		return RemoteState{Items: []int{1, 2, 3}, Log: []string{"prepare"}}, nil
	})
	g.AddFunc("work", func(ctx context.Context, _ RemoteState) (RemoteState, error) {
		if work != nil {
			work(ctx)
		}
		n, err := pregel.Arg[int](ctx)
		if err != nil {
			return RemoteState{}, err
		}
		return RemoteState{Total: n * 10}, nil
	}, pregel.Remote())
	g.AddFunc("side", func(context.Context, RemoteState) (RemoteState, error) {
		return RemoteState{Log: []string{"side"}}, nil
	})
	g.AddFunc("approve", func(ctx context.Context, s RemoteState) (RemoteState, error) {
		v, err := pregel.Interrupt[string](ctx, fmt.Sprintf("approve total %d?", s.Total))
		if err != nil {
			return RemoteState{}, err
		}
		return RemoteState{Reply: v, Log: []string{"approve"}}, nil
	}, pregel.Remote())
	g.AddEdge(pregel.Start, "prepare").AddEdge("prepare", "side")
	g.AddFanOut("prepare", "work", func(_ context.Context, s RemoteState) ([]any, error) {
		out := make([]any, len(s.Items))
		for i, v := range s.Items {
			out[i] = v
		}
		return out, nil
	})
	g.AddJoin("approve", "work", "side").AddEdge("approve", pregel.End)
	cg, err := g.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return cg
}

// reference runs g embedded, answering an interrupt with answer.
func reference(t *testing.T, g *pregel.Graph, input any, answer string) *pregel.Result {
	t.Helper()
	ctx := context.Background()
	store := pregel.NewMemoryStore()
	res, err := g.Run(ctx, input, pregel.WithStore(store), pregel.WithRunID("ref"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Status == pregel.RunInterrupted {
		if res, err = g.Resume(ctx, "ref", pregel.WithStore(store), pregel.WithResume(answer)); err != nil {
			t.Fatal(err)
		}
	}
	return res
}

func triageInput(t *testing.T) json.RawMessage {
	t.Helper()
	b, err := os.ReadFile("../../examples/triage/input.json")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The example graphs run end to end: API -> tick queue -> tick function ->
// DynamoDB, the triage graph's interrupt answered through the API.
func TestExamplesEndToEnd(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})

	s.create(loop.Name, "count-3", map[string]int{"limit": 3})
	s.create(triage.Name, "ticket-1", triageInput(t))

	r := s.waitStatus("count-3", pregel.RunCompleted)
	if got := values[[]int](t, r, "ticks"); !slices.Equal(got, ints(3)) || r.Step != 3 || r.Counters.Completed != 3 {
		t.Errorf("counter: ticks %v step %d counters %+v, want [1 2 3] at step 3", got, r.Step, r.Counters)
	}
	if len(r.Steps) != 4 {
		t.Errorf("counter: %d checkpoints listed, want 4 (steps 0 to 3)", len(r.Steps))
	}

	r = s.waitStatus("ticket-1", pregel.RunInterrupted)
	if len(r.Interrupts) != 1 || r.Interrupts[0].Node != "review" {
		t.Fatalf("triage interrupts %+v, want one from review", r.Interrupts)
	}
	var run api.Run
	if st := s.do("POST", "/v1/runs/ticket-1/resume", map[string]any{"resume": "approve"}, &run); st != http.StatusAccepted {
		t.Fatalf("resume: status %d", st)
	}
	r = s.waitStatus("ticket-1", pregel.RunCompleted)
	g, _ := s.app.Service.Graphs.Get(triage.Name)
	ref := reference(t, g, triageInput(t), "approve")
	if !jsonEqual(r.Values, ref.Values) || r.Step != ref.Step || r.Counters != ref.Counters {
		t.Errorf("triage ended with\n%s at step %d %+v\nwant (embedded)\n%s at step %d %+v", mustJSON(r.Values), r.Step, r.Counters, mustJSON(ref.Values), ref.Step, ref.Counters)
	}
	if values[string](t, r, "outcome") != "sent" {
		t.Errorf("outcome %s, want sent", r.Values["outcome"])
	}

}

func opsSummary(names []string, n func(string) int64) string {
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = fmt.Sprintf("%s %d", name, n(name))
	}
	return strings.Join(parts, ", ")
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// Remote nodes go through the node queue and the node function, the last
// one to finish triggering the commit; an interrupt in a remote node is
// resumed there.
func TestRemoteNodes(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	s.create("remote-fanout", "fan-1", nil)
	r := s.waitStatus("fan-1", pregel.RunInterrupted)
	if len(r.Interrupts) != 1 || r.Interrupts[0].Node != "approve" {
		t.Fatalf("interrupts %+v, want one from approve", r.Interrupts)
	}
	if st := s.do("POST", "/v1/runs/fan-1/resume", map[string]any{"resume": "yes"}, nil); st != http.StatusAccepted {
		t.Fatalf("resume: status %d", st)
	}
	r = s.waitStatus("fan-1", pregel.RunCompleted)
	g, _ := s.app.Service.Graphs.Get("remote-fanout")
	ref := reference(t, g, nil, "yes")
	if !jsonEqual(r.Values, ref.Values) || r.Counters != ref.Counters {
		t.Errorf("ended with %s %+v, want %s %+v", mustJSON(r.Values), r.Counters, mustJSON(ref.Values), ref.Counters)
	}
	// Three workers, the approval, and its resumption at least.
	if n := s.nodeCalls.Load(); n < 5 {
		t.Errorf("the node function ran %d times, want at least 5", n)
	}
}

// A drain requested through the API while the run is mid-way stops it at
// the next superstep boundary: no further tick is scheduled. Resume
// finishes it as if it had never stopped.
func TestDrainAndResume(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	const limit = 8
	s.create(loop.Name, "slow", map[string]int{"limit": limit, "delay_ms": 300})
	s.wait("slow", "step 1", func(r api.RunDetail) bool { return r.Step >= 1 })
	if st := s.do("POST", "/v1/runs/slow/drain", map[string]string{"reason": "maintenance window"}, nil); st != http.StatusAccepted {
		t.Fatalf("drain: status %d", st)
	}
	r := s.waitStatus("slow", pregel.RunDrained)
	if r.DrainReason != "maintenance window" || r.Step >= limit {
		t.Fatalf("drained run: reason %q step %d, want the reason and a step under %d", r.DrainReason, r.Step, limit)
	}
	s.waitIdle()
	time.Sleep(700 * time.Millisecond) // longer than a step
	if again := s.get("slow"); again.Step != r.Step || again.Status != pregel.RunDrained {
		t.Fatalf("after draining, the run moved on: %s at step %d (drained at %d)", again.Status, again.Step, r.Step)
	}
	if st := s.do("POST", "/v1/runs/slow/resume", map[string]any{}, nil); st != http.StatusAccepted {
		t.Fatalf("resume: status %d", st)
	}
	r = s.waitStatus("slow", pregel.RunCompleted)
	if got := values[[]int](t, r, "ticks"); !slices.Equal(got, ints(limit)) || r.Step != limit {
		t.Errorf("resumed run: ticks %v at step %d, want %v at step %d", got, r.Step, ints(limit), limit)
	}
}

// A cancel requested through the API stops a running run at the next
// tick; nothing more is scheduled.
func TestCancel(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	const limit = 8
	s.create(loop.Name, "doomed", map[string]int{"limit": limit, "delay_ms": 300})
	s.wait("doomed", "step 1", func(r api.RunDetail) bool { return r.Step >= 1 })
	var run api.Run
	if st := s.do("POST", "/v1/runs/doomed/cancel", nil, &run); st != http.StatusAccepted || !run.CancelRequested {
		t.Fatalf("cancel: status %d, run %+v", st, run)
	}
	r := s.waitStatus("doomed", pregel.RunCancelled)
	if r.Step >= limit {
		t.Fatalf("cancelled at step %d, want under %d", r.Step, limit)
	}
	s.waitIdle()
	if again := s.get("doomed"); again.Step != r.Step || again.Status != pregel.RunCancelled {
		t.Fatalf("after cancelling, the run moved on: %s at step %d", again.Status, again.Step)
	}
	if st := s.do("POST", "/v1/runs/doomed/resume", map[string]any{}, nil); st != http.StatusConflict {
		t.Errorf("resume of a cancelled run: status %d, want 409", st)
	}
}

// The same tick delivered again, under other deduplication ids so that
// SQS does not drop it, changes nothing: during the run (the run ends as
// an undisturbed one, each step counted once) and after it (the record is
// not even written).
func TestDuplicateTicks(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	const limit = 5
	s.create(loop.Name, "dup", map[string]int{"limit": limit, "delay_ms": 100})
	send := func(step int, nonce string) {
		b, _ := json.Marshal(tick.Tick{RunID: "dup", Step: step, Nonce: nonce})
		// The run's group, as the tick function's own ticks.
		s.sendRaw(s.cfg.TickQueueURL, string(b), "dup", fmt.Sprintf("dup#%d#%s", step, nonce))
	}
	// Duplicates of the first ticks while they are being handled, and of
	// later ones ahead of time.
	for step := 1; step <= limit; step++ {
		send(step, "again-a")
		send(step, "again-b")
	}
	r := s.waitStatus("dup", pregel.RunCompleted)
	if got := values[[]int](t, r, "ticks"); !slices.Equal(got, ints(limit)) || r.Step != limit || r.Counters.Completed != limit {
		t.Fatalf("ticks %v step %d counters %+v, want %v at step %d with %d completed", got, r.Step, r.Counters, ints(limit), limit, limit)
	}
	s.waitIdle()
	before, err := s.app.Service.Get(t.Context(), "dup")
	if err != nil {
		t.Fatal(err)
	}
	hist, err := s.app.Service.History(t.Context(), "dup")
	if err != nil {
		t.Fatal(err)
	}
	for step := 1; step <= limit+1; step++ {
		send(step, "late")
	}
	s.waitIdle()
	after, err := s.app.Service.Get(t.Context(), "dup")
	if err != nil {
		t.Fatal(err)
	}
	hist2, err := s.app.Service.History(t.Context(), "dup")
	if err != nil {
		t.Fatal(err)
	}
	if after.Version != before.Version || mustJSON(hist) != mustJSON(hist2) {
		t.Errorf("late duplicates changed the run: version %d -> %d, history equal %v", before.Version, after.Version, mustJSON(hist) == mustJSON(hist2))
	}
	if strings.Contains(s.logs.String(), `"level":"ERROR"`) {
		t.Errorf("duplicates were logged as errors:\n%s", s.logs.String())
	}
}

// Messages that can never be processed are logged with the reason,
// reported as failed, and end in the dead-letter queues after
// maxReceiveCount; none is dropped.
func TestBadMessagesGoToTheDLQ(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{visibility: time.Second, maxReceive: 2})
	s.sendRaw(s.cfg.TickQueueURL, `{"run_id": "x", "step": 0}`, "x", "bad-step")
	s.sendRaw(s.cfg.TickQueueURL, `not json`, "y", "bad-json")
	s.sendRaw(s.cfg.NodeQueueURL, `{"run_id": "x"}`, "", "")
	s.sendRaw(s.cfg.StartQueueURL, `{"graph": "no-such-graph"}`, "", "")
	s.sendRaw(s.cfg.StartQueueURL, `{"graph": "counter", "input": {"limit": 2}, "inptu": 1}`, "", "")

	want := map[string][]string{
		"ticks-dlq.fifo": {`{"run_id": "x", "step": 0}`, `not json`},
		"nodes-dlq":      {`{"run_id": "x"}`},
		"starts-dlq":     {`{"graph": "no-such-graph"}`, `{"graph": "counter", "input": {"limit": 2}, "inptu": 1}`},
	}
	for q, bodies := range want {
		url := s.dlqURL(q)
		deadline := time.Now().Add(20 * time.Second)
		var got []string
		for len(got) < len(bodies) && time.Now().Before(deadline) {
			for _, m := range receiveAll(t, s, url) {
				got = append(got, *m.Body)
			}
			time.Sleep(100 * time.Millisecond)
		}
		slices.Sort(got)
		slices.Sort(bodies)
		if !slices.Equal(got, bodies) {
			t.Errorf("dead letters of %s: %q, want %q", q, got, bodies)
		}
	}
	logs := s.logs.String()
	for _, reason := range []string{
		"tick needs a run_id and a step >= 1",
		"tick message: the body is not a JSON object",
		"node task needs run_id, step >= 1 and task_id",
		`graph \"no-such-graph\" is not registered`,
		`unknown field \"inptu\"`,
	} {
		if !strings.Contains(logs, reason) {
			t.Errorf("no log line gives the reason %q", reason)
		}
	}
	if n := strings.Count(logs, "bad message: it can never be processed"); n < 10 {
		t.Errorf("%d bad-message log lines, want one per delivery (5 messages x 2)", n)
	}
}
