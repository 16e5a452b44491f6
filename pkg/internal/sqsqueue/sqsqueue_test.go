package sqsqueue_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/superstep/superstep/internal/mototest"
	"github.com/superstep/superstep/pkg/internal/sqsqueue"
	"github.com/superstep/superstep/pkg/tick"
)

var moto mototest.Shared

func TestMain(m *testing.M) {
	os.Exit(moto.Run(m))
}

func TestDedupID(t *testing.T) {
	short := tick.Tick{RunID: "r1", Step: 3, Nonce: "v2"}
	if got := sqsqueue.DedupID(short); got != "r1#3#v2" {
		t.Errorf("DedupID(%+v) = %q, want it unchanged", short, got)
	}
	long := tick.Tick{RunID: strings.Repeat("a", 128), Step: 12, Nonce: "commit.0123456789abcdef.completed.0"}
	other := long
	other.Nonce = "commit.0123456789abcdef.completed.1"
	a, b := sqsqueue.DedupID(long), sqsqueue.DedupID(other)
	if len(a) != sqsqueue.MaxDedupIDLen || len(b) != sqsqueue.MaxDedupIDLen {
		t.Errorf("hashed ids are %d and %d characters, want %d", len(a), len(b), sqsqueue.MaxDedupIDLen)
	}
	if a == b {
		t.Error("two long ids that differ in their tail hash to the same id")
	}
	if a != sqsqueue.DedupID(long) {
		t.Error("DedupID is not stable")
	}
	if got := sqsqueue.GroupID("run with space"); strings.Contains(got, " ") || len(got) > sqsqueue.MaxDedupIDLen {
		t.Errorf("GroupID kept a character SQS refuses: %q", got)
	}
}

// env is a pair of queues on the shared emulator.
type env struct {
	client *sqs.Client
	name   string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	srv := moto.Start(t)
	var b [4]byte
	rand.Read(b[:])
	return &env{client: sqs.NewFromConfig(srv.Config), name: strings.ReplaceAll(t.Name(), "/", "-") + "-" + hex.EncodeToString(b[:])}
}

func receive(t *testing.T, client *sqs.Client, url string) []types.Message {
	t.Helper()
	out, err := client.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(url),
		MaxNumberOfMessages:         10,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Messages
}

func TestQueueSends(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	ticks, err := sqsqueue.CreateQueue(ctx, e.client, sqsqueue.Spec{Name: e.name + "-ticks", FIFO: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(ticks.URL, ".fifo") {
		t.Errorf("FIFO queue URL %s lacks .fifo", ticks.URL)
	}
	tasks, err := sqsqueue.CreateQueue(ctx, e.client, sqsqueue.Spec{Name: e.name + "-tasks"})
	if err != nil {
		t.Fatal(err)
	}
	q := sqsqueue.New(e.client, ticks.URL, tasks.URL)
	tk := tick.Tick{RunID: "run-1", Step: 2, Nonce: "v3"}
	for range 2 { // the second is deduplicated
		if err := q.SendTick(ctx, tk); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.SendTask(ctx, tick.NodeTask{RunID: "run-1", Step: 2, TaskID: "abc"}); err != nil {
		t.Fatal(err)
	}
	msgs := receive(t, e.client, ticks.URL)
	if len(msgs) != 1 {
		t.Fatalf("received %d ticks, want 1 (deduplicated)", len(msgs))
	}
	m := msgs[0]
	var got tick.Tick
	if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &got); err != nil || got != tk {
		t.Errorf("tick body %s (%v), want %+v", aws.ToString(m.Body), err, tk)
	}
	if g, d := m.Attributes["MessageGroupId"], m.Attributes["MessageDeduplicationId"]; g != "run-1" || d != "run-1#2#v3" {
		t.Errorf("group %q dedup %q, want run-1 and run-1#2#v3", g, d)
	}
	msgs = receive(t, e.client, tasks.URL)
	var task tick.NodeTask
	if len(msgs) != 1 || json.Unmarshal([]byte(aws.ToString(msgs[0].Body)), &task) != nil || task.TaskID != "abc" {
		t.Fatalf("node task messages %+v", msgs)
	}
}

// The poller deletes what the handler processed, leaves failures for
// redelivery until the redrive policy moves them to the dead-letter queue,
// and stops when its context ends.
func TestPoller(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	q, err := sqsqueue.CreateQueue(ctx, e.client, sqsqueue.Spec{Name: e.name, VisibilityTimeout: time.Second, MaxReceiveCount: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"ok", "fail", "error", "panic"} {
		if _, err := e.client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q.URL), MessageBody: aws.String(body)}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	calls := map[string]int{}
	var sawARN, sawSource string
	p := &sqsqueue.Poller{
		Client:      e.client,
		QueueURL:    q.URL,
		Concurrency: 2,
		IdleDelay:   20 * time.Millisecond,
		Logger:      discard(),
		Handler: func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			if len(ev.Records) != 1 {
				t.Errorf("batch of %d records, want 1", len(ev.Records))
			}
			r := ev.Records[0]
			mu.Lock()
			calls[r.Body]++
			sawARN, sawSource = r.EventSourceARN, r.EventSource
			mu.Unlock()
			switch r.Body {
			case "fail":
				return events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{{ItemIdentifier: r.MessageId}}}, nil
			case "error":
				return events.SQSEventResponse{}, errors.New("boom")
			case "panic":
				panic("boom")
			}
			return events.SQSEventResponse{}, nil
		},
	}
	pctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(pctx) }()

	// The three failing messages reach the DLQ after two receives each.
	deadline := time.Now().Add(15 * time.Second)
	var dead []string
	for len(dead) < 3 && time.Now().Before(deadline) {
		for _, m := range receive(t, e.client, q.DLQURL) {
			dead = append(dead, aws.ToString(m.Body))
			e.client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(q.DLQURL), ReceiptHandle: m.ReceiptHandle})
		}
		time.Sleep(100 * time.Millisecond)
	}
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dead) != 3 {
		t.Fatalf("dead letters %v, want fail, error and panic", dead)
	}
	if calls["ok"] != 1 {
		t.Errorf("the processed message was handled %d times, want 1 (deleted)", calls["ok"])
	}
	for _, b := range []string{"fail", "error", "panic"} {
		if calls[b] != 2 {
			t.Errorf("%q was handled %d times, want 2 (maxReceiveCount)", b, calls[b])
		}
	}
	if sawARN != q.ARN || sawSource != "aws:sqs" {
		t.Errorf("event source %q %q, want aws:sqs %q", sawSource, sawARN, q.ARN)
	}
}

func TestPollerMissingQueue(t *testing.T) {
	e := newEnv(t)
	p := &sqsqueue.Poller{Client: e.client, QueueURL: moto.Start(t).URL + "/123456789012/nope", Handler: func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
		return events.SQSEventResponse{}, nil
	}}
	if err := p.Run(t.Context()); err == nil {
		t.Fatal("Run on a missing queue returned nil")
	}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
