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

// TestThreadsLinearizableDynalite is TestThreadsLinearizable on dynalite.
// Its long version (SUPERSTEP_LINEARIZABLE_OPS, pkg/runs/README.md) is the
// store's 10,000-operation check: moto serves a few items a second under
// load, and reads a whole partition on every Query.
func TestThreadsLinearizableDynalite(t *testing.T) {
	if os.Getenv("SUPERSTEP_LINEARIZABLE_OPS") == "" {
		t.Skip("the long check only (SUPERSTEP_LINEARIZABLE_OPS=N): the short one runs on moto, TestThreadsLinearizable")
	}
	t.Parallel()
	threads, clients, ops := runstest.LinearizableSize()
	runstest.Linearizable(t, threads, clients, ops, func(t *testing.T) runstest.ThreadEnv {
		s := newEnvOn(t, dyn.Start(t).Config).store()
		return runstest.ThreadEnv{Runs: s, Threads: s, Checkpoints: s}
	})
}
