package sqsqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/superstep/superstep/pkg/tick"
)

// MaxBatch is the most messages SQS takes in one SendMessageBatch.
const MaxBatch = 10

// batchRetries is how many times entries a batch reports failed are sent
// again before SendTasks gives up.
const batchRetries = 3

// BatchSender sends up to MaxBatch messages in one request; *sqs.Client
// implements it.
type BatchSender interface {
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

var _ tick.TaskBatchSender = (*Queue)(nil)

// SendTasks implements [tick.TaskBatchSender]: the node tasks go to the
// standard queue MaxBatch to a SendMessageBatch request (a 10,000-way
// fan-out is 1,000 requests, not 10,000; SQS bills a batch of up to 64
// KiB as one request). Entries a batch reports failed are sent again, up
// to three times; then SendTasks fails, naming the first failure. A
// client that cannot send batches sends the tasks one by one.
func (q *Queue) SendTasks(ctx context.Context, ts []tick.NodeTask) error {
	bs, ok := q.client.(BatchSender)
	if !ok {
		for _, t := range ts {
			if err := q.SendTask(ctx, t); err != nil {
				return err
			}
		}
		return nil
	}
	attrs := q.attributes(ctx)
	for start := 0; start < len(ts); start += MaxBatch {
		chunk := ts[start:min(start+MaxBatch, len(ts))]
		entries := make([]types.SendMessageBatchRequestEntry, len(chunk))
		for i, t := range chunk {
			body, err := json.Marshal(t)
			if err != nil {
				return fmt.Errorf("sqsqueue: encode node task: %w", err)
			}
			entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(string(body)), MessageAttributes: attrs}
		}
		if err := sendBatch(ctx, bs, q.taskURL, entries); err != nil {
			t := chunk[0]
			return fmt.Errorf("sqsqueue: send node tasks of run %q step %d: %w", t.RunID, t.Step, err)
		}
	}
	return nil
}

// sendBatch sends entries in one request, and the entries it reports
// failed again (a sender's fault is not retried: the message is wrong).
func sendBatch(ctx context.Context, bs BatchSender, url string, entries []types.SendMessageBatchRequestEntry) error {
	for attempt := 0; ; attempt++ {
		out, err := bs.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
		if err != nil {
			return err
		}
		if len(out.Failed) == 0 {
			return nil
		}
		byID := make(map[string]types.SendMessageBatchRequestEntry, len(entries))
		for _, e := range entries {
			byID[aws.ToString(e.Id)] = e
		}
		var retry []types.SendMessageBatchRequestEntry
		var first error
		for _, f := range out.Failed {
			if first == nil {
				first = fmt.Errorf("%d of %d messages failed; first: %s: %s", len(out.Failed), len(entries), aws.ToString(f.Code), aws.ToString(f.Message))
			}
			if f.SenderFault {
				return first
			}
			retry = append(retry, byID[aws.ToString(f.Id)])
		}
		if attempt+1 >= batchRetries {
			return first
		}
		if err := ctx.Err(); err != nil {
			return errors.Join(first, err)
		}
		entries = retry
	}
}
