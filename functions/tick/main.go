// Command tick is the tick Lambda function: it executes or commits one
// superstep per tick message.
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
	lambdafn.Main(lambdafn.WithGraphs(graphs.Graphs(os.Getenv)...), lambdafn.WithFunction("tick"))
}
