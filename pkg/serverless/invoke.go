package serverless

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/superstep/superstep/pkg/agent/memorytools"
	"github.com/superstep/superstep/pkg/internal/lambdainvoke"
	"github.com/superstep/superstep/pkg/longterm"
	"github.com/superstep/superstep/pkg/tick"
	"github.com/superstep/superstep/pkg/tracing"
)

// handoffTimeout bounds the SendMessage that hands a task the node
// function could not finish to the node-task queue, even when the
// invocation's own time is up.
const handoffTimeout = 5 * time.Second

// HandleNodeEvent is the node function's handler: it takes both the
// records of the node-task queue's event source mapping (an SQS event, as
// [App.HandleNode]) and the asynchronous invocations of DispatchInvoke (a
// [lambdainvoke.Event] naming one node task).
//
// An invocation whose task fails for a reason that may pass (the task's
// lease held elsewhere, a store error, a time-out) hands the task to the
// node-task queue and succeeds: from there SQS redelivers it after the
// visibility timeout, up to maxReceiveCount, as with DispatchSQS, so that
// Lambda's few, quick retries (two, a minute or two apart) are not spent
// on a lease that lasts longer. Only when the hand-over fails too does the
// invocation fail, and Lambda retries it. A bad event (undecodable, an
// unknown graph) fails at once: after Lambda's retries it reaches the
// function's on-failure destination, the node dead-letter queue. An
// invocation that dies (a crash, the function's timeout) is retried by
// Lambda, then sent to that destination.
func (a *App) HandleNodeEvent(ctx context.Context, payload json.RawMessage) (any, error) {
	if !lambdainvoke.IsEvent(payload) {
		var ev events.SQSEvent
		if err := json.Unmarshal(payload, &ev); err != nil || ev.Records == nil {
			a.Logger.ErrorContext(ctx, "bad event: neither a node task's invocation nor an SQS batch; it goes to the on-failure destination after Lambda's retries",
				"handler", "node", "body", truncate(string(payload), 2048))
			return nil, fmt.Errorf("%w: the node function takes an SQS batch of node tasks or a node task's invocation event", ErrBadEvent)
		}
		return a.HandleNode(ctx, ev)
	}
	var ev lambdainvoke.Event
	if err := decodeBody(string(payload), &ev, false); err != nil {
		return nil, fmt.Errorf("%w: node task event: %w", ErrBadEvent, err)
	}
	return nil, a.HandleNodeInvoke(ctx, ev)
}

// HandleNodeInvoke runs the node task of one asynchronous invocation (see
// [App.HandleNodeEvent]).
func (a *App) HandleNodeInvoke(ctx context.Context, ev lambdainvoke.Event) error {
	if a.Ticks == nil {
		return a.unwired("node task invocations", FunctionNode)
	}
	log := a.Logger.With("handler", "node", "dispatch", string(DispatchInvoke), "run_id", ev.RunID, "step", ev.Step, "task_id", ev.TaskID)
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		log = log.With("request_id", lc.AwsRequestID)
	}
	ctx = longterm.WithScope(longterm.WithStore(ctx, a.LongTerm), memorytools.ThreadScope(a.Store, a.Store))
	if a.Tracer != nil {
		ctx = a.Tracer.FromMessage(ctx, traceMessage(ev))
	}
	err := a.Ticks.Node(ctx, ev.NodeTask)
	if err == nil {
		return nil
	}
	if bad(err) {
		log.ErrorContext(ctx, "bad node task: it can never be processed; the invocation fails and goes to the on-failure destination (the node dead-letter queue) after Lambda's retries",
			"reason", err.Error())
		return err
	}
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handoffTimeout)
	defer cancel()
	if herr := a.Queue.SendTask(hctx, ev.NodeTask); herr != nil {
		log.WarnContext(ctx, "node task failed and could not be handed to the node-task queue; the invocation fails and Lambda retries it",
			"reason", err.Error(), "handoff", herr.Error())
		return errors.Join(err, herr)
	}
	switch {
	case errors.Is(err, tick.ErrClaimed):
		log.InfoContext(ctx, "a task of this invocation is executing elsewhere; handed to the node-task queue, retried after its visibility timeout", "reason", err.Error())
	default:
		log.WarnContext(ctx, "node task failed; handed to the node-task queue, retried after its visibility timeout", "reason", err.Error())
	}
	return nil
}

// traceFields gives an event the trace context of ctx, as the queues'
// message attributes carry it.
func traceFields(tr *tracing.Tracer) func(context.Context) map[string]string {
	return func(ctx context.Context) map[string]string {
		attrs := tr.MessageAttributes(ctx)
		if len(attrs) == 0 {
			return nil
		}
		out := make(map[string]string, len(attrs))
		for k, v := range attrs {
			out[k] = aws.ToString(v.StringValue)
		}
		return out
	}
}

// traceMessage is an invocation event as the SQS message the tracer reads
// a trace context from.
func traceMessage(ev lambdainvoke.Event) events.SQSMessage {
	m := events.SQSMessage{MessageAttributes: make(map[string]events.SQSMessageAttribute, len(ev.Trace))}
	for k, v := range ev.Trace {
		m.MessageAttributes[k] = events.SQSMessageAttribute{DataType: "String", StringValue: aws.String(v)}
	}
	return m
}
