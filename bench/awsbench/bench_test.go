package awsbench_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	mathrand "math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/superstep/superstep/bench/awsbench"
	"github.com/superstep/superstep/internal/awsmeter"
	"github.com/superstep/superstep/internal/dynalitetest"
	"github.com/superstep/superstep/internal/lambdatest"
	"github.com/superstep/superstep/internal/mototest"
	"github.com/superstep/superstep/internal/testkit"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/serverless"
	"github.com/superstep/superstep/pkg/store/dynamo"
	"github.com/superstep/superstep/pkg/tick"
)

// The benchmarks of this file run the serverless runtime on moto_server
// with the real aws-sdk-go-v2 clients and handlers (pkg/serverless), and
// count what a superstep costs in AWS requests, request units and dollars.
// See the package documentation and bench/README.md.

// moto is the emulator the tests and benchmarks of this package share.
var moto mototest.Shared

// dyn serves DynamoDB instead of moto when envDynamoDB says dynalite.
var dyn dynalitetest.Shared

// envDynamoDB chooses the DynamoDB emulator of the deployments: moto (the
// default) or dynalite (internal/dynalitetest), whose Query reads a key
// range in O(log n) as DynamoDB does, where moto reads and sorts the
// whole partition; SQS stays on moto either way. See bench/README.md.
const envDynamoDB = "SUPERSTEP_AWS_DYNAMODB"

// emulatorConfig is the configuration of the deployments' clients: moto's,
// with DynamoDB routed to dynalite when envDynamoDB asks for it.
func emulatorConfig(tb testing.TB, srv *mototest.Server) aws.Config {
	tb.Helper()
	switch v := os.Getenv(envDynamoDB); v {
	case "", "moto":
		return srv.Config
	case "dynalite":
		return dyn.Start(tb).Route(srv.Config)
	default:
		tb.Fatalf("%s=%q: want moto or dynalite", envDynamoDB, v)
		return aws.Config{}
	}
}

func TestMain(m *testing.M) {
	flag.Parse()
	// go test prints a skipped benchmark's message only with -v: say it
	// here, so that `make bench` does not pass over them silently.
	if bench := flag.Lookup("test.bench"); bench != nil && bench.Value.String() != "" {
		ci := strings.TrimSpace(os.Getenv("CI"))
		strict := ci != "" && !strings.EqualFold(ci, "false") && ci != "0" // as mototest decides
		if _, err := exec.LookPath(mototest.Binary); err != nil && !strict {
			fmt.Fprintf(os.Stderr, "awsbench: SKIPPING the AWS benchmarks: %s is not on PATH; install it with pip install 'moto[server]'\n", mototest.Binary)
		}
	}
	cleanup, err := patchMoto()
	if err != nil {
		fmt.Fprintln(os.Stderr, "awsbench: patch moto:", err)
		os.Exit(1)
	}
	code := moto.Run(m)
	cleanup()
	if err := dyn.Close(); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, "awsbench:", err)
		code = 1
	}
	os.Exit(code)
}

// Graph names of the scenarios.
const (
	inlineGraph = "bench-inline"
	remoteGraph = "bench-remote"
	largeGraph  = "bench-large"
)

// largeDocBytes is the size of the large scenario's unchanging channel.
const largeDocBytes = 300 << 10

// loopState is the state of the inline and remote loops: Limit is the
// input, Count goes up by one per superstep.
type loopState struct {
	Limit int `json:"limit"`
	Count int `json:"count"`
}

// largeState adds to the loop a document of largeDocBytes that the first
// superstep writes and no other changes.
type largeState struct {
	Limit int    `json:"limit"`
	Count int    `json:"count"`
	Doc   string `json:"doc,omitempty"`
}

// largeDoc is the document of the large scenario: base64 of random bytes
// (fixed seed), so that it does not compress much more than text would.
var largeDoc = sync.OnceValue(func() string {
	r := mathrand.NewChaCha8([32]byte{'s', 'u', 'p', 'e', 'r', 's', 't', 'e', 'p'})
	raw := make([]byte, largeDocBytes*3/4)
	r.Read(raw)
	return base64.StdEncoding.EncodeToString(raw)
})

// loopGraph is Start -> step, step routing back to itself until done; the
// node's body is step, its options opts (pregel.Remote() for the remote
// loop).
func loopGraph[S any](tb testing.TB, name string, step func(S) S, done func(S) bool, opts ...pregel.NodeOption) *pregel.Graph {
	tb.Helper()
	return loopGraphMax(tb, name, 1000, step, done, opts...)
}

// loopGraphMax is loopGraph with a run limited to maxSteps supersteps.
func loopGraphMax[S any](tb testing.TB, name string, maxSteps int, step func(S) S, done func(S) bool, opts ...pregel.NodeOption) *pregel.Graph {
	tb.Helper()
	g := pregel.NewGraph[S](name)
	g.AddFunc("step", func(_ context.Context, s S) (S, error) { return step(s), nil }, opts...)
	g.AddEdge(pregel.Start, "step")
	g.AddConditionalEdges("step", func(_ context.Context, s S) ([]string, error) {
		if done(s) {
			return []string{pregel.End}, nil
		}
		return []string{"step"}, nil
	}, "step", pregel.End)
	cg, err := g.Compile(pregel.MaxSteps(maxSteps))
	if err != nil {
		tb.Fatal(err)
	}
	return cg
}

