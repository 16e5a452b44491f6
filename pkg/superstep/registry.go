package cli

import (
	"fmt"
	"strings"

	"github.com/superstep/superstep/internal/graphs"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// Test-only graph registration; see package graphs.
const (
	ExecLogEnv   = graphs.ExecLogEnv
	ExecLogGraph = graphs.ExecLogGraph
)

// registry returns the graphs the command knows (graphs.Registry).
func (e Env) registry() (*runs.Registry, error) {
	r, err := graphs.Registry(e.Getenv)
	if err != nil {
		return nil, failed(err)
	}
	return r, nil
}

// lookupGraph finds a registered graph or returns a usage error listing
// the graphs.
func lookupGraph(reg *runs.Registry, name string) (*pregel.Graph, error) {
	if g, ok := reg.Get(name); ok {
		return g, nil
	}
	var names []string
	for _, g := range reg.List() {
		names = append(names, g.Name())
	}
	return nil, badInput(fmt.Errorf("graph %q is not registered; graphs are %s (see 'superstep graph list')", name, strings.Join(names, ", ")))
}
