package awsbench_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/superstep/superstep/bench/awsbench"
	"github.com/superstep/superstep/internal/mototest"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/serverless"
)

// fanGraph is Start -> split, which fans out one remote work task per
// item 1..N (the input's n), each appending its item to results; then
// collect sums them.
const fanGraph = "bench-fanout"

type fanState struct {
	N       int   `json:"n"`
	Results []int `json:"results" reduce:"append"`
	Total   int   `json:"total"`
}

// fanCounter counts the executions of each work item.
type fanCounter struct {
	mu   sync.Mutex
	runs map[int]int
}

func (f *fanCounter) ran(item int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs[item]++
}

func (f *fanCounter) reset() map[int]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.runs
	f.runs = map[int]int{}
	return out
}

func fanOutGraph(tb testing.TB, fan *fanCounter) *pregel.Graph {
	tb.Helper()
	g := pregel.NewGraph[fanState](fanGraph)
	g.AddFunc("split", func(context.Context, fanState) (fanState, error) { return fanState{}, nil })
	g.AddFunc("work", func(ctx context.Context, _ fanState) (fanState, error) {
		n, err := pregel.Arg[int](ctx)
		if err != nil {
			return fanState{}, err
		}
		fan.ran(n)
		return fanState{Results: []int{n}}, nil
	}, pregel.Remote())
	g.AddFunc("collect", func(_ context.Context, s fanState) (fanState, error) {
		t := 0
		for _, v := range s.Results {
			t += v
		}
		return fanState{Total: t}, nil
	})
	g.AddEdge(pregel.Start, "split")
	g.AddFanOut("split", "work", func(_ context.Context, s fanState) ([]any, error) {
		out := make([]any, s.N)
		for i := range out {
			out[i] = i + 1
		}
		return out, nil
	})
	g.AddEdge("work", "collect").AddEdge("collect", pregel.End)
	cg, err := g.Compile()
	if err != nil {
		tb.Fatal(err)
	}
	return cg
}

// stamps is an SDK middleware that notes when task results are written
// (UpdateItem) and steps committed (PutItem of a STEP# item), to time
// the commit after the last result.
type stamps struct {
	mu      sync.Mutex
	records []time.Time
	commits map[string]time.Time
	// commitCount counts the successful commits of each step item.
	commitCount map[string]int
	// start is when the run was created.
	start time.Time
	// parts meters the writes per partition key value (partition_test.go).
	parts *partitionMeter
	// timer times the requests by operation (optimer_test.go), and
	// meterTimer the capacity meter's own reads.
	timer, meterTimer *opTimer
}

func (s *stamps) Install(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("superstep.awsbench.stamps", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
		out, md, err := next.HandleInitialize(ctx, in)
		now := time.Now()
		s.mu.Lock()
		defer s.mu.Unlock()
		switch p := in.Parameters.(type) {
		case *dynamodb.UpdateItemInput:
			if sk, ok := p.Key["sk"].(*types.AttributeValueMemberS); ok && err == nil && strings.HasPrefix(sk.Value, "TASK#") {
				s.records = append(s.records, now)
			}
		case *dynamodb.PutItemInput:
			if sk, ok := p.Item["sk"].(*types.AttributeValueMemberS); ok && err == nil && strings.HasPrefix(sk.Value, "STEP#") {
				s.commits[sk.Value] = now
				s.commitCount[sk.Value]++
			}
		}
		return out, md, err
	}), middleware.After)
}

