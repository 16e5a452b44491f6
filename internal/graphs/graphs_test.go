package graphs

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/superstep/superstep/pkg/pregel"
)

func TestRegistry(t *testing.T) {
	reg, err := Registry(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"counter", "support-triage"} {
		if _, ok := reg.Get(name); !ok {
			t.Errorf("%s is not registered", name)
		}
	}
	if _, ok := reg.Get(ExecLogGraph); ok {
		t.Errorf("%s is registered without %s", ExecLogGraph, ExecLogEnv)
	}
}

func TestExecLogGraph(t *testing.T) {
	log := filepath.Join(t.TempDir(), "exec.log")
	reg, err := Registry(func(k string) string {
		if k == ExecLogEnv {
			return log
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	g, ok := reg.Get(ExecLogGraph)
	if !ok {
		t.Fatalf("%s is not registered", ExecLogGraph)
	}
	res, err := g.Run(context.Background(), map[string]int{"rounds": 2, "fast_ms": 1, "slow_ms": 2})
	if err != nil || res.Status != pregel.RunCompleted || res.Step != 5 {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 7 { // tick, fast, slow, tick, fast, slow, tick
		t.Fatalf("log has %d lines:\n%s", len(lines), b)
	}
	if f := strings.Fields(lines[0]); len(f) != 3 || f[1] != "tick" || f[2] != "1" {
		t.Errorf("first line %q, want TASK_ID tick 1", lines[0])
	}
	if _, err := g.Start(context.Background(), "r", []byte(`{"rounds": 0}`)); err == nil {
		t.Errorf("rounds 0 accepted")
	}
}
