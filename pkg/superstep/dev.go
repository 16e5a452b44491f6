//go:build !superstep.lambda

package superstep

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/superstep/superstep/pkg/a2a"
	"github.com/superstep/superstep/pkg/agent/memorytools"
	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/embedded"
	"github.com/superstep/superstep/pkg/inspector"
	"github.com/superstep/superstep/pkg/longterm"
	"github.com/superstep/superstep/pkg/mcpserver"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/store/sqlite"
	"github.com/superstep/superstep/pkg/tracing"
)

// StoreFile is the name of the SQLite file dev keeps in its --dir.
const StoreFile = "superstep.db"

// devFlags are the flags of dev.
type devFlags struct {
	addr        string
	dir         string
	token       string
	grace       time.Duration
	logLevel    string
	concurrency int
	maxBody     int64
	strategy    string
	// pushPrivate lets A2A push notifications go to private networks.
	pushPrivate bool
	// grpcAddr: where the A2A gRPC binding listens; "" for none.
	grpcAddr string
	// publicURL: the URL clients reach dev at (a tunnel, a proxy), which
	// the agent cards advertise; "" for the request's own host.
	publicURL string
	events    string
	// eventsKept and eventMaxAge: the event retention (per run; by age).
	eventsKept  int
	eventMaxAge time.Duration
}

func newDevCmd(env Env) *cobra.Command {
	var f devFlags
	var af awsDevFlags // --aws: the local serverless mode (devaws.go)
	c := &cobra.Command{
		Use:   "dev",
		Short: "Serve the HTTP API on this machine, runs executed in this process",
		Long: `Serve the HTTP API (the same handler as the api Lambda) with runs executed
in this process. Checkpoints and run records go to ` + StoreFile + ` in --dir, so
runs survive a restart: on start, runs left pending or running (by a crash,
say) continue from their last committed superstep, and tasks whose results
were recorded are not run again.

Schedules ('superstep schedules') are kept in the same file and fired by
this process; a firing missed while it was stopped is made up once, when it
starts.

The URL is printed on stdout once the server listens (--addr with port 0
picks a free port); logs go to stderr.

On SIGINT or SIGTERM, every running run is asked to drain (reason
"signal: interrupt" or "signal: terminated"); runs still going after
--grace, or on a second signal, are stopped at once. Either way they stay
resumable: drained runs with 'superstep runs resume', stopped ones on the
next start.`,
		Example: `  superstep dev
  superstep dev --addr 127.0.0.1:0 --dir /tmp/superstep --token s3cret`,
		Args: noArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if _, err := a2a.ParseStrategy(f.strategy); err != nil {
				return badInput(fmt.Errorf("--a2a-strategy %q: want reject, enqueue, interrupt, rollback or parallel", f.strategy))
			}
			if _, err := embedded.ParseEventsMode(f.events); err != nil {
				return badInput(fmt.Errorf("--events %q: want watched (the default: only watched runs' events are kept), on or off", f.events))
			}
			if f.eventsKept < 1 {
				return badInput(fmt.Errorf("--event-retention %d: want a number of events per run, 1 or more (default %d)", f.eventsKept, runs.DefaultStreamRetention))
			}
			if f.eventMaxAge < 0 {
				return badInput(fmt.Errorf("--event-max-age %s is negative: want a duration such as %s, or 0 to keep events until their run is deleted", f.eventMaxAge, runs.DefaultEventMaxAge))
			}
			if f.publicURL != "" {
				if af.enabled {
					return badInput(errors.New("--public-url applies to the local dev server, not to --aws (whose agents are served by the api function's handler here)"))
				}
				u, err := a2a.ParseBaseURL(f.publicURL)
				if err != nil {
					return badInput(fmt.Errorf("--public-url: %w", err))
				}
				f.publicURL = u
			}
			if af.enabled {
				return runDevAWS(c.Context(), env, &f, &af)
			}
			return runDev(c.Context(), env, &f)
		},
	}
	fl := c.Flags()
	fl.StringVar(&f.addr, "addr", "127.0.0.1:8080", "`HOST:PORT` to listen on (port 0: any free port)")
	fl.StringVar(&f.dir, "dir", filepath.Dir(env.storePath()), "`DIR`ectory of the SQLite store (created if missing)")
	fl.StringVar(&f.token, "token", cmp.Or(env.getenv(TokenEnv), env.defaultToken()), "bearer token every request must present (env "+TokenEnv+"); empty: none")
	fl.DurationVar(&f.grace, "grace", 10*time.Second, "on SIGINT/SIGTERM, wait this long for runs to drain before stopping them")
	fl.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fl.IntVar(&f.concurrency, "concurrency", embedded.DefaultConcurrency, "most runs executing at once")
	fl.Int64Var(&f.maxBody, "max-body-bytes", api.DefaultMaxBodyBytes, "largest request body accepted")
	fl.StringVar(&f.strategy, "a2a-strategy", string(a2a.StrategyParallel), "what an A2A message does when its context's thread has an active task: parallel (a task of its own beside a working one), reject, enqueue, interrupt or rollback")
	fl.BoolVar(&f.pushPrivate, "a2a-push-private", false, "let A2A push notifications go to loopback, private and link-local addresses (a receiver on this machine or network); off, they are refused at config time")
	fl.StringVar(&f.grpcAddr, "a2a-grpc-addr", "", "`HOST:PORT` to serve the A2A gRPC binding on (port 0: any free port; the agent cards list it, each agent as a tenant); empty: no gRPC")
	fl.StringVar(&f.publicURL, "public-url", "", "`URL` clients reach this server at, such as https://agents.example.com behind a tunnel or proxy: the agent cards advertise it (and {URL}/a2a/{graph}) instead of the address a request came to, and the Host check accepts its host; empty: the request's host")
	fl.StringVar(&f.events, "events", string(embedded.EventsWatched), "which runs' events streams can replay: watched (while watched and "+embedded.WatchLease.String()+" after; an unwatched run writes none), on (every run's) or off")
	fl.IntVar(&f.eventsKept, "event-retention", runs.DefaultStreamRetention, "most events kept per run (the newest)")
	fl.DurationVar(&f.eventMaxAge, "event-max-age", runs.DefaultEventMaxAge, "how long a run's events are kept (a sweep deletes older ones); 0: until the run is deleted")
	af.register(c, env)
	return c
}

