package serverless_test

import (
	"strings"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/serverless"
	"github.com/superstep/superstep/pkg/tick"
)

// TICK_CHAIN_STEPS and TICK_CHAIN_BUDGET choose the tick chain; unset,
// a tick message is one superstep; bad values are named.
func TestConfigTickChain(t *testing.T) {
	base := map[string]string{
		serverless.EnvTable:     "t",
		serverless.EnvTickQueue: "https://sqs/q/ticks.fifo",
		serverless.EnvNodeQueue: "https://sqs/q/nodes",
	}
	for _, tc := range []struct {
		name, steps, budget string
		want                tick.Chain
		err                 string
	}{
		{name: "unset: one superstep per message"},
		{name: "steps", steps: "25", want: tick.Chain{Steps: 25}},
		{name: "steps and budget", steps: "100", budget: "20s", want: tick.Chain{Steps: 100, Budget: 20 * time.Second}},
		{name: "zero steps", steps: "0", err: serverless.EnvTickChainSteps},
		{name: "not a number", steps: "many", err: serverless.EnvTickChainSteps},
		{name: "bad budget", steps: "5", budget: "soon", err: serverless.EnvTickChainBudget},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{serverless.EnvTickChainSteps: tc.steps, serverless.EnvTickChainBudget: tc.budget}
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
			if cfg.Chain != tc.want {
				t.Errorf("chain = %+v, want %+v", cfg.Chain, tc.want)
			}
		})
	}
}
