package runs_test

import (
	"testing"

	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/runs/runstest"
)

func TestMemoryStoreConformance(t *testing.T) {
	runstest.Run(t, func(*testing.T) runs.Store { return runs.NewMemoryStore() })
}

func TestMemoryStoreSharedConformance(t *testing.T) {
	// The suite's names are unique per sub-test, so one store serves all.
	s := runs.NewMemoryStore()
	runstest.Run(t, func(*testing.T) runs.Store { return s })
}
