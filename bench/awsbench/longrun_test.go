package awsbench_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/store/dynamo"
	"github.com/superstep/superstep/pkg/tick"
)

// longGraph is the loop of the long run: the inline loop with a MaxSteps
// that lets it run longLimit supersteps.
const longGraph = "bench-long"

// longLimit is the MaxSteps of longGraph.
const longLimit = 1_000_000

// envLongSteps sets the supersteps of TestAWSLongRun (default
// longStepsShort, the version in make test).
const envLongSteps = "SUPERSTEP_AWS_LONG_STEPS"

// envLongWarmup sets the supersteps of the run TestAWSLongRun makes
// before the measured one (default longWarmupSteps in the long version,
// none in the short one).
const envLongWarmup = "SUPERSTEP_AWS_LONG_WARMUP"

// longWarmupSteps is the default warm-up run's length in the long version.
const longWarmupSteps = 1000

// longWarmup returns the warm-up run's length: envLongWarmup's, or the
// default.
func longWarmup(t *testing.T, long bool) int {
	t.Helper()
	v := os.Getenv(envLongWarmup)
	if v == "" {
		if long {
			return longWarmupSteps
		}
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > longLimit {
		t.Fatalf("%s=%q: want a whole number of supersteps, 0 to %d", envLongWarmup, v, longLimit)
	}
	return n
}

// longStepsShort is TestAWSLongRun's run length in make test, and
// longWindowShort the steps of its first and last windows.
const (
	longStepsShort  = 200
	longWindowShort = 60
)

// longWindow is what one window of a long run costs per superstep.
type longWindow struct {
	steps     int     // supersteps in the window (whole ticks)
	ms        float64 // handler and delivery time per superstep
	requests  float64 // AWS requests per superstep (DynamoDB, SQS)
	ddb       float64 // DynamoDB requests per superstep
	readB     float64 // DynamoDB response bytes of reads per superstep
	writeB    float64 // DynamoDB request bytes of writes per superstep
	storedB   float64 // bytes of the step items stored per superstep
	lastSteps [2]int  // first and last step of the window
}

// TestAWSLongRun is issue 26's serverless long run: one run of the inline
// loop through the real tick handler on moto, chained (chains of
// chainLongSteps), with the figures per superstep of its first and last
// windows of steps: time, requests and bytes read and written, and the
// bytes stored. Requests and bytes must be within 10 % of each other
// (nothing a step does may grow with the run), the time within 10 % in
// the long version and within 5× in the short one (which a loaded
// machine's noise over 60 steps can approach; a step that grows with the
// run shows in its requests or bytes first).
//
// In make test it runs longStepsShort steps (windows of longWindowShort);
// SUPERSTEP_AWS_LONG_STEPS=20000 is the run (windows of 1,000),
// after a warm-up run of longWarmupSteps (SUPERSTEP_AWS_LONG_WARMUP sets
// it). SUPERSTEP_AWS_DYNAMODB=dynalite runs DynamoDB on dynalite, whose
// Query, like DynamoDB's, does not read the whole partition as moto's
// does (bench/README.md):
//
//	SUPERSTEP_AWS_DYNAMODB=dynalite SUPERSTEP_AWS_LONG_STEPS=20000 go test -run TestAWSLongRun -v -timeout 2h ./bench/awsbench/
//
// It also logs, per window, each operation's time per call and the CPU
// time per superstep of this process and of each emulator, to tell where
// a step's time goes.
func TestAWSLongRun(t *testing.T) {
	steps, window := longStepsShort, longWindowShort
	if v := os.Getenv(envLongSteps); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 3000 {
			t.Fatalf("%s=%q: want a whole number of supersteps, at least 3000", envLongSteps, v)
		}
		steps, window = n, 1000
	}
	long := steps >= 3000
	d := deploy(t, true)
	d.cfg.Chain = tick.Chain{Steps: chainLongSteps}
	ctx := t.Context()
	// Time each call by operation: the handlers' (DynamoDB and SQS) and
	// the event source mappings' (SQS), to tell where a step's time goes.
	lat := &latencyMeter{}
	d.awsCfg.APIOptions = append(d.awsCfg.APIOptions, lat.Install)
	esmCfg := d.plainCfg.Copy()
	esmCfg.APIOptions = append(esmCfg.APIOptions, d.esmMeter.Install, d.queues.Install, lat.Install)
	d.esm = sqs.NewFromConfig(esmCfg)
	t.Logf("DynamoDB on %s, SQS on moto", dynamoEmulator())
	// CPU time: this process's and the emulators' (its child processes),
	// less sensitive than wall time to what else the machine runs.
	cpu := newCPUMeter(t)

	api := d.app(t, "api")
	if warm := longWarmup(t, long); warm > 0 {
		// Another run first, in its own partition, so that the first
		// window does not pay for the emulators' and this process's
		// warm-up (dynalite's JIT took 3.1 ms of CPU a step over the
		// first thousand steps, 1.6 ms after) and only the run's length
		// differs between the windows.
		wid := fmt.Sprintf("warmup-%d", time.Now().UnixNano())
		d.invoke(t, "api", func() error {
			_, _, err := api.Service.Create(ctx, longGraph, runs.CreateRequest{RunID: wid, Input: json.RawMessage(fmt.Sprintf(`{"limit": %d}`, warm))})
			return err
		})
		begin := time.Now()
		for url, ok := d.queues.next(); ok; url, ok = d.queues.next() {
			d.deliver(t, url)
		}
		r, err := d.verify.GetRun(ctx, wid)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != pregel.RunCompleted || r.Step != warm {
			t.Fatalf("warm-up run %s is %s at step %d (error %q), want completed at step %d", wid, r.Status, r.Step, r.Error, warm)
		}
		t.Logf("warm-up: a run of %d supersteps in %s, before the measured one", warm, time.Since(begin).Round(time.Millisecond))
	}
	id := fmt.Sprintf("long-%d", time.Now().UnixNano())
	d.invoke(t, "api", func() error {
		_, _, err := api.Service.Create(ctx, longGraph, runs.CreateRequest{RunID: id, Input: json.RawMessage(fmt.Sprintf(`{"limit": %d}`, steps))})
		return err
	})
	// One point per tick message: the newest step after it, the counters
	// and the time spent delivering ticks so far.
	type point struct {
		step int
		t    tally
		busy time.Duration
		lat  latencies
		cpu  cpuTimes
	}
	points := []point{{step: 0, t: d.snapshot(), lat: lat.snapshot(), cpu: cpu.read()}}
	var busy time.Duration
	started := time.Now()
	for {
		url, ok := d.queues.next()
		if !ok {
			break
		}
		if url != d.cfg.TickQueueURL {
			t.Fatalf("a message to %s; the inline loop sends ticks only", url)
		}
		begin := time.Now()
		d.deliver(t, url)
		busy += time.Since(begin)
		cp, err := d.verify.Load(ctx, id, pregel.Latest) // unmetered, untimed
		if err != nil {
			t.Fatal(err)
		}
		points = append(points, point{step: cp.Step, t: d.snapshot(), busy: busy, lat: lat.snapshot(), cpu: cpu.read()})
		if long && len(points)%(window/chainLongSteps) == 1 {
			// The figures of the last window so far, for a run cut short.
			a, b := points[len(points)-1-window/chainLongSteps], points[len(points)-1]
			n, u := float64(b.step-a.step), b.t.sub(a.t)
			t.Logf("steps %5d-%5d after %6s: %6.2f ms, %.3f requests (%.3f DynamoDB), %.1f bytes written per superstep",
				a.step+1, b.step, time.Since(started).Round(time.Second), float64((b.busy-a.busy).Microseconds())/1e3/n,
				(u.sum("ddb.req.")+u.sum("sqs.req."))/n, u.sum("ddb.req.")/n, (u["ddb.reqB.PutItem"]+u["ddb.reqB.UpdateItem"])/n)
			t.Logf("    ms per call: %s; CPU ms per superstep: %s", b.lat.sub(a.lat), b.cpu.sub(a.cpu).per(n))
		}
	}
	r, err := d.verify.GetRun(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != pregel.RunCompleted || r.Step != steps {
		t.Fatalf("run %s is %s at step %d (error %q), want completed at step %d", id, r.Status, r.Step, r.Error, steps)
	}
	stored := stepItemBytes(t, d, id)

	// Windows of whole ticks: the first ticks covering window steps from
	// step 1 (the run's creation and step 0 excluded), the last ones
	// covering window steps up to the end.
	measure := func(from, to int) longWindow {
		a, b := points[from], points[to]
		n := b.step - a.step
		u := b.t.sub(a.t)
		w := longWindow{steps: n, lastSteps: [2]int{a.step + 1, b.step}}
		per := func(v float64) float64 { return v / float64(n) }
		w.ms = per(float64((b.busy - a.busy).Microseconds()) / 1e3)
		w.ddb = per(u.sum("ddb.req."))
		w.requests = w.ddb + per(u.sum("sqs.req."))
		for _, op := range []string{"GetItem", "Query", "BatchGetItem"} {
			w.readB += per(u["ddb.respB."+op])
		}
		for _, op := range []string{"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"} {
			w.writeB += per(u["ddb.reqB."+op])
		}
		for s := a.step + 1; s <= b.step; s++ {
			w.storedB += per(float64(stored[s]))
		}
		return w
	}
	first := 1 // the first tick also writes step 0: start at the second
	for first < len(points) && points[first].step < 1 {
		first++
	}
	firstEnd := first
	for firstEnd < len(points)-1 && points[firstEnd].step-points[first].step < window {
		firstEnd++
	}
	last := len(points) - 2 // the last tick completes the run: leave it out
	lastBegin := last
	for lastBegin > firstEnd && points[last].step-points[lastBegin].step < window {
		lastBegin--
	}
	w1, w2 := measure(first, firstEnd), measure(lastBegin, last)
	t.Logf("%d supersteps in %s (%d tick messages, chains of %d)", steps, time.Since(started).Round(time.Second), len(points)-1, chainLongSteps)
	t.Logf("per superstep     %12s %12s  ratio", fmt.Sprintf("steps %d-%d", w1.lastSteps[0], w1.lastSteps[1]), fmt.Sprintf("steps %d-%d", w2.lastSteps[0], w2.lastSteps[1]))
	rows := []struct {
		name   string
		a, b   float64
		margin float64
	}{
		{"time (ms)", w1.ms, w2.ms, 5},
		{"AWS requests", w1.requests, w2.requests, 1.1},
		{"DynamoDB requests", w1.ddb, w2.ddb, 1.1},
		{"bytes read", w1.readB, w2.readB, 1.1},
		{"bytes written", w1.writeB, w2.writeB, 1.1},
		{"bytes stored", w1.storedB, w2.storedB, 1.1},
	}
	if long {
		rows[0].margin = 1.1
	}
	c1, c2 := points[firstEnd].cpu.sub(points[first].cpu).per(float64(w1.steps)), points[last].cpu.sub(points[lastBegin].cpu).per(float64(w2.steps))
	for _, who := range c2.names() {
		t.Logf("CPU %-13s %9.3f ms %9.3f ms  %.3f  (per superstep)", who, c1[who], c2[who], c2[who]/c1[who])
	}
	l1, l2 := points[firstEnd].lat.sub(points[first].lat), points[last].lat.sub(points[lastBegin].lat)
	for _, op := range l2.names() {
		a, b := l1[op], l2[op]
		t.Logf("%-17s %9.3f ms %9.3f ms  %.3f  (ms per call; %.3f, %.3f calls per superstep)", op, a.mean(), b.mean(), b.mean()/a.mean(),
			float64(a.calls)/float64(w1.steps), float64(b.calls)/float64(w2.steps))
	}
	for _, row := range rows {
		ratio := row.b / row.a
		t.Logf("%-17s %12.2f %12.2f  %.3f", row.name, row.a, row.b, ratio)
		if row.a <= 0 || ratio > row.margin || ratio < 1/row.margin {
			t.Errorf("%s per superstep: %.2f over steps %v, %.2f over steps %v: want within %.0f %%", row.name, row.a, w1.lastSteps, row.b, w2.lastSteps, (row.margin-1)*100)
		}
	}
}

// stepItemBytes reads the run's partition (unmetered, a page at a time)
// and returns the size of each step's items by step, as DynamoDB counts
// item sizes. It fails if the partition holds other per-step items.
func stepItemBytes(t *testing.T, d *deployment, id string) map[int]int {
	t.Helper()
	client := dynamodb.NewFromConfig(d.plainCfg)
	out := map[int]int{}
	p := dynamodb.NewQueryPaginator(client, &dynamodb.QueryInput{
		TableName:                 aws.String(d.cfg.Table),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: "RUN#" + id}},
	})
	for p.HasMorePages() {
		page, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			sk := it["sk"].(*types.AttributeValueMemberS).Value
			step, ok := strings.CutPrefix(sk, "STEP#")
			if !ok {
				continue // the run record, its blobs
			}
			n, err := strconv.Atoi(step)
			if err != nil {
				t.Fatalf("step item %q: %v", sk, err)
			}
			out[n] += dynamo.ItemSize(it)
		}
	}
	return out
}

