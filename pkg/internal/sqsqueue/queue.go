// Package sqsqueue carries superstep's ticks and node tasks on Amazon SQS
// with aws-sdk-go-v2, and emulates Lambda's SQS event source mapping for
// local runs.
//
// [Queue] implements [tick.Queue]: ticks go to a FIFO queue, grouped by run
// (MessageGroupId = run id, so one run's ticks are handled one at a time
// and in order) and deduplicated by [tick.Tick.DedupID]; node tasks go to a
// standard queue, so the tasks of one step run in parallel. Bodies are the
// JSON of [tick.Tick] and [tick.NodeTask].
//
// [Poller] receives messages the way a Lambda event source mapping with
// batch size 1 and ReportBatchItemFailures does, and calls the same handler
// function the Lambda runs, with an [events.SQSEvent]. It lets `superstep
// dev --aws` and the tests drive the real handlers without Lambda.
//
// SQS deduplication and ordering help but are not relied on: the tick
// protocol is fenced on the step number, so a duplicate or late message is
// a no-op.
package sqsqueue

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/superstep/superstep/pkg/tick"
)

// MaxDedupIDLen is the longest MessageDeduplicationId (and MessageGroupId)
// SQS accepts.
const MaxDedupIDLen = 128

// Sender sends messages; *sqs.Client implements it.
type Sender interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// Queue sends ticks to a FIFO queue and node tasks to a standard queue. It
// implements [tick.Queue] and is safe for concurrent use.
type Queue struct {
	client  Sender
	tickURL string
	taskURL string
	attrs   func(context.Context) map[string]types.MessageAttributeValue
}

// Option configures [New].
type Option func(*Queue)

// WithMessageAttributes sets the function that gives each message its
// attributes, from the context it is sent with: tracing uses it to carry
// the trace context (see tracing.Tracer.MessageAttributes).
func WithMessageAttributes(fn func(context.Context) map[string]types.MessageAttributeValue) Option {
	return func(q *Queue) { q.attrs = fn }
}

var _ tick.Queue = (*Queue)(nil)

// New returns a Queue sending ticks to the FIFO queue at tickURL and node
// tasks to the queue at taskURL.
func New(client Sender, tickURL, taskURL string, opts ...Option) *Queue {
	q := &Queue{client: client, tickURL: tickURL, taskURL: taskURL}
	for _, o := range opts {
		o(q)
	}
	return q
}

// attributes returns the attributes of a message sent with ctx.
func (q *Queue) attributes(ctx context.Context) map[string]types.MessageAttributeValue {
	if q.attrs == nil {
		return nil
	}
	return q.attrs(ctx)
}

// SendTick implements [tick.Queue]: the tick goes to the FIFO queue with
// MessageGroupId = run id and MessageDeduplicationId = [DedupID](t).
func (q *Queue) SendTick(ctx context.Context, t tick.Tick) error {
	body, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("sqsqueue: encode tick: %w", err)
	}
	_, err = q.client.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:               aws.String(q.tickURL),
		MessageBody:            aws.String(string(body)),
		MessageGroupId:         aws.String(GroupID(t.RunID)),
		MessageDeduplicationId: aws.String(DedupID(t)),
		MessageAttributes:      q.attributes(ctx),
	})
	if err != nil {
		return fmt.Errorf("sqsqueue: send tick %s: %w", t.DedupID(), err)
	}
	return nil
}

// SendTask implements [tick.Queue]: the task goes to the standard queue.
func (q *Queue) SendTask(ctx context.Context, t tick.NodeTask) error {
	body, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("sqsqueue: encode node task: %w", err)
	}
	_, err = q.client.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:          aws.String(q.taskURL),
		MessageBody:       aws.String(string(body)),
		MessageAttributes: q.attributes(ctx),
	})
	if err != nil {
		return fmt.Errorf("sqsqueue: send node task %s of run %q step %d: %w", t.TaskID, t.RunID, t.Step, err)
	}
	return nil
}

// DedupID is the MessageDeduplicationId of a tick: t.DedupID() when SQS
// accepts it, otherwise (too long, or a character SQS refuses) a readable
// prefix of it and its SHA-256, 128 characters in all.
func DedupID(t tick.Tick) string { return fit(t.DedupID()) }

// GroupID is the MessageGroupId of a run's ticks: the run id, made fit
// like [DedupID]. Run ids the API accepts always fit as they are.
func GroupID(runID string) string { return fit(runID) }

// fit returns id if SQS accepts it as a deduplication or group id, and a
// stable substitute of at most MaxDedupIDLen characters otherwise.
func fit(id string) string {
	if id != "" && len(id) <= MaxDedupIDLen && allowed(id) {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	h := hex.EncodeToString(sum[:]) // 64 characters
	prefix := make([]byte, 0, MaxDedupIDLen-len(h)-1)
	for i := 0; i < len(id) && len(prefix) < cap(prefix); i++ {
		if c := id[i]; allowedChar(c) {
			prefix = append(prefix, c)
		}
	}
	return string(prefix) + "~" + h
}

// allowed reports whether every character of id is one SQS accepts in a
// deduplication or group id: ASCII letters, digits and punctuation.
func allowed(id string) bool {
	for i := 0; i < len(id); i++ {
		if !allowedChar(id[i]) {
			return false
		}
	}
	return true
}

func allowedChar(c byte) bool { return c > ' ' && c < 0x7f }
