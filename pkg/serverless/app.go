// Package serverless holds superstep's Lambda handlers and their wiring,
// shared by the five Lambda functions of a deployment (a program built
// with pkg/superstep serves them; the repository's are functions/api,
// functions/tick, functions/node, functions/sweep and functions/stream)
// and by the local
// serverless mode,
// `superstep dev --aws`, which calls the same handlers from SQS pollers in
// one process.
//
// An [App] wires a [runs.Service] and a [tick.Handler] to one DynamoDB
// table (runs, checkpoints, task claims) and two SQS queues (ticks on a
// FIFO queue, node tasks on a standard one). Its handlers:
//
//   - [App.HandleTick]: SQS tick messages -> [tick.Handler.Tick]
//   - [App.HandleNode]: SQS node-task messages -> [tick.Handler.Node]
//   - [App.HandleAPI]: API Gateway HTTP API (payload 2.0) requests served
//     by the [api] handler, EventBridge "superstep.StartRun" events and
//     SQS start-queue messages, told apart by the shape of the event.
//   - [App.HandleStream]: the table's stream -> [dynamo.Store.PurgeRun]
//     of runs whose record expired
//   - [App.HandleFunctionURL]: Lambda function URL requests in
//     RESPONSE_STREAM mode (the stream function): the same HTTP API,
//     streamed (run streams, A2A message/stream) through lambdaurl
//
// The tick and node handlers append each run's events to the table
// ([dynamo.Store] is a [runs.EventLog]); GET /v1/runs/{id}/stream reads
// them, on any function, and A2A streams follow them.
//
// Every SQS handler reports failures per message (ReportBatchItemFailures);
// a message that can never be processed is logged with the reason and
// reported as failed too, so that it reaches the dead-letter queue after
// maxReceiveCount instead of vanishing. The environment variables, the
// event shapes and the local mode are described in README.md beside this
// file.
package serverless

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/superstep/superstep/pkg/a2a"
	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/internal/jwtauth"
	"github.com/superstep/superstep/pkg/internal/lambdainvoke"
	"github.com/superstep/superstep/pkg/internal/sqsqueue"
	"github.com/superstep/superstep/pkg/longterm"
	"github.com/superstep/superstep/pkg/mcpserver"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/schedule"
	"github.com/superstep/superstep/pkg/schedule/awsscheduler"
	"github.com/superstep/superstep/pkg/store/dynamo"
	"github.com/superstep/superstep/pkg/tick"
	"github.com/superstep/superstep/pkg/tracing"
)

