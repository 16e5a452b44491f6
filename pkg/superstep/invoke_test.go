//go:build !superstep.lambda

package superstep

import (
	"strings"
	"testing"

	"github.com/superstep/superstep/internal/graphs"
	"github.com/superstep/superstep/internal/mototest"
	"github.com/superstep/superstep/internal/serverlesstest"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/serverless"
)

// TestInvoke: `invoke FUNCTION --event FILE` runs the function's handler
// here, configured from the environment as in Lambda, on the sample events.
func TestInvoke(t *testing.T) {
	opts := WithGraphs(graphs.Graphs(nil)...)
	t.Setenv(serverless.EnvTable, "")
	r := runWith(t, nil, []string{"invoke", "api", "--event", "../../events/api-create-run.json"}, opts).want(t, ExitUsage)
	if !strings.Contains(r.stderr, "set TABLE_NAME, TICK_QUEUE_URL, NODE_QUEUE_URL") {
		t.Errorf("without configuration: %s", r.stderr)
	}
	r = runWith(t, nil, []string{"invoke", "ticks", "--event", "x.json"}, opts).want(t, ExitUsage)
	if !strings.Contains(r.stderr, `unknown function "ticks"`) {
		t.Errorf("unknown function: %s", r.stderr)
	}

	srv := mototest.Start(t)
	cfg, env := serverlesstest.Provision(t, srv, "invoke")
	serverlesstest.Setenv(t, env)
	r = runWith(t, nil, []string{"invoke", "api", "--event", "../../events/api-create-run.json"}, opts).want(t, ExitOK)
	if !strings.Contains(r.stdout, `"statusCode":202`) || !strings.Contains(r.stdout, "sample-counter") {
		t.Errorf("invoke api: %s", r.stdout)
	}
	r = runWith(t, nil, []string{"invoke", "tick", "--event", "../../events/sqs-tick.json"}, opts).want(t, ExitOK)
	if !strings.Contains(r.stdout, `"batchItemFailures"`) || strings.Contains(r.stdout, "itemIdentifier") {
		t.Errorf("invoke tick: %s", r.stdout)
	}
	app, err := serverless.New(serverless.Options{Config: cfg, AWS: srv.Config, Graphs: mustReg(t)})
	if err != nil {
		t.Fatal(err)
	}
	run, err := app.Service.Get(t.Context(), "sample-counter")
	if err != nil || run.Step < 1 {
		t.Errorf("run after the api and tick invocations: %+v, %v; want it created and at step 1 or later", run, err)
	}
}

func mustReg(t *testing.T) *runs.Registry {
	t.Helper()
	s, err := newSettings([]Option{WithGraphs(graphs.Graphs(nil)...)})
	if err != nil {
		t.Fatal(err)
	}
	return s.reg
}
