package infra

import (
	"fmt"
	"strings"
	"testing"
)

// TestStreamConcurrencyParameter: the stream function, whose requests
// hold an instance for up to 900 s, has a reserved-concurrency parameter
// (its most streams open at once), empty by default.
func TestStreamConcurrencyParameter(t *testing.T) {
	tp := loadTemplate(t)
	p := asMap(asMap(tp["Parameters"])["StreamReservedConcurrency"])
	if p == nil || p["Default"] != "" || p["AllowedPattern"] != "^([1-9][0-9]*)?$" {
		t.Errorf("parameter StreamReservedConcurrency: %v, want a whole number or empty, empty by default", p)
	}
	fn := tp.resource(t, "StreamFunction", "AWS::Serverless::Function")
	rce := asList(asMap(fn.Properties["ReservedConcurrentExecutions"])["Fn::If"])
	if len(rce) != 3 || rce[0] != "HasStreamReservedConcurrency" {
		t.Fatalf("StreamFunction.ReservedConcurrentExecutions = %v, want !If [HasStreamReservedConcurrency, ...]", fn.Properties["ReservedConcurrentExecutions"])
	}
	if id, _, ok := refTarget(rce[1]); !ok || id != "StreamReservedConcurrency" {
		t.Errorf("StreamFunction.ReservedConcurrentExecutions when set = %v, want !Ref StreamReservedConcurrency", rce[1])
	}
	if id, _, ok := refTarget(rce[2]); !ok || id != "AWS::NoValue" {
		t.Errorf("StreamFunction.ReservedConcurrentExecutions when empty = %v, want no value", rce[2])
	}
	cond := fmt.Sprint(asMap(tp["Conditions"])["HasStreamReservedConcurrency"])
	if !strings.Contains(cond, "StreamReservedConcurrency") || !strings.Contains(cond, "Fn::Not") {
		t.Errorf("condition HasStreamReservedConcurrency = %s, want the parameter not empty", cond)
	}
}

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
