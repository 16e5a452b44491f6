package runstest

import (
	"cmp"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// TestCheckDumpedFaults checks again, thread by thread, the histories
// with faults written under SUPERSTEP_LINEARIZABLE_DUMP (faults-*.json; a
// tool for studying the checker, skipped without it): each thread's
// verdict and check time, an Illegal one drawn as HTML beside the dump.
// SUPERSTEP_FAULTS_THREAD_TIMEOUT (seconds, default 60) bounds each.
func TestCheckDumpedFaults(t *testing.T) {
	dir := os.Getenv("SUPERSTEP_LINEARIZABLE_DUMP")
	if dir == "" {
		t.Skip("set SUPERSTEP_LINEARIZABLE_DUMP to a directory of dumped histories")
	}
	limit := time.Minute
	if s, err := strconv.Atoi(os.Getenv("SUPERSTEP_FAULTS_THREAD_TIMEOUT")); err == nil && s > 0 {
		limit = time.Duration(s) * time.Second
	}
	files, _ := filepath.Glob(filepath.Join(dir, "faults-*.json"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d dumped
		if err := json.Unmarshal(data, &d); err != nil {
			t.Fatal(err)
		}
		by := map[string][]porcupine.Operation{}
		var order []string
		for _, op := range d.Ops {
			if _, ok := by[op.In.Thread]; !ok {
				order = append(order, op.In.Thread)
			}
			by[op.In.Thread] = append(by[op.In.Thread], porcupine.Operation{ClientId: op.Client, Call: op.Call, Return: op.Return, Input: op.In, Output: op.Out})
		}
		for _, th := range order {
			ops := by[th]
			unknown := 0
			for _, op := range ops {
				if op.Output.(linOutput).Err == errUnknown {
					unknown++
				}
			}
			model := faultModel(newLinModel(ops, d.Facts))
			start := time.Now()
			res, info := porcupine.CheckOperationsVerbose(model, ops, limit)
			t.Logf("%s %s: %d operations (%d unknown): %s in %v", filepath.Base(f), th, len(ops), unknown, res, time.Since(start).Round(time.Millisecond))
			if res == porcupine.Illegal {
				explainIllegal(t, model, ops, info)
				html := filepath.Join(dir, filepath.Base(f)+"-"+th+".html")
				if err := porcupine.VisualizePath(model, info, html); err == nil {
					t.Logf("drawn in %s", html)
				}
			}
		}
	}
}

// explainIllegal logs the longest partial linearization's end: the last
// operations it took, the states they led to, and the first operations
// (by call) it could not take.
func explainIllegal(t *testing.T, model porcupine.Model, ops []porcupine.Operation, info porcupine.LinearizationInfo) {
	var best []int
	for _, part := range info.PartialLinearizations() {
		for _, lin := range part {
			if len(lin) > len(best) {
				best = lin
			}
		}
	}
	state := model.Init()
	t0 := ops[0].Call
	for _, op := range ops {
		t0 = min(t0, op.Call)
	}
	ms := func(v int64) float64 { return float64(v-t0) / 1e6 }
	taken := map[int]bool{}
	for i, k := range best {
		op := ops[k]
		_, state = model.Step(state, op.Input, op.Output)
		taken[k] = true
		if i >= len(best)-8 {
			t.Logf("  %d [%.1f, %.1f] %s\n      → %s", i, ms(op.Call), ms(op.Return), model.DescribeOperation(op.Input, op.Output), model.DescribeState(state))
		}
	}
	idx := make([]int, len(ops))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(ops[a].Call, ops[b].Call) })
	n := 0
	for _, k := range idx {
		if op := ops[k]; !taken[k] && n < 6 {
			n++
			t.Logf("  not taken: [%.1f, %.1f] c%d %s", ms(op.Call), ms(op.Return), op.ClientId, model.DescribeOperation(op.Input, op.Output))
		}
	}
}
