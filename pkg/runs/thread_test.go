package runs_test

import (
	"testing"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/runs/runstest"
)

func TestMemoryThreadStoreConformance(t *testing.T) {
	runstest.ThreadStores(t, func(*testing.T) runs.ThreadStore { return runs.NewMemoryStore() })
}

func TestMemoryThreadStrategies(t *testing.T) {
	runstest.Strategies(t, 50, func(*testing.T) runstest.ThreadEnv {
		m := runs.NewMemoryStore()
		return runstest.ThreadEnv{Runs: m, Threads: m, Checkpoints: pregel.NewMemoryStore()}
	})
}
