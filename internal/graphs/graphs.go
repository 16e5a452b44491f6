// Package graphs is the one place that says which graphs the repository's
// own binaries serve: cmd/superstep and functions/* pass [Graphs] to
// superstep.WithGraphs.
package graphs

import (
	"fmt"

	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// ExecLogEnv names the environment variable that registers the test-only
// graph [ExecLogGraph]: when it holds a file name, that graph is served
// too and appends every task execution to the file. End-to-end tests use
// it to check that a recovered run does not execute again a task whose
// result was recorded. Leave it unset in real use.
const ExecLogEnv = "SUPERSTEP_TEST_EXEC_LOG"

// lookup reads a test graph's variable: set and not empty.
func lookup(getenv func(string) string, name string) (string, bool) {
	v := getenv(name)
	return v, v != ""
}

// Graphs returns the functions that compile the graphs the repository's
// binaries serve: the example graphs (examples.Graphs), plus the test-only
// ExecLogGraph when getenv (nil: none) returns a file name for
// ExecLogEnv, and ThreadChatGraph when it returns a delay for
// ThreadChatEnv.
//
//	superstep.Main(superstep.WithGraphs(graphs.Graphs(os.Getenv)...))
func Graphs(getenv func(string) string) []func() (*pregel.Graph, error) {
	out := examples.Graphs()
	if getenv != nil {
		if path := getenv(ExecLogEnv); path != "" {
			out = append(out, func() (*pregel.Graph, error) { return execLogGraph(path) })
		}
		if delay, ok := lookup(getenv, ThreadChatEnv); ok {
			out = append(out, func() (*pregel.Graph, error) { return threadChatGraph(delay) })
		}
	}
	return out
}

// Registry returns the graphs every superstep binary serves: the example
// graphs (examples.All), plus the test-only ExecLogGraph when getenv (nil:
// none) returns a file name for ExecLogEnv.
//
//	reg, err := graphs.Registry(os.Getenv)
func Registry(getenv func(string) string) (*runs.Registry, error) {
	all, err := examples.All()
	if err != nil {
		return nil, fmt.Errorf("register graphs: %w", err)
	}
	if getenv != nil {
		if path := getenv(ExecLogEnv); path != "" {
			g, err := execLogGraph(path)
			if err != nil {
				return nil, fmt.Errorf("register test graph: %w", err)
			}
			all = append(all, g)
		}
		if delay, ok := lookup(getenv, ThreadChatEnv); ok {
			g, err := threadChatGraph(delay)
			if err != nil {
				return nil, fmt.Errorf("register test graph: %w", err)
			}
			all = append(all, g)
		}
	}
	r, err := runs.NewRegistry(all...)
	if err != nil {
		return nil, fmt.Errorf("register graphs: %w", err)
	}
	return r, nil
}
