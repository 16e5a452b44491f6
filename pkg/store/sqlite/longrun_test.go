package sqlite_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/store/sqlite"
)

// countingStore is a Store that counts the calls the engine makes to it
// and times each commit.
type countingStore struct {
	*sqlite.Store
	calls   atomic.Int64
	commits []time.Time // when each step's commit returned
	calls1  []int64     // calls made up to each step's commit
}

func (c *countingStore) Commit(ctx context.Context, cp *pregel.Checkpoint) error {
	err := c.Store.Commit(ctx, cp)
	c.commits = append(c.commits, time.Now())
	c.calls1 = append(c.calls1, c.calls.Add(1))
	return err
}

func (c *countingStore) Load(ctx context.Context, runID string, step int) (*pregel.Checkpoint, error) {
	c.calls.Add(1)
	return c.Store.Load(ctx, runID, step)
}

func (c *countingStore) PendingTasks(ctx context.Context, runID string, step int) ([]pregel.TaskResult, error) {
	c.calls.Add(1)
	return c.Store.PendingTasks(ctx, runID, step)
}

func (c *countingStore) RecordTask(ctx context.Context, runID string, step int, r pregel.TaskResult) (pregel.TaskResult, error) {
	c.calls.Add(1)
	return c.Store.RecordTask(ctx, runID, step, r)
}

// window is the per-step figures of a run over a range of its steps.
type window struct {
	nsPerStep    float64 // median time between consecutive commits
	callsPerStep float64 // store calls per step
	bytesPerStep float64 // stored bytes (metadata and values) per step
}

// longRun runs the loop graph for steps supersteps on a fresh SQLite file
// and returns its figures over the first and the last 1,000 steps.
func longRun(tb testing.TB, steps int) (first, last window) {
	tb.Helper()
	ctx := context.Background()
	path := filepath.Join(tb.TempDir(), "long.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		tb.Fatal(err)
	}
	defer s.Close()
	cs := &countingStore{Store: s, commits: make([]time.Time, 0, steps+1), calls1: make([]int64, 0, steps+1)}
	res, err := loopGraph(tb, steps).Run(ctx, loopState{}, pregel.WithStore(cs), pregel.WithRunID("long"))
	if err != nil {
		tb.Fatal(err)
	}
	if res.Status != pregel.RunCompleted || res.Step != steps {
		tb.Fatalf("run ended %s at step %d, want %s at step %d", res.Status, res.Step, pregel.RunCompleted, steps)
	}
	if len(cs.commits) != steps+1 {
		tb.Fatalf("%d commits, want %d (step 0 and one per superstep)", len(cs.commits), steps+1)
	}
	bytes := stepBytes(tb, path)
	const w = 1000
	win := func(lo int) window { // steps lo+1 .. lo+w
		var gaps []float64
		total := 0
		for st := lo + 1; st <= lo+w; st++ {
			gaps = append(gaps, float64(cs.commits[st].Sub(cs.commits[st-1]).Nanoseconds()))
			total += bytes[st]
		}
		slices.Sort(gaps)
		return window{
			nsPerStep:    gaps[len(gaps)/2],
			callsPerStep: float64(cs.calls1[lo+w]-cs.calls1[lo]) / w,
			bytesPerStep: float64(total) / w,
		}
	}
	return win(0), win(steps - w)
}

// stepBytes returns the stored bytes of each step row of the file at path.
func stepBytes(tb testing.TB, path string) map[int]int {
	tb.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT id & 4294967295, length(meta) + coalesce(length(changes), 0) FROM steps`)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	out := map[int]int{}
	for rows.Next() {
		var step, n int
		if err := rows.Scan(&step, &n); err != nil {
			tb.Fatal(err)
		}
		out[step] = n
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

// within reports whether b is within frac of a.
func within(a, b, frac float64) bool { return b >= a*(1-frac) && b <= a*(1+frac) }

// TestLongRunFlat runs 2,000 supersteps on SQLite: the store calls and the
// stored bytes per step of the last thousand are within 10 % of the first
// thousand's. (Times are logged, not checked: the machine's load moves
// them; BenchmarkLongRun100k reports them.)
func TestLongRunFlat(t *testing.T) {
	first, last := longRun(t, 2000)
	t.Logf("first 1,000: %+v; last 1,000: %+v", first, last)
	if !within(first.callsPerStep, last.callsPerStep, 0.10) {
		t.Errorf("store calls per step: %.2f over the first 1,000 steps, %.2f over the last", first.callsPerStep, last.callsPerStep)
	}
	if !within(first.bytesPerStep, last.bytesPerStep, 0.10) {
		t.Errorf("stored bytes per step: %.1f over the first 1,000 steps, %.1f over the last", first.bytesPerStep, last.bytesPerStep)
	}
}

// BenchmarkLongRun100k runs one run of 100,000 supersteps on SQLite (set
// SUPERSTEP_LONG_STEPS for another length) and reports the time, store
// calls and stored bytes per step over the first and the last 1,000:
//
//	go test -run '^$' -bench LongRun100k -benchtime 1x -timeout 30m ./pkg/store/sqlite/
func BenchmarkLongRun100k(b *testing.B) {
	steps := 100_000
	if v, err := strconv.Atoi(os.Getenv("SUPERSTEP_LONG_STEPS")); err == nil && v >= 2000 {
		steps = v
	}
	for b.Loop() {
		first, last := longRun(b, steps)
		b.ReportMetric(first.nsPerStep, "first-ns/step")
		b.ReportMetric(last.nsPerStep, "last-ns/step")
		b.ReportMetric(first.callsPerStep, "first-calls/step")
		b.ReportMetric(last.callsPerStep, "last-calls/step")
		b.ReportMetric(first.bytesPerStep, "first-B/step")
		b.ReportMetric(last.bytesPerStep, "last-B/step")
		if !within(first.nsPerStep, last.nsPerStep, 0.10) || !within(first.bytesPerStep, last.bytesPerStep, 0.10) || !within(first.callsPerStep, last.callsPerStep, 0.10) {
			b.Logf("the last 1,000 steps are not within 10 %% of the first: %+v, %+v", first, last)
		}
	}
}
