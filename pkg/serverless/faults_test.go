package serverless_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/superstep/superstep/internal/lambdatest"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs/runstest"
)

// linChatState is the state of linChatGraph.
type linChatState struct {
	Messages []string `json:"messages" reduce:"append"`
}

// linChatGraph is the conversation turn of the thread model
// (pkg/runs/runstest): the run's message, then reply (inline, in the tick
// handler; a message starting with "ask" stops it at an interrupt until a
// resume), then done (remote, in the node handler).
func linChatGraph(t *testing.T) *pregel.Graph {
	t.Helper()
	g := pregel.NewGraph[linChatState]("lin-chat")
	g.AddFunc("reply", func(ctx context.Context, s linChatState) (linChatState, error) {
		last := s.Messages[len(s.Messages)-1]
		if strings.HasPrefix(last, "ask") {
			if _, err := pregel.Interrupt[string](ctx, "go on?"); err != nil {
				return linChatState{}, err
			}
		}
		return linChatState{Messages: []string{"re:" + last}}, nil
	})
	g.AddFunc("done", func(context.Context, linChatState) (linChatState, error) {
		return linChatState{Messages: []string{"done"}}, nil
	}, pregel.Remote())
	g.AddEdge(pregel.Start, "reply").AddEdge("reply", "done").AddEdge("done", pregel.End)
	cg, err := g.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return cg
}

// disorder stands in for the event source mappings of the tick and node
// functions, as a hostile queue would deliver: it takes every message as
// soon as it is sent and hands it to its handler late (a random delay),
// some twice (a duplicate, later again), some again long after (a late
// duplicate of a message already handled), all concurrently, so that
// messages overtake one another. A message whose handler fails is
// delivered again (as SQS would after its visibility timeout). Its
// choices come from one seeded generator, in the order the messages are
// received.
type disorder struct {
	s        *stack
	rng      *rand.Rand
	maxDelay time.Duration
	// What it did.
	received, delivered, duplicated, delayed, late, failed, reordered atomic.Int64
	seq                                                               atomic.Int64 // the highest sequence number delivered
	wg                                                                sync.WaitGroup
	mu                                                                sync.Mutex
	seen                                                              []queued
}

// queued is a message taken from a queue, numbered in the order taken.
type queued struct {
	queue string // tick or node
	id    string
	body  string
	seq   int64
}

// run delivers until ctx is done, then waits for the deliveries under
// way.
func (d *disorder) run(ctx context.Context) {
	var n int64
	var idle time.Duration
	for ctx.Err() == nil {
		got := 0
		for _, q := range []struct{ name, url string }{{"tick", d.s.cfg.TickQueueURL}, {"node", d.s.cfg.NodeQueueURL}} {
			out, err := d.s.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.url), MaxNumberOfMessages: 10})
			if err != nil {
				continue // ctx done, or the emulator busy: again
			}
			for _, m := range out.Messages {
				if _, err := d.s.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(q.url), ReceiptHandle: m.ReceiptHandle}); err != nil {
					continue
				}
				got++
				n++
				d.received.Add(1)
				msg := queued{queue: q.name, id: aws.ToString(m.MessageId), body: aws.ToString(m.Body), seq: n}
				d.schedule(ctx, msg, d.delay())
				if d.rng.IntN(4) == 0 {
					d.duplicated.Add(1)
					d.schedule(ctx, msg, d.delay()+d.maxDelay/2)
				}
				d.mu.Lock()
				d.seen = append(d.seen, msg)
				if d.rng.IntN(8) == 0 {
					old := d.seen[d.rng.IntN(len(d.seen))]
					d.late.Add(1)
					d.schedule(ctx, old, d.delay())
				}
				d.mu.Unlock()
			}
		}
		// Idle, poll less often: the emulator serves one request at a
		// time.
		if got == 0 {
			idle = min(2*idle+5*time.Millisecond, 100*time.Millisecond)
			select {
			case <-ctx.Done():
			case <-time.After(idle):
			}
		} else {
			idle = 0
		}
	}
	d.wg.Wait()
}

// delay draws a delivery's delay: none for half of them.
func (d *disorder) delay() time.Duration {
	if d.rng.IntN(2) == 0 {
		return 0
	}
	d.delayed.Add(1)
	return time.Duration(d.rng.Int64N(int64(d.maxDelay)))
}

// schedule hands msg to its handler after wait; a failure delivers it
// again a little later.
func (d *disorder) schedule(ctx context.Context, msg queued, wait time.Duration) {
	d.wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			if prev := d.seq.Load(); msg.seq < prev {
				d.reordered.Add(1) // a message taken later was delivered first
			}
			for prev := d.seq.Load(); msg.seq > prev && !d.seq.CompareAndSwap(prev, msg.seq); prev = d.seq.Load() {
			}
			d.delivered.Add(1)
			if d.handle(ctx, msg) {
				return
			}
			d.failed.Add(1)
			wait = 50 * time.Millisecond
		}
	})
}