// dynamoEmulator names the emulator serving DynamoDB (envDynamoDB).
func dynamoEmulator() string {
	if v := os.Getenv(envDynamoDB); v != "" {
		return v
	}
	return "moto"
}

// latencyMeter is SDK middleware that times each call (serialization,
// signing, the emulator's answer and its decoding, retries included) by
// operation.
type latencyMeter struct {
	mu sync.Mutex
	l  latencies
}

// latency is what a latencyMeter counted of one operation.
type latency struct {
	calls int
	total time.Duration
}

// mean is the mean time of a call in milliseconds.
func (l latency) mean() float64 {
	if l.calls == 0 {
		return 0
	}
	return float64(l.total.Microseconds()) / 1e3 / float64(l.calls)
}

// latencies maps operation names to their latency.
type latencies map[string]latency

// Install adds the meter to a client's stack (an APIOptions function).
func (m *latencyMeter) Install(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("superstep.latency",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			begin := time.Now()
			out, md, err := next.HandleInitialize(ctx, in)
			elapsed := time.Since(begin)
			op := awsmiddleware.GetOperationName(ctx)
			m.mu.Lock()
			if m.l == nil {
				m.l = latencies{}
			}
			l := m.l[op]
			l.calls++
			l.total += elapsed
			m.l[op] = l
			m.mu.Unlock()
			return out, md, err
		}), middleware.Before)
}

