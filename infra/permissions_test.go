package infra

import (
	"strings"
	"testing"
)

// TestConcurrencyParameters: tick and node have a reserved-concurrency
// parameter (empty by default: reserving takes from the account's pool)
// and their queues' event source mappings a maximum concurrency with a
// default, so that a burst of runs leaves the api function room.
func TestConcurrencyParameters(t *testing.T) {
	tp := loadTemplate(t)
	params := asMap(tp["Parameters"])
	for _, tc := range []struct {
		fn, event, reserved, maximum string
		wantMax                      int
	}{
		{"TickFunction", "Ticks", "TickReservedConcurrency", "TickMaximumConcurrency", 20},
		{"NodeFunction", "Tasks", "NodeReservedConcurrency", "NodeMaximumConcurrency", 50},
	} {
		fn := tp.resource(t, tc.fn, "AWS::Serverless::Function")
		rp := asMap(params[tc.reserved])
		if rp == nil || rp["Default"] != "" {
			t.Errorf("parameter %s: %v, want one defaulting to empty (no reservation)", tc.reserved, rp)
		}
		rce := fn.Properties["ReservedConcurrentExecutions"]
		if s := strings.Join(strs(rce), " "); !strings.Contains(s, tc.reserved) {
			t.Errorf("%s.ReservedConcurrentExecutions = %v, want it from %s", tc.fn, rce, tc.reserved)
		}
		mp := asMap(params[tc.maximum])
		if d, ok := asInt(mp["Default"]); !ok || d != tc.wantMax {
			t.Errorf("parameter %s default %v, want %d", tc.maximum, mp["Default"], tc.wantMax)
		}
		if lo, _ := asInt(mp["MinValue"]); lo != 2 {
			t.Errorf("parameter %s MinValue %v, want 2 (Lambda's lowest maximum concurrency)", tc.maximum, mp["MinValue"])
		}
		ev := asMap(asMap(asMap(fn.Properties["Events"])[tc.event])["Properties"])
		mc := asMap(ev["ScalingConfig"])["MaximumConcurrency"]
		if id, _, ok := refTarget(mc); !ok || id != tc.maximum {
			t.Errorf("%s event %s ScalingConfig.MaximumConcurrency = %v, want !Ref %s", tc.fn, tc.event, mc, tc.maximum)
		}
	}
}
