package sqsqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Receiver receives and deletes messages; *sqs.Client implements it.
type Receiver interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// Handler is a Lambda SQS handler with ReportBatchItemFailures: it returns
// the ids of the messages it could not process, or an error when the
// whole batch failed.
type Handler func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error)

// Poller emulates a Lambda SQS event source mapping with batch size 1 and
// ReportBatchItemFailures: it receives one message at a time, calls
// Handler with an [events.SQSEvent] holding it, deletes it unless the
// handler reported it as failed (or returned an error, or panicked), and
// leaves a failed message to come back after the visibility timeout, or
// to go to the queue's dead-letter queue after its maxReceiveCount.
//
// Set the fields before calling Run; a Poller runs once.
type Poller struct {
	// Client talks to SQS. Required.
	Client Receiver
	// QueueURL is the queue to poll. Required.
	QueueURL string
	// Handler processes each message. Required.
	Handler Handler
	// Concurrency is the number of messages handled at once (default 1),
	// like the concurrency of the function behind an event source
	// mapping. A FIFO queue never hands out two messages of one group at
	// once, whatever the concurrency.
	Concurrency int
	// WaitTime is the long-poll wait of each receive (WaitTimeSeconds,
	// whole seconds up to 20). Zero short-polls: an empty receive is
	// followed by IdleDelay of sleep instead.
	WaitTime time.Duration
	// IdleDelay is the pause after an empty short poll (default 100 ms)
	// and the base of the back-off after a failed receive.
	IdleDelay time.Duration
	// VisibilityTimeout, when positive, overrides the queue's visibility
	// timeout for the messages this Poller receives (whole seconds).
	VisibilityTimeout time.Duration
	// Timeout bounds each handler call, like a function's timeout; zero
	// means none.
	Timeout time.Duration
	// StopGrace is how long the handler calls in progress may go on once
	// Run's context is done before their context is cancelled too. Zero
	// cancels them at once; their messages then come back after the
	// visibility timeout, as after a crash.
	StopGrace time.Duration
	// Region fills the awsRegion of the events (optional).
	Region string
	// Logger receives handler failures and receive errors (default
	// slog.Default()).
	Logger *slog.Logger
}

// Run polls until ctx is done, then waits for the handler calls in
// progress (see StopGrace) and returns nil. It returns an error at once
// if the queue cannot be read (it does not exist, say).
func (p *Poller) Run(ctx context.Context) error {
	if p.Client == nil || p.QueueURL == "" || p.Handler == nil {
		return errors.New("sqsqueue: Poller needs a Client, a QueueURL and a Handler")
	}
	attrs, err := p.Client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(p.QueueURL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("sqsqueue: read queue %s: %w", p.QueueURL, err)
	}
	arn := attrs.Attributes[string(types.QueueAttributeNameQueueArn)]

	// Handler calls outlive ctx by StopGrace.
	hctx, cancelHandlers := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHandlers()
	stop := context.AfterFunc(ctx, func() {
		if p.StopGrace <= 0 {
			cancelHandlers()
			return
		}
		t := time.AfterFunc(p.StopGrace, cancelHandlers)
		context.AfterFunc(hctx, func() { t.Stop() })
	})
	defer stop()

	n := max(p.Concurrency, 1)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { p.loop(ctx, hctx, arn) })
	}
	wg.Wait()
	return nil
}

func (p *Poller) log() *slog.Logger {
	if p.Logger != nil {
		return p.Logger
	}
	return slog.Default()
}

