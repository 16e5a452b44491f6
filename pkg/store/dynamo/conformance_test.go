package dynamo_test

import (
	"testing"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/pregel/checkpointtest"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/runs/runstest"
)

// Each sub-test gets its own table: moto copies a whole table on every
// transaction, so small tables keep the suite fast.

func TestCheckpointerConformance(t *testing.T) {
	t.Parallel()
	checkpointtest.Run(t, func(t *testing.T) pregel.Checkpointer { return newEnv(t).store() })
}

func TestRunStoreConformance(t *testing.T) {
	t.Parallel()
	runstest.Run(t, func(t *testing.T) runs.Store { return newEnv(t).store() })
}

// TestSharedTableRuns runs the run store suite against one Store on one
// table, as a deployment has it, so that unfiltered listings see other
// sub-tests' runs. (The checkpoint suite's RunIsolation and ConcurrentRuns
// already share a table between runs.)
func TestSharedTableRuns(t *testing.T) {
	t.Parallel()
	s := newEnv(t).store()
	runstest.Run(t, func(*testing.T) runs.Store { return s })
}