func (m *latencyMeter) snapshot() latencies {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(latencies, len(m.l))
	for op, l := range m.l {
		out[op] = l
	}
	return out
}

// sub is what l counted beyond before.
func (l latencies) sub(before latencies) latencies {
	out := latencies{}
	for op, v := range l {
		if d := (latency{v.calls - before[op].calls, v.total - before[op].total}); d.calls > 0 {
			out[op] = d
		}
	}
	return out
}

func (l latencies) names() []string {
	names := make([]string, 0, len(l))
	for op := range l {
		names = append(names, op)
	}
	slices.Sort(names)
	return names
}

// String lists each operation's mean time per call.
func (l latencies) String() string {
	var b strings.Builder
	for i, op := range l.names() {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %.2f (%d)", op, l[op].mean(), l[op].calls)
	}
	return b.String()
}

// cpuMeter reads the CPU time (user and system) of this process and of
// its child processes, the emulators, by name (moto_server, node).
type cpuMeter struct {
	children map[string][]int // name -> pids
}

// cpuTimes is CPU time in milliseconds by process name ("test" for this
// one).
type cpuTimes map[string]float64

// clockTick is the unit of /proc/<pid>/stat's times (USER_HZ, 100 on
// Linux).
const clockTick = 10 * time.Millisecond