// loop receives and handles messages one at a time until ctx is done.
func (p *Poller) loop(ctx, hctx context.Context, arn string) {
	idle := p.IdleDelay
	if idle <= 0 {
		idle = 100 * time.Millisecond
	}
	in := &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(p.QueueURL),
		MaxNumberOfMessages:         1,
		WaitTimeSeconds:             int32(min(p.WaitTime/time.Second, 20)),
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	}
	if p.VisibilityTimeout > 0 {
		in.VisibilityTimeout = int32(max(p.VisibilityTimeout/time.Second, 1))
	}
	failures := 0
	for ctx.Err() == nil {
		out, err := p.Client.ReceiveMessage(ctx, in)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			delay := min(idle<<min(failures, 6), 10*time.Second)
			delay += rand.N(delay/2 + 1)
			p.log().Warn("sqsqueue: receive failed; retrying", "queue", p.QueueURL, "err", err, "retry_in", delay)
			sleep(ctx, delay)
			continue
		}
		failures = 0
		if len(out.Messages) == 0 {
			if in.WaitTimeSeconds == 0 {
				sleep(ctx, idle)
			}
			continue
		}
		for _, m := range out.Messages {
			p.handle(hctx, arn, m)
		}
	}
}

// handle calls the handler with one message and deletes it unless it
// failed.
func (p *Poller) handle(ctx context.Context, arn string, m types.Message) {
	ev := events.SQSEvent{Records: []events.SQSMessage{p.record(arn, m)}}
	id := aws.ToString(m.MessageId)
	log := p.log().With("queue", p.QueueURL, "message_id", id, "receive_count", m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
	log.Debug("sqsqueue: handling a message")
	resp, err := p.invoke(ctx, ev)
	failed := err != nil
	if err != nil {
		log.Warn("sqsqueue: handler failed; the message comes back after the visibility timeout", "err", err)
	}
	for _, f := range resp.BatchItemFailures {
		if f.ItemIdentifier != id {
			// Lambda treats an unknown identifier as a failure of
			// the whole batch.
			log.Error("sqsqueue: handler reported a failure for a message not in the batch; the batch counts as failed", "item_identifier", f.ItemIdentifier)
		}
		failed = true
	}
	if failed {
		return
	}
	log.Debug("sqsqueue: handled; deleting the message")
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if _, err := p.Client.DeleteMessage(dctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(p.QueueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
		log.Warn("sqsqueue: delete a handled message; it will be delivered again", "err", err)
	}
}

// invoke calls the handler as Lambda would: with a timeout, and a panic
// counting as an error.
func (p *Poller) invoke(ctx context.Context, ev events.SQSEvent) (resp events.SQSEventResponse, err error) {
	if p.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.Timeout)
		defer cancel()
	}
	defer func() {
		if v := recover(); v != nil {
			p.log().Error("sqsqueue: handler panicked", "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			resp, err = events.SQSEventResponse{}, fmt.Errorf("sqsqueue: handler panicked: %v", v)
		}
	}()
	return p.Handler(ctx, ev)
}

// record converts a received message into the record Lambda would pass.
func (p *Poller) record(arn string, m types.Message) events.SQSMessage {
	r := events.SQSMessage{
		MessageId:              aws.ToString(m.MessageId),
		ReceiptHandle:          aws.ToString(m.ReceiptHandle),
		Body:                   aws.ToString(m.Body),
		Md5OfBody:              aws.ToString(m.MD5OfBody),
		Md5OfMessageAttributes: aws.ToString(m.MD5OfMessageAttributes),
		Attributes:             m.Attributes,
		EventSource:            "aws:sqs",
		EventSourceARN:         arn,
		AWSRegion:              p.Region,
	}
	if r.AWSRegion == "" {
		// arn:aws:sqs:<region>:<account>:<name>
		if parts := strings.Split(arn, ":"); len(parts) > 3 {
			r.AWSRegion = parts[3]
		}
	}
	if len(m.MessageAttributes) > 0 {
		r.MessageAttributes = make(map[string]events.SQSMessageAttribute, len(m.MessageAttributes))
		for k, v := range m.MessageAttributes {
			r.MessageAttributes[k] = events.SQSMessageAttribute{
				StringValue:      v.StringValue,
				BinaryValue:      v.BinaryValue,
				StringListValues: v.StringListValues,
				BinaryListValues: v.BinaryListValues,
				DataType:         aws.ToString(v.DataType),
			}
		}
	}
	return r
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
