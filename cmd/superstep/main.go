// Command superstep runs, serves and inspects the example graphs, and
// scaffolds projects that serve their own:
//
//	superstep init DIR [--module PATH]       scaffold a project of your own
//	superstep run GRAPH --input JSON|@file   run a graph here, on a SQLite file
//	superstep resume RUN_ID [--answer V]     continue a run of that file
//	superstep dev [--aws]                    serve the HTTP API on this machine
//	superstep runs list|show|create|drain|cancel|resume
//	                                         talk to a running dev server
//	superstep graph list|show                the registered graphs, as Mermaid
//	superstep invoke FUNCTION --event FILE   one Lambda handler, here, on one event
//
// Exit codes: 0 completed, 1 failed (or an error), 2 usage or bad input,
// 3 interrupted, 4 drained, 5 cancelled. It is a program like the one
// `superstep init` scaffolds: pkg/superstep is the whole command, given
// the graphs listed in internal/graphs. Started by AWS Lambda, it serves
// the function SUPERSTEP_FUNCTION names.
package main

import (
	"os"

	"github.com/superstep/superstep/internal/graphs"
	"github.com/superstep/superstep/pkg/superstep"
)

func main() {
	superstep.Main(superstep.WithGraphs(graphs.Graphs(os.Getenv)...), superstep.WithInitCommand())
}