func runDev(ctx context.Context, env Env, f *devFlags) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return badInput(fmt.Errorf("--log-level %q: want debug, info, warn or error", f.logLevel))
	}
	log := env.logger(level)
	reg, err := env.registry()
	if err != nil {
		return err
	}
	tr, err := startTracing(ctx, &log)
	if err != nil {
		return badInput(err)
	}
	defer tr.Shutdown(context.WithoutCancel(ctx))
	var runTracer runs.Tracer
	if tr != nil {
		runTracer = tr.WithGraphs(reg.Get) // agents' runs are invoke_agent spans
	}
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		return failed(fmt.Errorf("create --dir: %w", err))
	}
	path := filepath.Join(f.dir, filepath.Base(env.storePath()))
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		return failed(fmt.Errorf("open store: %w", err))
	}
	defer st.Close()
	st.SetEventRetention(f.eventsKept)
	var records runs.Store
	if rs, ok := any(st).(runs.Store); ok {
		records = rs
	} else {
		log.Warn("the SQLite store keeps no run records yet: they are kept in memory and lost on exit (checkpoints are kept)")
		records = runs.NewMemoryStore()
	}

	// The scheduler's context ends only when dev gives up waiting for
	// runs: it stops them as a crash would, leaving them to the next start.
	schedCtx, crash := context.WithCancel(context.WithoutCancel(ctx))
	defer crash()
	svc := &runs.Service{Graphs: reg, Runs: records, Checkpoints: st, Logger: log, Tracer: runTracer}
	if ts, ok := records.(runs.ThreadStore); ok {
		svc.Threads = ts // threads: one writer each; a run continues its thread's state
	}
	// The long-term store (pkg/longterm) is in the same file: nodes reach
	// it through their context, memory tools their thread's scope.
	lt := longterm.New(st.LongTerm(), env.s.longTerm...)
	schedCtx = longterm.WithScope(longterm.WithStore(schedCtx, lt), memorytools.ThreadScope(records, svc.Threads))
	sched := embedded.NewScheduler(embedded.SchedulerConfig{Graphs: reg, Runs: records, Checkpoints: st, Concurrency: f.concurrency, EventsMode: embedded.EventsMode(f.events), EventRetention: f.eventsKept, EventMaxAge: f.eventMaxAge, Logger: log, Tracer: runTracer, OnStop: svc.RunStopped, StartThreadRun: svc.StartThreadRun})
	svc.Dispatcher = sched
	if err := sched.Start(schedCtx); err != nil {
		return failed(fmt.Errorf("start scheduler: %w", err))
	}
	// Before serving: a create cut by a crash of the last dev may have
	// claimed a thread for a run it never stored.
	if svc.Threads != nil {
		if n, err := svc.RecoverClaims(ctx); err != nil {
			_ = sched.Shutdown(context.Background(), 0)
			return failed(err)
		} else if n > 0 {
			log.Warn("threads claimed by runs that were never stored were passed on", "claims", n)
		}
	}
	// Schedules (pkg/schedule): kept in the same file, fired by this
	// process; firings missed while it was stopped are made up once.
	schedules, stopSchedules, closeSchedules, err := startSchedules(ctx, path, svc, log)
	if err != nil {
		_ = sched.Shutdown(context.Background(), 0)
		return failed(err)
	}
	defer closeSchedules()
	var allowedHosts []string
	var a2aBase []a2a.Option
	if f.publicURL != "" {
		// The cards advertise the public URL, and requests that reach dev
		// under its host (a tunnel passing the Host on) pass the Host check.
		u, err := url.Parse(f.publicURL) // checked in RunE
		if err != nil {
			return badInput(fmt.Errorf("--public-url: %w", err))
		}
		allowedHosts = append(allowedHosts, u.Hostname())
		a2aBase = append(a2aBase, a2a.WithBaseURL(f.publicURL))
	}
	handler, err := api.New(api.Config{Service: svc, Token: f.token, MaxBodyBytes: f.maxBody, Logger: log, HostCheck: true, AllowedHosts: allowedHosts, LongTerm: lt, Schedules: schedules})
	if err != nil {
		_ = sched.Shutdown(context.Background(), 0)
		return failed(err)
	}
	// Every graph is also an A2A agent at /a2a/{graph} (pkg/a2a), streaming live events.
	a2aEvents := []a2a.Option{a2a.WithEvents(sched)} // followed by runs.Cursor, as the API's streams
	if f.events == string(embedded.EventsOff) {
		a2aEvents = nil // nothing is logged: A2A follows the run records
	}
	// The A2A gRPC binding, when asked for, on a listener of its own.
	var grpcLn net.Listener
	if f.grpcAddr != "" {
		if grpcLn, err = net.Listen("tcp", f.grpcAddr); err != nil {
			_ = sched.Shutdown(context.Background(), 0)
			return failed(fmt.Errorf("listen on --a2a-grpc-addr %s: %w", f.grpcAddr, err))
		}
		defer grpcLn.Close()
		a2aEvents = append(a2aEvents, a2a.WithGRPCAddress(grpcLn.Addr().String()))
	}
	agents, err := a2a.New(svc, append(append(a2aEvents, a2aBase...), a2a.WithStreaming(true), a2a.WithBearerAuth(f.token != ""), a2a.WithLogger(log), a2a.WithMaxBodyBytes(f.maxBody), a2a.WithPushNotifications(a2a.PushOptions{Store: st, AllowPrivateNetworks: f.pushPrivate}),
		// A message's contextId names a thread: a chat client's next
		// message continues the conversation.
		a2a.WithThreadStrategy(runs.Strategy(f.strategy)))...) // checked in RunE
	if err != nil {
		_ = sched.Shutdown(context.Background(), 0)
		return badInput(err)
	}
	handler.Handle(a2a.Pattern, agents)
	// Every graph is also a tool of an MCP server at /mcp (pkg/mcpserver).
	tools, err := mcpserver.New(mcpserver.Config{Service: svc, Logger: log})
	if err != nil {
		_ = sched.Shutdown(context.Background(), 0)
		return badInput(err)
	}
	handler.Handle(mcpserver.Pattern, tools)
	// Push configs are in the store file: go on delivering those of the
	// last run of dev.
	if err := agents.ResumePush(ctx); err != nil {
		log.Warn("push notifications of earlier tasks not resumed", "error", err)
	}
	if err := env.s.mount(handler); err != nil {
		_ = sched.Shutdown(context.Background(), 0)
		return badInput(err)
	}

	// Signals are caught before the server says it serves: a signal sent
	// as soon as the address is known must drain, not kill, the server.
	sigs, stopSignals := env.signals()
	defer stopSignals()
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		_ = sched.Shutdown(context.Background(), 0)
		return failed(fmt.Errorf("listen on %s: %w", f.addr, err))
	}
	// The web inspector at /, the API's routes keep precedence; with
	// tracing on, a server span per API request.
	srv := api.NewServer(env.s.wrap(inspector.New(tr.HTTPHandler(agents.BindingErrors(handler.GuardHost(agents.PublicCards(handler)))))), api.ServerConfig{Logger: log})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	var grpcSrv *grpc.Server
	if grpcLn != nil {
		grpcSrv = agents.NewGRPCServer(a2a.GRPCConfig{Token: f.token})
		go func() {
			if err := grpcSrv.Serve(grpcLn); err != nil {
				select {
				case served <- fmt.Errorf("gRPC: %w", err):
				default: // the HTTP server's error came first
				}
			}
		}()
		log.Info("serving A2A over gRPC", "addr", grpcLn.Addr().String())
	}

	url := "http://" + ln.Addr().String()
	names := make([]string, 0, len(reg.List()))
	for _, g := range reg.List() {
		names = append(names, g.Name())
	}
	log.Info("serving", "url", url, "store", path, "graphs", strings.Join(names, ","), "auth", f.token != "")
	if f.publicURL != "" {
		log.Info("agent cards advertise the public URL", "public_url", f.publicURL)
	}
	if f.token == "" && !isLoopback(ln.Addr()) {
		log.Warn("serving beyond this machine without a token; set --token or " + TokenEnv)
	}
	fmt.Fprintf(env.Stdout, "superstep dev: serving %s\n", url)

	var sig os.Signal
	select {
	case sig = <-sigs:
	case <-ctx.Done():
	case err := <-served:
		_ = sched.Shutdown(context.Background(), 0)
		return failed(fmt.Errorf("serve: %w", err))
	}

	// Drain every running run, then wait for the scheduler.
	reason := "shutdown"
	if sig != nil {
		reason = "signal: " + signalName(sig)
	}
	stopSchedules() // no firing starts a run while runs drain
	log.Info("stopping: draining running runs", "reason", reason, "grace", f.grace)
	drainAll(context.WithoutCancel(ctx), log, svc, reason)
	stopCtx, stopNow := context.WithCancel(context.WithoutCancel(ctx))
	defer stopNow()
	go func() {
		select {
		case s := <-sigs:
			log.Warn("second signal: stopping runs at once; they continue at the next start", "signal", signalName(s))
			stopNow()
		case <-stopCtx.Done():
		}
	}()
	if err := sched.Shutdown(stopCtx, f.grace); err != nil {
		crash()
		log.Warn("runs stopped at once; they continue at the next start", "error", err)
		waitCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = sched.WaitIdle(waitCtx)
	}
	httpCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(httpCtx); err != nil {
		log.Warn("close HTTP connections", "error", err)
	}
	if grpcSrv != nil {
		stopGRPC(httpCtx, grpcSrv)
	}
	// Push loops read the store: they stop before it closes.
	if err := agents.StopPush(httpCtx); err != nil {
		log.Warn("stop push deliveries", "error", err)
	}
	log.Info("stopped")
	return nil
}

