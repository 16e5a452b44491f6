// Package examples collects the example graphs so that every binary (the
// CLI, the dev server, the Lambdas) can register them by name.
package examples

import (
	"fmt"

	"github.com/superstep/superstep/examples/assistant"
	"github.com/superstep/superstep/examples/loop"
	"github.com/superstep/superstep/examples/triage"
	"github.com/superstep/superstep/pkg/pregel"
)

// builders lists the example graphs, each under its own package.
var builders = []func() (*pregel.Graph, error){
	triage.Graph,    // "support-triage"
	loop.Graph,      // "counter"
	assistant.Graph, // "assistant"
}

// Graphs returns the functions that compile the example graphs, in a
// fixed order, e.g. for superstep.WithGraphs(examples.Graphs()...).
func Graphs() []func() (*pregel.Graph, error) {
	return append([]func() (*pregel.Graph, error)(nil), builders...)
}

// All compiles and returns every example graph, in a fixed order. Graph
// names are unique.
func All() ([]*pregel.Graph, error) {
	out := make([]*pregel.Graph, 0, len(builders))
	seen := make(map[string]bool, len(builders))
	for _, build := range builders {
		g, err := build()
		if err != nil {
			return nil, fmt.Errorf("examples: %w", err)
		}
		if seen[g.Name()] {
			return nil, fmt.Errorf("examples: two graphs are named %q", g.Name())
		}
		seen[g.Name()] = true
		out = append(out, g)
	}
	return out, nil
}
