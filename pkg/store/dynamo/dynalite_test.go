package dynamo_test

import (
	"testing"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/pregel/checkpointtest"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/runs/runstest"
)

// The conformance suites again on dynalite (internal/dynalitetest), a
// second emulator that validates requests as strictly as DynamoDB and
// reads key ranges as DynamoDB does, where moto reads whole partitions:
// a request moto accepts and DynamoDB refuses fails here.

func TestCheckpointerConformanceDynalite(t *testing.T) {
	t.Parallel()
	checkpointtest.Run(t, func(t *testing.T) pregel.Checkpointer { return newEnvOn(t, dyn.Start(t).Config).store() })
}

func TestRunStoreConformanceDynalite(t *testing.T) {
	t.Parallel()
	runstest.Run(t, func(t *testing.T) runs.Store { return newEnvOn(t, dyn.Start(t).Config).store() })
}
