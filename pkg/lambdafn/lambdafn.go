// Package lambdafn is the entry point of a Lambda function of a superstep
// deployment (api, tick, node, sweep or stream): it wires the function
// from the environment (pkg/serverless) and serves it until Lambda stops
// the process. It links no more than a function uses: no CLI, no SQLite,
// no inspector, so that the function's cold start (its Init duration) is
// short.
//
// The repository's bootstraps (functions/*) call it directly:
//
//	func main() {
//		lambdafn.Main(lambdafn.WithGraphs(orders.Graph), lambdafn.WithFunction("api"))
//	}
//
// and [superstep.Main] calls it when Lambda starts a program built with
// pkg/superstep, or, built with the superstep.lambda tag, in place of the
// whole command (see pkg/superstep).
//
// [superstep.Main]: https://pkg.go.dev/github.com/superstep/superstep/pkg/superstep#Main
package lambdafn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/superstep/superstep/pkg/longterm"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/serverless"
	"github.com/superstep/superstep/pkg/tracing"
)

const (
	// RuntimeEnv is set by AWS Lambda (and by the Lambda runtime
	// interface emulator) in the environment of a function's process.
	RuntimeEnv = "AWS_LAMBDA_RUNTIME_API"
	// FunctionEnv names the Lambda function a process serves: api, tick,
	// node, sweep or stream. The SAM template sets it on each function.
	FunctionEnv = "SUPERSTEP_FUNCTION"
)

// Exit codes of [Serve].
const (
	// ExitOK: Lambda stopped the function.
	ExitOK = 0
	// ExitFailed: the function could not wire itself (its
	// configuration, the AWS configuration, a route).
	ExitFailed = 1
	// ExitUsage: bad options, or no function to serve.
	ExitUsage = 2
)

// Functions returns the names of the Lambda functions of a deployment,
// the values of [FunctionEnv]:
//
//   - api: the HTTP API (API Gateway HTTP API, payload 2.0), EventBridge
//     superstep.StartRun events and start-queue messages
//   - tick: the tick queue's messages (one superstep of a run)
//   - node: the node-task queue's messages (remote nodes)
//   - sweep: the table's stream (purges expired runs)
//   - stream: a Lambda function URL in RESPONSE_STREAM mode: the HTTP API
//     with streamed responses (run streams, A2A message/stream)
func Functions() []string {
	return []string{serverless.FunctionAPI, serverless.FunctionTick, serverless.FunctionNode, serverless.FunctionSweep, serverless.FunctionStream}
}

// An Option configures the function [Main] and [Serve] start. Options
// apply in order; a later one of the same kind replaces an earlier one,
// except [WithGraphs], [WithCompiledGraphs], [WithMiddleware],
// [WithRoute] and [WithEmbedder], which add.
type Option func(*settings)

type settings struct {
	builders   []func() (*pregel.Graph, error)
	reg        *runs.Registry
	function   string
	token      string
	logger     *slog.Logger
	middleware []func(http.Handler) http.Handler
	routes     []Route
	longTerm   []longterm.Option
	start      func(handler any)
}

// A Route is an extra route of the HTTP API: h served at Pattern, an
// [http.ServeMux] pattern such as "GET /healthz".
type Route struct {
	Pattern string
	Handler http.Handler
}

// WithGraphs adds the graphs the function serves, each given by the
// function that compiles it. Every graph needs a name of its own.
func WithGraphs(graphs ...func() (*pregel.Graph, error)) Option {
	return func(s *settings) { s.builders = append(s.builders, graphs...) }
}

// WithCompiledGraphs adds graphs already compiled.
func WithCompiledGraphs(graphs ...*pregel.Graph) Option {
	return func(s *settings) {
		for _, g := range graphs {
			s.builders = append(s.builders, func() (*pregel.Graph, error) { return g, nil })
		}
	}
}

// WithRegistry serves the graphs of reg, compiled already (pkg/superstep
// compiles them once for the CLI and the functions); it replaces
// [WithGraphs] and [WithCompiledGraphs].
func WithRegistry(reg *runs.Registry) Option { return func(s *settings) { s.reg = reg } }

// WithFunction fixes the function the program serves, for a binary built
// for one function. Without it the function comes from [FunctionEnv];
// if both are given they must agree.
func WithFunction(name string) Option { return func(s *settings) { s.function = name } }

// WithToken sets the bearer token the HTTP API requires when API_TOKEN
// is unset.
func WithToken(token string) Option { return func(s *settings) { s.token = token } }

// WithLogger sets the function's logger. Default: JSON on stdout
// (CloudWatch Logs) at LOG_LEVEL.
func WithLogger(l *slog.Logger) Option { return func(s *settings) { s.logger = l } }

