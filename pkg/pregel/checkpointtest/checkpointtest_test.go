package checkpointtest_test

import (
	"testing"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/pregel/checkpointtest"
)

// TestMemoryConformance runs the suite against the reference store, so the
// suite is exercised even when no other store's tests run.
func TestMemoryConformance(t *testing.T) {
	checkpointtest.Run(t, func(*testing.T) pregel.Checkpointer { return pregel.NewMemoryStore() })
}

// TestSharedStore runs the suite against one store shared by every
// sub-test, which the suite's unique run ids allow.
func TestSharedStoreConformance(t *testing.T) {
	s := pregel.NewMemoryStore()
	checkpointtest.Run(t, func(*testing.T) pregel.Checkpointer { return s })
}
