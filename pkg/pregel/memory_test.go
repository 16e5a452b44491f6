package pregel_test

import (
	"testing"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/pregel/checkpointtest"
)

func TestMemoryStoreConformance(t *testing.T) {
	checkpointtest.Run(t, func(*testing.T) pregel.Checkpointer { return pregel.NewMemoryStore() })
}