// WithMiddleware wraps the HTTP API of the api and stream functions.
// Middlewares given first run outermost.
func WithMiddleware(mw func(http.Handler) http.Handler) Option {
	return func(s *settings) { s.middleware = append(s.middleware, mw) }
}

// WithRoute serves h at pattern beside the API routes of the api and
// stream functions. A pattern that collides with an API route stops the
// function (exit code 1, the reason in its log).
func WithRoute(pattern string, h http.Handler) Option {
	return func(s *settings) { s.routes = append(s.routes, Route{pattern, h}) }
}

// WithLongTerm adds options of the long-term store (pkg/longterm), such
// as [longterm.WithEmbedder].
func WithLongTerm(opts ...longterm.Option) Option {
	return func(s *settings) { s.longTerm = append(s.longTerm, opts...) }
}

// WithStart replaces lambda.Start, which serves the handler until Lambda
// stops the process: tests call the handler themselves.
func WithStart(start func(handler any)) Option { return func(s *settings) { s.start = start } }

// Main serves the Lambda function the options and the environment name,
// and exits with [Serve]'s exit code. Outside Lambda (no [RuntimeEnv]) it
// says so and exits with ExitUsage.
func Main(opts ...Option) {
	os.Exit(Serve(context.Background(), os.Getenv, os.Stderr, opts...))
}

// Compile compiles graphs and registers them, refusing a nil function,
// a graph that does not compile and two graphs with one name.
func Compile(graphs ...func() (*pregel.Graph, error)) (*runs.Registry, error) {
	out := make([]*pregel.Graph, 0, len(graphs))
	seen := map[string]bool{}
	var dups []string
	for i, build := range graphs {
		if build == nil {
			return nil, fmt.Errorf("graph %d of WithGraphs is nil", i+1)
		}
		g, err := build()
		if err != nil {
			return nil, fmt.Errorf("compile graph %d: %w", i+1, err)
		}
		if g == nil {
			return nil, fmt.Errorf("graph %d compiled to nil", i+1)
		}
		if seen[g.Name()] {
			dups = append(dups, fmt.Sprintf("%q", g.Name()))
		}
		seen[g.Name()] = true
		out = append(out, g)
	}
	if len(dups) > 0 {
		return nil, fmt.Errorf("two graphs are named %s: give each graph its own name (pregel.NewGraph's argument)", strings.Join(dups, ", "))
	}
	return runs.NewRegistry(out...)
}

// Handler returns the Lambda handler of function name of app: what
// lambda.Start serves.
func Handler(app *serverless.App, name string) (any, error) {
	switch name {
	case serverless.FunctionAPI:
		return app.HandleAPI, nil
	case serverless.FunctionTick:
		return app.HandleTick, nil
	case serverless.FunctionNode:
		return app.HandleNodeEvent, nil
	case serverless.FunctionSweep:
		return app.HandleStream, nil
	case serverless.FunctionStream:
		return app.HandleFunctionURL, nil
	}
	return nil, fmt.Errorf("unknown function %q: want one of %s", name, strings.Join(Functions(), ", "))
}

// Serve serves the Lambda function the options and the environment
// (getenv) name until Lambda stops the process, and returns an exit
// code: ExitUsage for bad options or no function to serve, ExitFailed
// when the function cannot wire itself. What stops it is written to
// stderr (the function's log).
func Serve(ctx context.Context, getenv func(string) string, stderr io.Writer, opts ...Option) int {
	s := &settings{}
	for _, o := range opts {
		if o != nil {
			o(s)
		}
	}
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	if stderr == nil {
		stderr = os.Stderr
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "superstep: cannot start: %v\n", err)
		return ExitUsage
	}
	if getenv(RuntimeEnv) == "" {
		return fail(fmt.Errorf("%s is unset: this program is a Lambda function's bootstrap, started by AWS Lambda (or the runtime interface emulator)", RuntimeEnv))
	}
	name, err := s.lambdaFunction(getenv)
	if err != nil {
		return fail(err)
	}
	// No collection while the function wires itself: what it allocates
	// is small and lives on, and a collection now is paid in the cold
	// start (Lambda's Init duration).
	gcPercent := debug.SetGCPercent(-1)
	app, err := s.wire(ctx, name)
	debug.SetGCPercent(gcPercent)
	if errors.Is(err, errOptions) {
		return fail(err)
	}
	if err != nil {
		// The function's log (CloudWatch Logs) says why it cannot start.
		slog.New(slog.NewJSONHandler(stderr, nil)).Error("superstep "+name+": cannot start", "err", err)
		return ExitFailed
	}
	if app.Tracer != nil {
		// Records a graph's own code logs with slog.InfoContext go where
		// the runtime's do, with the node span's trace_id and span_id.
		tracing.SetDefaultLogger(app.Logger)
	}
	h, err := Handler(app, name)
	if err != nil {
		return fail(err)
	}
	start := s.start
	if start == nil {
		start = func(h any) { lambda.StartWithOptions(h, lambda.WithContext(ctx)) }
		if app.Tracer != nil {
			start = func(h any) {
				lambda.StartWithOptions(h, lambda.WithContext(ctx), lambda.WithEnableSIGTERM(func() { shutdownTracer(app) }))
			}
		}
	}
	if app.Tracer != nil {
		h = flushing{next: lambda.NewHandler(h), app: app}
	}
	start(h)
	return ExitOK
}

