package superstep

import (
	"context"
	"io"

	"github.com/superstep/superstep/pkg/lambdafn"
)

const (
	// LambdaRuntimeEnv is set by AWS Lambda (and by the Lambda runtime
	// interface emulator) in the environment of a function's process:
	// when it is set, [Run] serves a Lambda function instead of the CLI.
	LambdaRuntimeEnv = lambdafn.RuntimeEnv
	// FunctionEnv names the Lambda function a process serves: api, tick,
	// node, sweep or stream. The SAM template sets it on each function;
	// one binary serves them all.
	FunctionEnv = lambdafn.FunctionEnv
)

// serveLambda serves the Lambda function the deployment names (getenv)
// with pkg/lambdafn; it returns only if the function cannot start.
func (s *settings) serveLambda(ctx context.Context, getenv func(string) string, stderr io.Writer) int {
	opts := []lambdafn.Option{
		lambdafn.WithRegistry(s.reg),
		lambdafn.WithFunction(s.function),
		lambdafn.WithToken(s.token),
		lambdafn.WithLogger(s.logger),
		lambdafn.WithLongTerm(s.longTerm...),
		lambdafn.WithStart(s.lambdaStart),
	}
	for _, mw := range s.middleware {
		opts = append(opts, lambdafn.WithMiddleware(mw))
	}
	for _, r := range s.routes {
		opts = append(opts, lambdafn.WithRoute(r.Pattern, r.Handler))
	}
	return lambdafn.Serve(ctx, getenv, stderr, opts...)
}