func registry(tb testing.TB, fan *fanCounter) *runs.Registry {
	tb.Helper()
	inc := func(s loopState) loopState { return loopState{Count: s.Count + 1} }
	loopDone := func(s loopState) bool { return s.Count >= s.Limit }
	// The large loop's node reads the counter only (pregel.Reads): the
	// document is written by the first step and read by none.
	large := func(s largeState) largeState {
		out := largeState{Count: s.Count + 1}
		if s.Count == 0 {
			out.Doc = largeDoc()
		}
		return out
	}
	reg, err := runs.NewRegistry(
		loopGraph(tb, inlineGraph, inc, loopDone),
		loopGraph(tb, remoteGraph, inc, loopDone, pregel.Remote()),
		loopGraphMax(tb, longGraph, longLimit, inc, loopDone),
		loopGraph(tb, largeGraph, large, func(s largeState) bool { return s.Count >= s.Limit }, pregel.Reads("limit", "count")),
		fanOutGraph(tb, fan),
	)
	if err != nil {
		tb.Fatal(err)
	}
	return reg
}

// scenario is one benchmark: a graph, the number of supersteps by which
// its long run exceeds its short one, and its cost target in dollars per
// million supersteps, if it has one.
type scenario struct {
	graph  string
	steps  int
	target float64
	// chain is the deployment's TICK_CHAIN_STEPS (0: one superstep per
	// tick message, the default).
	chain int
	// events is the deployment's RUN_EVENTS ("": the default, watched
	// runs only; these runs are not watched).
	events serverless.EventsMode
	// invoke is NODE_DISPATCH=invoke: node tasks start by asynchronous
	// invocations of the node function, not messages on the node queue.
	invoke bool
}

// inlineTarget is the cost target for inline nodes, in dollars per million
// supersteps.
const inlineTarget = 3.0

// remoteTarget is the cost target for a superstep of one remote task, in
// dollars per million supersteps (issue 26).
const remoteTarget = 3.0

// chainedTarget is the cost target for an inline superstep in a chain of
// chainSteps, in dollars per million supersteps: its commit (one write,
// $0.625) and a tenth of a tick message and invocation ($0.20).
const chainedTarget = 0.85

// chainSteps is the chained scenarios' TICK_CHAIN_STEPS: a tick message
// runs up to 10 inline supersteps, so a run of 21 takes three messages
// where a run of 1 takes one.
const chainSteps = 10

// chainedLongTarget is the cost target for an inline superstep in a chain
// of chainLongSteps (issue 26): $0.625 for the commit and a twentieth of a
// tick message and invocation ($0.10).
const chainedLongTarget = 0.75

// chainLongSteps is the longer chain's TICK_CHAIN_STEPS: a run of 21
// supersteps takes two messages.
const chainLongSteps = 20

var (
	inline        = scenario{graph: inlineGraph, steps: 20, target: inlineTarget}
	inlineChained = scenario{graph: inlineGraph, steps: 20, target: chainedTarget, chain: chainSteps}
	inlineChain20 = scenario{graph: inlineGraph, steps: 20, target: chainedLongTarget, chain: chainLongSteps}
	remote        = scenario{graph: remoteGraph, steps: 20, target: remoteTarget}
	remoteChained = scenario{graph: remoteGraph, steps: 20, target: remoteTarget, chain: chainLongSteps}
	remoteInvoke  = scenario{graph: remoteGraph, steps: 20, target: remoteTarget, invoke: true}
	large         = scenario{graph: largeGraph, steps: 10}
	inlineEvents  = scenario{graph: inlineGraph, steps: 20, events: serverless.EventsOn}
	remoteEvents  = scenario{graph: remoteGraph, steps: 20, events: serverless.EventsOn}
)

func BenchmarkAWSInline(b *testing.B)        { benchScenario(b, inline) }
func BenchmarkAWSInlineChained(b *testing.B) { benchScenario(b, inlineChained) }

// BenchmarkAWSInlineChained20 is BenchmarkAWSInlineChained with chains of
// 20 supersteps a tick message.
func BenchmarkAWSInlineChained20(b *testing.B) { benchScenario(b, inlineChain20) }
func BenchmarkAWSRemote(b *testing.B)          { benchScenario(b, remote) }

// BenchmarkAWSRemoteChained is BenchmarkAWSRemote on a deployment with
// TICK_CHAIN_STEPS=20: the node function that commits a step of the loop
// runs the next one (one remote task) in the same invocation.
func BenchmarkAWSRemoteChained(b *testing.B) { benchScenario(b, remoteChained) }

// BenchmarkAWSRemoteInvoke is BenchmarkAWSRemote with NODE_DISPATCH=invoke:
// each node task is one asynchronous Invoke of the node function (through
// the real lambda client to a lambdatest stand-in; the harness runs the
// invocations in order, as it delivers messages) instead of three SQS
// requests.
func BenchmarkAWSRemoteInvoke(b *testing.B) { benchScenario(b, remoteInvoke) }
func BenchmarkAWSLargeState(b *testing.B)   { benchScenario(b, large) }

// BenchmarkAWSInlineEvents and BenchmarkAWSRemoteEvents are the inline
// and remote loops with RUN_EVENTS=on, every run's events kept (as for a
// watched run under the default): the difference with BenchmarkAWSInline
// and BenchmarkAWSRemote, whose runs nobody watches, is what a run's
// event stream costs per superstep.
func BenchmarkAWSInlineEvents(b *testing.B) { benchScenario(b, inlineEvents) }
func BenchmarkAWSRemoteEvents(b *testing.B) { benchScenario(b, remoteEvents) }

// Execution environments: each function (api, tick, node) has an App of
// its own, as on Lambda, where they are separate processes; the Store in
// an App caches what it read and wrote. warm keeps one App per function
// for every invocation (one warm execution environment each: the best
// case for the cache); cold makes a new App for each invocation (a fresh
// environment each time: the worst case).
var environments = []string{"warm", "cold"}

// benchScenario runs sc in each kind of execution environment.
func benchScenario(b *testing.B, sc scenario) {
	for _, env := range environments {
		b.Run(env, func(b *testing.B) { benchRuns(b, sc, env == "warm") })
	}
}

