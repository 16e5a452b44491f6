package dynamo_test

import (
	"os"
	"strings"
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

// envDynaliteAll runs the checkpointer suite's Segments checks on
// dynalite too. They take about 35 s under -race there, more than make
// test affords a second emulator; TestCheckpointerConformance runs them
// on moto.
const envDynaliteAll = "SUPERSTEP_DYNALITE_ALL"

func TestCheckpointerConformanceDynalite(t *testing.T) {
	t.Parallel()
	checkpointtest.Run(t, func(t *testing.T) pregel.Checkpointer {
		if strings.HasSuffix(t.Name(), "/Segments") && os.Getenv(envDynaliteAll) == "" {
			t.Skipf("SKIPPING on dynalite to keep make test short: TestCheckpointerConformance runs it on moto; %s=1 runs it here", envDynaliteAll)
		}
		return newEnvOn(t, dyn.Start(t).Config).store()
	})
}

func TestRunStoreConformanceDynalite(t *testing.T) {
	t.Parallel()
	runstest.Run(t, func(t *testing.T) runs.Store { return newEnvOn(t, dyn.Start(t).Config).store() })
}
