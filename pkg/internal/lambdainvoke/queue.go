// Package lambdainvoke starts superstep's node tasks by an asynchronous
// invocation of the node function (Lambda Invoke, InvocationType Event)
// instead of a message on the node-task queue: one request where SQS takes
// three (send, receive, delete).
//
// [Queue] implements [tick.Queue]: ticks go where its inner queue sends
// them (the FIFO tick queue); each node task is the payload of one Invoke
// (an [Event]). Lambda keeps the event in its own queue, retries a failed
// invocation (MaximumRetryAttempts) and sends an event it gave up on to the
// function's on-failure destination (the node dead-letter queue); the node
// function hands a task it could not finish to the node-task queue (see
// serverless.App.HandleNodeEvent), where SQS's redelivery and
// maxReceiveCount take over. Duplicate invocations, which Lambda allows,
// are harmless as duplicate messages are: the tick protocol is fenced on the
// step number and leases each task.
package lambdainvoke

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/superstep/superstep/pkg/tick"
)

// MaxPayload is the largest payload Lambda accepts for an asynchronous
// invocation (256 KB). A node task's event is a few hundred bytes: it names
// the task, whose inputs the node function reads from the table.
const MaxPayload = 256 * 1024

// Parallel is how many Invoke requests SendTasks has in flight at once.
const Parallel = 16

// Invoker invokes a Lambda function; *lambda.Client implements it.
type Invoker interface {
	Invoke(ctx context.Context, in *lambda.InvokeInput, optFns ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

// Event is the payload of a node task's invocation: the task, and the trace
// context of the sender (W3C trace context fields, as the queues' message
// attributes carry it).
type Event struct {
	tick.NodeTask
	// Trace holds the trace context fields (traceparent, tracestate,
	// baggage); none when tracing is off.
	Trace map[string]string `json:"trace,omitempty"`
}

// IsEvent reports whether payload looks like a node task's Event rather
// than another event (an SQS batch has "Records").
func IsEvent(payload []byte) bool {
	var probe struct {
		Records json.RawMessage `json:"Records"`
		TaskID  *string         `json:"task_id"`
	}
	if err := json.Unmarshal(payload, &probe); err != nil {
		return false
	}
	return probe.Records == nil && probe.TaskID != nil
}

// Queue sends ticks through its inner queue and starts each node task by an
// asynchronous invocation of the node function. It is safe for concurrent
// use.
type Queue struct {
	inner    tick.Queue
	client   Invoker
	function string
	trace    func(context.Context) map[string]string
}

var _ tick.TaskBatchSender = (*Queue)(nil)

// Option configures [New].
type Option func(*Queue)

// WithTrace sets the function that gives each event its trace context,
// from the context it is sent with.
func WithTrace(fn func(context.Context) map[string]string) Option {
	return func(q *Queue) { q.trace = fn }
}

// New returns a Queue whose ticks go to inner and whose node tasks invoke
// function (a name or ARN, an alias's ARN included). An empty function
// means the function running this code, as invoked (the node function
// invoking itself, through the alias it was invoked by: the ARN in the
// Lambda context of the call).
func New(inner tick.Queue, client Invoker, function string, opts ...Option) *Queue {
	q := &Queue{inner: inner, client: client, function: function}
	for _, o := range opts {
		o(q)
	}
	return q
}

// SendTick implements [tick.Queue]: the tick goes to the inner queue.
func (q *Queue) SendTick(ctx context.Context, t tick.Tick) error { return q.inner.SendTick(ctx, t) }

// SendTask implements [tick.Queue]: one asynchronous invocation of the node
// function with the task's Event.
func (q *Queue) SendTask(ctx context.Context, t tick.NodeTask) error {
	fn := q.function
	if fn == "" {
		if lc, ok := lambdacontext.FromContext(ctx); ok {
			fn = lc.InvokedFunctionArn
		}
	}
	if fn == "" {
		return fmt.Errorf("lambdainvoke: node task %s of run %q step %d: no node function to invoke (set NODE_FUNCTION)", t.TaskID, t.RunID, t.Step)
	}
	ev := Event{NodeTask: t}
	if q.trace != nil {
		ev.Trace = q.trace(ctx)
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("lambdainvoke: encode node task: %w", err)
	}
	if len(payload) > MaxPayload {
		return fmt.Errorf("lambdainvoke: node task %s of run %q step %d: its event is %d bytes, over Lambda's %d for an asynchronous invocation", t.TaskID, t.RunID, t.Step, len(payload), MaxPayload)
	}
	out, err := q.client.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(fn), InvocationType: types.InvocationTypeEvent, Payload: payload})
	if err != nil {
		return fmt.Errorf("lambdainvoke: invoke the node function for task %s of run %q step %d: %w", t.TaskID, t.RunID, t.Step, err)
	}
	if out.StatusCode != http.StatusAccepted {
		return fmt.Errorf("lambdainvoke: invoke the node function for task %s of run %q step %d: status %d, want 202 (queued)", t.TaskID, t.RunID, t.Step, out.StatusCode)
	}
	return nil
}

// SendTasks implements [tick.TaskBatchSender]: Lambda has no batch invoke,
// so the tasks are invoked Parallel at a time. Every task is tried; the
// error names each that failed (a task sent twice by a retry of the caller
// is harmless).
func (q *Queue) SendTasks(ctx context.Context, ts []tick.NodeTask) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	sem := make(chan struct{}, Parallel)
	for _, t := range ts {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := q.SendTask(ctx, t); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
