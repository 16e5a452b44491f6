package lambdainvoke_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/superstep/superstep/internal/lambdatest"
	"github.com/superstep/superstep/pkg/internal/lambdainvoke"
	"github.com/superstep/superstep/pkg/tick"
)

// ticks records the ticks sent to the inner queue.
type ticks struct {
	mu   sync.Mutex
	sent []tick.Tick
}

func (q *ticks) SendTick(_ context.Context, t tick.Tick) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sent = append(q.sent, t)
	return nil
}

func (q *ticks) SendTask(context.Context, tick.NodeTask) error {
	return errors.New("a node task went to the inner queue")
}

// received collects the events a stand-in function was invoked with.
type received struct {
	mu     sync.Mutex
	events []lambdainvoke.Event
	arns   []string
}

func (r *received) handler(ctx context.Context, payload []byte) error {
	var ev lambdainvoke.Event
	if err := json.Unmarshal(payload, &ev); err != nil {
		return err
	}
	lc, _ := lambdacontext.FromContext(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
	r.arns = append(r.arns, lc.InvokedFunctionArn)
	return nil
}

func (r *received) wait(t *testing.T, n int) ([]lambdainvoke.Event, []string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.mu.Lock()
		got, arns := append([]lambdainvoke.Event(nil), r.events...), append([]string(nil), r.arns...)
		r.mu.Unlock()
		if len(got) >= n {
			return got, arns
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d invocations within 10s, want %d", len(got), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func client(url string) *lambda.Client {
	return lambda.New(lambda.Options{Region: "us-east-1", BaseEndpoint: aws.String(url),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
}

// Node tasks are asynchronous invocations of the named function (an
// alias's ARN), with the sender's trace context; ticks go to the inner
// queue; a wide step's tasks are all invoked, in parallel; a function
// named by no configuration is the one running, as it was invoked.
func TestQueue(t *testing.T) {
	var got received
	srv := lambdatest.Start(t, map[string]*lambdatest.Function{"node": {Handler: got.handler}}, lambdatest.Faults{})
	inner := &ticks{}
	alias := lambdatest.ARN("node") + ":live"
	q := lambdainvoke.New(inner, client(srv.URL), alias, lambdainvoke.WithTrace(func(context.Context) map[string]string {
		return map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	}))
	if err := q.SendTick(t.Context(), tick.Tick{RunID: "r", Step: 1}); err != nil {
		t.Fatal(err)
	}
	if len(inner.sent) != 1 || inner.sent[0].RunID != "r" {
		t.Errorf("ticks sent to the inner queue: %+v", inner.sent)
	}
	ts := make([]tick.NodeTask, 40)
	for i := range ts {
		ts[i] = tick.NodeTask{RunID: "r", Step: 2, TaskID: strings.Repeat("t", i+1)}
	}
	if err := q.SendTasks(t.Context(), ts); err != nil {
		t.Fatal(err)
	}
	events, arns := got.wait(t, len(ts))
	seen := map[string]bool{}
	for i, ev := range events {
		seen[ev.TaskID] = true
		if ev.RunID != "r" || ev.Step != 2 || ev.Trace["traceparent"] == "" || arns[i] != alias {
			t.Errorf("invocation %d: %+v of %s, want a task of run r step 2 with a traceparent, of %s", i, ev, arns[i], alias)
		}
	}
	if len(seen) != len(ts) {
		t.Errorf("%d distinct tasks invoked, want %d", len(seen), len(ts))
	}

	self := lambdainvoke.New(inner, client(srv.URL), "")
	if err := self.SendTask(t.Context(), tick.NodeTask{RunID: "r", Step: 3, TaskID: "x"}); err == nil || !strings.Contains(err.Error(), "NODE_FUNCTION") {
		t.Errorf("no function and no Lambda context: %v, want an error naming NODE_FUNCTION", err)
	}
	ctx := lambdacontext.NewContext(t.Context(), &lambdacontext.LambdaContext{InvokedFunctionArn: alias})
	if err := self.SendTask(ctx, tick.NodeTask{RunID: "r", Step: 3, TaskID: "self"}); err != nil {
		t.Fatal(err)
	}
	events, arns = got.wait(t, len(ts)+1)
	if last := events[len(events)-1]; last.TaskID != "self" || arns[len(arns)-1] != alias {
		t.Errorf("the function invoking itself: %+v of %s, want task self of %s", last, arns[len(arns)-1], alias)
	}
}

// What Lambda refuses fails the send, naming the task: an unknown
// function, and an event over the 256 KB of an asynchronous invocation
// (refused before it is sent).
func TestQueueErrors(t *testing.T) {
	srv := lambdatest.Start(t, map[string]*lambdatest.Function{"node": {Handler: func(context.Context, []byte) error { return nil }}}, lambdatest.Faults{})
	q := lambdainvoke.New(&ticks{}, client(srv.URL), lambdatest.ARN("nope"))
	err := q.SendTasks(t.Context(), []tick.NodeTask{{RunID: "r", Step: 1, TaskID: "a"}, {RunID: "r", Step: 1, TaskID: "b"}})
	if err == nil || !strings.Contains(err.Error(), "task a") || !strings.Contains(err.Error(), "task b") || !strings.Contains(err.Error(), "ResourceNotFound") {
		t.Errorf("unknown function: %v, want both tasks' errors, ResourceNotFound", err)
	}
	q = lambdainvoke.New(&ticks{}, client(srv.URL), "node")
	err = q.SendTask(t.Context(), tick.NodeTask{RunID: strings.Repeat("r", lambdainvoke.MaxPayload), Step: 1, TaskID: "big"})
	if err == nil || !strings.Contains(err.Error(), "over Lambda's 262144") {
		t.Errorf("a 256 KB event: %v, want it refused for its size", err)
	}
	if st := srv.Stats(); st.Accepted != 0 {
		t.Errorf("%d invocations accepted, want none", st.Accepted)
	}
}

// IsEvent tells a node task's event from an SQS batch and other payloads.
func TestIsEvent(t *testing.T) {
	for _, tc := range []struct {
		payload string
		want    bool
	}{
		{`{"run_id":"r","step":1,"task_id":"t"}`, true},
		{`{"run_id":"r","step":1,"task_id":"t","trace":{"traceparent":"x"}}`, true},
		{`{"Records":[{"body":"{}"}]}`, false},
		{`{"Records":[],"task_id":"t"}`, false},
		{`{"run_id":"r"}`, false},
		{`not json`, false},
		{`[]`, false},
	} {
		if got := lambdainvoke.IsEvent([]byte(tc.payload)); got != tc.want {
			t.Errorf("IsEvent(%s) = %v, want %v", tc.payload, got, tc.want)
		}
	}
}
