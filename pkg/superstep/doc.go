// Package superstep is the entry point of a program that serves your
// graphs: one main function gives your binary the whole superstep command
// (run, resume, dev, dev --aws, runs, threads, graph) on your graphs, and when AWS
// Lambda starts the binary it serves the Lambda function the deployment
// names (api, tick, node, sweep or stream):
//
//	func main() {
//		superstep.Main(superstep.WithGraphs(orders.Graph, support.Graph))
//	}
//
// `superstep init DIR` scaffolds such a project with a SAM template.
//
// The Lambda functions are served by pkg/lambdafn, which [Main] calls.
// Built with the superstep.lambda build tag (the Lambda builds of a
// scaffolded project's Makefile pass it), the package is [Main] and the
// options only, and Main serves the Lambda function alone: the binary
// links no CLI, no SQLite and no inspector, and starts faster (Lambda's
// Init duration). Without the tag, the binary is the whole command.
//
// Every command is built by a function from an [Env], so tests run the
// command in-process with [Run] and their own standard streams,
// environment and signals; nothing is kept in package-level variables.
package superstep