// Environment variables read by [ConfigFromEnv].
const (
	// EnvTable names the DynamoDB table (required).
	EnvTable = "TABLE_NAME"
	// EnvTickQueue is the URL of the FIFO tick queue (required).
	EnvTickQueue = "TICK_QUEUE_URL"
	// EnvNodeQueue is the URL of the node-task queue (required).
	EnvNodeQueue = "NODE_QUEUE_URL"
	// EnvStartQueue is the URL of the start queue (optional; the local
	// mode polls it, in AWS an event source mapping does).
	EnvStartQueue = "START_QUEUE_URL"
	// EnvAPIToken is a bearer token the HTTP API requires (optional; in
	// AWS, API Gateway's IAM or JWT authorization protects the API).
	EnvAPIToken = "API_TOKEN"
	// EnvTaskLease is how long a task claim lasts, as a Go duration
	// (optional, default 15m); keep it under the queues' visibility
	// timeout and over the longest task.
	EnvTaskLease = "TASK_LEASE"
	// EnvLogLevel is debug, info, warn or error (optional, default info).
	EnvLogLevel = "LOG_LEVEL"
	// EnvThreadRetention is how long an idle thread is kept after its
	// last change, as a Go duration such as 720h (optional; unset: until
	// it is deleted). DynamoDB's TTL then deletes it, and the sweep its
	// runs (see dynamo.WithThreadRetention).
	EnvThreadRetention = "THREAD_RETENTION"
	// EnvTickChainSteps is the most supersteps one message runs: a tick's
	// while their tasks are inline, a node task's while the next step is
	// one remote task (optional, default 1: one per message; the SAM
	// template sets 20; see tick.Chain).
	EnvTickChainSteps = "TICK_CHAIN_STEPS"
	// EnvTickChainBudget bounds the time a tick spends on a chain of
	// supersteps, as a Go duration (optional; the function's timeout,
	// less tick.DefaultChainMargin, always bounds it).
	EnvTickChainBudget = "TICK_CHAIN_BUDGET"
	// EnvRunEvents says when the tick and node functions keep a run's
	// events for streams: "watched" (the default), "on" or "off" (see
	// EventsMode).
	EnvRunEvents = "RUN_EVENTS"
	// EnvEventRetention is how many events each run keeps, the newest
	// (optional, default runs.DefaultStreamRetention); every function of
	// a deployment must have the same.
	EnvEventRetention = "EVENT_RETENTION"
	// EnvEventMaxAge is how long a run's events are kept, as a Go
	// duration (optional, default runs.DefaultEventMaxAge, 24h; 0: until
	// the run is purged): event items get a TTL (dynamo.WithEventMaxAge).
	EnvEventMaxAge = "EVENT_MAX_AGE"
	// EnvStreamURL is the public URL of the stream function's function
	// URL (optional). When set, the agent cards the api function serves
	// advertise streaming at that URL.
	EnvStreamURL = "STREAM_URL"
	// EnvJWTIssuer and EnvJWTAudience, when the issuer is set, make the
	// HTTP API check bearer JSON Web Tokens itself, as API Gateway's JWT
	// authorizer does (pkg/internal/jwtauth): the stream function's URL with
	// AuthType NONE. The audiences are comma separated.
	EnvJWTIssuer   = "JWT_ISSUER"
	EnvJWTAudience = "JWT_AUDIENCE"
	// EnvThreadStrategy is what an A2A message does when its context's
	// thread has an active task: parallel (the default), reject,
	// enqueue, interrupt or rollback (optional; see a2a.WithThreadStrategy).
	EnvThreadStrategy = "A2A_THREAD_STRATEGY"
	// EnvPushAllowPrivateNetworks, "true", lets A2A push notifications go
	// to loopback, private and link-local addresses (optional, default
	// false: refused, against SSRF).
	EnvPushAllowPrivateNetworks = "PUSH_ALLOW_PRIVATE_NETWORKS"
	// EnvScheduleGroup, when set, turns /v1/schedules on: schedules are
	// kept in this EventBridge Scheduler schedule group
	// (pkg/schedule/awsscheduler) and fire into the start queue
	// (EnvStartQueueARN) with the role EnvSchedulerRole; EnvScheduleDLQ,
	// optional, receives firings EventBridge could not send.
	EnvScheduleGroup = "SCHEDULE_GROUP"
	EnvSchedulerRole = "SCHEDULER_ROLE_ARN"
	EnvStartQueueARN = "START_QUEUE_ARN"
	EnvScheduleDLQ   = "SCHEDULE_DLQ_ARN"
	// EnvNodeDispatch is how node tasks reach the node function: "sqs"
	// (the default: a message on the node-task queue) or "invoke" (an
	// asynchronous Lambda invocation; see NodeDispatch).
	EnvNodeDispatch = "NODE_DISPATCH"
	// EnvNodeFunction names the node function (name or ARN, an alias's
	// ARN included) that NODE_DISPATCH=invoke invokes; required in the
	// tick function, optional in the node function, which otherwise
	// invokes itself as it was invoked.
	EnvNodeFunction = "NODE_FUNCTION"
)

// NodeDispatch is how node tasks reach the node function.
type NodeDispatch string

// The node dispatches.
const (
	// DispatchSQS sends each node task to the node-task queue, whose
	// event source mapping invokes the node function: three SQS requests
	// a task (send, receive, delete).
	DispatchSQS NodeDispatch = "sqs"
	// DispatchInvoke invokes the node function asynchronously (Lambda
	// Invoke, InvocationType Event) with each task: one request. Lambda
	// retries a failed invocation and sends one it gave up on to the
	// function's on-failure destination; a task the node function could
	// not finish is handed to the node-task queue (HandleNodeEvent).
	DispatchInvoke NodeDispatch = "invoke"
)

