package sqlite_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/embedded"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/store/sqlite"
)

// schedEnv is a Service and a started Scheduler on one SQLite Store.
type schedEnv struct {
	store *sqlite.Store
	sched *embedded.Scheduler
	svc   *runs.Service
}

func newSchedEnv(b *testing.B, g *pregel.Graph) *schedEnv {
	b.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "superstep.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	reg, err := runs.NewRegistry(g)
	if err != nil {
		b.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	sched := embedded.NewScheduler(embedded.SchedulerConfig{Graphs: reg, Runs: s, Checkpoints: s, Logger: log})
	if err := sched.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sched.Shutdown(context.Background(), time.Second) })
	return &schedEnv{store: s, sched: sched, svc: &runs.Service{Graphs: reg, Runs: s, Checkpoints: s, Dispatcher: sched, Logger: log}}
}

// run creates a run and waits for the Scheduler to finish it.
func (e *schedEnv) run(b *testing.B, id string) {
	ctx := context.Background()
	if _, _, err := e.svc.Create(ctx, "bench-loop", runs.CreateRequest{RunID: id}); err != nil {
		b.Fatal(err)
	}
	if err := e.sched.WaitIdle(ctx); err != nil {
		b.Fatal(err)
	}
	r, err := e.svc.Get(ctx, id)
	if err != nil || r.Status != pregel.RunCompleted || r.Step != loopSteps {
		b.Fatalf("run %s: %s at step %d (%v); want completed at step %d", id, r.Status, r.Step, err, loopSteps)
	}
}

// BenchmarkSchedulerLoop1000 runs the loop graph of BenchmarkLoop1000
// through the embedded Scheduler on a SQLite Store (records, checkpoints
// and the run's event stream in one file), as `superstep dev` does:
// "unwatched" with nobody watching the run, "watched" with one watcher
// reading every event as it is logged (runs.Cursor, as an SSE stream
// does). ns/superstep includes the engine, the commits, the record updates
// and the event log; cpu-ns/superstep is the process's CPU time a
// superstep, as BenchmarkLoop1000 reports it; events/superstep is what the
// stream carries.
func BenchmarkSchedulerLoop1000(b *testing.B) {
	for _, watched := range []bool{false, true} {
		name := "unwatched"
		if watched {
			name = "watched"
		}
		b.Run(name, func(b *testing.B) {
			e := newSchedEnv(b, loopGraph(b, loopSteps))
			n := 0
			var events int64
			b.ReportAllocs()
			cpu := cpuTime()
			for b.Loop() {
				n++
				id := fmt.Sprint("loop-", n)
				var done chan int64
				if watched {
					done = make(chan int64, 1)
					cur := runs.NewCursor(e.sched, id, 0)
					go func() {
						defer cur.Close()
						ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
						defer cancel()
						for {
							ev, err := cur.Next(ctx)
							if err != nil || ev.Type == pregel.EventRunFinished {
								done <- ev.ID
								return
							}
						}
					}()
				}
				e.run(b, id)
				if watched {
					events += <-done
				} else {
					page, err := e.store.EventsSince(context.Background(), id, 0, 1)
					if err != nil {
						b.Fatal(err)
					}
					events += page.Last
				}
			}
			steps := float64(n * loopSteps)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/steps, "ns/superstep")
			b.ReportMetric(float64(events)/steps, "events/superstep")
			if cpu := cpuTime() - cpu; cpu > 0 {
				b.ReportMetric(float64(cpu/time.Nanosecond)/steps, "cpu-ns/superstep")
			}
		})
	}
}
