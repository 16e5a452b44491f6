// Command sweep is the sweep Lambda function: fed by the table's stream,
// it deletes what is left of a finished run (steps, task results, claims,
// blobs) once DynamoDB's TTL has deleted the run's record.
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
	superstep.Main(superstep.WithGraphs(graphs.Graphs(os.Getenv)...), superstep.WithFunction("sweep"))
}
