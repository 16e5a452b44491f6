package serverless_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/tick"
)

// chatState is the state of the thread tests' graph.
type chatState struct {
	Messages []string `json:"messages" reduce:"append"`
}

// chatLog records the executions of the chat graph's nodes: which run
// each was of, in order, and whether nodes of two different runs ever
// executed at once.
type chatLog struct {
	mu      sync.Mutex
	order   []string       // the run of each execution, in order
	inside  map[string]int // executing now, by run
	overlap []string       // runs that executed at once
}

func (c *chatLog) enter(ctx context.Context) func() {
	info, _ := pregel.TaskFrom(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	for other, n := range c.inside {
		if n > 0 && other != info.RunID {
			c.overlap = append(c.overlap, other+"+"+info.RunID)
		}
	}
	c.inside[info.RunID]++
	c.order = append(c.order, info.RunID)
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.inside[info.RunID]--
	}
}

// chatGraph is a two-step conversation turn: reply (inline, in the tick
// handler) answers the last message, done (remote, in the node handler)
// closes the turn; so a run ends in the node handler, and a drain or a
// cancel stops it in either.
func chatGraph(t *testing.T, log *chatLog) *pregel.Graph {
	t.Helper()
	g := pregel.NewGraph[chatState]("chat")
	g.AddFunc("reply", func(ctx context.Context, s chatState) (chatState, error) {
		defer log.enter(ctx)()
		return chatState{Messages: []string{"re:" + s.Messages[len(s.Messages)-1]}}, nil
	})
	g.AddFunc("done", func(ctx context.Context, s chatState) (chatState, error) {
		defer log.enter(ctx)()
		return chatState{Messages: []string{"done"}}, nil
	}, pregel.Remote())
	g.AddEdge(pregel.Start, "reply").AddEdge("reply", "done").AddEdge("done", pregel.End)
	cg, err := g.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return cg
}

// delivery is an SQS message as a handler gets it.
type delivery struct {
	queue string // tick or node
	id    string
	body  string
}

// receive takes (and deletes) what the queue at url offers now, as the
// event source mapping would before handing the messages over.
func (s *stack) receive(queue, url string) []delivery {
	s.t.Helper()
	ctx := s.t.Context()
	out, err := s.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10})
	if err != nil {
		s.t.Fatal(err)
	}
	var ds []delivery
	for _, m := range out.Messages {
		if _, err := s.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
			s.t.Fatal(err)
		}
		ds = append(ds, delivery{queue: queue, id: aws.ToString(m.MessageId), body: aws.ToString(m.Body)})
	}
	return ds
}

// handle gives a message to its handler; it reports whether the handler
// took it (false: it asked for the message to be delivered again).
func (s *stack) handle(d delivery) bool {
	ctx := s.t.Context()
	url, handler := s.cfg.NodeQueueURL, s.app.HandleNode
	if d.queue == "tick" {
		url, handler = s.cfg.TickQueueURL, s.app.HandleTick
	}
	arn := "arn:aws:sqs:us-east-1:123456789012:" + url[strings.LastIndex(url, "/")+1:]
	resp, err := handler(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: d.id, Body: d.body, EventSource: "aws:sqs", EventSourceARN: arn}}})
	if err != nil {
		s.t.Errorf("%s handler: %v", d.queue, err)
	}
	return err == nil && len(resp.BatchItemFailures) == 0
}