// fanOutRun runs the fan-out graph with n work tasks, delivering every
// dupEvery-th node-task message twice (0: none), and checks that every
// result was recorded and applied once and that step 2 committed once. It
// returns what the run used, the executions and the time from the last
// task result written to the commit of step 2.
func (d *deployment) fanOutRun(tb testing.TB, name string, n, dupEvery int, st *stamps) (tally, time.Duration) {
	tb.Helper()
	ctx := tb.Context()
	id := fmt.Sprintf("%s-%s-%d", fanGraph, name, time.Now().UnixNano())
	before := d.snapshot()
	d.fan.reset()
	st.mu.Lock()
	st.records, st.commits, st.commitCount = nil, map[string]time.Time{}, map[string]int{}
	st.mu.Unlock()
	st.parts.reset()
	st.timer.reset()
	st.meterTimer.reset()
	st.start = time.Now()
	api := d.app(tb, "api")
	d.invoke(tb, "api", func() error {
		_, _, err := api.Service.Create(ctx, fanGraph, runs.CreateRequest{RunID: id, Input: json.RawMessage(fmt.Sprintf(`{"n": %d}`, n))})
		return err
	})
	if d.workers > 1 {
		d.deliverParallel(tb, dupEvery)
	}
	k := 0
	for {
		url, ok := d.queues.next()
		if !ok {
			break
		}
		dup := false
		if url == d.cfg.NodeQueueURL {
			k++
			dup = dupEvery > 0 && k%dupEvery == 0
		}
		d.deliverTimes(tb, url, dup)
	}
	used := d.snapshot().sub(before)
	r, err := d.verify.GetRun(ctx, id)
	if err != nil {
		tb.Fatal(err)
	}
	if r.Status != pregel.RunCompleted || r.Step != 3 {
		tb.Fatalf("run %s is %s at step %d (%q), want completed at step 3", id, r.Status, r.Step, r.Error)
	}
	cp, err := d.verify.Load(ctx, id, pregel.Latest)
	if err != nil {
		tb.Fatal(err)
	}
	var results []int
	var total int
	if err := json.Unmarshal(cp.Values["results"], &results); err != nil {
		tb.Fatal(err)
	}
	_ = json.Unmarshal(cp.Values["total"], &total)
	sort.Ints(results)
	if len(results) != n || total != n*(n+1)/2 {
		tb.Fatalf("%d results summing to %d, want %d summing to %d: a result was lost or applied twice", len(results), total, n, n*(n+1)/2)
	}
	for i, v := range results {
		if v != i+1 {
			tb.Fatalf("results[%d] = %d: a result was lost or applied twice", i, v)
		}
	}
	for item, c := range d.fan.reset() {
		if c != 1 {
			tb.Errorf("work item %d executed %d times, want once", item, c)
		}
	}
	if got := used["ddb.req.PutItem"] - used["ddb.err.PutItem"]; got < 0 {
		tb.Fatalf("PutItem count %v", got)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	commit, ok := st.commits["STEP#0000000002"]
	if !ok {
		tb.Fatal("no commit of step 2 seen")
	}
	if k := st.commitCount["STEP#0000000002"]; k != 1 {
		tb.Fatalf("step 2 committed %d times, want once", k)
	}
	var last time.Time
	for _, t := range st.records {
		if t.Before(commit) && t.After(last) {
			last = t
		}
	}
	return used, commit.Sub(last)
}

// deliverTimes is deliver, and with dup hands the message to the handler
// a second time after the first, as a redelivery would.
func (d *deployment) deliverTimes(tb testing.TB, url string, dup bool) {
	tb.Helper()
	times := 1
	if dup {
		times = 2
	}
	d.deliverN(tb, url, times)
}

// fanDeploy is a warm deployment with the commit timer and the partition
// meter installed.
func fanDeploy(tb testing.TB) (*deployment, *stamps) {
	// Handlers at once on a loaded machine may take long; a message
	// comes back only when the harness says so (deliverTimes, requeue).
	d := deployVisible(tb, true, 10*time.Minute)
	st := &stamps{commits: map[string]time.Time{}, commitCount: map[string]int{}, parts: &partitionMeter{}, timer: &opTimer{}, meterTimer: &opTimer{}}
	d.awsCfg.APIOptions = append(d.awsCfg.APIOptions, st.Install, st.parts.Install, st.timer.Install)
	d.esm = sqs.New(d.esm.Options(), func(o *sqs.Options) { o.APIOptions = append(o.APIOptions, st.timer.Install) })
	d.capacity.Reader = dynamodb.NewFromConfig(d.plainCfg, func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, st.meterTimer.Install) })
	return d, st
}