// handle gives msg to its handler; it reports whether the handler took
// it.
func (d *disorder) handle(ctx context.Context, msg queued) bool {
	url, handler := d.s.cfg.NodeQueueURL, d.s.app.HandleNode
	if msg.queue == "tick" {
		url, handler = d.s.cfg.TickQueueURL, d.s.app.HandleTick
	}
	arn := "arn:aws:sqs:us-east-1:123456789012:" + url[strings.LastIndex(url, "/")+1:]
	resp, err := handler(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: msg.id, Body: msg.body, EventSource: "aws:sqs", EventSourceARN: arn}}})
	if err != nil && !errors.Is(err, context.Canceled) {
		d.s.t.Logf("%s handler: %v", msg.queue, err)
	}
	return err == nil && len(resp.BatchItemFailures) == 0
}

// TestThreadsLinearizableSQSDisorder checks thread histories on the
// serverless path with the queues' deliveries disordered: clients drive
// threads through the api function's HTTP API, the tick and node
// handlers run in process on moto's DynamoDB, and their messages are
// delivered late, twice, long after again, and out of order (disorder,
// seeded by the check's seed). Every run must end, and the histories must
// be linearizable against the model of runstest.Linearizable.
//
// Short by default (2 threads × 3 clients × 4 operations: the emulator
// serves one request at a time, and a run takes some 80 of them);
// SUPERSTEP_FAULTS_OPS=N makes N operations (at least) on N/120 threads of
// 3 clients (pkg/runs/README.md).
func TestThreadsLinearizableSQSDisorder(t *testing.T) { threadsLinearizableDisorder(t, false) }

// TestThreadsLinearizableInvokeDisorder is TestThreadsLinearizableSQSDisorder
// with NODE_DISPATCH=invoke: the remote node's tasks start by asynchronous
// invocations, which Lambda's event queue (the lambdatest stand-in)
// delivers late, out of order and twice each (the second copy later); the ticks, and
// the tasks a node function hands to the node-task queue, go through the
// SQS disorder.
func TestThreadsLinearizableInvokeDisorder(t *testing.T) { threadsLinearizableDisorder(t, true) }

func threadsLinearizableDisorder(t *testing.T, invoke bool) {
	t.Parallel()
	threads, clients, ops := 2, 3, 4
	if n, _ := strconv.Atoi(os.Getenv("SUPERSTEP_FAULTS_OPS")); n > 0 {
		ops = 40
		threads = (n + clients*ops - 1) / (clients * ops)
	}
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("SUPERSTEP_LINEARIZABLE_SEED"), 10, 64); err == nil {
		seed = v
	}
	// SUPERSTEP_AWS_DYNAMODB=dynalite puts DynamoDB on dynalite, for the
	// long mode: on moto its runs fall minutes behind the clients.
	s := newStack(t, stackOptions{noPollers: true, graphs: []*pregel.Graph{linChatGraph(t)},
		dynalite: os.Getenv("SUPERSTEP_AWS_DYNAMODB") == "dynalite", invoke: invoke, invokeFaults: lambdatest.Faults{MaxDelay: 100 * time.Millisecond, Duplicate: 1, Seed: seed}})
	d := &disorder{s: s, rng: rand.New(rand.NewPCG(seed, 1)), maxDelay: 50 * time.Millisecond}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.run(ctx)
	}()
	t.Cleanup(func() {
		stop()
		<-done
	})
	api := &runstest.HTTPThreads{URL: func() string { return s.url }, Graph: "lin-chat"}
	start := time.Now()
	// SUPERSTEP_FAULTS_CHECK_TIMEOUT bounds the checker (default 5m): a
	// long run's histories may need longer for a verdict.
	checkTimeout, _ := time.ParseDuration(os.Getenv("SUPERSTEP_FAULTS_CHECK_TIMEOUT"))
	res := runstest.CheckFaults(t, runstest.FaultConfig{Threads: threads, Clients: clients, Ops: ops, Seed: seed, Strict: true, Settle: 60 * time.Second, Poll: 50 * time.Millisecond, Timeout: checkTimeout}, api)
	t.Logf("%d AWS requests", s.meter.Snapshot().Total().Requests)
	t.Logf("SQS disorder: %d messages taken, %d deliveries: %d duplicated, %d late duplicates, %d delayed, %d overtaken, %d failed and delivered again; %d clients on %d threads: %s; test %v",
		d.received.Load(), d.delivered.Load(), d.duplicated.Load(), d.late.Load(), d.delayed.Load(), d.reordered.Load(), d.failed.Load(), threads*clients, threads, res, time.Since(start).Round(time.Millisecond))
	if res.Verdict != porcupine.Ok {
		t.Errorf("thread histories with SQS disorder are not linearizable: %s", res.Verdict)
	}
	if d.duplicated.Load()+d.late.Load() == 0 || d.reordered.Load() == 0 {
		t.Errorf("the deliveries were not disordered enough to test anything")
	}
	if invoke {
		st := s.lambda.Stats()
		t.Logf("Lambda stand-in: %+v", st)
		if st.Accepted == 0 || st.Duplicated != st.Accepted || st.Failed != 0 {
			t.Errorf("Lambda stand-in: %+v; want node tasks invoked, each twice, none given up on", st)
		}
	}
}
