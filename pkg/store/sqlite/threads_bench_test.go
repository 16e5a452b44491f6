package sqlite_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/superstep/superstep/pkg/runs/runstest"
)

// BenchmarkCreateOnThread compares creating a run on a thread of one
// earlier run with creating it on a thread of 2 (its state partly
// inherited) and of 1,000.
func BenchmarkCreateOnThread(b *testing.B) {
	for _, earlier := range []int{1, 2, 1000} {
		b.Run(fmt.Sprintf("earlier=%d", earlier), func(b *testing.B) {
			s := open(b, filepath.Join(b.TempDir(), "superstep.db"))
			runstest.BenchmarkCreateOnThread(b, runstest.ThreadEnv{Runs: s, Threads: s, Checkpoints: s}, earlier, nil)
		})
	}
}
