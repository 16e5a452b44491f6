package serverless_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/internal/awsmeter"
	"github.com/superstep/superstep/internal/dynalitetest"
	"github.com/superstep/superstep/internal/lambdatest"
	"github.com/superstep/superstep/internal/mototest"
	"github.com/superstep/superstep/internal/testkit"
	"github.com/superstep/superstep/pkg/a2a"
	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/internal/sqsqueue"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/serverless"
	"github.com/superstep/superstep/pkg/tracing"
)

// moto is the emulator the tests of this package share; each test has
// its own table and queues.
var moto mototest.Shared

// dyn is dynalite, for the stacks whose DynamoDB is on it
// (stackOptions.dynalite); started on first use.
var dyn dynalitetest.Shared

func TestMain(m *testing.M) {
	code := moto.Run(m)
	if err := dyn.Close(); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, "serverless tests:", err)
		code = 1
	}
	os.Exit(code)
}

// syncBuffer is a bytes.Buffer safe for concurrent writes and reads.
type syncBuffer = testkit.Buffer

// stack is a deployment on the emulator: a table and queues of its own,
// the App, the HTTP API on a local listener and the pollers standing in
// for the event source mappings.
type stack struct {
	t      *testing.T
	app    *serverless.App
	cfg    serverless.Config
	prefix string
	sqs    *sqs.Client
	ddb    *dynamodb.Client
	meter  *awsmeter.Meter
	logs   *syncBuffer
	url    string
	// nodeCalls counts node function invocations.
	nodeCalls atomic.Int64
	// opts made app (to make another, as a new Lambda container would).
	opts serverless.Options
	// lambda is the Lambda stand-in of stackOptions.invoke (nil without).
	lambda *lambdatest.Server
}

type stackOptions struct {
	visibility time.Duration
	maxReceive int
	noPollers  bool
	token      string // the HTTP API's bearer token (Config.APIToken)
	// work is called by every execution of remote-fanout's work tasks.
	work func(ctx context.Context)
	// tracer, when set, traces the stack.
	tracer *tracing.Tracer
	// streaming serves the App as the stream function does: its URL
	// is a function URL in RESPONSE_STREAM mode (see functionURL).
	streaming bool
	// deadline is the function URL requests' timeout (default 30s).
	deadline time.Duration
	// config, if set, changes the Config before New.
	config func(*serverless.Config)
	// graphs are served besides the examples and remote-fanout.
	graphs []*pregel.Graph
	// wrapTick and wrapNode, when set, wrap the tick and node functions'
	// handlers (to fail or kill an invocation).
	wrapTick, wrapNode func(sqsqueue.Handler) sqsqueue.Handler
	// threadRetention is Config.ThreadRetention.
	threadRetention time.Duration
	// push tunes push notifications; pushPrivate is
	// PUSH_ALLOW_PRIVATE_NETWORKS.
	push        a2a.PushOptions
	pushPrivate bool
	// schedules turns schedules on (EventBridge Scheduler on the
	// emulator).
	schedules bool
	// invoke starts node tasks by asynchronous invocations of the node
	// function (NODE_DISPATCH=invoke) served by a lambdatest stand-in
	// with these faults; wrapInvoke, when set, wraps its handler (to
	// fail or kill an invocation).
	invoke       bool
	invokeFaults lambdatest.Faults
	wrapInvoke   func(lambdatest.Handler) lambdatest.Handler
	// dynalite puts the stack's DynamoDB on dynalite
	// (internal/dynalitetest), SQS staying on moto: a long check's
	// requests take milliseconds there, where moto reads a whole
	// partition on every Query.
	dynalite bool
}

var unsafeChars = regexp.MustCompile(`[^a-zA-Z0-9_-]+`)

