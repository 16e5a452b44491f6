package superstep

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"

	"slices"
	"strings"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/superstep/superstep/pkg/serverless"
)

const (
	// LambdaRuntimeEnv is set by AWS Lambda (and by the Lambda runtime
	// interface emulator) in the environment of a function's process:
	// when it is set, [Run] serves a Lambda function instead of the CLI.
	LambdaRuntimeEnv = "AWS_LAMBDA_RUNTIME_API"
	// FunctionEnv names the Lambda function a process serves: api, tick,
	// node, sweep or stream. The SAM template sets it on each function;
	// one binary serves them all.
	FunctionEnv = "SUPERSTEP_FUNCTION"
)

// functionNames are the Lambda functions of a deployment, the values of
// [FunctionEnv]:
//
//   - api: the HTTP API (API Gateway HTTP API, payload 2.0), EventBridge
//     superstep.StartRun events and start-queue messages
//   - tick: the tick queue's messages (one superstep of a run)
//   - node: the node-task queue's messages (remote nodes)
//   - sweep: the table's stream (purges expired runs)
//   - stream: a Lambda function URL in RESPONSE_STREAM mode: the HTTP API
//     with streamed responses (run streams, A2A message/stream)
var functionNames = []string{"api", "tick", "node", "sweep", "stream"}

// handler returns the Lambda handler of function name.
func handler(app *serverless.App, name string) any {
	switch name {
	case "api":
		return app.HandleAPI
	case "tick":
		return app.HandleTick
	case "node":
		return app.HandleNode
	case "sweep":
		return app.HandleStream
	case "stream":
		return app.HandleFunctionURL
	}
	return nil
}

// lambdaFunction is the function the process must serve: WithFunction's
// or FunctionEnv's, which must agree when both are set.
func (e Env) lambdaFunction() (string, error) {
	fixed := e.s.function
	named := strings.TrimSpace(e.getenv(FunctionEnv))
	name := named
	switch {
	case fixed != "" && named != "" && fixed != named:
		return "", fmt.Errorf("this binary serves the %s function, but %s=%s: deploy the %s binary for %s, or set %s=%s",
			fixed, FunctionEnv, named, named, named, FunctionEnv, fixed)
	case fixed != "":
		name = fixed
	case name == "":
		return "", fmt.Errorf("started by Lambda (%s is set) but no function is named: set %s to one of %s in the function's environment (the SAM template of 'superstep init' does)",
			LambdaRuntimeEnv, FunctionEnv, strings.Join(functionNames, ", "))
	}
	if !slices.Contains(functionNames, name) {
		return "", fmt.Errorf("unknown function %q in %s: want one of %s", name, FunctionEnv, strings.Join(functionNames, ", "))
	}
	return name, nil
}

// serveLambda serves the Lambda function the deployment names; it
// returns only if the function cannot start.
func serveLambda(ctx context.Context, env Env) int {
	stderr := errOut(env)
	name, err := env.lambdaFunction()
	if err != nil {
		fmt.Fprintf(stderr, "superstep: cannot start: %v\n", err)
		return ExitUsage
	}
	// No collection while the function wires itself: what it allocates
	// is small and lives on, and a collection now is paid in the cold
	// start (Lambda's Init duration).
	gcPercent := debug.SetGCPercent(-1)
	app, err := serverless.FromEnv(ctx, serverless.Options{
		Config:     serverless.Config{APIToken: env.s.token},
		Graphs:     env.s.reg,
		Logger:     env.s.logger,
		Middleware: env.s.wrap,
		Streaming:  name == "stream",
		// Each function wires only what it uses (its cold start).
		Function: name,
		LongTerm: env.s.longTerm,
	})
	if err == nil && app.API != nil { // the tick, node and sweep functions serve no HTTP
		err = env.s.mount(app.API)
	}
	if err != nil {
		debug.SetGCPercent(gcPercent)
		// The function's log (CloudWatch Logs) says why it cannot start.
		slog.New(slog.NewJSONHandler(stderr, nil)).Error("superstep "+name+": cannot start", "err", err)
		return ExitFailed
	}
	debug.SetGCPercent(gcPercent)
	installLogger(app.Tracer, app.Logger)
	start := env.s.lambdaStart
	if start == nil {
		start = func(h any) { lambda.StartWithOptions(h, lambda.WithContext(ctx)) }
		if app.Tracer != nil {
			start = func(h any) {
				lambda.StartWithOptions(h, lambda.WithContext(ctx), lambda.WithEnableSIGTERM(func() { shutdownTracer(app) }))
			}
		}
	}
	h := handler(app, name)
	if app.Tracer != nil {
		h = flushing{next: lambda.NewHandler(h), app: app}
	}
	start(h)
	return ExitOK
}
