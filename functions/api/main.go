// Command api is the api Lambda function: it serves the HTTP API (API
// Gateway HTTP API, payload format 2.0) and starts runs from EventBridge
// superstep.StartRun events and start-queue messages.
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
	superstep.Main(superstep.WithGraphs(graphs.Graphs(os.Getenv)...), superstep.WithFunction("api"))
}