func newStack(t *testing.T, o stackOptions) *stack {
	t.Helper()
	srv := moto.Start(t)
	base := srv.Config
	if o.dynalite {
		base = dyn.Start(t).Route(srv.Config)
	}
	meter := new(awsmeter.Meter)
	awsCfg := base.Copy()
	awsCfg.APIOptions = append(awsCfg.APIOptions, meter.Install, deadProcess)
	var b [3]byte
	rand.Read(b[:])
	name := unsafeChars.ReplaceAllString(t.Name(), "-")
	if len(name) > 40 {
		name = name[:40]
	}
	prefix := strings.ToLower(name) + "-" + hex.EncodeToString(b[:])
	if o.visibility == 0 {
		o.visibility = 5 * time.Second
	}
	if o.maxReceive == 0 {
		o.maxReceive = 5
	}
	cfg, err := serverless.Provision(t.Context(), awsCfg, serverless.Resources{Prefix: prefix, VisibilityTimeout: o.visibility, MaxReceiveCount: o.maxReceive, Schedules: o.schedules})
	if err != nil {
		t.Fatal(err)
	}
	cfg.APIToken = o.token
	cfg.ThreadRetention = o.threadRetention
	cfg.PushAllowPrivateNetworks = o.pushPrivate
	if o.config != nil {
		o.config(&cfg)
	}
	logs := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: logLevel()}))
	reg := registry(t, o.work, o.graphs...)
	s := &stack{t: t, cfg: cfg, prefix: prefix, sqs: sqs.NewFromConfig(srv.Config), ddb: dynamodb.NewFromConfig(base), meter: meter, logs: logs}
	opts := serverless.Options{AWS: awsCfg, Graphs: reg, Logger: log, Tracer: o.tracer, Push: o.push, Streaming: o.streaming}
	if o.invoke {
		s.startLambda(o)
		cfg.NodeDispatch, cfg.NodeFunction = serverless.DispatchInvoke, lambdatest.ARN("node")+":live"
		opts.LambdaEndpoint = s.lambda.URL
	}
	opts.Config, s.cfg = cfg, cfg
	app, err := serverless.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.app, s.opts = app, opts
	var h http.Handler = app
	if o.streaming {
		h = functionURL(app, cmp.Or(o.deadline, 30*time.Second))
	}
	httpSrv := httptest.NewServer(h)
	t.Cleanup(httpSrv.Close)
	s.url = httpSrv.URL
	if !o.noPollers {
		// Short polls: mototest serialises the emulator's requests, so
		// a long poll would hold up every other request.
		p := app.Pollers(serverless.PollOptions{TickConcurrency: 2, NodeConcurrency: 3, IdleDelay: 50 * time.Millisecond, Timeout: 30 * time.Second})
		if o.wrapTick != nil {
			p.Tick.Handler = o.wrapTick(p.Tick.Handler)
		}
		if o.wrapNode != nil {
			p.Node.Handler = o.wrapNode(p.Node.Handler)
		}
		node := p.Node.Handler
		p.Node.Handler = func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			s.nodeCalls.Add(1)
			return node(ctx, ev)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("pollers: %v", err)
			}
		})
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", logs.String())
		}
	})
	return s
}

// startLambda starts the Lambda stand-in invoking the node function: its
// failed invocations are retried twice, then sent to the node dead-letter
// queue (its on-failure destination).
func (s *stack) startLambda(o stackOptions) {
	h := lambdatest.Handler(func(ctx context.Context, payload []byte) error {
		_, err := s.app.HandleNodeEvent(ctx, payload)
		return err
	})
	if o.wrapInvoke != nil {
		h = o.wrapInvoke(h)
	}
	dlq := s.dlqURL("nodes-dlq")
	s.lambda = lambdatest.Start(s.t, map[string]*lambdatest.Function{"node": {
		Handler: func(ctx context.Context, payload []byte) error {
			s.nodeCalls.Add(1)
			return h(ctx, payload)
		},
		RetryDelay: 200 * time.Millisecond,
		OnFailure: func(ctx context.Context, record []byte) error {
			_, err := s.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(dlq), MessageBody: aws.String(string(record))})
			return err
		},
	}}, o.invokeFaults)
}