// errOptions marks errors of the options (exit code ExitUsage).
var errOptions = errors.New("bad options")

// wire compiles the graphs and wires the App of function name.
func (s *settings) wire(ctx context.Context, name string) (*serverless.App, error) {
	reg := s.reg
	if reg == nil {
		if len(s.builders) == 0 {
			return nil, fmt.Errorf("%w: no graphs: pass them with WithGraphs(yourpkg.Graph, ...)", errOptions)
		}
		var err error
		if reg, err = Compile(s.builders...); err != nil {
			return nil, fmt.Errorf("%w: %w", errOptions, err)
		}
	}
	app, err := serverless.FromEnv(ctx, serverless.Options{
		Config:     serverless.Config{APIToken: s.token},
		Graphs:     reg,
		Logger:     s.logger,
		Middleware: s.wrap,
		Streaming:  name == serverless.FunctionStream,
		// Each function wires only what it uses (its cold start).
		Function: name,
		LongTerm: s.longTerm,
	})
	if err != nil {
		return nil, err
	}
	if app.API != nil { // the tick, node and sweep functions serve no HTTP
		if err := Mount(app.API, s.routes); err != nil {
			return nil, err
		}
	}
	return app, nil
}

// lambdaFunction is the function the process must serve: WithFunction's
// or FunctionEnv's, which must agree when both are set.
func (s *settings) lambdaFunction(getenv func(string) string) (string, error) {
	fixed := s.function
	named := strings.TrimSpace(getenv(FunctionEnv))
	name := named
	switch {
	case fixed != "" && named != "" && fixed != named:
		return "", fmt.Errorf("this binary serves the %s function, but %s=%s: deploy the %s binary for %s, or set %s=%s",
			fixed, FunctionEnv, named, named, named, FunctionEnv, fixed)
	case fixed != "":
		name = fixed
	case name == "":
		return "", fmt.Errorf("started by Lambda (%s is set) but no function is named: set %s to one of %s in the function's environment (the SAM template of 'superstep init' does)",
			RuntimeEnv, FunctionEnv, strings.Join(Functions(), ", "))
	}
	if !slices.Contains(Functions(), name) {
		return "", fmt.Errorf("unknown function %q in %s: want one of %s", name, FunctionEnv, strings.Join(Functions(), ", "))
	}
	return name, nil
}

// wrap applies the middlewares to h, the first given outermost.
func (s *settings) wrap(h http.Handler) http.Handler {
	for i := len(s.middleware) - 1; i >= 0; i-- {
		h = s.middleware[i](h)
	}
	return h
}

// Mount adds routes to mux, reporting a pattern the mux refuses
// (http.ServeMux panics on a conflict) as an error.
func Mount(mux interface{ Handle(string, http.Handler) }, routes []Route) (err error) {
	for _, r := range routes {
		func() {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("WithRoute(%q): %v", r.Pattern, p)
				}
			}()
			mux.Handle(r.Pattern, r.Handler)
		}()
		if err != nil {
			return err
		}
	}
	return nil
}

// flushing exports the spans of each invocation before it returns: the
// Lambda runtime freezes the process between invocations, so spans left
// in the batcher could wait until the next one, or be lost.
type flushing struct {
	next lambda.Handler
	app  *serverless.App
}

// Invoke runs the function's handler, then flushes the tracer.
func (f flushing) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	out, err := f.next.Invoke(ctx, payload)
	if ferr := f.app.Tracer.Flush(ctx); ferr != nil {
		f.app.Logger.WarnContext(ctx, "export the invocation's spans", "err", ferr)
	}
	return out, err
}

// shutdownTracer exports what is left when Lambda stops the process.
func shutdownTracer(app *serverless.App) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = app.Tracer.Shutdown(ctx)
}