// Config is the deployment an App talks to.
type Config struct {
	// Table is the DynamoDB table of runs, checkpoints and claims.
	Table string
	// TickQueueURL is the FIFO queue of ticks.
	TickQueueURL string
	// NodeQueueURL is the standard queue of node tasks.
	NodeQueueURL string
	// StartQueueURL is the start queue (optional).
	StartQueueURL string
	// APIToken, when set, is the bearer token of the HTTP API.
	APIToken string
	// Lease is the task claim lease (zero: the tick package's default).
	Lease time.Duration
	// LogLevel of [FromEnv]'s logger.
	LogLevel slog.Level
	// Chain lets a tick run the next supersteps in the same invocation
	// while their tasks are inline (zero: one superstep per message).
	Chain tick.Chain
	// Events says when the tick and node functions keep a run's events
	// (RUN_EVENTS; "": EventsWatched).
	Events EventsMode
	// EventRetention is how many events each run keeps (0: the default).
	EventRetention int
	// EventMaxAge is how long a run's events are kept (zero: until the
	// run is purged; ConfigFromEnv defaults to runs.DefaultEventMaxAge).
	EventMaxAge time.Duration
	// StreamURL is the stream function's public URL (optional).
	StreamURL string
	// JWTIssuer, when set, is the issuer of the bearer tokens the HTTP
	// API requires (checked by the handler, see pkg/internal/jwtauth), for one of
	// JWTAudience.
	JWTIssuer   string
	JWTAudience []string
	// ThreadStrategy is what an A2A message does when its context's
	// thread has an active task (empty: parallel); it applies where the
	// Service keeps threads (see a2a.WithThreadStrategy).
	ThreadStrategy runs.Strategy
	// ThreadRetention is how long an idle thread is kept after its last
	// change (zero: until it is deleted).
	ThreadRetention time.Duration
	// PushAllowPrivateNetworks lets A2A push notifications go to
	// private addresses (see a2a.PushOptions).
	PushAllowPrivateNetworks bool
	// ScheduleGroup, when set, keeps schedules in EventBridge Scheduler
	// (SCHEDULE_GROUP); they fire into StartQueueARN with
	// SchedulerRoleARN; ScheduleDLQ is optional.
	ScheduleGroup    string
	SchedulerRoleARN string
	StartQueueARN    string
	ScheduleDLQ      string
	// NodeDispatch is how node tasks reach the node function (empty:
	// DispatchSQS); NodeFunction is the function DispatchInvoke invokes
	// (empty: the function running, as invoked; see lambdainvoke.New).
	NodeDispatch NodeDispatch
	NodeFunction string
}