// benchRuns runs, per iteration, a run of one superstep and a run of
// 1+sc.steps supersteps, and reports the difference per superstep: what
// one more superstep costs, without the run's creation and completion.
func benchRuns(b *testing.B, sc scenario, warm bool) {
	d := deploy(b, warm)
	d.cfg.Chain = tick.Chain{Steps: sc.chain}
	d.cfg.Events = sc.events
	d.dispatch(sc.invoke)
	var short, long tally
	n := 0
	for b.Loop() {
		short = short.add(d.run(b, sc.graph, fmt.Sprintf("short-%d", n), 1))
		long = long.add(d.run(b, sc.graph, fmt.Sprintf("long-%d", n), 1+sc.steps))
		n++
	}
	if err := d.capacity.Err(); err != nil {
		b.Fatal(err)
	}
	r := newReport(short, long, n, sc.steps)
	r.reportMetrics(b)
	// go test shows only 10 lines of a benchmark's log without -v.
	if testing.Verbose() {
		b.Log("\n" + r.String(b.Name()))
	} else {
		b.Log("\n" + r.summary(b.Name(), sc.target))
	}
}

// TestScenarios checks the harness on short runs: the shape of each
// scenario's superstep (invocations, queue messages) and that request
// units and dollars come out positive, and that an inline superstep
// stays under the cost target.
func TestScenarios(t *testing.T) {
	for _, env := range environments {
		t.Run(env, func(t *testing.T) { testScenarios(t, env == "warm") })
	}
}

func testScenarios(t *testing.T, warm bool) {
	d := deploy(t, warm)
	for _, tc := range []struct {
		sc scenario
		// Per superstep: Lambda invocations, FIFO and standard sends.
		invocations, fifoSends, stdSends float64
		// maxUSD bounds the cost per million supersteps with every
		// invocation lasting 50 ms (0: no bound).
		maxUSD float64
		// ddbRequests, when positive, is the number of DynamoDB
		// requests per superstep, with rru read and wru write units.
		ddbRequests, rru, wru float64
	}{
		{inline, 1, 1, 0, 3, 0, 0, 0},
		// Runs of 1 and 3 supersteps are one tick each in a chain: a
		// chained superstep after the first is its commit, one PutItem,
		// which also tells whether a drain or cancel came (no read).
		{inlineChained, 0, 0, 0, chainedTarget, 1, 0, 1},
		{inlineChain20, 0, 0, 0, chainedLongTarget, 1, 0, 1},
		// The node function executes the task, records it and, the
		// last of its step, commits it and sends the node task of the
		// next step: no tick.
		{remote, 1, 0, 1, 3.5, 0, 0, 0},
		// Chained, the node function runs the next step itself: its
		// task's lease and the commit, two PutItems, no read, message or
		// invocation.
		{remoteChained, 0, 0, 0, remoteTarget, 2, 0, 2},
		// The node task is an asynchronous invocation: no SQS at all;
		// the lease, the commit and the read of the node handler.
		{remoteInvoke, 1, 0, 0, remoteTarget, 3, 1, 2},
		{large, 1, 1, 0, 0, 0, 0, 0},
	} {
		name := tc.sc.graph
		if tc.sc.chain > 0 {
			name += fmt.Sprintf("-chained%d", tc.sc.chain)
		}
		if tc.sc.invoke {
			name += "-invoke"
		}
		t.Run(name, func(t *testing.T) {
			d.cfg.Chain = tick.Chain{Steps: tc.sc.chain}
			d.dispatch(tc.sc.invoke)
			clear(d.apps)
			const steps = 2
			short := d.run(t, tc.sc.graph, "short", 1)
			long := d.run(t, tc.sc.graph, "long", 1+steps)
			r := newReport(short, long, 1, steps)
			m := r.marginal
			if got := m.sum("inv."); got != tc.invocations {
				t.Errorf("%v Lambda invocations per superstep, want %v", got, tc.invocations)
			}
			if got := m["q.fifo.SendMessage"]; got != tc.fifoSends {
				t.Errorf("%v tick messages per superstep, want %v", got, tc.fifoSends)
			}
			if got := m["q.std.SendMessage"]; got != tc.stdSends {
				t.Errorf("%v node-task messages per superstep, want %v", got, tc.stdSends)
			}
			wantESM := tc.invocations
			if tc.sc.invoke {
				wantESM = 0
				if got := m["lambda.req.Invoke"]; got != tc.invocations {
					t.Errorf("%v Invoke requests per superstep, want %v", got, tc.invocations)
				}
			}
			if rec, del := m.sum("esm.ReceiveMessage"), m.sum("esm.DeleteMessage"); rec != wantESM || del != wantESM {
				t.Errorf("event source mapping: %v receives and %v deletes per superstep, want %v each", rec, del, wantESM)
			}
			if m.sum("wru.") <= 0 || r.usd(0) <= 0 || tc.ddbRequests == 0 && m.sum("rru.") <= 0 {
				t.Errorf("no request units or cost counted: %v", m)
			}
			if req, rru, wru := m.sum("ddb.req."), m.sum("rru."), m.sum("wru."); tc.ddbRequests > 0 && (req != tc.ddbRequests || rru != tc.rru || wru != tc.wru) {
				t.Errorf("%v DynamoDB requests, %v RRU, %v WRU per superstep; want %v, %v, %v", req, rru, wru, tc.ddbRequests, tc.rru, tc.wru)
			}
			if usd := awsbench.PerMillion(r.usd(assumedDuration)); tc.maxUSD > 0 && usd >= tc.maxUSD {
				t.Errorf("a superstep costs $%.3f per million at 50 ms per invocation; the target is under $%.2f", usd, tc.maxUSD)
			}
			t.Log("\n" + r.String(t.Name()))
		})
	}
	if err := d.capacity.Err(); err != nil {
		t.Fatal(err)
	}
}

