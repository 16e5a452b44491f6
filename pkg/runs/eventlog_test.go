package runs_test

import (
	"fmt"
	"testing"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/runs/runstest"
)

func TestMemoryEventLogConformance(t *testing.T) {
	runstest.RunEventLog(t, func(_ *testing.T, retention int) runs.EventLog {
		return runs.NewMemoryEventLog(retention, 0)
	})
}

// TestMemoryEventLogKeepsRecentRuns checks that a MemoryEventLog keeps the
// streams of the runs appended to most recently, up to its bound.
func TestMemoryEventLogKeepsRecentRuns(t *testing.T) {
	l := runs.NewMemoryEventLog(0, 3)
	ctx := t.Context()
	ev := []pregel.Event{{Type: pregel.EventRunStarted}}
	for i := range 4 {
		if _, err := l.AppendEvents(ctx, fmt.Sprint("r", i), ev); err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			// r0 is used again: r1 becomes the oldest.
			if _, err := l.AppendEvents(ctx, "r0", ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	for id, want := range map[string]int64{"r0": 2, "r1": 0, "r2": 1, "r3": 1} {
		page, err := l.EventsSince(ctx, id, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if page.Last != want {
			t.Errorf("run %s: last id %d; want %d", id, page.Last, want)
		}
	}
}

// TestMemoryEventExpiry: the memory log deletes what expired, and a run's
// events go with the run.
func TestMemoryEventExpiry(t *testing.T) {
	runstest.RunEventExpiry(t, func(t *testing.T) runstest.ExpiringEventLog {
		return runs.NewMemoryEventLog(0, 0)
	})
}

func TestMemoryEventCompaction(t *testing.T) {
	runstest.RunEventCompaction(t, func(*testing.T) runstest.CompactingEventLog {
		return runs.NewMemoryEventLog(0, 0)
	})
}
