package dynamo_test

import (
	"fmt"
	"testing"

	"github.com/superstep/superstep/pkg/runs/runstest"
)

// BenchmarkCreateOnThread compares creating a run on a thread of one
// earlier run with creating it on a thread of 2 and of 1,000, against
// moto: requests, read and write units (estimated as DynamoDB charges
// them) and request bytes per create. The time is moto's, not DynamoDB's.
func BenchmarkCreateOnThread(b *testing.B) {
	for _, earlier := range []int{1, 2, 1000} {
		b.Run(fmt.Sprintf("earlier=%d", earlier), func(b *testing.B) {
			e := newEnv(b)
			s := e.store()
			var reqs, bytes int64
			var rru, wru float64
			around := func() func() {
				m, c := e.meter.Snapshot(), e.capacity.snapshot()
				return func() {
					d := e.meter.Snapshot().Sub(m).Total()
					u := e.capacity.snapshot().sub(c).total()
					reqs, bytes = reqs+d.Requests, bytes+d.RequestBytes
					rru, wru = rru+u.RRU, wru+u.WRU
				}
			}
			runstest.BenchmarkCreateOnThread(b, runstest.ThreadEnv{Runs: s, Threads: s, Checkpoints: s}, earlier, around)
			n := float64(b.N)
			b.ReportMetric(float64(reqs)/n, "requests/op")
			b.ReportMetric(rru/n, "RRU/op")
			b.ReportMetric(wru/n, "WRU/op")
			b.ReportMetric(float64(bytes)/n, "req-B/op")
		})
	}
}
