package serverless_test

import (
	"strings"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/serverless"
)

// EVENT_RETENTION and EVENT_MAX_AGE set how many and how long a run's
// events are kept; unset, the documented defaults; bad values are named
// with what to fix.
func TestConfigEventRetention(t *testing.T) {
	base := map[string]string{
		serverless.EnvTable:     "t",
		serverless.EnvTickQueue: "https://sqs/q/ticks.fifo",
		serverless.EnvNodeQueue: "https://sqs/q/nodes",
	}
	for _, tc := range []struct {
		name, count, age string
		wantCount        int
		wantAge          time.Duration
		err              string
	}{
		{name: "unset: the defaults", wantAge: runs.DefaultEventMaxAge},
		{name: "both", count: "500", age: "2h", wantCount: 500, wantAge: 2 * time.Hour},
		{name: "age 0: no limit by age", age: "0", wantAge: 0},
		{name: "zero events", count: "0", err: serverless.EnvEventRetention},
		{name: "negative events", count: "-5", err: serverless.EnvEventRetention},
		{name: "negative age", age: "-1h", err: serverless.EnvEventMaxAge},
		{name: "unparsable age", age: "a day", err: serverless.EnvEventMaxAge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{serverless.EnvEventRetention: tc.count, serverless.EnvEventMaxAge: tc.age}
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
			if cfg.EventRetention != tc.wantCount || cfg.EventMaxAge != tc.wantAge {
				t.Errorf("retention = %d events, %s; want %d, %s", cfg.EventRetention, cfg.EventMaxAge, tc.wantCount, tc.wantAge)
			}
		})
	}
}
