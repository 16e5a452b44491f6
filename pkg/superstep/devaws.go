//go:build !superstep.lambda

package superstep

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/spf13/cobra"

	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/inspector"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/serverless"
)

// awsDevFlags are the flags of `dev --aws`, the local serverless mode.
type awsDevFlags struct {
	enabled    bool
	endpoint   string
	region     string
	table      string
	tickQueue  string
	nodeQueue  string
	startQueue string
	create     bool
	prefix     string
	waitTime   time.Duration
	// waitSet: --wait-time was given; otherwise it depends on --endpoint.
	waitSet func() bool
}

// awsDevHelp is appended to dev's help.
const awsDevHelp = `

With --aws, dev runs the serverless runtime instead, without Lambda or
Docker: the HTTP API is served here over DynamoDB and SQS (moto_server or
another emulator at --endpoint, or AWS itself), and pollers stand in for the
queue event source mappings of the api, tick and node functions, calling
their Lambda handlers in this process (batch size 1, ReportBatchItemFailures).
--create makes the table and queues first (named after --prefix); otherwise
name them with --table, --tick-queue, --node-queue and --start-queue, or the
functions' environment variables TABLE_NAME, TICK_QUEUE_URL, NODE_QUEUE_URL
and START_QUEUE_URL. Runs live in the table and queues, not in this
process: stopping dev leaves them where they are, and the next start (or
the deployed functions) carries on with them.`

// register adds the --aws flags to dev.
func (af *awsDevFlags) register(c *cobra.Command, env Env) {
	c.Long += awsDevHelp
	c.Example += `
  moto_server -p 5000 &
  superstep dev --aws --endpoint http://127.0.0.1:5000 --create
  superstep dev --aws --endpoint http://127.0.0.1:5000 --table superstep \
      --tick-queue http://127.0.0.1:5000/123456789012/superstep-ticks.fifo \
      --node-queue http://127.0.0.1:5000/123456789012/superstep-nodes`
	fl := c.Flags()
	fl.BoolVar(&af.enabled, "aws", false, "run the serverless handlers here against DynamoDB and SQS (see above)")
	fl.StringVar(&af.endpoint, "endpoint", env.getenv("AWS_ENDPOINT_URL"), "with --aws: `URL` of the AWS emulator, e.g. http://127.0.0.1:5000 (env AWS_ENDPOINT_URL); empty: AWS")
	fl.StringVar(&af.region, "region", env.getenv("AWS_REGION"), "with --aws: AWS `REGION` (env AWS_REGION; default us-east-1 with --endpoint)")
	fl.StringVar(&af.table, "table", env.getenv(serverless.EnvTable), "with --aws: DynamoDB table `NAME` (env "+serverless.EnvTable+")")
	fl.StringVar(&af.tickQueue, "tick-queue", env.getenv(serverless.EnvTickQueue), "with --aws: `URL` of the FIFO tick queue (env "+serverless.EnvTickQueue+")")
	fl.StringVar(&af.nodeQueue, "node-queue", env.getenv(serverless.EnvNodeQueue), "with --aws: `URL` of the node-task queue (env "+serverless.EnvNodeQueue+")")
	fl.StringVar(&af.startQueue, "start-queue", env.getenv(serverless.EnvStartQueue), "with --aws: `URL` of the start queue, optional (env "+serverless.EnvStartQueue+")")
	fl.BoolVar(&af.create, "create", false, "with --aws: create the table and queues (named after --prefix) and use them")
	fl.StringVar(&af.prefix, "prefix", "superstep", "with --aws --create: name of the table and prefix of the queues")
	fl.DurationVar(&af.waitTime, "wait-time", 20*time.Second, "with --aws: long-poll wait of each SQS receive, at most 20s (0 short-polls); 2s with --endpoint unless given")
	af.waitSet = func() bool { return fl.Changed("wait-time") }
}