// A step of many remote tasks, every seventh node-task message delivered
// twice: every result is recorded and applied once, each task executes
// once, and the step commits once. BenchmarkAWSFanOut1000 runs 1,000.
func TestFanOut(t *testing.T) {
	n := 40
	if testing.Short() {
		n = 20
	}
	d, st := fanDeploy(t)
	used, lag := d.fanOutRun(t, "test", n, 7, st)
	if err := d.capacity.Err(); err != nil {
		t.Fatal(err)
	}
	t.Log(fanSummary(used, n, lag))
	peak, pk, throttled := st.parts.peak()
	t.Logf("peak: %d writes in one second to partition key value %s; %d throttled attempts", peak, pk, throttled)
	if peak == 0 {
		t.Error("the partition meter saw no write")
	}
	if got := used["q.std.SendMessage"]; got > float64(n)/2 {
		t.Errorf("%v single SendMessage requests for %d node tasks; want them sent in batches of 10", got, n)
	}
}

// fanOutTasks is the width of BenchmarkAWSFanOut1000's step
// (-fanout N to measure another).
var fanOutTasks = flag.Int("fanout", 1000, "remote tasks in BenchmarkAWSFanOut1000's step")

// BenchmarkAWSFanOut1000 runs the fan-out graph with 1,000 remote tasks
// (or -fanout N; every tenth node-task message delivered twice) and
// reports the cost per task and the time from the last task result
// written to the commit of the step.
func BenchmarkAWSFanOut1000(b *testing.B) {
	n := *fanOutTasks
	d, st := fanDeploy(b)
	var used tally
	var lag time.Duration
	runs := 0
	for b.Loop() {
		u, l := d.fanOutRun(b, fmt.Sprintf("b%d", runs), n, 10, st)
		used, lag = used.add(u), lag+l
		runs++
	}
	if err := d.capacity.Err(); err != nil {
		b.Fatal(err)
	}
	per := used.scale(1 / float64(runs*n))
	peak, pk, throttled := st.parts.peak() // of the last run
	b.ReportMetric(float64(peak), "peak-writes/s/pk")
	b.ReportMetric(float64(throttled), "throttled-retries")
	b.Logf("peak: %d writes in one second to partition key value %s (each at least 1 WRU; DynamoDB serves 1,000 WRU/s per value); %d throttled attempts retried", peak, pk, throttled)
	b.ReportMetric(per.sum("ddb.req."), "ddb-req/task")
	b.ReportMetric(per.sum("sqs.req."), "sqs-req/task")
	b.ReportMetric(per.sum("rru."), "RRU/task")
	b.ReportMetric(per.sum("wru."), "WRU/task")
	b.ReportMetric(awsbench.PerMillion(awsbench.Price(usage(per, assumedDuration)).Total()), "usd/1M-tasks@50ms")
	b.ReportMetric(float64(lag.Microseconds())/1e3/float64(runs), "ms-last-result-to-commit")
	b.Log(fanSummary(used.scale(1/float64(runs)), n, lag/time.Duration(runs)))
}

// fanSummary describes one fan-out run's use per task.
func fanSummary(used tally, n int, lag time.Duration) string {
	per := used.scale(1 / float64(n))
	return fmt.Sprintf("fan-out of %d remote tasks, per task: %.2f DynamoDB requests (%.2f RRU, %.2f WRU; Query %.2f, GetItem %.2f, PutItem %.2f, UpdateItem %.2f, BatchWriteItem %.2f), %.2f SQS requests, %.2f Lambda invocations; $%.2f per 1M tasks at %v per invocation; last result to commit: %v",
		n, per.sum("ddb.req."), per.sum("rru."), per.sum("wru."), per["ddb.req.Query"], per["ddb.req.GetItem"], per["ddb.req.PutItem"], per["ddb.req.UpdateItem"], per["ddb.req.BatchWriteItem"],
		per.sum("sqs.req."), per.sum("inv."), awsbench.PerMillion(awsbench.Price(usage(per, assumedDuration)).Total()), assumedDuration, lag.Round(time.Microsecond))
}

// fanOutTasks10k is the width of BenchmarkAWSFanOut10000's step, and
// fanOutWorkers the node handlers it runs at once.
var (
	fanOutTasks10k = flag.Int("fanout10k", 10000, "remote tasks in BenchmarkAWSFanOut10000's step")
	fanOutWorkers  = flag.Int("fanout-workers", 8, "handlers BenchmarkAWSFanOut10000 runs at once")
)