// deployment is a table and queues on the emulator, the functions' Apps on
// them, and the meters.
type deployment struct {
	// cfg, awsCfg, graphs and logger make the Apps.
	cfg    serverless.Config
	awsCfg aws.Config
	// plainCfg is the emulator's configuration without the meters.
	plainCfg aws.Config
	graphs   *runs.Registry
	logger   *slog.Logger
	// warm keeps one App per function in apps; otherwise every
	// invocation has a new one.
	warm bool
	apps map[string]*serverless.App
	// verify reads runs back, unmetered.
	verify *dynamo.Store
	// esm receives and deletes messages as the event source mappings do.
	esm *sqs.Client
	// arns maps queue URLs to ARNs, for the events.
	arns map[string]string

	appMeter, esmMeter awsmeter.Meter
	capacity           *awsbench.CapacityMeter
	queues             *queueMeter
	logs               *syncBuffer

	// fan counts the executions of the fan-out's work tasks.
	fan *fanCounter
	// workers, above 1, is how many handlers the fan-out runs deliver to
	// at once (deliverParallel); redelivered counts the messages it
	// handed out again after a handler refused them.
	workers     int
	redelivered int
	// Handler invocations and their durations, by function.
	invocations map[string]float64
	durations   map[string]time.Duration
	// lambda accepts the node function's asynchronous invocations
	// (NODE_DISPATCH=invoke); the harness runs them itself, in the order
	// sent (queueMeter), as it delivers messages.
	lambda *lambdatest.Server
}

// benchNodeFunction is the node function's name on the Lambda stand-in.
const benchNodeFunction = "bench-node"

// dispatch sets the deployment's NODE_DISPATCH: invoke or sqs.
func (d *deployment) dispatch(invoke bool) {
	d.cfg.NodeDispatch, d.cfg.NodeFunction = serverless.DispatchSQS, ""
	if invoke {
		d.cfg.NodeDispatch, d.cfg.NodeFunction = serverless.DispatchInvoke, lambdatest.ARN(benchNodeFunction)+":live"
	}
	clear(d.apps)
}

func deploy(tb testing.TB, warm bool) *deployment {
	tb.Helper()
	return deployVisible(tb, warm, 30*time.Second)
}

// deployVisible is deploy with the queues' visibility timeout set.
func deployVisible(tb testing.TB, warm bool, visibility time.Duration) *deployment {
	tb.Helper()
	srv := moto.Start(tb)
	emu := emulatorConfig(tb, srv)
	ctx := tb.Context()
	var b [4]byte
	rand.Read(b[:])
	prefix := "bench-" + hex.EncodeToString(b[:])
	cfg, err := serverless.Provision(ctx, emu, serverless.Resources{Prefix: prefix, VisibilityTimeout: visibility})
	if err != nil {
		tb.Fatal(err)
	}
	fan := &fanCounter{runs: map[int]int{}}
	d := &deployment{
		fan:         fan,
		cfg:         cfg,
		graphs:      registry(tb, fan),
		warm:        warm,
		apps:        map[string]*serverless.App{},
		verify:      dynamo.New(dynamodb.NewFromConfig(emu), cfg.Table),
		capacity:    &awsbench.CapacityMeter{Reader: dynamodb.NewFromConfig(emu)},
		queues:      &queueMeter{},
		logs:        &syncBuffer{},
		arns:        map[string]string{},
		invocations: map[string]float64{},
		durations:   map[string]time.Duration{},
	}
	d.lambda = lambdatest.Start(tb, map[string]*lambdatest.Function{benchNodeFunction: {
		Handler: func(context.Context, []byte) error { return nil },
	}}, lambdatest.Faults{})
	d.awsCfg, d.plainCfg = emu.Copy(), emu.Copy()
	d.awsCfg.APIOptions = append(d.awsCfg.APIOptions, d.appMeter.Install, d.capacity.Install, d.queues.Install)
	d.logger = slog.New(slog.NewJSONHandler(d.logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	esmCfg := emu.Copy()
	esmCfg.APIOptions = append(esmCfg.APIOptions, d.esmMeter.Install, d.queues.Install)
	d.esm = sqs.NewFromConfig(esmCfg)
	plain := sqs.NewFromConfig(emu)
	for _, url := range []string{cfg.TickQueueURL, cfg.NodeQueueURL} {
		out, err := plain.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl:       aws.String(url),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
		})
		if err != nil {
			tb.Fatal(err)
		}
		d.arns[url] = out.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("logs:\n%s", d.logs)
		}
	})
	return d
}

// app returns the App that serves an invocation of function fn: the
// function's own when warm, a new one otherwise.
func (d *deployment) app(tb testing.TB, fn string) *serverless.App {
	tb.Helper()
	if a, ok := d.apps[fn]; ok {
		return a
	}
	a, err := serverless.New(serverless.Options{Config: d.cfg, AWS: d.awsCfg, Graphs: d.graphs, Logger: d.logger, LambdaEndpoint: d.lambda.URL})
	if err != nil {
		tb.Fatal(err)
	}
	if d.warm {
		d.apps[fn] = a
	}
	return a
}

