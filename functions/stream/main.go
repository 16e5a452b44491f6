// Command stream is the stream Lambda function: behind a function URL in
// RESPONSE_STREAM mode, it serves the HTTP API with streamed responses
// (GET /v1/runs/{id}/stream, A2A message/stream) through aws-lambda-go's
// lambdaurl.
// It is the program pkg/superstep makes of the example graphs, built for
// this function alone (superstep.WithFunction). Configuration is read from
// the environment; see pkg/serverless/README.md.
package main

import (
	"os"

	"github.com/superstep/superstep/internal/graphs"
	"github.com/superstep/superstep/pkg/superstep"
)

func main() {
	superstep.Main(superstep.WithGraphs(graphs.Graphs(os.Getenv)...), superstep.WithFunction("stream"))
}