// chaos delivers the tick and node messages until none is left, as a
// hostile queue would: each round takes what the queues offer, delivers
// some messages twice and some earlier ones again (late duplicates), in a
// random order, all at once. A message a handler fails is delivered again
// in a later round. At the end every message is delivered once more.
func (s *stack) chaos(rng *rand.Rand) {
	s.t.Helper()
	var seen, retry []delivery
	for round := 0; ; round++ {
		if round > 3000 {
			s.t.Fatal("messages never stop")
		}
		fresh := slices.Concat(s.receive("tick", s.cfg.TickQueueURL), s.receive("node", s.cfg.NodeQueueURL))
		batch := slices.Concat(retry, fresh)
		retry = nil
		if len(batch) == 0 {
			if s.queueDepth(s.cfg.TickQueueURL)+s.queueDepth(s.cfg.NodeQueueURL) == 0 {
				break
			}
			continue
		}
		for _, d := range fresh {
			if rng.IntN(3) == 0 {
				batch = append(batch, d) // delivered twice
			}
		}
		for range rng.IntN(3) {
			if len(seen) > 0 {
				batch = append(batch, seen[rng.IntN(len(seen))]) // a late duplicate
			}
		}
		seen = append(seen, fresh...)
		rng.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, d := range batch {
			wg.Go(func() {
				if !s.handle(d) {
					mu.Lock()
					retry = append(retry, d)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	}
	rng.Shuffle(len(seen), func(i, j int) { seen[i], seen[j] = seen[j], seen[i] })
	for _, d := range seen {
		s.handle(d)
	}
	s.settle()
}

// TestThreadStrategies: runs on one thread through the api, tick and node
// handlers on moto. For each strategy, n runs are created at once on a
// thread whose run is between its two steps, then the messages are
// delivered in order, or duplicated and reordered. Never do two runs of
// the thread execute at once or interleave; reject refuses all but one
// with 409; enqueue runs all of them in arrival order, none lost;
// interrupt drains the busy run after its committed step and runs the
// rest in order; rollback cancels it, discards its step, and runs the
// rest in order. The thread ends idle with the state its runs promise, and
// no message is left.
func TestThreadStrategies(t *testing.T) {
	t.Parallel()
	const n = 20
	for _, mode := range []string{"in-order", "duplicated-reordered"} {
		for _, st := range []runs.Strategy{runs.StrategyReject, runs.StrategyEnqueue, runs.StrategyInterrupt, runs.StrategyRollback} {
			t.Run(mode+"/"+string(st), func(t *testing.T) {
				t.Parallel()
				testThreadStrategy(t, st, n, mode != "in-order")
			})
		}
	}
}

func testThreadStrategy(t *testing.T, st runs.Strategy, n int, hostile bool) {
	log := &chatLog{inside: map[string]int{}}
	s := newStack(t, stackOptions{noPollers: true, graphs: []*pregel.Graph{chatGraph(t, log)}})
	ctx := t.Context()
	svc := s.app.Service
	const th = "conversation"
	if code := s.do("POST", "/v1/threads", map[string]string{"thread_id": th}, nil); code != http.StatusCreated {
		t.Fatalf("create thread: %d", code)
	}
	say := func(msg string, strategy runs.Strategy) (string, int, api.BusyProblem) {
		var out struct {
			RunID       string `json:"run_id"`
			ActiveRunID string `json:"active_run_id"`
		}
		code := s.do("POST", "/v1/threads/"+th+"/runs", map[string]any{"graph": "chat", "input": map[string]any{"messages": []string{msg}}, "strategy": strategy}, &out)
		return out.RunID, code, api.BusyProblem{ActiveRunID: out.ActiveRunID}
	}
	var run0 string
	if st != runs.StrategyReject {
		// The thread is busy: its run has committed reply and waits for
		// its done task.
		var code int
		if run0, code, _ = say("m00", ""); code != http.StatusAccepted {
			t.Fatalf("first run: %d", code)
		}
		s.pump(s.cfg.TickQueueURL, s.app.HandleTick)
		if r, err := svc.Get(ctx, run0); err != nil || r.Status != pregel.RunRunning || r.Step != 1 {
			t.Fatalf("first run: %+v %v, want running at step 1", r, err)
		}
	}
	ids := make([]string, n)
	codes := make([]int, n)
	busy := make([]api.BusyProblem, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { ids[i], codes[i], busy[i] = say(fmt.Sprintf("m%02d", i+1), st) })
	}
	wg.Wait()
	var accepted []string
	for i, code := range codes {
		switch {
		case code == http.StatusAccepted:
			accepted = append(accepted, ids[i])
		case code == http.StatusConflict && st == runs.StrategyReject:
			if busy[i].ActiveRunID == "" {
				t.Errorf("409 without the active run's id: %+v", busy[i])
			}
		default:
			t.Fatalf("create %d: status %d", i, code)
		}
	}
	thr, err := svc.GetThread(ctx, th)
	if err != nil {
		t.Fatal(err)
	}
	arrival := slices.Concat([]string{thr.Active}, thr.Queue)
	if hostile {
		// Handlers also crash half way: before a stopped run passes its
		// thread on, and after it did but before the next run's tick
		// was sent (once for each run). The messages' next deliveries
		// finish the hand-off.
		s.app.Ticks.Threads = &crashingThreads{Threads: s.app.Ticks.Threads}
		s.app.Service.Dispatcher = &crashingDispatcher{Dispatcher: s.app.Service.Dispatcher}
		s.chaos(rand.New(rand.NewPCG(uint64(len(st)), 7)))
	} else {
		s.settle()
	}

	if thr, err = svc.GetThread(ctx, th); err != nil {
		t.Fatal(err)
	}
	if thr.Active != "" || len(thr.Queue) > 0 {
		t.Fatalf("thread still has run %q active and %v queued", thr.Active, thr.Queue)
	}
	if len(log.overlap) > 0 {
		t.Errorf("runs of one thread executed at once: %v", log.overlap)
	}
	// Each run executed in one stretch: once another run executed, it
	// never did again.
	var stretches []string
	for _, id := range log.order {
		if len(stretches) == 0 || stretches[len(stretches)-1] != id {
			stretches = append(stretches, id)
		}
	}
	if c := slices.Clone(stretches); len(slices.Compact(func() []string { slices.Sort(c); return c }())) != len(stretches) {
		t.Errorf("runs of the thread interleaved: executions by run %v", stretches)
	}

	state, err := svc.State(ctx, th)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := json.Unmarshal(state.Values["messages"], &got); err != nil {
		t.Fatal(err)
	}
	turn := func(id string) []string {
		r, err := svc.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var in chatState
		if err := json.Unmarshal(r.Input, &in); err != nil {
			t.Fatal(err)
		}
		return []string{in.Messages[0], "re:" + in.Messages[0], "done"}
	}
	status := func(id string) runs.Run {
		r, err := svc.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	var want []string
	switch st {
	case runs.StrategyReject:
		if len(accepted) != 1 {
			t.Fatalf("reject: %d accepted, want 1 (and %d refused with 409)", len(accepted), n-1)
		}
		want = turn(accepted[0])
	case runs.StrategyEnqueue, runs.StrategyInterrupt:
		if len(arrival) != n+1 || arrival[0] != run0 {
			t.Fatalf("%s: the thread held %v, want %s then %d queued", st, arrival, run0, n)
		}
		for i, id := range arrival {
			w := turn(id)
			if i == 0 && st == runs.StrategyInterrupt {
				w = w[:2] // drained after reply
			}
			want = append(want, w...)
		}
		if !slices.Equal(stretches, arrival) {
			t.Errorf("%s: runs executed in order\n%v\nwant arrival order\n%v", st, stretches, arrival)
		}
	case runs.StrategyRollback:
		if len(accepted) != n || len(arrival) != n+1 {
			t.Fatalf("rollback: %d accepted, thread held %v", len(accepted), arrival)
		}
		for _, id := range arrival[1:] {
			want = append(want, turn(id)...)
		}
		if !slices.Equal(stretches, arrival) {
			t.Errorf("rollback: runs executed in order\n%v\nwant arrival order\n%v", stretches, arrival)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s: thread state\n%v\nwant\n%v", st, got, want)
	}
	for i, id := range arrival {
		r := status(id)
		// The first run of interrupt and rollback is superseded: it ends
		// cancelled naming its successor, its steps kept in the thread
		// (interrupt) or discarded (rollback).
		wantStatus, superseded := pregel.RunCompleted, i == 0 && (st == runs.StrategyInterrupt || st == runs.StrategyRollback)
		if superseded {
			wantStatus = pregel.RunCancelled
		}
		wantDiscarded := superseded && st == runs.StrategyRollback
		if r.Status != wantStatus || r.Discarded != wantDiscarded || (r.SupersededBy != "") != superseded {
			t.Errorf("%s: run %s (%d of the thread) is %s (discarded %v, superseded by %q), want %s (discarded %v)", st, id, i, r.Status, r.Discarded, r.SupersededBy, wantStatus, wantDiscarded)
		}
	}
	if d := s.queueDepth(s.cfg.TickQueueURL) + s.queueDepth(s.cfg.NodeQueueURL); d != 0 {
		t.Errorf("%d messages left", d)
	}
	if strings.Contains(s.logs.String(), `"level":"ERROR"`) {
		t.Errorf("errors logged:\n%s", s.logs.String())
	}
}

// errCrash stands for a handler stopped half way (a time-out, a crash).
var errCrash = errors.New("crashed")

// firstOfEach reports the first time it is asked about each run.
type firstOfEach struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (f *firstOfEach) first(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen == nil {
		f.seen = map[string]bool{}
	}
	first := !f.seen[id]
	f.seen[id] = true
	return first
}

// crashingThreads fails the first hand-off of each run before it starts.
type crashingThreads struct {
	tick.Threads
	firstOfEach
}

func (c *crashingThreads) RunStopped(ctx context.Context, r runs.Run) error {
	if c.first(r.ID) {
		return errCrash
	}
	return c.Threads.RunStopped(ctx, r)
}

// crashingDispatcher fails the first dispatch of each run: a hand-off
// that gave the thread to the run and stored its step 0 stops before its
// tick is sent.
type crashingDispatcher struct {
	runs.Dispatcher
	firstOfEach
}

func (c *crashingDispatcher) Dispatch(ctx context.Context, r runs.Run) error {
	if c.first(r.ID) {
		return errCrash
	}
	return c.Dispatcher.Dispatch(ctx, r)
}

// With THREAD_RETENTION set, an idle thread's item carries a TTL from its
// last change, and a thread with forks none; when DynamoDB's TTL deletes
// a thread's item, the sweep handler deletes the thread's runs with their
// items, and nothing else: not another thread's runs, not a run that only
// shares the thread's id as its context, not the runs of a thread created
// again under the same id.
func TestExpiredThreadsArePurged(t *testing.T) {
	t.Parallel()
	log := &chatLog{inside: map[string]int{}}
	s := newStack(t, stackOptions{graphs: []*pregel.Graph{chatGraph(t, log)}, threadRetention: time.Hour})
	ctx := t.Context()
	turn := func(thread, msg string) string {
		var r api.Run
		if code := s.do("POST", "/v1/threads/"+thread+"/runs", map[string]any{"graph": "chat", "input": map[string]any{"messages": []string{msg}}}, &r); code != http.StatusAccepted {
			t.Fatalf("run on %s: %d", thread, code)
		}
		s.waitStatus(r.RunID, pregel.RunCompleted)
		return r.RunID
	}
	thread := func(id string) {
		if code := s.do("POST", "/v1/threads", map[string]string{"thread_id": id}, nil); code != http.StatusCreated {
			t.Fatalf("create thread %s: %d", id, code)
		}
	}
	item := func(thread string) map[string]types.AttributeValue {
		out, err := s.ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.cfg.Table), Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "THREAD#" + thread}, "sk": &types.AttributeValueMemberS{Value: "~THREAD"},
		}})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item
	}
	expiry := func(thread string) (time.Time, bool) {
		v, ok := item(thread)["expires_at"].(*types.AttributeValueMemberN)
		if !ok {
			return time.Time{}, false
		}
		sec, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return time.Unix(sec, 0), true
	}
	// What DynamoDB's TTL does, and the stream record it makes.
	expire := func(thread string) events.DynamoDBEventRecord {
		if _, err := s.ddb.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(s.cfg.Table), Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "THREAD#" + thread}, "sk": &types.AttributeValueMemberS{Value: "~THREAD"},
		}}); err != nil {
			t.Fatal(err)
		}
		return removal(thread, runKeys("THREAD#"+thread, "~THREAD"))
	}

	thread("gone")
	gone := []string{turn("gone", "hello"), turn("gone", "again")}
	thread("kept")
	kept := turn("kept", "hi")
	if code := s.do("POST", "/v1/graphs/chat/runs", map[string]any{"run_id": "same-context", "context_id": "gone", "input": map[string]any{"messages": []string{"x"}}}, nil); code != http.StatusAccepted {
		t.Fatalf("run with the thread's id as context: %d", code)
	}
	s.waitStatus("same-context", pregel.RunCompleted)
	thread("reborn")
	old := turn("reborn", "first life")
	thread("parent")
	turn("parent", "p")
	if code := s.do("POST", "/v1/threads/parent/fork", map[string]string{"thread_id": "child"}, nil); code >= 300 {
		t.Fatalf("fork: %d", code)
	}
	s.waitIdle()

	th, err := s.app.Service.GetThread(ctx, "gone")
	if err != nil {
		t.Fatal(err)
	}
	if at, ok := expiry("gone"); !ok || !at.Equal(th.UpdatedAt.Add(time.Hour).Truncate(time.Second)) {
		t.Errorf("idle thread: expires_at %v (%v), want an hour after its last change %v", at, ok, th.UpdatedAt)
	}
	if at, ok := expiry("parent"); ok {
		t.Errorf("a thread with a fork expires at %v; want no TTL while its fork needs its runs", at)
	}
	if _, ok := expiry("child"); !ok {
		t.Errorf("an idle fork has no TTL")
	}

	records := []events.DynamoDBEventRecord{expire("gone"), expire("reborn")}
	thread("reborn")
	born := turn("reborn", "second life")
	resp, err := s.app.HandleStream(ctx, events.DynamoDBEvent{Records: records})
	if err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("HandleStream: %+v %v", resp, err)
	}
	for _, id := range append(gone, old) {
		if sks := s.partition(id); len(sks) > 0 {
			t.Errorf("run %s of an expired thread keeps items %v", id, sks)
		}
	}
	for _, id := range []string{kept, "same-context", born} {
		if _, err := s.app.Service.Get(ctx, id); err != nil {
			t.Errorf("run %s: %v; only the expired threads' runs go", id, err)
		}
		if sks := s.partition(id); len(sks) < 2 {
			t.Errorf("run %s has items %v, want its record and steps", id, sks)
		}
	}
	// Again (a redelivered batch): nothing more goes, nothing fails.
	if resp, err := s.app.HandleStream(ctx, events.DynamoDBEvent{Records: records}); err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("HandleStream again: %+v %v", resp, err)
	}
	if st, err := s.app.Service.State(ctx, "reborn"); err != nil || len(st.Values["messages"]) == 0 {
		t.Errorf("the thread created again lost its state: %+v %v", st, err)
	}
}