// stopGRPC stops a gRPC server gracefully, or at once when ctx ends
// first (open streams).
func stopGRPC(ctx context.Context, s *grpc.Server) {
	done := make(chan struct{})
	go func() { s.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.Stop()
		<-done
	}
}

// drainAll asks every running run to drain with reason.
func drainAll(ctx context.Context, log *slog.Logger, svc *runs.Service, reason string) {
	f := runs.Filter{Status: pregel.RunRunning, Limit: 500}
	for {
		page, err := svc.List(ctx, f)
		if err != nil {
			log.Warn("list running runs to drain them", "error", err)
			return
		}
		for _, r := range page.Runs {
			if _, err := svc.Drain(ctx, r.ID, reason); err != nil && !errors.Is(err, runs.ErrInvalidState) {
				log.Warn("drain run", "run_id", r.ID, "error", err)
			} else if err == nil {
				log.Info("draining run", "run_id", r.ID, "graph", r.Graph)
			}
		}
		if page.NextPageToken == "" {
			return
		}
		f.PageToken = page.NextPageToken
	}
}

// isLoopback reports whether addr is a loopback address.
func isLoopback(addr net.Addr) bool {
	ta, ok := addr.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// startTracing sets up OpenTelemetry tracing when the OTEL_* variables
// turn it on (see pkg/tracing), and makes log records carry the trace and
// span ids. It returns nil when tracing is off.
func startTracing(ctx context.Context, log **slog.Logger) (*tracing.Tracer, error) {
	tr, err := tracing.FromEnv(ctx, "superstep")
	if err != nil || tr == nil {
		return nil, err
	}
	*log = slog.New(tracing.NewLogHandler((*log).Handler()))
	installLogger(tr, *log)
	(*log).Info("tracing on: spans go where the OTEL_* variables say")
	return tr, nil
}