// BenchmarkAWSFanOut10000 is BenchmarkAWSFanOut1000 with 10,000 remote
// tasks (or -fanout10k N), delivered by -fanout-workers handlers at once
// (8 by default), each with Apps of its own, as concurrent Lambda
// execution environments: at one message at a time, as the 1,000-way
// runs, a 10,000-way step takes hours on moto. It reports, besides the
// 1,000-way's figures, the most writes made to one partition key value in
// the run and the number of values written to (see partitionMeter).
func BenchmarkAWSFanOut10000(b *testing.B) {
	n, workers := *fanOutTasks10k, *fanOutWorkers
	d, st := fanDeploy(b)
	d.workers = workers
	var used tally
	var lag time.Duration
	runs := 0
	start := time.Now()
	cpu0 := childCPU()
	stop := st.progress(time.Minute, n)
	defer stop()
	for b.Loop() {
		u, l := d.fanOutRun(b, fmt.Sprintf("b%d", runs), n, 10, st)
		used, lag = used.add(u), lag+l
		runs++
	}
	if err := d.capacity.Err(); err != nil {
		b.Fatal(err)
	}
	per := used.scale(1 / float64(runs*n))
	peak, pk, throttled := st.parts.peak() // of the last run
	most, mostPK, keys := st.parts.busiest()
	readMost, readPK := st.parts.mostRead()
	b.ReportMetric(float64(peak), "peak-writes/s/pk")
	b.ReportMetric(float64(most), "max-writes/pk")
	b.ReportMetric(float64(readMost), "max-reads/pk")
	b.Logf("most reads (GetItem, Query) of one partition key value over the run: %d (%s): at least %.1f s at 3,000 RRU/s", readMost, readPK, float64(readMost)/3000)
	b.ReportMetric(float64(throttled), "throttled-retries")
	b.Logf("peak: %d writes in one second to partition key value %s (moto's pace with %d handlers at once); most writes to one value over the run: %d (%s), %d values written to: at least %.1f s at 1,000 WRU/s; %d throttled attempts retried; %v for %d run(s)",
		peak, pk, workers, most, mostPK, keys, float64(most)/1000, throttled, time.Since(start).Round(time.Second), runs)
	b.ReportMetric(per.sum("ddb.req."), "ddb-req/task")
	b.ReportMetric(per.sum("sqs.req."), "sqs-req/task")
	b.ReportMetric(per.sum("rru."), "RRU/task")
	b.ReportMetric(per.sum("wru."), "WRU/task")
	b.ReportMetric(awsbench.PerMillion(awsbench.Price(usage(per, assumedDuration)).Total()), "usd/1M-tasks@50ms")
	b.ReportMetric(float64(lag.Microseconds())/1e3/float64(runs), "ms-last-result-to-commit")
	b.Log(fanSummary(used.scale(1/float64(runs)), n, lag/time.Duration(runs)))
	b.Logf("%d deliveries refused (another handler held the task's lease) and delivered again", d.redelivered)
	st.mu.Lock()
	b.Log(pace(st.start, st.records))
	st.mu.Unlock()
	b.Logf("the emulators (moto_server; dynalite if used) used %v of CPU in %v", (childCPU() - cpu0).Round(time.Second), time.Since(start).Round(time.Second))
	b.Log(st.timer.report(n))
	b.Log("the capacity meter's own reads: " + st.meterTimer.report(n))
}

// progress prints, every period until stop is called, how many results
// of a run of n tasks are recorded, to follow a long benchmark.
func (s *stamps) progress(period time.Duration, n int) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				s.mu.Lock()
				k, start := len(s.records), s.start
				s.mu.Unlock()
				fmt.Fprintf(os.Stderr, "fan-out: %d of %d results recorded after %v (%v)\n", k, n, time.Since(start).Round(time.Second), time.Now().UTC().Format(time.TimeOnly))
			}
		}
	}()
	return func() { close(done) }
}

