package serverless_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/superstep/superstep/pkg/pregel"
)

// pump hands one message of the queue at url to handle, as the event
// source mapping would, and deletes it; it reports whether there was one.
// The handler must not fail it.
func (s *stack) pump(url string, handle func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)) bool {
	s.t.Helper()
	ctx := s.t.Context()
	out, err := s.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 1})
	if err != nil {
		s.t.Fatal(err)
	}
	if len(out.Messages) == 0 {
		return false
	}
	m := out.Messages[0]
	name := url[strings.LastIndex(url, "/")+1:]
	ev := events.SQSEvent{Records: []events.SQSMessage{{
		MessageId: aws.ToString(m.MessageId), Body: aws.ToString(m.Body),
		EventSource: "aws:sqs", EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:" + name,
	}}}
	resp, err := handle(ctx, ev)
	if err != nil || len(resp.BatchItemFailures) > 0 {
		s.t.Fatalf("%s: message %s failed: %+v %v\nlogs:\n%s", name, aws.ToString(m.Body), resp, err, s.logs.String())
	}
	if _, err := s.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
		s.t.Fatal(err)
	}
	return true
}

// settle handles tick and node messages until both queues are empty.
func (s *stack) settle() {
	s.t.Helper()
	for n := 0; ; n++ {
		if n > 200 {
			s.t.Fatal("messages never stop")
		}
		ticked := s.pump(s.cfg.TickQueueURL, s.app.HandleTick)
		noded := s.pump(s.cfg.NodeQueueURL, s.app.HandleNode)
		if !ticked && !noded && s.queueDepth(s.cfg.TickQueueURL)+s.queueDepth(s.cfg.NodeQueueURL) == 0 {
			return
		}
	}
}

// A cancel or a drain through the API while remote-fanout's remote step
// (three remote work tasks and the inline side task) has its tasks
// queued, one executing, or all finished: the run always ends — cancelled
// (after the step only if all its tasks had finished), or drained after
// the step in progress is committed, and then resumable to completion. No
// message is left and no task executes twice. The handlers get the
// messages one at a time from the queues on moto.
func TestStopDuringRemoteStep(t *testing.T) {
	t.Parallel()
	ref := reference(t, remoteGraph(t, nil), nil, "yes")
	points := []struct {
		name      string
		finished  int
		executing bool
		cancelAt  int // the step a cancelled run ends at
	}{
		{"tasks queued", 0, false, 1},
		{"a task executing", 1, true, 1},
		{"tasks finished", 3, false, 2},
	}
	for _, mode := range []string{"cancel", "drain"} {
		for _, p := range points {
			t.Run(mode+"/"+p.name, func(t *testing.T) {
				t.Parallel()
				var (
					s      *stack
					mu     sync.Mutex
					execs  = map[string]int{}
					armed  atomic.Bool
					once   sync.Once
					status int
				)
				request := func() {
					once.Do(func() {
						var body any
						if mode == "drain" {
							body = map[string]string{"reason": "deploy"}
						}
						status = s.do("POST", "/v1/runs/x/"+mode, body, nil)
					})
				}
				s = newStack(t, stackOptions{noPollers: true, work: func(ctx context.Context) {
					info, _ := pregel.TaskFrom(ctx)
					mu.Lock()
					execs[info.TaskID]++
					mu.Unlock()
					if armed.Load() {
						request()
					}
				}})
				s.create("remote-fanout", "x", nil)
				s.pump(s.cfg.TickQueueURL, s.app.HandleTick) // step 1: prepare
				s.pump(s.cfg.TickQueueURL, s.app.HandleTick) // step 2: send the work tasks, execute side
				if n := s.queueDepth(s.cfg.NodeQueueURL); n != 3 {
					t.Fatalf("%d node tasks queued, want 3", n)
				}
				for range p.finished {
					s.pump(s.cfg.NodeQueueURL, s.app.HandleNode)
				}
				if p.executing {
					armed.Store(true)
					s.pump(s.cfg.NodeQueueURL, s.app.HandleNode)
				} else {
					request()
				}
				if status != http.StatusAccepted {
					t.Fatalf("%s: status %d", mode, status)
				}
				s.settle()

				r := s.get("x")
				if mode == "cancel" {
					if r.Status != pregel.RunCancelled || r.Step != p.cancelAt || r.CancelRequested {
						t.Fatalf("run is %s at step %d (cancel requested %v), want cancelled at step %d", r.Status, r.Step, r.CancelRequested, p.cancelAt)
					}
					if st := s.do("POST", "/v1/runs/x/cancel", nil, nil); st != http.StatusConflict {
						t.Errorf("second cancel: status %d, want 409", st)
					}
				} else {
					if r.Status != pregel.RunDrained || r.Step != 2 || r.DrainReason != "deploy" {
						t.Fatalf("run is %s at step %d (reason %q), want drained at step 2: the step in progress committed", r.Status, r.Step, r.DrainReason)
					}
					for _, resume := range []map[string]any{{}, {"resume": "yes"}} {
						if st := s.do("POST", "/v1/runs/x/resume", resume, nil); st != http.StatusAccepted {
							t.Fatalf("resume %v: status %d", resume, st)
						}
						s.settle()
					}
					r = s.get("x")
					if r.Status != pregel.RunCompleted || !jsonEqual(r.Values, ref.Values) || r.Counters != ref.Counters {
						t.Fatalf("after resume: %s %s %+v, want completed with %s %+v", r.Status, mustJSON(r.Values), r.Counters, mustJSON(ref.Values), ref.Counters)
					}
				}
				mu.Lock()
				defer mu.Unlock()
				for id, n := range execs {
					if n > 1 {
						t.Errorf("work task %s executed %d times", id, n)
					}
				}
			})
		}
	}
}