// TestThreadHandOffCost counts the AWS requests of the node message that
// ends a run's last step: a run on no thread; a run whose thread then goes
// idle; a run whose thread passes to a queued run (its step 0 stored, its
// tick sent); and a late duplicate of that message. The counts are upper
// bounds, so that the hand-off does not grow unnoticed.
func TestThreadHandOffCost(t *testing.T) {
	t.Parallel()
	log := &chatLog{inside: map[string]int{}}
	s := newStack(t, stackOptions{noPollers: true, graphs: []*pregel.Graph{chatGraph(t, log)}})
	input := map[string]any{"messages": []string{"hi"}}
	onThread := func(thread string, strategy runs.Strategy) string {
		var r api.Run
		if code := s.do("POST", "/v1/threads/"+thread+"/runs", map[string]any{"graph": "chat", "input": input, "strategy": strategy}, &r); code != http.StatusAccepted {
			t.Fatalf("run on %s: %d", thread, code)
		}
		return r.RunID
	}
	for _, id := range []string{"idle", "busy"} {
		if code := s.do("POST", "/v1/threads", map[string]string{"thread_id": id}, nil); code != http.StatusCreated {
			t.Fatalf("create thread: %d", code)
		}
	}
	// lastStep delivers the run's first tick, then measures the node
	// message of its last step (and returns that message).
	lastStep := func(name string, before func()) (awsmeterOps, delivery) {
		s.pump(s.cfg.TickQueueURL, s.app.HandleTick)
		if before != nil {
			before()
		}
		msgs := s.receive("node", s.cfg.NodeQueueURL)
		if len(msgs) != 1 {
			t.Fatalf("%s: %d node messages, want 1", name, len(msgs))
		}
		used := s.measure(func() {
			if !s.handle(msgs[0]) {
				t.Fatalf("%s: the node message failed", name)
			}
		})
		t.Logf("%s: %d AWS requests (%s)", name, used.total, used.summary)
		return used, msgs[0]
	}

	s.create("chat", "plain", input)
	plain, _ := lastStep("run on no thread", nil)
	onThread("idle", "")
	idle, _ := lastStep("run whose thread goes idle", nil)
	first := onThread("busy", "")
	var next string
	handoff, msg := lastStep("run whose thread passes to a queued run", func() { next = onThread("busy", runs.StrategyEnqueue) })
	if r, err := s.app.Service.Get(t.Context(), first); err != nil || r.Status != pregel.RunCompleted {
		t.Fatalf("first run: %+v %v", r, err)
	}
	dup := s.measure(func() { s.handle(msg) })
	t.Logf("a late duplicate of that message: %d AWS requests (%s)", dup.total, dup.summary)
	s.settle()
	if r, err := s.app.Service.Get(t.Context(), next); err != nil || r.Status != pregel.RunCompleted {
		t.Fatalf("queued run: %+v %v", r, err)
	}
	for _, c := range []struct {
		name       string
		got, limit int64
	}{
		{"thread goes idle, more than no thread", idle.total - plain.total, 3},
		// Passing the thread on, and storing the next run's step 0 and
		// sending its tick, which a create on an idle thread does.
		{"hand-off, more than no thread", handoff.total - plain.total, 11},
		// Reads, and the next run's tick again (the queue drops it).
		{"late duplicate", dup.total, 7},
	} {
		if c.got > c.limit {
			t.Errorf("%s: %d requests, want at most %d", c.name, c.got, c.limit)
		}
	}
}

// awsmeterOps is what measure counted.
type awsmeterOps struct {
	total   int64
	summary string
}

// measure counts the AWS requests fn makes.
func (s *stack) measure(fn func()) awsmeterOps {
	before := s.meter.Snapshot()
	fn()
	used := s.meter.Snapshot().Sub(before)
	return awsmeterOps{total: used.Total().Requests, summary: opsSummary(used.Names(), func(n string) int64 { return used.Op(n).Requests })}
}