// registry serves the examples, the test graph with remote nodes and
// extra.
func registry(t *testing.T, work func(context.Context), extra ...*pregel.Graph) *runs.Registry {
	t.Helper()
	all, err := examples.All()
	if err != nil {
		t.Fatal(err)
	}
	reg, err := runs.NewRegistry(append(append(all, remoteGraph(t, work)), extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// do sends an API request and decodes the JSON answer into out (if not
// nil); it returns the status.
func (s *stack) do(method, path string, body any, out any) int {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			s.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(s.t.Context(), method, s.url+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			s.t.Fatalf("%s %s: %v\n%s", method, path, err, raw)
		}
	}
	if resp.StatusCode >= 400 {
		s.t.Logf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode
}

// create starts a run through the API.
func (s *stack) create(graph, runID string, input any) {
	s.t.Helper()
	var r api.Run
	if st := s.do("POST", "/v1/graphs/"+graph+"/runs", map[string]any{"run_id": runID, "input": input}, &r); st != http.StatusAccepted {
		s.t.Fatalf("create %s: status %d", runID, st)
	}
}

// get reads a run through the API.
func (s *stack) get(runID string) api.RunDetail {
	s.t.Helper()
	var r api.RunDetail
	if st := s.do("GET", "/v1/runs/"+runID, nil, &r); st != http.StatusOK {
		s.t.Fatalf("get %s: status %d", runID, st)
	}
	return r
}

// wait polls the run until cond holds.
func (s *stack) wait(runID string, what string, cond func(api.RunDetail) bool) api.RunDetail {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := s.get(runID)
		if cond(r) {
			return r
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("run %s: waited 30s for %s; it is %s at step %d", runID, what, r.Status, r.Step)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *stack) waitStatus(runID string, st pregel.RunStatus) api.RunDetail {
	s.t.Helper()
	return s.wait(runID, string(st), func(r api.RunDetail) bool {
		if r.Status != st && (r.Status == pregel.RunFailed || r.Status == pregel.RunCompleted || r.Status == pregel.RunCancelled) {
			s.t.Fatalf("run %s is %s (error %q), want %s", runID, r.Status, r.Error, st)
		}
		return r.Status == st
	})
}

// queueDepth is the number of messages in a queue, visible or in flight.
func (s *stack) queueDepth(url string) int {
	s.t.Helper()
	out, err := s.sqs.GetQueueAttributes(s.t.Context(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url),
		AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeNameApproximateNumberOfMessages,
			types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			types.QueueAttributeNameApproximateNumberOfMessagesDelayed,
		},
	})
	if err != nil {
		s.t.Fatal(err)
	}
	n := 0
	for _, v := range out.Attributes {
		i, _ := strconv.Atoi(v)
		n += i
	}
	return n
}

// waitIdle waits until the tick and node queues are empty.
func (s *stack) waitIdle() {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for s.queueDepth(s.cfg.TickQueueURL)+s.queueDepth(s.cfg.NodeQueueURL) > 0 || (s.lambda != nil && !s.lambda.Idle()) {
		if time.Now().After(deadline) {
			s.t.Fatal("the queues (and Lambda's event queue) did not empty within 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// dlqURL is the URL of the dead-letter queue of queue name (as Provision
// names it).
func (s *stack) dlqURL(name string) string {
	s.t.Helper()
	out, err := s.sqs.GetQueueUrl(s.t.Context(), &sqs.GetQueueUrlInput{QueueName: aws.String(s.prefix + "-" + name)})
	if err != nil {
		s.t.Fatal(err)
	}
	return aws.ToString(out.QueueUrl)
}

// sendRaw puts a message on a queue; on a FIFO queue, in group with
// deduplication id dedup.
func (s *stack) sendRaw(url, body, group, dedup string) {
	s.t.Helper()
	in := &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body)}
	if strings.HasSuffix(url, ".fifo") {
		in.MessageGroupId = aws.String(group)
		in.MessageDeduplicationId = aws.String(dedup)
	}
	if _, err := s.sqs.SendMessage(s.t.Context(), in); err != nil {
		s.t.Fatal(err)
	}
}

// values decodes a channel of a run's values.
func values[T any](t *testing.T, r api.RunDetail, ch string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.Values[ch], &v); err != nil {
		t.Fatalf("channel %s = %s: %v", ch, r.Values[ch], err)
	}
	return v
}

func jsonEqual(a, b map[string]json.RawMessage) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func ints(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

// receiveAll receives (and deletes) what a queue holds now.
func receiveAll(t *testing.T, s *stack, url string) []types.Message {
	t.Helper()
	out, err := s.sqs.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range out.Messages {
		if _, err := s.sqs.DeleteMessage(t.Context(), &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
	}
	return out.Messages
}

// logLevel is debug when SUPERSTEP_TEST_DEBUG is set.
func logLevel() slog.Level {
	if os.Getenv("SUPERSTEP_TEST_DEBUG") != "" {
		return slog.LevelDebug
	}
	return slog.LevelInfo
}
