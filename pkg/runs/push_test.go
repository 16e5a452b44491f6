package runs_test

import (
	"testing"

	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/runs/runstest"
)

func TestMemoryPushStoreConformance(t *testing.T) {
	runstest.PushStores(t, func(*testing.T) runs.PushStore { return runs.NewMemoryPushStore() }, nil)
}
