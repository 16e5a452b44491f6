package runstest_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/runs/runstest"
)

// TestCheckDumpedHistories checks again the histories written under
// SUPERSTEP_LINEARIZABLE_DUMP (a tool for studying the checker; skipped
// without it).
func TestCheckDumpedHistories(t *testing.T) {
	dir := os.Getenv("SUPERSTEP_LINEARIZABLE_DUMP")
	if dir == "" {
		t.Skip("set SUPERSTEP_LINEARIZABLE_DUMP to a directory of dumped histories")
	}
	files, _ := filepath.Glob(filepath.Join(dir, "history-*.json"))
	for _, f := range files {
		res, took, err := runstest.CheckDumpedHistory(f, 10*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %s in %v", filepath.Base(f), res, took.Round(time.Millisecond))
	}
}
