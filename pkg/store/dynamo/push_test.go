package dynamo_test

import (
	"testing"

	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/runs/runstest"
	"github.com/superstep/superstep/pkg/store/dynamo"
)

// TestPushStoreConformance: push configs in the run's partition, deleted
// by PurgeRun with the rest of the run.
func TestPushStoreConformance(t *testing.T) {
	t.Parallel()
	runstest.PushStores(t, func(t *testing.T) runs.PushStore { return newEnv(t).store() },
		func(t *testing.T, s runs.PushStore, runID string) {
			if _, err := s.(*dynamo.Store).PurgeRun(t.Context(), runID); err != nil {
				t.Fatal(err)
			}
		})
}
