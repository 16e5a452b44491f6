package serverless_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/superstep/superstep/internal/lambdatest"
	"github.com/superstep/superstep/pkg/pregel"
)

// deadKey holds, in the context of an invocation killableInvoke wraps,
// whether its process is dead.
type deadKey struct{}

// deadProcess fails every AWS request made from a dead invocation's
// context (deadKey): a process that died sends nothing more, not even
// from a context detached from the invocation's cancellation.
func deadProcess(st *middleware.Stack) error {
	return st.Initialize.Add(middleware.InitializeMiddlewareFunc("test.deadProcess", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
		if dead, ok := ctx.Value(deadKey{}).(*atomic.Bool); ok && dead.Load() {
			return middleware.InitializeOutput{}, middleware.Metadata{}, errors.New("test: the invocation's process is dead")
		}
		return next.HandleInitialize(ctx, in)
	}), middleware.Before)
}

// killableInvoke is killable for the node function's asynchronous
// invocations: the kill cancels the invocation and makes its process dead
// (deadProcess), so that it fails without handing its task on, and Lambda
// retries it.
func killableInvoke(h lambdatest.Handler) lambdatest.Handler {
	return func(ctx context.Context, payload []byte) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		dead := new(atomic.Bool)
		ctx = context.WithValue(ctx, deadKey{}, dead)
		kill := context.CancelFunc(func() { dead.Store(true); cancel() })
		return h(context.WithValue(ctx, killKey{}, kill), payload)
	}
}

// With NODE_DISPATCH=invoke, remote nodes start by asynchronous
// invocations of the node function, through the real lambda client and a
// stand-in of Lambda's event queue that delivers late, out of order and
// some twice: the remote fan-out, its interrupt and its resumption end as
// the embedded run does, and no node task goes through the node-task
// queue.
func TestInvokeDispatch(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{invoke: true, invokeFaults: lambdatest.Faults{MaxDelay: 300 * time.Millisecond, Duplicate: 0.5, Seed: 26}})
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
	s.waitIdle()
	st := s.lambda.Stats()
	// Three workers, the approval and its resumption.
	if st.Accepted < 5 || st.Duplicated == 0 || st.Failed != 0 {
		t.Errorf("Lambda stand-in: %+v; want at least 5 invocations accepted, some duplicated, none failed", st)
	}
	if n := s.meter.Snapshot().Op("SendMessage").Requests; n == 0 {
		t.Error("no SendMessage at all: the ticks went nowhere")
	}
	if n := s.meter.Snapshot().Op("Invoke").Requests; n != st.Accepted {
		t.Errorf("%d Invoke requests metered, %d accepted", n, st.Accepted)
	}
	if d := s.queueDepth(s.dlqURL("nodes-dlq")); d != 0 {
		t.Errorf("%d dead letters of node tasks", d)
	}
	// A duplicate that finds its task leased by the first delivery is
	// handed to the node-task queue; nothing else is.
	if strings.Contains(s.logs.String(), "node task failed") {
		t.Errorf("a node task failed in a run without failures:\n%s", s.logs.String())
	}
}

// A node task event that can never be processed fails every invocation
// (Lambda's two retries included) with the reason logged, and reaches the
// on-failure destination, the node dead-letter queue, as Lambda's
// invocation record holding the event; an event that is neither a task
// nor an SQS batch too. Nothing is handed to the node-task queue.
func TestInvokeBadEventsGoToTheDLQ(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{invoke: true})
	client := lambda.NewFromConfig(s.opts.AWS, func(o *lambda.Options) { o.BaseEndpoint = aws.String(s.lambda.URL) })
	bad := []string{`{"run_id":"x","step":0,"task_id":"t"}`, `{"hello":"world"}`}
	for _, p := range bad {
		out, err := client.Invoke(t.Context(), &lambda.InvokeInput{FunctionName: aws.String(s.cfg.NodeFunction), InvocationType: lambdatypes.InvocationTypeEvent, Payload: []byte(p)})
		if err != nil || out.StatusCode != http.StatusAccepted {
			t.Fatalf("Invoke %s: %+v, %v", p, out, err)
		}
	}
	var got []string
	deadline := time.Now().Add(20 * time.Second)
	for len(got) < len(bad) && time.Now().Before(deadline) {
		for _, m := range receiveAll(t, s, s.dlqURL("nodes-dlq")) {
			var rec lambdatest.Record
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &rec); err != nil {
				t.Fatalf("dead letter %s: %v", aws.ToString(m.Body), err)
			}
			if rec.RequestContext.Condition != "RetriesExhausted" || rec.RequestContext.ApproximateInvokeCount != 3 {
				t.Errorf("dead letter %+v: want RetriesExhausted after 3 invocations", rec.RequestContext)
			}
			got = append(got, string(rec.RequestPayload))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(got) != len(bad) {
		t.Fatalf("dead letters %q, want the events %q", got, bad)
	}
	logs := s.logs.String()
	for _, reason := range []string{"node task needs run_id, step >= 1 and task_id", "neither a node task's invocation nor an SQS batch"} {
		if !strings.Contains(logs, reason) {
			t.Errorf("no log line gives the reason %q", reason)
		}
	}
	if d := s.queueDepth(s.cfg.NodeQueueURL); d != 0 || strings.Contains(logs, "handed to the node-task queue") {
		t.Errorf("a bad event was handed to the node-task queue (depth %d)", d)
	}
}
