package tracing_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/examples/triage"
	"github.com/superstep/superstep/pkg/embedded"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/store/sqlite"
)

// The embedded scheduler on SQLite: the run created through the Service
// gets an invoke_workflow root, and its executions (before and after the
// interrupt) add their superstep and node spans under that root, so that
// the whole run, resumed or not, is one trace.
func TestSchedulerSQLiteTree(t *testing.T) {
	r := newRecorder()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	all, err := examples.All()
	if err != nil {
		t.Fatal(err)
	}
	reg, err := runs.NewRegistry(all...)
	if err != nil {
		t.Fatal(err)
	}
	sched := embedded.NewScheduler(embedded.SchedulerConfig{Graphs: reg, Runs: st, Checkpoints: st, Tracer: r})
	if err := sched.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sched.Shutdown(context.Background(), time.Second) })
	svc := &runs.Service{Graphs: reg, Runs: st, Checkpoints: st, Dispatcher: sched, Tracer: r}

	in := json.RawMessage(`{"ticket": {"id": "T-1", "from": "ana@example.com", "subject": "Refund", "body": "I was charged twice for my invoice"}}`)
	run, _, err := svc.Create(ctx, triage.Name, runs.CreateRequest{RunID: "traced-1", Input: in, ContextID: "thread-7"})
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Trace) == 0 || run.Trace["traceparent"] == "" {
		t.Fatalf("the created run's record holds no trace context: %v", run.Trace)
	}
	waitRun(t, svc, run.ID, pregel.RunInterrupted)
	if _, err := svc.Resume(ctx, run.ID, runs.ResumeRequest{Value: json.RawMessage(`"approve"`)}); err != nil {
		t.Fatal(err)
	}
	waitRun(t, svc, run.ID, pregel.RunCompleted)

	got := tree(t, r.rec.Ended(), treeKeys...)
	want := `invoke_workflow support-triage
  superstep step=1 step.outcome=committed
    node detect_language step=1 node.status=completed
  superstep step=2 step.outcome=committed
    node translate step=2 node.status=skipped node.reason=ShouldExecute returned false
  superstep step=3 step.outcome=committed
    node classify step=3 node.status=completed
  superstep step=4 step.outcome=committed
    node research step=4 node.status=completed
  superstep step=5 step.outcome=committed
    node lookup_customer step=5 node.status=completed
    node search_kb step=5 node.status=completed
    node search_kb step=5 node.status=completed
    node search_kb step=5 node.status=completed
  superstep step=6 step.outcome=committed
    node draft_reply step=6 node.status=completed
  superstep step=7 step.outcome=interrupted
    node review step=7 node.status=interrupted
  superstep step=7 step.outcome=committed
    node review step=7 node.status=completed
  superstep step=8 step.outcome=committed
    node send_reply step=8 node.status=completed
  end support-triage step=6 run.status=interrupted
  end support-triage step=8 run.status=completed
`
	if got != want {
		t.Errorf("span tree:\n%s\nwant:\n%s", got, want)
	}
	for _, s := range r.rec.Ended() {
		if attr(s, "superstep.thread.id") != "thread-7" && !strings.HasPrefix(s.Name(), "invoke_workflow") {
			t.Errorf("span %q lacks the thread id", s.Name())
		}
		if strings.HasPrefix(s.Name(), "invoke_workflow") && attr(s, "gen_ai.conversation.id") != "thread-7" {
			t.Errorf("the root span lacks gen_ai.conversation.id")
		}
		if strings.HasPrefix(s.Name(), "invoke_workflow") && attr(s, "superstep.graph.version") != run.GraphVersion.Label() {
			t.Errorf("the root span's superstep.graph.version = %q, want %q", attr(s, "superstep.graph.version"), run.GraphVersion.Label())
		}
	}
}

func waitRun(t *testing.T, svc *runs.Service, id string, want pregel.RunStatus) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r, err := svc.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status == want {
			return
		}
		if r.Status.Terminal() || time.Now().After(deadline) {
			t.Fatalf("run %s is %s (%s), want %s", id, r.Status, r.Error, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
