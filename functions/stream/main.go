// Command stream is the stream Lambda function: behind a function URL in
// RESPONSE_STREAM mode, it serves the HTTP API with streamed responses
// (GET /v1/runs/{id}/stream, A2A message/stream) through aws-lambda-go's
// lambdaurl.
// It serves the example graphs (internal/graphs) through pkg/lambdafn,
// which links no CLI: no SQLite, no inspector (its cold start). The
// configuration is read from the environment; see pkg/serverless/README.md.
package main

import (
	"os"

	"github.com/superstep/superstep/internal/graphs"
	"github.com/superstep/superstep/pkg/lambdafn"
)

func main() {
	lambdafn.Main(lambdafn.WithGraphs(graphs.Graphs(os.Getenv)...), lambdafn.WithFunction("stream"))
}
