package serverless_test

import (
	"strings"
	"testing"

	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/serverless"
)

// NODE_DISPATCH chooses how node tasks start (unset: sqs), NODE_FUNCTION
// what invoke invokes; a bad value is named, and a tick function told to
// invoke without a function to invoke does not start.
func TestConfigNodeDispatch(t *testing.T) {
	base := map[string]string{
		serverless.EnvTable:     "t",
		serverless.EnvTickQueue: "https://sqs/q/ticks.fifo",
		serverless.EnvNodeQueue: "https://sqs/q/nodes",
	}
	for _, tc := range []struct {
		name, dispatch, function string
		want                     serverless.NodeDispatch
		err                      string
	}{
		{name: "unset: sqs"},
		{name: "sqs", dispatch: "sqs", want: serverless.DispatchSQS},
		{name: "invoke", dispatch: "INVOKE", function: "arn:aws:lambda:us-east-1:123456789012:function:node:live", want: serverless.DispatchInvoke},
		{name: "unknown", dispatch: "sns", err: serverless.EnvNodeDispatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{serverless.EnvNodeDispatch: tc.dispatch, serverless.EnvNodeFunction: tc.function}
			for k, v := range base {
				env[k] = v
			}
			cfg, err := serverless.ConfigFromEnv(func(k string) string { return env[k] })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one naming %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.NodeDispatch != tc.want || cfg.NodeFunction != tc.function {
				t.Errorf("dispatch %q function %q, want %q %q", cfg.NodeDispatch, cfg.NodeFunction, tc.want, tc.function)
			}
		})
	}
	reg, err := runs.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	cfg := serverless.Config{Table: "t", TickQueueURL: "https://sqs/q/ticks.fifo", NodeQueueURL: "https://sqs/q/nodes", NodeDispatch: serverless.DispatchInvoke}
	if _, err := serverless.New(serverless.Options{Config: cfg, Graphs: reg, Function: serverless.FunctionTick}); err == nil || !strings.Contains(err.Error(), serverless.EnvNodeFunction) {
		t.Errorf("a tick function with invoke and no node function: %v, want an error naming %s", err, serverless.EnvNodeFunction)
	}
	if _, err := serverless.New(serverless.Options{Config: cfg, Graphs: reg, Function: serverless.FunctionNode}); err != nil {
		t.Errorf("a node function with invoke invokes itself as invoked: %v", err)
	}
}
