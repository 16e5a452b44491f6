package sqsqueue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/superstep/superstep/pkg/internal/sqsqueue"
	"github.com/superstep/superstep/pkg/tick"
)

// countingSQS counts the requests made through the real client, and fails
// the entries named in failOnce the first time they are sent.
type countingSQS struct {
	*sqs.Client
	mu       sync.Mutex
	single   int
	batches  []int
	failOnce map[string]bool
	fault    bool
}

func (c *countingSQS) SendMessage(ctx context.Context, in *sqs.SendMessageInput, o ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	c.mu.Lock()
	c.single++
	c.mu.Unlock()
	return c.Client.SendMessage(ctx, in, o...)
}

func (c *countingSQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, o ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	c.mu.Lock()
	c.batches = append(c.batches, len(in.Entries))
	var failed []types.BatchResultErrorEntry
	var keep []types.SendMessageBatchRequestEntry
	for _, e := range in.Entries {
		body := aws.ToString(e.MessageBody)
		if c.failOnce[body] {
			delete(c.failOnce, body)
			failed = append(failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"), Message: aws.String("try again"), SenderFault: c.fault})
			continue
		}
		keep = append(keep, e)
	}
	c.mu.Unlock()
	out := &sqs.SendMessageBatchOutput{}
	if len(keep) > 0 {
		in2 := *in
		in2.Entries = keep
		var err error
		if out, err = c.Client.SendMessageBatch(ctx, &in2, o...); err != nil {
			return nil, err
		}
	}
	out.Failed = append(out.Failed, failed...)
	return out, nil
}

// A step's node tasks go out ten to a SendMessageBatch request; entries a
// batch reports failed are sent again; a sender's fault is an error.
func TestSendTasksInBatches(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	tasks, err := sqsqueue.CreateQueue(ctx, e.client, sqsqueue.Spec{Name: e.name + "-tasks"})
	if err != nil {
		t.Fatal(err)
	}
	const n = 23
	ts := make([]tick.NodeTask, n)
	for i := range ts {
		ts[i] = tick.NodeTask{RunID: "run-1", Step: 2, TaskID: fmt.Sprintf("t%02d", i)}
	}
	body := func(t tick.NodeTask) string { b, _ := json.Marshal(t); return string(b) }
	c := &countingSQS{Client: e.client, failOnce: map[string]bool{body(ts[3]): true, body(ts[17]): true}}
	q := sqsqueue.New(c, "", tasks.URL)
	if err := q.SendTasks(ctx, ts); err != nil {
		t.Fatal(err)
	}
	// 10, 10 and 3, plus one retry of a failed entry in each of the first
	// two batches.
	if c.single != 0 || fmt.Sprint(c.batches) != "[10 1 10 1 3]" {
		t.Errorf("requests: %d SendMessage, batches of %v; want none and [10 1 10 1 3]", c.single, c.batches)
	}
	got := map[string]int{}
	for range 10 {
		msgs := receive(t, e.client, tasks.URL)
		for _, m := range msgs {
			var nt tick.NodeTask
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &nt); err != nil {
				t.Fatal(err)
			}
			got[nt.TaskID]++
			if _, err := e.client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(tasks.URL), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
		if len(got) == n {
			break
		}
	}
	for _, nt := range ts {
		if got[nt.TaskID] != 1 {
			t.Errorf("task %s received %d times, want once", nt.TaskID, got[nt.TaskID])
		}
	}

	bad := &countingSQS{Client: e.client, failOnce: map[string]bool{body(ts[0]): true}, fault: true}
	err = sqsqueue.New(bad, "", tasks.URL).SendTasks(ctx, ts[:2])
	if err == nil || !strings.Contains(err.Error(), "1 of 2 messages failed") {
		t.Errorf("a sender's fault: %v, want an error saying 1 of 2 messages failed", err)
	}
}