// run creates a run of graph counting to limit, as the api function does,
// and delivers its messages to the tick and node handlers one at a time,
// as the event source mappings (batch size 1) do, until none is left. It
// checks that the run completed and returns what it used.
func (d *deployment) run(tb testing.TB, graph, name string, limit int) tally {
	tb.Helper()
	ctx := tb.Context()
	var b [3]byte
	rand.Read(b[:])
	id := fmt.Sprintf("%s-%s-%s", graph, name, hex.EncodeToString(b[:]))
	before := d.snapshot()
	api := d.app(tb, "api")
	d.invoke(tb, "api", func() error {
		_, _, err := api.Service.Create(ctx, graph, runs.CreateRequest{RunID: id, Input: json.RawMessage(fmt.Sprintf(`{"limit": %d}`, limit))})
		return err
	})
	for {
		url, ok := d.queues.next()
		if !ok {
			break
		}
		d.deliver(tb, url)
	}
	used := d.snapshot().sub(before)

	r, err := d.verify.GetRun(ctx, id)
	if err != nil {
		tb.Fatal(err)
	}
	if r.Status != pregel.RunCompleted || r.Step != limit {
		tb.Fatalf("run %s is %s at step %d (error %q), want completed at step %d", id, r.Status, r.Step, r.Error, limit)
	}
	cp, err := d.verify.Load(ctx, id, pregel.Latest)
	if err != nil {
		tb.Fatal(err)
	}
	var count int
	if err := json.Unmarshal(cp.Values["count"], &count); err != nil || count != limit {
		tb.Fatalf("run %s: count %s, want %d", id, cp.Values["count"], limit)
	}
	if graph == largeGraph && len(cp.Values["doc"]) != len(largeDoc())+2 {
		tb.Fatalf("run %s: the document is %d bytes, want %d", id, len(cp.Values["doc"]), len(largeDoc())+2)
	}
	return used
}

// deliver receives one message from the queue at url, hands it to the
// function that consumes the queue and deletes it, as an event source
// mapping with batch size 1 and ReportBatchItemFailures does.
func (d *deployment) deliver(tb testing.TB, url string) { tb.Helper(); d.deliverN(tb, url, 1) }

// deliverN is deliver with the message handed to the handler times times
// in a row before it is deleted (a redelivery).
func (d *deployment) deliverN(tb testing.TB, url string, times int) {
	tb.Helper()
	ctx := tb.Context()
	if payload, ok := strings.CutPrefix(url, invokePrefix); ok {
		// An asynchronous invocation of the node function.
		app := d.app(tb, "node")
		for range times {
			d.invoke(tb, "node", func() error {
				_, err := app.HandleNodeEvent(ctx, json.RawMessage(payload))
				return err
			})
		}
		return
	}
	out, err := d.esm.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(url),
		MaxNumberOfMessages:         1,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	if err != nil {
		tb.Fatal(err)
	}
	if len(out.Messages) == 0 && strings.HasSuffix(url, ".fifo") {
		// The FIFO queue deduplicated the send (a tick sent again, as a
		// redelivered node task does): there is nothing to deliver. A
		// lost tick shows as a run that does not complete.
		return
	}
	if len(out.Messages) != 1 {
		tb.Fatalf("received %d messages from %s, want the one sent", len(out.Messages), url)
	}
	m := out.Messages[0]
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
	app := d.app(tb, fn)
	handler := app.HandleTick
	if fn == "node" {
		handler = app.HandleNode
	}
	for i := range times {
		var resp events.SQSEventResponse
		d.invoke(tb, fn, func() error {
			var err error
			resp, err = handler(ctx, ev)
			return err
		})
		if i > 0 && len(resp.BatchItemFailures) > 0 {
			// A duplicate of a message whose first delivery succeeded
			// may be refused (the first holds the task's lease,
			// tick.ErrClaimed): the first delivery deletes the message,
			// as on SQS. Whether the run still ends right is what the
			// callers check.
			continue
		}
		if len(resp.BatchItemFailures) > 0 {
			tb.Fatalf("the %s function reported %s as failed; logs:\n%s", fn, aws.ToString(m.Body), d.logs)
		}
	}
	if _, err := d.esm.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
		tb.Fatal(err)
	}
}

// invoke calls a handler as one invocation of function fn and adds its
// duration, less the capacity meter's own reads, to the function's.
func (d *deployment) invoke(tb testing.TB, fn string, call func() error) {
	tb.Helper()
	overhead := d.capacity.Overhead()
	start := time.Now()
	err := call()
	elapsed := time.Since(start) - (d.capacity.Overhead() - overhead)
	if err != nil {
		tb.Fatalf("%s function: %v", fn, err)
	}
	d.invocations[fn]++
	d.durations[fn] += elapsed
}

// snapshot is every counter now.
func (d *deployment) snapshot() tally {
	t := tally{}
	for name, op := range d.appMeter.Snapshot().Ops {
		svc := "ddb"
		switch {
		case sqsOps[name]:
			svc = "sqs"
		case name == "Invoke":
			svc = "lambda"
		}
		t[svc+".req."+name] += float64(op.Requests)
		t[svc+".reqB."+name] += float64(op.RequestBytes)
		t[svc+".respB."+name] += float64(op.ResponseBytes)
		t[svc+".err."+name] += float64(op.Errors)
	}
	for name, op := range d.esmMeter.Snapshot().Ops {
		t["esm."+name] += float64(op.Requests)
		t["sqs.req."+name] += float64(op.Requests)
		t["sqs.err."+name] += float64(op.Errors)
	}
	for name, u := range d.capacity.Snapshot() {
		t["rru."+name] += u.Read
		t["wru."+name] += u.Write
		t["gsi."+name] += u.IndexWrite
	}
	for k, v := range d.queues.snapshot() {
		t[k] += v
	}
	for fn, n := range d.invocations {
		t["inv."+fn] = n
		t["dur."+fn] = d.durations[fn].Seconds()
	}
	return t
}

// sqsOps names the SQS operations the App's clients call; the others are
// DynamoDB's.
var sqsOps = map[string]bool{
	"SendMessage": true, "SendMessageBatch": true, "ReceiveMessage": true,
	"DeleteMessage": true, "DeleteMessageBatch": true, "ChangeMessageVisibility": true,
	"GetQueueAttributes": true, "GetQueueUrl": true, "CreateQueue": true, "SetQueueAttributes": true,
}