// newCPUMeter finds this process's children. Without /proc (not Linux)
// it counts this process alone.
func newCPUMeter(t *testing.T) *cpuMeter {
	t.Helper()
	m := &cpuMeter{children: map[string][]int{}}
	dirs, _ := os.ReadDir("/proc")
	for _, e := range dirs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		name, ppid, _, ok := procStat(pid)
		if ok && ppid == os.Getpid() {
			m.children[name] = append(m.children[name], pid)
		}
	}
	return m
}

// procStat reads a process's name, parent and CPU time from
// /proc/<pid>/stat.
func procStat(pid int) (name string, ppid int, cpu time.Duration, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0, 0, false
	}
	s := string(b)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return "", 0, 0, false
	}
	name = s[open+1 : closing]
	// After the name: state ppid pgrp session tty_nr tpgid flags minflt
	// cminflt majflt cmajflt utime stime.
	f := strings.Fields(s[closing+1:])
	if len(f) < 13 {
		return "", 0, 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return name, ppid, time.Duration(utime+stime) * clockTick, true
}

// read returns the CPU times now.
func (m *cpuMeter) read() cpuTimes {
	out := cpuTimes{}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		out["test"] = float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e6
	}
	for name, pids := range m.children {
		for _, pid := range pids {
			if _, _, cpu, ok := procStat(pid); ok {
				out[name] += float64(cpu.Microseconds()) / 1e3
			}
		}
	}
	return out
}

// sub is c less before.
func (c cpuTimes) sub(before cpuTimes) cpuTimes {
	out := cpuTimes{}
	for k, v := range c {
		out[k] = v - before[k]
	}
	return out
}

// per divides each time by n (supersteps).
func (c cpuTimes) per(n float64) cpuTimes {
	out := cpuTimes{}
	for k, v := range c {
		out[k] = v / n
	}
	return out
}

func (c cpuTimes) names() []string {
	names := make([]string, 0, len(c))
	for k := range c {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// String lists the times, "test 1.23, node 0.45".
func (c cpuTimes) String() string {
	var b strings.Builder
	for i, k := range c.names() {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %.2f", k, c[k])
	}
	return b.String()
}
