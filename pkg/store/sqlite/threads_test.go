package sqlite_test

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/runs/runstest"
)

func TestThreadStoreConformance(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "superstep.db"))
	runstest.ThreadStores(t, func(*testing.T) runs.ThreadStore { return s })
}

func TestThreadStrategies(t *testing.T) {
	runstest.Strategies(t, 50, func(t *testing.T) runstest.ThreadEnv {
		s := open(t, filepath.Join(t.TempDir(), "superstep.db"))
		return runstest.ThreadEnv{Runs: s, Threads: s, Checkpoints: s}
	})
}

// TestThreadsLinearizable checks concurrent clients' histories on threads
// against the sequential model of a thread (runstest.Linearizable);
// SUPERSTEP_LINEARIZABLE_OPS makes it a long run (pkg/runs/README.md).
func TestThreadsLinearizable(t *testing.T) {
	threads, clients, ops := runstest.LinearizableSize()
	runstest.Linearizable(t, threads, clients, ops, func(t *testing.T) runstest.ThreadEnv {
		s := open(t, filepath.Join(t.TempDir(), "superstep.db"))
		return runstest.ThreadEnv{Runs: s, Threads: s, Checkpoints: s}
	})
}

// TestCommitFromStoresNoInheritedValue checks that runs continuing a thread
// write only what their input changed: a large value written once by the
// first run is read by the third, through the second, from the first run's
// row, and no later row holds it again.
func TestCommitFromStoresNoInheritedValue(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "superstep.db")
	s := open(t, path)
	big := json.RawMessage(`"` + strings.Repeat("x", 100_000) + `"`)
	first := &pregel.Checkpoint{RunID: "r1", Graph: "g", Step: 0,
		Values:   map[string]json.RawMessage{"doc": big, "n": json.RawMessage(`1`)},
		Versions: map[string]int{"doc": 0, "n": 0}}
	if err := s.Commit(ctx, first); err != nil {
		t.Fatal(err)
	}
	prev := runs.StepRef{RunID: "r1", Step: 0}
	for i, id := range []string{"r2", "r3"} {
		cp := &pregel.Checkpoint{RunID: id, Graph: "g", Step: 0,
			Values:   map[string]json.RawMessage{"doc": big, "n": json.RawMessage(fmt.Sprint(i + 2))},
			Versions: map[string]int{"doc": pregel.Inherited, "n": 0}}
		if err := s.CommitFrom(ctx, cp, prev); err != nil {
			t.Fatal(err)
		}
		if err := s.CommitFrom(ctx, cp, prev); !errors.Is(err, pregel.ErrStepConflict) {
			t.Errorf("second CommitFrom of %s step 0: %v, want ErrStepConflict", id, err)
		}
		prev = runs.StepRef{RunID: id, Step: 0}
	}
	// A later step of r3 keeps the inherited channel.
	step1 := &pregel.Checkpoint{RunID: "r3", Graph: "g", Step: 1,
		Values:   map[string]json.RawMessage{"doc": big, "n": json.RawMessage(`9`)},
		Versions: map[string]int{"doc": pregel.Inherited, "n": 1}}
	if err := s.Commit(ctx, step1); err != nil {
		t.Fatal(err)
	}
	for _, step := range []int{0, 1} {
		cp, err := s.Load(ctx, "r3", step)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(cp.Values["doc"], big) || cp.Versions["doc"] != pregel.Inherited {
			t.Errorf("r3 step %d: doc of %d bytes at version %d, want the inherited value", step, len(cp.Values["doc"]), cp.Versions["doc"])
		}
	}

	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT r.run_id, s.id & 4294967295, length(s.changes) FROM runs AS r JOIN steps AS s ON s.id >> 32 = r.id ORDER BY s.id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			run     string
			step, n int
		)
		if err := rows.Scan(&run, &step, &n); err != nil {
			t.Fatal(err)
		}
		if run != "r1" && n > 1000 {
			t.Errorf("run %s step %d stores %d bytes of values; the inherited value was copied", run, step, n)
		}
	}

	// A step 0 that inherits cannot be committed without its origins.
	bad := &pregel.Checkpoint{RunID: "r4", Graph: "g", Values: map[string]json.RawMessage{"doc": big}, Versions: map[string]int{"doc": pregel.Inherited}}
	if err := s.Commit(ctx, bad); err == nil {
		t.Error("Commit of a step 0 with inherited channels succeeded; it needs CommitFrom")
	}
	if err := s.CommitFrom(ctx, bad, runs.StepRef{RunID: "nope", Step: 0}); !errors.Is(err, pregel.ErrNotFound) {
		t.Errorf("CommitFrom a missing step: %v, want ErrNotFound", err)
	}
}