// queueMeter is an SDK middleware that counts SQS requests and their
// payload bytes by queue type (FIFO or standard), which SQS prices apart,
// and remembers the queues messages were sent to, in order, so that the
// harness delivers each message from the right queue.
type queueMeter struct {
	mu     sync.Mutex
	counts tally
	sent   []string
}

// Install adds the middleware to a client's stack.
func (q *queueMeter) Install(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("superstep.awsbench.queues", q.handle), middleware.After)
}

func (q *queueMeter) handle(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	var op, url string
	payload := 0
	switch p := in.Parameters.(type) {
	case *sqs.SendMessageInput:
		op, url, payload = "SendMessage", aws.ToString(p.QueueUrl), len(aws.ToString(p.MessageBody))
	case *sqs.SendMessageBatchInput:
		op, url = "SendMessageBatch", aws.ToString(p.QueueUrl)
		for _, e := range p.Entries {
			payload += len(aws.ToString(e.MessageBody))
		}
	case *sqs.ReceiveMessageInput:
		op, url = "ReceiveMessage", aws.ToString(p.QueueUrl)
	case *sqs.DeleteMessageInput:
		op, url = "DeleteMessage", aws.ToString(p.QueueUrl)
	case *lambda.InvokeInput:
		// An asynchronous invocation: delivered in turn like a message.
		out, md, err := next.HandleInitialize(ctx, in)
		if err == nil {
			q.mu.Lock()
			q.sent = append(q.sent, invokePrefix+string(p.Payload))
			q.mu.Unlock()
		}
		return out, md, err
	default:
		return next.HandleInitialize(ctx, in)
	}
	out, md, err := next.HandleInitialize(ctx, in)
	if r, ok := out.Result.(*sqs.ReceiveMessageOutput); ok && err == nil {
		for _, m := range r.Messages {
			payload += len(aws.ToString(m.Body))
		}
	}
	kind := "std"
	if strings.HasSuffix(url, ".fifo") {
		kind = "fifo"
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.counts == nil {
		q.counts = tally{}
	}
	q.counts["q."+kind+"."+op]++
	q.counts["qB."+kind+"."+op] += float64(payload)
	if op == "SendMessage" && err == nil {
		q.sent = append(q.sent, url)
	}
	if b, ok := out.Result.(*sqs.SendMessageBatchOutput); ok && err == nil {
		for range b.Successful {
			q.sent = append(q.sent, url)
		}
	}
	return out, md, err
}

// invokePrefix marks, in queueMeter's sent list, an asynchronous invocation
// of the node function: the prefix, then its payload.
const invokePrefix = "invoke:"

// next pops the queue of the oldest message sent and not yet delivered
// (or the invocation, invokePrefix and its payload).
func (q *queueMeter) next() (string, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.sent) == 0 {
		return "", false
	}
	url := q.sent[0]
	q.sent = q.sent[1:]
	return url, true
}

// requeue notes a message of url's queue that was not deleted and is to
// be delivered again.
func (q *queueMeter) requeue(url string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sent = append(q.sent, url)
}

func (q *queueMeter) snapshot() tally {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.counts.add(nil)
}

// tally is a set of named counters.
type tally map[string]float64

// add returns t + u.
func (t tally) add(u tally) tally {
	out := make(tally, len(t))
	for k, v := range t {
		out[k] = v
	}
	for k, v := range u {
		out[k] += v
	}
	return out
}

// sub returns t - u.
func (t tally) sub(u tally) tally { return t.add(u.scale(-1)) }

// scale returns t * f.
func (t tally) scale(f float64) tally {
	out := make(tally, len(t))
	for k, v := range t {
		out[k] = v * f
	}
	return out
}

// sum adds the counters whose names start with prefix.
func (t tally) sum(prefix string) float64 {
	s := 0.0
	for k, v := range t {
		if strings.HasPrefix(k, prefix) {
			s += v
		}
	}
	return s
}

