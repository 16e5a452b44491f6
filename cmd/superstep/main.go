// Command superstep runs, serves and inspects superstep graphs.
//
//	superstep run GRAPH --input JSON|@file   run a graph here, on a SQLite file
//	superstep resume RUN_ID [--answer V]     continue a run of that file
//	superstep dev                            serve the HTTP API on this machine
//	superstep runs list|show|create|drain|cancel|resume
//	                                         talk to a running dev server
//	superstep graph list|show                the registered graphs, as Mermaid
//
// Exit codes: 0 completed, 1 failed (or an error), 2 usage or bad input,
// 3 interrupted, 4 drained, 5 cancelled. The commands live in
// internal/cli; the graphs every binary serves are listed in
// internal/graphs.
package main

import (
	"context"
	"os"

	"github.com/superstep/superstep/pkg/superstep"
)

func main() {
	os.Exit(cli.Main(context.Background(), cli.OSEnv(), os.Args[1:]))
}
