// Command sweep is the sweep Lambda function: fed by the table's stream,
// it deletes what is left of a finished run (steps, task results, claims,
// blobs) once DynamoDB's TTL has deleted the run's record.
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
	lambdafn.Main(lambdafn.WithGraphs(graphs.Graphs(os.Getenv)...), lambdafn.WithFunction("sweep"))
}