// ops lists the operation names of the counters starting with prefix.
func (t tally) ops(prefix string) []string {
	var out []string
	for k, v := range t {
		if name, ok := strings.CutPrefix(k, prefix); ok && v != 0 {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// assumedDuration is the conservative handler duration the cost is also
// given at.
const assumedDuration = 50 * time.Millisecond

// memoryMB is each function's memory in infra/template.yaml.
var memoryMB = map[string]int{"api": awsbench.APIMemoryMB, "tick": awsbench.TickMemoryMB, "node": awsbench.NodeMemoryMB}

// report is what a scenario costs: per superstep (the marginal cost of one
// more) and per run (the rest).
type report struct {
	// marginal is per superstep: (long runs - short runs) / (runs * steps).
	marginal tally
	// overhead is per run: a short run less one superstep, the intercept
	// of cost(run of L supersteps) = overhead + L*marginal. It holds what
	// only a run's creation, first step and completion do; it can be
	// negative where the first step does less than the others (the large
	// scenario's first step reads no document).
	overhead tally
	runs     int
	steps    int
}

func newReport(short, long tally, runs, steps int) report {
	m := long.sub(short).scale(1 / float64(runs*steps))
	return report{marginal: m, overhead: short.scale(1 / float64(runs)).sub(m), runs: runs, steps: steps}
}

// usage converts counters into priced usage; each invocation lasts d, or,
// when d is zero, the mean measured duration of the function's.
func usage(t tally, d time.Duration) awsbench.Usage {
	u := awsbench.Usage{
		WriteRequestUnits: t.sum("wru."),
		ReadRequestUnits:  t.sum("rru."),
	}
	for _, op := range t.ops("q.fifo.") {
		u.SQSFIFORequests += awsbench.SQSBilledRequests(t["q.fifo."+op], t["qB.fifo."+op])
	}
	for _, op := range t.ops("q.std.") {
		u.SQSStandardRequests += awsbench.SQSBilledRequests(t["q.std."+op], t["qB.std."+op])
	}
	for _, fn := range t.ops("inv.") {
		n := t["inv."+fn]
		u.LambdaInvocations += n
		each := d
		if each == 0 && n > 0 {
			each = time.Duration(t["dur."+fn] / n * float64(time.Second))
		}
		u.LambdaGBSeconds += awsbench.GBSeconds(memoryMB[fn], each, n)
	}
	return u
}

// usd is the cost of a superstep with invocations lasting d (zero: as
// measured).
func (r report) usd(d time.Duration) float64 { return awsbench.Price(usage(r.marginal, d)).Total() }

// meanDuration is the mean measured duration of an invocation in t, over
// the functions invoked.
func meanDuration(t tally) time.Duration {
	var n, secs float64
	for _, fn := range t.ops("inv.") {
		n += t["inv."+fn]
		secs += t["dur."+fn]
	}
	if n <= 0 {
		return 0
	}
	return time.Duration(secs / n * float64(time.Second))
}

// ddbWrites names the DynamoDB operations that write.
var ddbWrites = map[string]bool{"PutItem": true, "UpdateItem": true, "DeleteItem": true, "BatchWriteItem": true, "TransactWriteItems": true}

func (r report) reportMetrics(b *testing.B) {
	m := r.marginal
	var writeBytes, readBytes float64
	for _, op := range m.ops("ddb.req.") {
		if ddbWrites[op] {
			writeBytes += m["ddb.reqB."+op]
		} else {
			readBytes += m["ddb.respB."+op]
		}
	}
	b.ReportMetric(m.sum("ddb.req."), "ddb-req/superstep")
	b.ReportMetric(m.sum("sqs.req."), "sqs-req/superstep")
	b.ReportMetric(m.sum("inv."), "lambda-inv/superstep")
	b.ReportMetric(writeBytes, "ddb-write-B/superstep")
	b.ReportMetric(readBytes, "ddb-read-B/superstep")
	b.ReportMetric(m.sum("wru."), "WRU/superstep")
	b.ReportMetric(m.sum("rru."), "RRU/superstep")
	b.ReportMetric(float64(meanDuration(m))/1e6, "ms/invocation")
	b.ReportMetric(awsbench.PerMillion(r.usd(0)), "usd/1M-supersteps")
	b.ReportMetric(awsbench.PerMillion(r.usd(assumedDuration)), "usd/1M-supersteps@50ms")
	b.ReportMetric(awsbench.PerMillion(awsbench.Price(usage(r.overhead, 0)).Total()), "overhead-usd/1M-runs")
}

// String is the breakdown of a superstep's cost, for the log.
func (r report) String(name string) string {
	m := r.marginal
	var w bytes.Buffer
	fmt.Fprintf(&w, "%s: per superstep (the difference between runs of %d and 1 supersteps, %d pair(s) of runs)\n", name, 1+r.steps, r.runs)
	fmt.Fprintf(&w, "  %-28s %8s %10s %9s %9s %12s\n", "request", "count", "bytes", "RRU", "WRU", "$/1M steps")
	for _, op := range m.ops("ddb.req.") {
		c := awsbench.Price(awsbench.Usage{ReadRequestUnits: m["rru."+op], WriteRequestUnits: m["wru."+op]}).Total()
		bytes := m["ddb.respB."+op]
		if ddbWrites[op] {
			bytes = m["ddb.reqB."+op]
		}
		fmt.Fprintf(&w, "  %-28s %8.2f %10.0f %9.2f %9.2f %12.4f\n", "DynamoDB "+op, m["ddb.req."+op], bytes, m["rru."+op], m["wru."+op], awsbench.PerMillion(c))
		if g := m["gsi."+op]; g != 0 {
			fmt.Fprintf(&w, "  %-28s %8s %10s %9s %9.2f\n", "  of which index writes", "", "", "", g)
		}
	}
	for _, kind := range []string{"fifo", "std"} {
		for _, op := range m.ops("q." + kind + ".") {
			n := awsbench.SQSBilledRequests(m["q."+kind+"."+op], m["qB."+kind+"."+op])
			var c float64
			if kind == "fifo" {
				c = awsbench.Price(awsbench.Usage{SQSFIFORequests: n}).Total()
			} else {
				c = awsbench.Price(awsbench.Usage{SQSStandardRequests: n}).Total()
			}
			fmt.Fprintf(&w, "  %-28s %8.2f %10.0f %9s %9s %12.4f\n", "SQS "+kind+" "+op, m["q."+kind+"."+op], m["qB."+kind+"."+op], "", "", awsbench.PerMillion(c))
		}
	}
	if n := m["lambda.req.Invoke"]; n != 0 {
		fmt.Fprintf(&w, "  %-28s %8.2f %10.0f %9s %9s %12s\n", "Lambda Invoke (Event)", n, m["lambda.reqB.Invoke"], "", "", "the invocation")
	}
	for _, fn := range m.ops("inv.") {
		n := m["inv."+fn]
		each := time.Duration(m["dur."+fn] / n * float64(time.Second))
		fmt.Fprintf(&w, "  %-28s %8.2f   mean %.1f ms at %d MB\n", "Lambda "+fn+" invocations", n, float64(each)/1e6, memoryMB[fn])
	}
	for _, d := range []time.Duration{0, assumedDuration} {
		c := awsbench.Price(usage(m, d))
		label := fmt.Sprintf("measured (%.1f ms per invocation)", float64(meanDuration(m))/1e6)
		if d != 0 {
			label = fmt.Sprintf("%v per invocation", d)
		}
		fmt.Fprintf(&w, "  cost per 1M supersteps, Lambda duration %s:\n", label)
		for _, part := range c.Components() {
			if part.USD != 0 {
				fmt.Fprintf(&w, "    %-28s $%8.4f  %5.1f%%\n", part.Name, awsbench.PerMillion(part.USD), 100*part.USD/c.Total())
			}
		}
		fmt.Fprintf(&w, "    %-28s $%8.4f  — %s\n", "total", awsbench.PerMillion(c.Total()), awsbench.StepFunctionsRatio(c.Total()))
	}
	fmt.Fprintf(&w, "  per run, the intercept of cost = overhead + supersteps*marginal (creation, first step, completion): $%.4f per 1M runs, %.1f DynamoDB and %.1f SQS requests, %.1f WRU, %.1f RRU\n",
		awsbench.PerMillion(awsbench.Price(usage(r.overhead, 0)).Total()), r.overhead.sum("ddb.req."), r.overhead.sum("sqs.req."), r.overhead.sum("wru."), r.overhead.sum("rru."))
	if e := m.sum("ddb.err.") + m.sum("sqs.err."); e != 0 {
		fmt.Fprintf(&w, "  note: %.2f failed requests per superstep (conditions, retries) are counted above\n", e)
	}
	return w.String()
}

// summary is the report in under 10 lines; target is the cost target in
// dollars per million supersteps, zero for none.
func (r report) summary(name string, target float64) string {
	m := r.marginal
	var w bytes.Buffer
	var writeBytes float64
	for op := range ddbWrites {
		writeBytes += m["ddb.reqB."+op]
	}
	fmt.Fprintf(&w, "%s, per superstep (runs of %d and 1 supersteps): %.1f DynamoDB requests (%.1f RRU, %.1f WRU, %.0f bytes written), %.1f SQS requests (%.1f FIFO, %.1f standard), %.1f Lambda invocations (%.1f ms each, measured)\n",
		name, 1+r.steps, m.sum("ddb.req."), m.sum("rru."), m.sum("wru."), writeBytes, m.sum("sqs.req."), m.sum("q.fifo."), m.sum("q.std."), m.sum("inv."), float64(meanDuration(m))/1e6)
	measured, assumed := r.usd(0), r.usd(assumedDuration)
	fmt.Fprintf(&w, "  $ per 1M supersteps: %.2f (measured durations), %.2f (%v per invocation); %s\n",
		awsbench.PerMillion(measured), awsbench.PerMillion(assumed), assumedDuration, awsbench.StepFunctionsRatio(max(measured, assumed)))
	c := awsbench.Price(usage(m, assumedDuration))
	var parts []string
	for _, p := range c.Components() {
		if p.USD != 0 {
			parts = append(parts, fmt.Sprintf("%s $%.2f (%.0f%%)", p.Name, awsbench.PerMillion(p.USD), 100*p.USD/c.Total()))
		}
	}
	fmt.Fprintf(&w, "  at %v: %s\n", assumedDuration, strings.Join(parts, ", "))
	if target > 0 {
		verdict := func(usd float64) string {
			if awsbench.PerMillion(usd) < target {
				return "met"
			}
			return "NOT met"
		}
		fmt.Fprintf(&w, "  target, under $%.2f per 1M supersteps: %s with the measured durations, %s at %v\n", target, verdict(measured), verdict(assumed), assumedDuration)
	}
	fmt.Fprintf(&w, "  (-v for the breakdown by request)\n")
	return w.String()
}

// syncBuffer is a bytes.Buffer safe for concurrent writes and reads.
type syncBuffer = testkit.Buffer

// BenchmarkAWSChainLatency measures the wall time per superstep of the
// inline loop (runs of 21 supersteps, warm) with one superstep per tick
// message and with chains of chainSteps, alternately in one process, and
// reports both and their ratio: absolute times on a shared machine are
// noisy, the ratio less so. The time is from the run's creation to its
// completion, every message received, handled and deleted as the event
// source mapping does, less the request-unit meter's own reads. moto
// delivers at once; on AWS each message also waits for the SQS to Lambda
// poll, which a chain saves as well.
func BenchmarkAWSChainLatency(b *testing.B) {
	const steps = 21
	plain, chained := deploy(b, true), deploy(b, true)
	chained.cfg.Chain = tick.Chain{Steps: chainSteps}
	var tPlain, tChained time.Duration
	n := 0
	for b.Loop() {
		tPlain += plain.timedRun(b, inlineGraph, fmt.Sprintf("plain-%d", n), steps)
		tChained += chained.timedRun(b, inlineGraph, fmt.Sprintf("chained-%d", n), steps)
		n++
	}
	perPlain := tPlain.Seconds() * 1e3 / float64(n*steps)
	perChained := tChained.Seconds() * 1e3 / float64(n*steps)
	b.ReportMetric(perPlain, "ms/superstep-unchained")
	b.ReportMetric(perChained, "ms/superstep-chained")
	b.ReportMetric(perPlain/perChained, "speedup")
	b.Logf("inline loop, %d supersteps a run, %d run(s) each: %.2f ms per superstep unchained, %.2f ms chained (%d a tick): %.1f× faster",
		steps, n, perPlain, perChained, chainSteps, perPlain/perChained)
}

// timedRun is run, timed: the wall time from the run's creation to its
// completion, less the request-unit meter's own reads.
func (d *deployment) timedRun(tb testing.TB, graph, name string, limit int) time.Duration {
	tb.Helper()
	overhead := d.capacity.Overhead()
	start := time.Now()
	d.run(tb, graph, name, limit)
	return time.Since(start) - (d.capacity.Overhead() - overhead)
}
