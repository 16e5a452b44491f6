package serverless_test

import (
	"strings"
	"testing"

	"github.com/superstep/superstep/pkg/a2a"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/serverless"
)

// A2A_THREAD_STRATEGY chooses what an A2A message does on a busy thread;
// unset it is parallel (a2a's default); an unknown strategy is named with the ones there
// are, by ConfigFromEnv and by New (which would otherwise build an A2A
// server on it).
func TestConfigThreadStrategy(t *testing.T) {
	base := map[string]string{
		serverless.EnvTable:     "t",
		serverless.EnvTickQueue: "https://sqs/q/ticks.fifo",
		serverless.EnvNodeQueue: "https://sqs/q/nodes",
	}
	for _, tc := range []struct {
		name, value string
		want        runs.Strategy
		err         bool
	}{
		{name: "unset", want: ""},
		{name: "parallel", value: "parallel", want: a2a.StrategyParallel},
		{name: "enqueue", value: "enqueue", want: runs.StrategyEnqueue},
		{name: "rollback", value: " rollback ", want: runs.StrategyRollback},
		{name: "unknown", value: "later", err: true},
		{name: "case matters", value: "Reject", err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{serverless.EnvThreadStrategy: tc.value}
			for k, v := range base {
				env[k] = v
			}
			cfg, err := serverless.ConfigFromEnv(func(k string) string { return env[k] })
			if tc.err {
				want := serverless.EnvThreadStrategy + `="` + strings.TrimSpace(tc.value) + `" is not one of reject, enqueue, interrupt, rollback, parallel`
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("err = %v, want one saying %s", err, want)
				}
				cfg := serverless.Config{Table: "t", TickQueueURL: "https://sqs/q/ticks.fifo", NodeQueueURL: "https://sqs/q/nodes", ThreadStrategy: runs.Strategy(tc.value)}
				reg, _ := runs.NewRegistry()
				if _, err := serverless.New(serverless.Options{Config: cfg, Graphs: reg}); err == nil || !strings.Contains(err.Error(), serverless.EnvThreadStrategy) {
					t.Fatalf("New: err = %v, want one naming %s", err, serverless.EnvThreadStrategy)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.ThreadStrategy != tc.want {
				t.Errorf("strategy = %q, want %q", cfg.ThreadStrategy, tc.want)
			}
		})
	}
}