// ConfigFromEnv reads the Config from the environment through getenv
// (os.Getenv). It names every missing or malformed variable.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	get := func(k string) string { return strings.TrimSpace(getenv(k)) }
	c := Config{
		Table:          get(EnvTable),
		TickQueueURL:   get(EnvTickQueue),
		NodeQueueURL:   get(EnvNodeQueue),
		StartQueueURL:  get(EnvStartQueue),
		APIToken:       get(EnvAPIToken),
		ThreadStrategy: runs.Strategy(get(EnvThreadStrategy)),
		StreamURL:      get(EnvStreamURL),
		JWTIssuer:      get(EnvJWTIssuer),

		ScheduleGroup:    get(EnvScheduleGroup),
		SchedulerRoleARN: get(EnvSchedulerRole),
		StartQueueARN:    get(EnvStartQueueARN),
		ScheduleDLQ:      get(EnvScheduleDLQ),
		NodeDispatch:     NodeDispatch(strings.ToLower(get(EnvNodeDispatch))),
		NodeFunction:     get(EnvNodeFunction),
	}
	for a := range strings.SplitSeq(get(EnvJWTAudience), ",") {
		if a = strings.TrimSpace(a); a != "" {
			c.JWTAudience = append(c.JWTAudience, a)
		}
	}
	var errs []error
	switch v := EventsMode(strings.ToLower(get(EnvRunEvents))); v {
	case "", EventsWatched, EventsOn, EventsOff:
		c.Events = v
	default:
		errs = append(errs, fmt.Errorf("%s=%q: want %s, %s or %s", EnvRunEvents, v, EventsWatched, EventsOn, EventsOff))
	}
	if v := get(EnvEventRetention); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			errs = append(errs, fmt.Errorf("%s=%q is not a whole number of events, 1 or more", EnvEventRetention, v))
		}
		c.EventRetention = n
	}
	c.EventMaxAge = runs.DefaultEventMaxAge
	if v := get(EnvEventMaxAge); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			errs = append(errs, fmt.Errorf("%s=%q is not a Go duration such as 24h (0: keep events until the run is purged)", EnvEventMaxAge, v))
		}
		c.EventMaxAge = d
	}
	if c.StreamURL != "" {
		if u, err := url.Parse(c.StreamURL); err != nil || u.Scheme != "https" && u.Scheme != "http" || u.Host == "" {
			errs = append(errs, fmt.Errorf("%s=%q is not an http(s) URL", EnvStreamURL, c.StreamURL))
		}
	}
	if v := get(EnvTaskLease); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("%s=%q is not a positive Go duration such as 15m", EnvTaskLease, v))
		}
		c.Lease = d
	}
	if v := get(EnvTickChainSteps); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			errs = append(errs, fmt.Errorf("%s=%q is not a whole number of supersteps, 1 or more (1: one superstep per message)", EnvTickChainSteps, v))
		}
		c.Chain.Steps = n
	}
	if v := get(EnvTickChainBudget); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("%s=%q is not a positive Go duration such as 30s", EnvTickChainBudget, v))
		}
		c.Chain.Budget = d
	}
	if v := get(EnvThreadRetention); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			errs = append(errs, fmt.Errorf("%s=%q is not a Go duration such as 720h (0: keep threads until they are deleted)", EnvThreadRetention, v))
		}
		c.ThreadRetention = d
	}
	if v := get(EnvPushAllowPrivateNetworks); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: want true or false", EnvPushAllowPrivateNetworks, v))
		}
		c.PushAllowPrivateNetworks = b
	}
	if v := get(EnvLogLevel); v != "" {
		if err := c.LogLevel.UnmarshalText([]byte(v)); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: want debug, info, warn or error", EnvLogLevel, v))
		}
	}
	if err := c.validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, fmt.Errorf("serverless: %w", err)
	}
	return c, nil
}