// runDevAWS is `superstep dev --aws`.
func runDevAWS(ctx context.Context, env Env, f *devFlags, af *awsDevFlags) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return badInput(fmt.Errorf("--log-level %q: want debug, info, warn or error", f.logLevel))
	}
	if !af.waitSet() && af.endpoint != "" {
		// An emulator goes on waiting for a client that is gone: a
		// receive left by a stopped dev can take the next one's messages
		// (until their visibility timeout). Short waits keep that rare.
		af.waitTime = 2 * time.Second
	}
	if af.waitTime < 0 || af.waitTime > 20*time.Second {
		return badInput(fmt.Errorf("--wait-time %v: want 0 to 20s", af.waitTime))
	}
	log := env.logger(level)
	reg, err := env.registry()
	if err != nil {
		return err
	}
	awsCfg, err := loadAWSConfig(ctx, af)
	if err != nil {
		return failed(err)
	}
	tr, err := startTracing(ctx, &log)
	if err != nil {
		return badInput(err)
	}
	defer tr.Shutdown(context.WithoutCancel(ctx))

	var cfg serverless.Config
	if af.create {
		log.Info("creating the table and queues", "prefix", af.prefix, "endpoint", af.endpoint)
		if cfg, err = serverless.Provision(ctx, awsCfg, serverless.Resources{Prefix: af.prefix}); err != nil {
			return failed(err)
		}
	} else {
		cfg = serverless.Config{Table: af.table, TickQueueURL: af.tickQueue, NodeQueueURL: af.nodeQueue, StartQueueURL: af.startQueue}
		var missing []string
		for _, m := range []struct{ flag, val string }{{"--table", cfg.Table}, {"--tick-queue", cfg.TickQueueURL}, {"--node-queue", cfg.NodeQueueURL}} {
			if m.val == "" {
				missing = append(missing, m.flag)
			}
		}
		if len(missing) > 0 {
			return badInput(fmt.Errorf("dev --aws needs %s (or the variables %s, %s and %s), or --create to make a table and queues on --endpoint",
				strings.Join(missing, ", "), serverless.EnvTable, serverless.EnvTickQueue, serverless.EnvNodeQueue))
		}
		if lease := env.getenv(serverless.EnvTaskLease); lease != "" {
			if cfg.Lease, err = time.ParseDuration(lease); err != nil || cfg.Lease <= 0 {
				return badInput(fmt.Errorf("%s=%q is not a positive duration such as 15m", serverless.EnvTaskLease, lease))
			}
		}
	}
	cfg.APIToken = cmp.Or(f.token, env.getenv(serverless.EnvAPIToken))
	cfg.ThreadStrategy = runs.Strategy(f.strategy) // checked by serverless.New
	app, err := serverless.New(serverless.Options{Config: cfg, AWS: awsCfg, Graphs: reg, Logger: log, MaxBodyBytes: f.maxBody, Middleware: env.s.wrap, Tracer: tr, DeliverPushHere: true, LongTerm: env.s.longTerm,
		// A local HTTP server streams: A2A streams follow the runs' events.
		Streaming: true})
	if err != nil {
		return badInput(err)
	}
	if err := env.s.mount(app.API); err != nil {
		return badInput(err)
	}
	// Reading a run that does not exist proves the table is there.
	if _, err := app.Service.Get(ctx, "superstep-dev-probe"); err != nil && !errors.Is(err, runs.ErrNotFound) {
		return failed(fmt.Errorf("table %s: %w", cfg.Table, err))
	}

	pollCtx, stopPolling := context.WithCancel(context.WithoutCancel(ctx))
	defer stopPolling()
	pollers := app.Pollers(serverless.PollOptions{
		WaitTime:        af.waitTime,
		TickConcurrency: f.concurrency,
		StopGrace:       f.grace,
	})
	polled := make(chan error, 1)
	go func() { polled <- pollers.Run(pollCtx) }()

	// Signals are caught before the server says it serves: a signal sent
	// as soon as the address is known must drain, not kill, the server.
	sigs, stopSignals := env.signals()
	defer stopSignals()
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		stopPolling()
		<-polled
		return failed(fmt.Errorf("listen on %s: %w", f.addr, err))
	}
	srv := api.NewServer(inspector.New(app), api.ServerConfig{Logger: log}) // the web inspector at /, the API's routes keep precedence
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	url := "http://" + ln.Addr().String()
	names := make([]string, 0, len(reg.List()))
	for _, g := range reg.List() {
		names = append(names, g.Name())
	}
	log.Info("serving (serverless handlers, local pollers)", "url", url, "endpoint", cmp.Or(af.endpoint, "AWS"), "region", awsCfg.Region,
		"table", cfg.Table, "tick_queue", cfg.TickQueueURL, "node_queue", cfg.NodeQueueURL, "start_queue", cfg.StartQueueURL,
		"graphs", strings.Join(names, ","), "auth", cfg.APIToken != "")
	if cfg.APIToken == "" && !isLoopback(ln.Addr()) {
		log.Warn("serving beyond this machine without a token; set --token or " + TokenEnv)
	}
	fmt.Fprintf(env.Stdout, "superstep dev: serving %s\n", url)

	var runErr error
	pollDone := false
	select {
	case sig := <-sigs:
		log.Info("stopping: runs stay in the table and queues", "signal", signalName(sig), "grace", f.grace)
	case <-ctx.Done():
		log.Info("stopping: runs stay in the table and queues", "grace", f.grace)
	case err := <-served:
		runErr = failed(fmt.Errorf("serve: %w", err))
	case err := <-polled:
		pollDone = true
		if err == nil {
			err = errors.New("the pollers stopped")
		}
		runErr = failed(fmt.Errorf("poll: %w", err))
	}
	// Handlers in progress get --grace to finish; cut short, their
	// messages come back after the visibility timeout.
	stopPolling()
	if !pollDone {
		if err := <-polled; err != nil && runErr == nil {
			runErr = failed(fmt.Errorf("poll: %w", err))
		}
	}
	httpCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(httpCtx); err != nil {
		log.Warn("close HTTP connections", "error", err)
	}
	log.Info("stopped")
	return runErr
}

// loadAWSConfig loads the SDK's configuration with the flags' endpoint and
// region. An emulator takes any credentials: if none are configured, dummy
// ones are used with --endpoint.
func loadAWSConfig(ctx context.Context, af *awsDevFlags) (aws.Config, error) {
	var opts []func(*config.LoadOptions) error
	region := af.region
	if af.endpoint != "" {
		// An emulator needs no instance credentials: do not ask EC2's
		// instance metadata service for them.
		opts = append(opts, config.WithBaseEndpoint(af.endpoint), config.WithEC2IMDSClientEnableState(imds.ClientDisabled))
		if region == "" {
			region = "us-east-1"
		}
	}
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load the AWS configuration: %w", err)
	}
	if af.endpoint != "" {
		if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
			cfg.Credentials = credentials.NewStaticCredentialsProvider("test", "test", "")
		}
	}
	if cfg.Region == "" {
		return aws.Config{}, errors.New("no AWS region: set --region or AWS_REGION")
	}
	return cfg, nil
}
