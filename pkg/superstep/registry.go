//go:build !superstep.lambda

package superstep

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// registry returns the graphs the program serves (the options of Run).
func (e Env) registry() (*runs.Registry, error) {
	if e.s == nil || e.s.reg == nil {
		return nil, failed(errors.New("no graphs are registered"))
	}
	return e.s.reg, nil
}

// storePath is the default SQLite file of run, resume and graph.
func (e Env) storePath() string {
	if e.s == nil || e.s.storePath == "" {
		return DefaultStore
	}
	return e.s.storePath
}

// defaultToken is the token of WithToken, or "".
func (e Env) defaultToken() string {
	if e.s == nil {
		return ""
	}
	return e.s.token
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

// logger is the logger of WithLogger, or a text logger on stderr at level.
func (e Env) logger(level slog.Level) *slog.Logger {
	if e.s != nil && e.s.logger != nil {
		return e.s.logger
	}
	return slog.New(slog.NewTextHandler(e.Stderr, &slog.HandlerOptions{Level: level}))
}