func (c Config) validate() error {
	var missing []string
	for _, v := range []struct{ name, val string }{{EnvTable, c.Table}, {EnvTickQueue, c.TickQueueURL}, {EnvNodeQueue, c.NodeQueueURL}} {
		if v.val == "" {
			missing = append(missing, v.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("set %s (the table and queues the functions use)", strings.Join(missing, ", "))
	}
	if c.JWTIssuer != "" && len(c.JWTAudience) == 0 {
		return fmt.Errorf("%s is set without %s: name the accepted audiences (comma separated)", EnvJWTIssuer, EnvJWTAudience)
	}
	if !strings.HasSuffix(c.TickQueueURL, ".fifo") {
		return fmt.Errorf("%s=%s is not a FIFO queue (its name must end in .fifo)", EnvTickQueue, c.TickQueueURL)
	}
	if c.ScheduleGroup != "" && (c.SchedulerRoleARN == "" || c.StartQueueARN == "") {
		return fmt.Errorf("%s is set without %s and %s: schedules need the role EventBridge Scheduler sends with and the start queue it sends to", EnvScheduleGroup, EnvSchedulerRole, EnvStartQueueARN)
	}
	if c.NodeDispatch != "" && c.NodeDispatch != DispatchSQS && c.NodeDispatch != DispatchInvoke {
		return fmt.Errorf("%s=%q: want %s or %s", EnvNodeDispatch, c.NodeDispatch, DispatchSQS, DispatchInvoke)
	}
	if _, err := a2a.ParseStrategy(string(c.ThreadStrategy)); err != nil {
		return fmt.Errorf("%s=%q is not one of reject, enqueue, interrupt, rollback, parallel (empty: parallel)", EnvThreadStrategy, c.ThreadStrategy)
	}
	return nil
}

// Options configures [New].
type Options struct {
	Config Config
	// AWS configures the DynamoDB and SQS clients (endpoint, region,
	// credentials, middleware such as awsmeter).
	AWS aws.Config
	// LambdaEndpoint, when set, is where the Lambda client of
	// DispatchInvoke sends its Invoke requests, instead of AWS's
	// endpoint (or AWS.BaseEndpoint): a local stand-in in tests.
	LambdaEndpoint string
	// Graphs are the graphs served. Required.
	Graphs *runs.Registry
	// Logger (default slog.Default()).
	Logger *slog.Logger
	// MaxBodyBytes bounds HTTP request bodies (default
	// api.DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// LongTerm configures the long-term store (pkg/longterm) the app
	// keeps in its table: longterm.WithEmbedder for semantic search,
	// say. It is served at /v1/store and reached by nodes through their
	// context (longterm.From).
	LongTerm []longterm.Option
	// Middleware, when set, wraps the HTTP API (ServeHTTP and the API
	// Gateway requests of HandleAPI), e.g. to log requests.
	Middleware func(http.Handler) http.Handler
	// Tracer, when set, traces runs, ticks and node tasks, and carries
	// the trace context in the queues' messages (see pkg/tracing).
	Tracer *tracing.Tracer
	// Streaming says the App serves a transport that streams responses:
	// the stream function's function URL (HandleFunctionURL). The A2A
	// agents then stream (message/stream, tasks/resubscribe). Otherwise
	// (the api function behind API Gateway, which buffers responses)
	// they stream only where Config.StreamURL points.
	Streaming bool
	// Push tunes A2A push notifications (attempts, backoff, timeout).
	// Their configs are kept in the table and delivered by HandleStream;
	// Config.PushAllowPrivateNetworks adds to AllowPrivateNetworks.
	Push a2a.PushOptions
	// DeliverPushHere: the process serving the API also delivers push
	// notifications, following the runs it has configs for (the local
	// mode: one long-lived process, no table stream). Lambda functions
	// leave it off: HandleStream delivers.
	DeliverPushHere bool
	// Function, when set, is the one Lambda function the App serves
	// (FunctionAPI, FunctionTick, FunctionNode, FunctionSweep or
	// FunctionStream), and New wires only what that function uses: the
	// tick and node functions get no HTTP API, A2A or MCP server, the
	// sweep function no HTTP API or MCP server, the api and stream
	// functions no tick handler. Its other handlers then refuse their
	// events with an error naming the function that serves them.
	// Empty: every handler (the local mode, tests).
	Function string
}

// The Lambda functions of a deployment, the values of Options.Function.
const (
	FunctionAPI    = "api"
	FunctionTick   = "tick"
	FunctionNode   = "node"
	FunctionSweep  = "sweep"
	FunctionStream = "stream"
)

// parts says what the function named fn (empty: every function) uses.
func parts(fn string) (ticks, http, agents bool, err error) {
	switch fn {
	case "":
		return true, true, true, nil
	case FunctionTick, FunctionNode:
		return true, false, false, nil
	case FunctionSweep:
		// It delivers A2A push notifications.
		return false, false, true, nil
	case FunctionAPI, FunctionStream:
		return false, true, true, nil
	}
	return false, false, false, fmt.Errorf("unknown function %q: want %s, %s, %s, %s or %s", fn, FunctionAPI, FunctionTick, FunctionNode, FunctionSweep, FunctionStream)
}

// App is one deployment's handlers and what they share. Create it with
// [New] or [FromEnv]; it is safe for concurrent use. Its fields are for
// reading: changing them after New has no defined effect.
type App struct {
	Config Config
	Logger *slog.Logger
	// Service applies the run lifecycle (create, drain, cancel, resume).
	Service *runs.Service
	// Ticks executes ticks and node tasks.
	Ticks *tick.Handler
	// API is the HTTP API handler; mount more routes with API.Handle.
	API *api.Handler
	// Store keeps runs, checkpoints and claims in the table.
	Store *dynamo.Store
	// LongTerm is the long-term store, in the table too.
	LongTerm *longterm.Store
	// Queue sends ticks and node tasks to the queues. With
	// DispatchInvoke the handlers start node tasks by invoking the node
	// function instead, and Queue's node-task queue takes the tasks a
	// node function hands over (HandleNodeEvent).
	Queue *sqsqueue.Queue
	// SQS is the queues' client.
	SQS *sqs.Client
	// Agents serves the graphs as A2A agents, and delivers their push
	// notifications (HandleStream).
	Agents *a2a.Server

	// handler is API, its agent cards public, behind Options.Middleware.
	handler http.Handler
	// Tracer traces runs (nil: tracing is off).
	Tracer *tracing.Tracer
	// function is Options.Function: the one function wired (empty: all).
	function string
}

// unwired is the error of a handler whose parts New did not wire: the App
// serves another function (Options.Function).
func (a *App) unwired(what, fn string) error {
	return fmt.Errorf("serverless: this App serves the %s function (Options.Function), not %s: %s is the %s function's", a.function, what, what, fn)
}

// New wires an App.
func New(o Options) (*App, error) {
	if o.Graphs == nil {
		return nil, errors.New("serverless: Options.Graphs is nil")
	}
	if err := o.Config.validate(); err != nil {
		return nil, fmt.Errorf("serverless: %w", err)
	}
	wantTicks, wantHTTP, wantAgents, err := parts(o.Function)
	if err != nil {
		return nil, fmt.Errorf("serverless: Options.Function: %w", err)
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	store := dynamo.New(dynamodb.NewFromConfig(o.AWS), o.Config.Table, dynamo.WithEventRetention(o.Config.EventRetention), dynamo.WithEventMaxAge(o.Config.EventMaxAge), dynamo.WithThreadRetention(o.Config.ThreadRetention))
	sqsClient := sqs.NewFromConfig(o.AWS)
	var queueOpts []sqsqueue.Option
	if o.Tracer != nil {
		queueOpts = append(queueOpts, sqsqueue.WithMessageAttributes(o.Tracer.MessageAttributes))
	}
	queue := sqsqueue.New(sqsClient, o.Config.TickQueueURL, o.Config.NodeQueueURL, queueOpts...)
	// What the handlers send ticks and node tasks with.
	var dispatch tick.Queue = queue
	if o.Config.NodeDispatch == DispatchInvoke {
		if o.Function == FunctionTick && o.Config.NodeFunction == "" {
			return nil, fmt.Errorf("serverless: %s=%s: set %s, the node function the tick function invokes", EnvNodeDispatch, DispatchInvoke, EnvNodeFunction)
		}
		var invokeOpts []lambdainvoke.Option
		if o.Tracer != nil {
			invokeOpts = append(invokeOpts, lambdainvoke.WithTrace(traceFields(o.Tracer)))
		}
		client := lambda.NewFromConfig(o.AWS, func(lo *lambda.Options) {
			if o.LambdaEndpoint != "" {
				lo.BaseEndpoint = aws.String(o.LambdaEndpoint)
			}
		})
		dispatch = lambdainvoke.New(queue, client, o.Config.NodeFunction, invokeOpts...)
	}
	ticks := &tick.Handler{
		Graphs:      o.Graphs,
		Runs:        store,
		Checkpoints: store,
		Queue:       dispatch,
		Logger:      log,
		Lease:       o.Config.Lease,
		// Leases keep a duplicate delivery from executing a task
		// another handler is executing.
		Claims: store,
		// One Query reads a run, its newest step and its open step's
		// results.
		Loader: store,
		Chain:  o.Config.Chain,
	}
	// The runs' streams: about one PutItem per superstep of a run whose
	// events are kept (watched runs by default).
	var events runs.EventReader = store
	switch o.Config.Events {
	case EventsOn:
		ticks.Events = store
	case EventsOff:
	default:
		ticks.Events, ticks.EventFilter = store, isWatched
		events = &watchingLog{EventReader: store, runs: store, lease: WatchLease, logger: log}
	}
	svc := &runs.Service{
		Graphs:      o.Graphs,
		Runs:        store,
		Checkpoints: store,
		// Threads: one active run each (a conditional write on the
		// thread's item); the tick and node handlers pass a thread on
		// when its run stops, and start the next run with a tick.
		Threads:    store,
		Dispatcher: &tick.Dispatcher{Checkpoints: store, Queue: dispatch, Logger: log},
		Logger:     log,
	}
	ticks.Threads = svc
	if o.Tracer != nil {
		// Agents' runs are invoke_agent spans: the tracer tells them by
		// their graphs.
		o.Tracer = o.Tracer.WithGraphs(o.Graphs.Get)
		ticks.Tracer, svc.Tracer = o.Tracer, o.Tracer
	}
	// Schedules: EventBridge Scheduler fires them into the start queue.
	lt := longterm.New(store.LongTerm(), o.LongTerm...)
	a := &App{
		Config:   o.Config,
		Logger:   log,
		Service:  svc,
		Store:    store,
		LongTerm: lt,
		Queue:    queue,
		SQS:      sqsClient,
		Tracer:   o.Tracer,
		function: o.Function,
	}
	if wantTicks {
		a.Ticks = ticks
	}
	if !wantAgents {
		return a, nil
	}
	if err := a.wireHTTP(o, events, wantHTTP); err != nil {
		return nil, err
	}
	return a, nil
}

// wireHTTP wires the A2A agents and, when withAPI, the HTTP API and the
// MCP server, of New's App a.
func (a *App) wireHTTP(o Options, events runs.EventReader, withAPI bool) error {
	svc, store, log := a.Service, a.Store, a.Logger
	var schedules *schedule.Service
	if withAPI && o.Config.ScheduleGroup != "" {
		backend, err := awsscheduler.New(scheduler.NewFromConfig(o.AWS), awsscheduler.Config{Group: o.Config.ScheduleGroup,
			TargetARN: o.Config.StartQueueARN, RoleARN: o.Config.SchedulerRoleARN, DeadLetterARN: o.Config.ScheduleDLQ})
		if err != nil {
			return fmt.Errorf("serverless: %w", err)
		}
		schedules = &schedule.Service{Runs: svc, Backend: backend, AWS: true, MaxInputBytes: awsscheduler.MaxInputBytes}
	}
	// Streams read the runs' events from the table.
	// The long-term store shares the table (pkg/store/dynamo's
	// longterm.go): no other resource, role or permission.
	// Every graph is an A2A agent too. API Gateway's HTTP API cannot
	// stream: behind it, the cards say streaming is off, or, with a
	// stream function, point at its URL; a blocking send follows the run
	// record. The stream function streams, following the run's events.
	// Push configs are kept in the table with their runs; the sweep
	// function, fed by the table's stream, delivers (HandleStream).
	push := o.Push
	push.Store, push.DeliverElsewhere = store, !o.DeliverPushHere
	push.AllowPrivateNetworks = push.AllowPrivateNetworks || o.Config.PushAllowPrivateNetworks
	a2aOpts := []a2a.Option{a2a.WithStreaming(o.Streaming), a2a.WithBearerAuth(o.Config.APIToken != "" || o.Config.JWTIssuer != ""), a2a.WithLogger(log),
		a2a.WithMaxBodyBytes(o.MaxBodyBytes), a2a.WithTrustForwardedProto(true), a2a.WithBlockingTimeout(a2a.APIGatewayBlockingTimeout),
		a2a.WithPushNotifications(push),
		// A message's contextId names a thread where the Service keeps
		// threads; the strategy says what a message does on a busy one.
		a2a.WithThreadStrategy(o.Config.ThreadStrategy)}
	switch {
	case o.Streaming:
		// A function URL request has no gateway limit: the function's
		// timeout bounds it (HandleFunctionURL).
		a2aOpts = append(a2aOpts, a2a.WithBlockingTimeout(a2a.DefaultBlockingTimeout))
	case o.Config.StreamURL != "":
		a2aOpts = append(a2aOpts, a2a.WithStreaming(true), a2a.WithBaseURL(o.Config.StreamURL))
	}
	if o.Streaming && o.Config.Events != EventsOff {
		// The run's stream in the table, followed by a runs.Cursor as the
		// HTTP API's streams are (polled: runs execute elsewhere).
		a2aOpts = append(a2aOpts, a2a.WithEvents(events))
	}
	agents, err := a2a.New(svc, a2aOpts...)
	if err != nil {
		return fmt.Errorf("serverless: %w", err)
	}
	a.Agents = agents
	if !withAPI {
		return nil
	}
	httpAPI, err := api.New(api.Config{Service: svc, Token: o.Config.APIToken, MaxBodyBytes: o.MaxBodyBytes, Logger: log, Events: events, LongTerm: a.LongTerm, Schedules: schedules})
	if err != nil {
		return fmt.Errorf("serverless: %w", err)
	}
	httpAPI.Handle(a2a.Pattern, agents)
	// Every graph is also a tool at /mcp (pkg/mcpserver), stateless: the
	// requests of one client may reach different instances. Behind API
	// Gateway a call waits at most 25s (the gateway's limit is 30s); then
	// its result says how to wait on.
	mcpWait := 25 * time.Second
	if o.Streaming {
		mcpWait = 0 // the function's timeout bounds it; mcpserver's default
	}
	tools, err := mcpserver.New(mcpserver.Config{Service: svc, Stateless: true, Wait: mcpWait, Logger: log})
	if err != nil {
		return fmt.Errorf("serverless: %w", err)
	}
	httpAPI.Handle(mcpserver.Pattern, tools)
	var inner http.Handler = httpAPI
	if o.Config.JWTIssuer != "" {
		// No gateway checks the token (a function URL): check it here,
		// as API Gateway's JWT authorizer would.
		inner = jwtauth.New(o.Config.JWTIssuer, o.Config.JWTAudience).Middleware(httpAPI, func(r *http.Request) bool {
			return r.URL.Path == "/healthz" && (r.Method == http.MethodGet || r.Method == http.MethodHead)
		})
	}
	// Agent cards need no token; with tracing on, a server span per request.
	handler := o.Tracer.HTTPHandler(agents.PublicCards(inner))
	if o.Middleware != nil {
		handler = o.Middleware(handler)
	}
	a.API, a.handler = httpAPI, handler
	return nil
}

// FromEnv wires the App of a Lambda function serving o.Graphs: o.Config
// is read from the environment ([ConfigFromEnv]; an APIToken set in
// o.Config is kept when API_TOKEN is unset), o.AWS from the SDK's default
// chain (which honours AWS_ENDPOINT_URL and AWS_REGION), and o.Logger, if
// nil, is a JSON logger on stdout (CloudWatch Logs) at LOG_LEVEL.
// Tracing is on when the OTEL_* variables turn it on (see pkg/tracing);
// log records then carry trace_id and span_id.
func FromEnv(ctx context.Context, o Options) (*App, error) {
	cfg, err := ConfigFromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	if cfg.APIToken == "" {
		cfg.APIToken = o.Config.APIToken
	}
	o.Config = cfg
	if o.AWS, err = config.LoadDefaultConfig(ctx); err != nil {
		return nil, fmt.Errorf("serverless: load the AWS configuration: %w", err)
	}
	if o.Logger == nil {
		o.Logger = NewLogger(os.Stdout, cfg.LogLevel)
	}
	if o.Tracer == nil {
		tr, err := tracing.FromEnv(ctx, "superstep")
		if err != nil {
			return nil, fmt.Errorf("serverless: %w", err)
		}
		if tr != nil {
			o.Tracer = tr
			o.Logger = slog.New(tracing.NewLogHandler(o.Logger.Handler()))
		}
	}
	return New(o)
}

// NewLogger returns a JSON logger writing to w at level.
func NewLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
}

// ServeHTTP serves the HTTP API; App is an [http.Handler].
// Requests pass through Options.Middleware first.
func (a *App) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if a.API == nil {
		a.Logger.ErrorContext(r.Context(), a.unwired("the HTTP API", FunctionAPI).Error())
		http.Error(w, "this function does not serve the HTTP API", http.StatusNotFound)
		return
	}
	if a.handler == nil {
		a.API.ServeHTTP(w, r)
		return
	}
	a.handler.ServeHTTP(w, r)
}
