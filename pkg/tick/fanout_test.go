package tick_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/superstep/superstep/internal/mototest"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/pregel/fanouttest"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/store/dynamo"
	"github.com/superstep/superstep/pkg/tick"
)

// fifoQueue delivers messages in the order sent, deduplicating ticks like
// an SQS FIFO queue.
type fifoQueue struct {
	mu   sync.Mutex
	msgs []message
	seen map[string]bool
	// singles and batches count SendTask calls and SendTasks calls.
	singles, batches int
}

// SendTasks implements tick.TaskBatchSender.
func (q *fifoQueue) SendTasks(_ context.Context, ts []tick.NodeTask) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.batches++
	for _, t := range ts {
		q.msgs = append(q.msgs, message{task: &t})
	}
	return nil
}

func (q *fifoQueue) SendTick(_ context.Context, t tick.Tick) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.seen[t.DedupID()] {
		return nil
	}
	q.seen[t.DedupID()] = true
	q.msgs = append(q.msgs, message{tick: &t})
	return nil
}

func (q *fifoQueue) SendTask(_ context.Context, t tick.NodeTask) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.singles++
	q.msgs = append(q.msgs, message{task: &t})
	return nil
}

func (q *fifoQueue) pop() (message, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.msgs) == 0 {
		return message{}, false
	}
	m := q.msgs[0]
	q.msgs = q.msgs[1:]
	return m, true
}

// runPolicyCase runs c with a remote fan-out target on the serverless path
// over be, every message delivered twice in a row, and checks it as the
// embedded engine's: statuses, counters, errors, outcomes; the cancelled
// items never ran and no item ran twice.
func runPolicyCase(t *testing.T, c fanouttest.Case, be backend) {
	t.Helper()
	ctx := context.Background()
	c.Remote = true
	ex := &fanouttest.Executions{}
	reg, err := runs.NewRegistry(fanouttest.Graph(t, "fanout-policy", c, ex))
	if err != nil {
		t.Fatal(err)
	}
	q := &fifoQueue{seen: map[string]bool{}}
	clock := &fakeClock{now: time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)}
	h := &tick.Handler{Graphs: reg, Runs: be.runs, Checkpoints: be.checkpoints, Queue: q, Claims: be.claims, Loader: be.loader, Now: clock.Now}
	svc := &runs.Service{Graphs: reg, Runs: be.runs, Checkpoints: be.checkpoints, Dispatcher: &tick.Dispatcher{Checkpoints: be.checkpoints, Queue: q}}
	input, _ := json.Marshal(fanouttest.Input(c))
	if _, _, err := svc.Create(ctx, "fanout-policy", runs.CreateRequest{RunID: "r", Input: input}); err != nil {
		t.Fatal(err)
	}
	for n := 0; ; n++ {
		if n > 20*c.Items+100 {
			t.Fatal("messages never stop")
		}
		m, ok := q.pop()
		if !ok {
			break
		}
		for range 2 { // a duplicate delivery of every message
			if m.tick != nil {
				err = h.Tick(ctx, *m.tick)
			} else {
				err = h.Node(ctx, *m.task)
			}
			if errors.Is(err, tick.ErrClaimed) {
				// The duplicate found the first delivery's lease held (a
				// wide step): it comes back after the visibility timeout.
				clock.redeliver()
				q.mu.Lock()
				q.msgs = append(q.msgs, m)
				q.mu.Unlock()
				continue
			}
			if err != nil {
				t.Fatalf("deliver %+v: %v", m, err)
			}
		}
	}
	r, err := svc.Get(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	hist, err := be.checkpoints.History(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	cp, err := be.checkpoints.Load(ctx, "r", pregel.Latest)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(cp.Values)
	var final fanouttest.State
	if err := json.Unmarshal(raw, &final); err != nil {
		t.Fatal(err)
	}
	fanouttest.Check(t, c, r.Status, r.Counters, r.Error, hist, final)
	if c.Items > 1 && c.Status == pregel.RunCompleted && (q.singles != 0 || q.batches == 0) {
		t.Errorf("node tasks sent with %d SendTask and %d SendTasks calls; want them in batches (a duplicate tick sends them again)", q.singles, q.batches)
	}
	for i := range c.Items {
		k := ex.Count(i)
		switch {
		case k > 1:
			t.Errorf("item %d ran %d times", i, k)
		case k > 0 && containsInt(c.Cancelled, i):
			t.Errorf("cancelled item %d ran", i)
		}
	}
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func TestFanOutPoliciesTick(t *testing.T) {
	for _, c := range fanouttest.Cases() {
		t.Run(c.Name, func(t *testing.T) { runPolicyCase(t, c, memoryBackend(t)) })
	}
}

func TestFanOutPoliciesTickDynamo(t *testing.T) {
	srv := mototest.Start(t)
	client := dynamodb.NewFromConfig(srv.Config)
	dyn := func(t *testing.T, table string) backend {
		if err := dynamo.CreateTable(t.Context(), client, table); err != nil {
			t.Fatal(err)
		}
		s := dynamo.New(client, table)
		return backend{checkpoints: s, runs: s, claims: s, loader: s}
	}
	// moto is slow to create tables: the cases that reach the store
	// differently (the others are the same code as on memory).
	for _, c := range fanouttest.Cases() {
		switch c.Name {
		case "ToleratedReached", "ToleratedExceeded", "MinimumEarly", "AllFailing":
			t.Run(c.Name, func(t *testing.T) { runPolicyCase(t, c, dyn(t, "policy-"+c.Name)) })
		}
	}
	// A wide step (counted settled results, tick.SuccessCounter): the
	// node handler of the tenth success commits; the other 30 items are
	// cancelled and never run.
	wide := fanouttest.Case{Name: "WideMinimum", Items: 40, Options: []pregel.FanOutOption{pregel.MinSuccesses(10)},
		Status: pregel.RunCompleted, Counters: pregel.Counters{Completed: 12, Cancelled: 30}}
	for i := range 40 {
		if i < 10 {
			wide.Succeeded = append(wide.Succeeded, i)
		} else {
			wide.Cancelled = append(wide.Cancelled, i)
		}
	}
	if wide.Items < tick.CountSettledFrom {
		t.Fatalf("%d items do not reach tick.CountSettledFrom (%d)", wide.Items, tick.CountSettledFrom)
	}
	t.Run(fmt.Sprint(wide.Name), func(t *testing.T) { runPolicyCase(t, wide, dyn(t, "policy-wide")) })
}