// deliverParallel delivers every message sent until none is left, as
// fanOutRun's loop does, with d.workers handlers at once, each with Apps
// of its own (one warm execution environment per concurrent invocation),
// every dupEvery-th node-task message handed to the handler twice.
func (d *deployment) deliverParallel(tb testing.TB, dupEvery int) {
	tb.Helper()
	ctx := tb.Context()
	var (
		mu    sync.Mutex // busy, k, failed; d.invocations, d.durations
		busy  int
		k     int
		fails []error
	)
	// take pops the next message's queue, or reports that none is left
	// and no handler is running (none can send more).
	take := func() (url string, dup, ok, done bool) {
		mu.Lock()
		defer mu.Unlock()
		if len(fails) > 0 {
			return "", false, false, true
		}
		url, ok = d.queues.next()
		if !ok {
			return "", false, false, busy == 0
		}
		busy++
		if url == d.cfg.NodeQueueURL {
			k++
			dup = dupEvery > 0 && k%dupEvery == 0
		}
		return url, dup, true, false
	}
	var wg sync.WaitGroup
	for range d.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			apps := map[string]*serverless.App{}
			for {
				url, dup, ok, done := take()
				if done {
					return
				}
				if !ok {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				err := d.deliverOne(ctx, apps, url, dup, &mu)
				mu.Lock()
				busy--
				if err != nil {
					fails = append(fails, err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(fails) > 0 {
		tb.Fatalf("%v; logs:\n%s", errors.Join(fails...), d.logs)
	}
}

// deliverOne is deliverN for deliverParallel: it returns what failed
// rather than fail the benchmark (not allowed off its goroutine).
func (d *deployment) deliverOne(ctx context.Context, apps map[string]*serverless.App, url string, dup bool, mu *sync.Mutex) error {
	var msgs []sqstypes.Message
	for try := 0; len(msgs) == 0 && try < 10; try++ {
		out, err := d.esm.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(url),
			MaxNumberOfMessages:         1,
			WaitTimeSeconds:             int32(min(try, 1)),
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		})
		if err != nil {
			return err
		}
		msgs = out.Messages
		if len(msgs) == 0 && strings.HasSuffix(url, ".fifo") {
			return nil // deduplicated, as in deliverN
		}
	}
	if len(msgs) != 1 {
		return fmt.Errorf("received %d messages from %s, want the one sent", len(msgs), url)
	}
	m := msgs[0]
	ev := events.SQSEvent{Records: []events.SQSMessage{{
		MessageId:      aws.ToString(m.MessageId),
		ReceiptHandle:  aws.ToString(m.ReceiptHandle),
		Body:           aws.ToString(m.Body),
		Md5OfBody:      aws.ToString(m.MD5OfBody),
		Attributes:     m.Attributes,
		EventSource:    "aws:sqs",
		EventSourceARN: d.arns[url],
		AWSRegion:      mototest.Region,
	}}}
	fn := "tick"
	if url == d.cfg.NodeQueueURL {
		fn = "node"
	}
	app, ok := apps[fn]
	if !ok {
		var err error
		if app, err = serverless.New(serverless.Options{Config: d.cfg, AWS: d.awsCfg, Graphs: d.graphs, Logger: d.logger}); err != nil {
			return err
		}
		apps[fn] = app
	}
	handler := app.HandleTick
	if fn == "node" {
		handler = app.HandleNode
	}
	times := 1
	if dup {
		times = 2
	}
	for i := range times {
		start := time.Now()
		resp, err := handler(ctx, ev)
		mu.Lock()
		d.invocations[fn]++
		d.durations[fn] += time.Since(start)
		mu.Unlock()
		if err != nil {
			return fmt.Errorf("%s function: %w", fn, err)
		}
		if len(resp.BatchItemFailures) > 0 && i == 0 {
			// Another handler holds the task's lease (a delivery
			// again, tick.ErrClaimed): as SQS would after the
			// visibility timeout, the message comes back.
			if _, err := d.esm.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0}); err != nil {
				return err
			}
			mu.Lock()
			d.redelivered++
			mu.Unlock()
			d.queues.requeue(url)
			return nil
		}
	}
	_, err := d.esm.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle})
	return err
}
