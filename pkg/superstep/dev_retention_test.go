//go:build !superstep.lambda

package superstep

import (
	"strings"
	"testing"
)

// dev refuses event retention settings out of range, or unparsable,
// before it serves, saying what to fix.
func TestDevEventRetentionRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--event-retention", "0"}, "--event-retention 0: want a number of events per run, 1 or more"},
		{[]string{"--event-retention", "-3"}, "--event-retention -3: want a number of events per run, 1 or more"},
		{[]string{"--event-max-age", "-1h"}, "--event-max-age -1h0m0s is negative: want a duration such as 24h0m0s, or 0"},
		{[]string{"--event-max-age", "a week"}, `invalid argument "a week" for "--event-max-age"`},
		{[]string{"--event-retention", "many"}, `invalid argument "many" for "--event-retention"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			h := newHarness(t)
			r := h.run(append([]string{"dev", "--addr", "127.0.0.1:0", "--dir", t.TempDir()}, tc.args...)...).want(t, ExitUsage)
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("dev %s:\n%s\nwant it to say %q", strings.Join(tc.args, " "), r.stderr, tc.want)
			}
		})
	}
}
