package sqlite_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/superstep/superstep/pkg/embedded"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/runs/runstest"
)

func TestEventLogConformance(t *testing.T) {
	runstest.RunEventLog(t, func(t *testing.T, retention int) runs.EventLog {
		s := open(t, filepath.Join(t.TempDir(), "superstep.db"))
		s.SetEventRetention(retention)
		return s
	})
}

// TestEventLogSurvivesReopen checks that a run's stream is kept in the
// file: a Store opened later reads it and continues its ids.
func TestEventLogSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "superstep.db")
	ctx := t.Context()
	s := open(t, path)
	if _, err := s.AppendEvents(ctx, "r1", []pregel.Event{{Type: pregel.EventRunStarted, RunID: "r1"}, {Type: pregel.EventStepStarted, RunID: "r1", Step: 1, Tasks: 2}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, path)
	page, err := s2.EventsSince(ctx, "r1", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != 1 || page.Events[0].ID != 2 || page.Events[0].Type != pregel.EventStepStarted || page.Events[0].Tasks != 2 {
		t.Fatalf("after reopening: %+v; want event 2, step_started with 2 tasks", page.Events)
	}
	got, err := s2.AppendEvents(ctx, "r1", []pregel.Event{{Type: pregel.EventRunFinished, RunID: "r1"}})
	if err != nil || got[0].ID != 3 {
		t.Fatalf("append after reopening = %+v, %v; want id 3", got, err)
	}
}

// TestEventExpiry: the SQLite log deletes what expired, and a run's events
// go with the run.
func TestEventExpiry(t *testing.T) {
	runstest.RunEventExpiry(t, func(t *testing.T) runstest.ExpiringEventLog {
		return open(t, filepath.Join(t.TempDir(), "superstep.db"))
	})
}

// TestFlatBytesPerTurn: a conversation on one thread stores as much per
// turn late as early, everything counted, as dev runs it (events of runs
// nobody watches are not stored). With SUPERSTEP_FLAT_TURNS (100 for the
// issue's figure), also with every run's events stored (EventsOn).
func TestFlatBytesPerTurn(t *testing.T) {
	modes := []embedded.EventsMode{embedded.EventsWatched}
	if os.Getenv(runstest.FlatTurnsEnv) != "" {
		modes = append(modes, embedded.EventsOn)
	}
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			s := open(t, filepath.Join(t.TempDir(), "superstep.db"))
			runstest.FlatBytesPerTurn(t, runstest.FlatTurns(t), mode, runstest.FlatStores{Runs: s, Threads: s, Checkpoints: s, Events: s})
		})
	}
}

func TestEventCompaction(t *testing.T) {
	runstest.RunEventCompaction(t, func(t *testing.T) runstest.CompactingEventLog {
		return open(t, filepath.Join(t.TempDir(), "superstep.db"))
	})
}

// TestWatchedTurnBytes: a watched conversation stores its answers' text
// about once, not an event row per token: 2 turns of 1,000 tokens here,
// SUPERSTEP_WATCHED_TURNS=100 for the 100-turn figure (≤ 5 MB in
// all). Without compaction a turn's events took ~290 bytes a token.
func TestWatchedTurnBytes(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "superstep.db"))
	turns := runstest.WatchedTurns(t, 2)
	total, text := runstest.WatchedTurnBytes(t, turns, 1000, runstest.FlatStores{Runs: s, Threads: s, Checkpoints: s, Events: s})
	// The text once in the checkpoints, and in the events: the compacted
	// answer (with a length per piece), the model node's writes and the
	// step's appended messages; records and step metadata besides.
	if limit := 5*text + int64(turns)*8192; total.TotalBytes > limit {
		t.Errorf("%d turns stored %d bytes; want at most %d (five times the %d bytes of text, 8 KB a turn)", turns, total.TotalBytes, limit, text)
	}
	if turns >= 100 && total.TotalBytes > 5<<20 {
		t.Errorf("%d turns stored %d bytes; want at most 5 MB", turns, total.TotalBytes)
	}
}
