package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/pregel/checkpointtest"
	"github.com/superstep/superstep/pkg/pregel/fanouttest"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/store/sqlite"
)

func open(t testing.TB, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

func TestConformance(t *testing.T) {
	checkpointtest.Run(t, func(t *testing.T) pregel.Checkpointer {
		return open(t, filepath.Join(t.TempDir(), "superstep.db"))
	})
}

// TestConformanceTwoStores runs the suite against two Stores on one file,
// used alternately, as two processes would share it.
func TestConformanceTwoStores(t *testing.T) {
	checkpointtest.Run(t, func(t *testing.T) pregel.Checkpointer {
		path := filepath.Join(t.TempDir(), "superstep.db")
		return &alternate{stores: []pregel.Checkpointer{open(t, path), open(t, path)}}
	})
}

// alternate sends each call to the next of its stores in turn.
type alternate struct {
	stores []pregel.Checkpointer
	n      atomic.Uint64
}

func (a *alternate) next() pregel.Checkpointer {
	return a.stores[a.n.Add(1)%uint64(len(a.stores))]
}

func (a *alternate) Commit(ctx context.Context, cp *pregel.Checkpoint) error {
	return a.next().Commit(ctx, cp)
}

func (a *alternate) RecordTask(ctx context.Context, runID string, step int, r pregel.TaskResult) (pregel.TaskResult, error) {
	return a.next().RecordTask(ctx, runID, step, r)
}

func (a *alternate) PendingTasks(ctx context.Context, runID string, step int) ([]pregel.TaskResult, error) {
	return a.next().PendingTasks(ctx, runID, step)
}

func (a *alternate) Load(ctx context.Context, runID string, step int) (*pregel.Checkpoint, error) {
	return a.next().Load(ctx, runID, step)
}

func (a *alternate) History(ctx context.Context, runID string) ([]pregel.StepInfo, error) {
	return a.next().History(ctx, runID)
}

func (a *alternate) HistoryPage(ctx context.Context, runID string, after, limit int) ([]pregel.StepInfo, error) {
	return a.next().(*sqlite.Store).HistoryPage(ctx, runID, after, limit)
}

// TestDeltaStorage commits 20 steps of a state with a 1 MB channel that
// never changes and a 1 KB channel that changes each step: the stored
// channel bytes grow by about 1 KB per step, not 1 MB.
func TestDeltaStorage(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "superstep.db")
	s := open(t, path)
	const (
		big   = 1 << 20
		small = 1 << 10
		steps = 20
	)
	cp := &pregel.Checkpoint{
		RunID:    "deltas",
		Graph:    "g",
		Values:   map[string]json.RawMessage{"big": jsonString(big, 'b'), "small": jsonString(small, '0')},
		Versions: map[string]int{"big": 0, "small": 0},
		Next:     []pregel.Trigger{{Node: "n"}},
	}
	if err := s.Commit(ctx, cp); err != nil {
		t.Fatal(err)
	}
	base := storedValueBytes(t, path)
	if base < big+small || base > big+2*small {
		t.Fatalf("after step 0: %d bytes of channel values stored, want %d", base, big+small)
	}
	for step := 1; step <= steps; step++ {
		next := &pregel.Checkpoint{
			RunID: cp.RunID, Graph: cp.Graph, Step: step,
			Values:   maps.Clone(cp.Values),
			Versions: maps.Clone(cp.Versions),
			Next:     cp.Next,
			Tasks:    []pregel.TaskStatus{{TaskID: fmt.Sprint("t", step), Node: "n", Status: pregel.NodeCompleted}},
		}
		next.Values["small"] = jsonString(small, byte('a'+step))
		next.Versions["small"] = step
		if err := s.Commit(ctx, next); err != nil {
			t.Fatal(err)
		}
		cp = next
	}

	got := storedValueBytes(t, path)
	perStep := float64(got-base) / steps
	t.Logf("channel values: %d bytes after step 0, %d after step %d: %.0f bytes per step", base, got, steps, perStep)
	if perStep < small || perStep > 1.1*small {
		t.Errorf("stored channel values grew by %.0f bytes per step, want about %d (only the changed channel)", perStep, small)
	}
	// The whole database, WAL included, holds the big value about once.
	if size := fileBytes(t, path); size > 2*big {
		t.Errorf("database files hold %d bytes after %d steps, want under %d", size, steps, 2*big)
	}

	// And every step loads back whole.
	for _, step := range []int{0, 1, steps / 2, steps} {
		got, err := s.Load(ctx, cp.RunID, step)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(got.Values["big"]); n != big {
			t.Errorf("step %d: big channel has %d bytes, want %d", step, n, big)
		}
		wantSmall := byte('0')
		if step > 0 {
			wantSmall = byte('a' + step)
		}
		if v := got.Values["small"]; len(v) != small || v[1] != wantSmall || got.Versions["small"] != step || got.Versions["big"] != 0 {
			t.Errorf("step %d: small channel %.5s... version %d, big version %d; want %c..., version %d and 0", step, v, got.Versions["small"], got.Versions["big"], wantSmall, step)
		}
	}
}

// jsonString returns a JSON string of n bytes filled with c.
func jsonString(n int, c byte) json.RawMessage {
	b := []byte(strings.Repeat(string(c), n))
	b[0], b[n-1] = '"', '"'
	return b
}

// storedValueBytes returns the bytes of channel values in the database,
// read through a connection of its own.
func storedValueBytes(t *testing.T, path string) int64 {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int64
	if err := db.QueryRowContext(t.Context(), `SELECT COALESCE(SUM(LENGTH(changes)), 0) FROM steps`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// fileBytes returns the size of the database file and its WAL.
func fileBytes(t *testing.T, path string) int64 {
	t.Helper()
	var n int64
	for _, p := range []string{path, path + "-wal"} {
		fi, err := os.Stat(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}

// TestReopen closes a store and opens its file again: everything committed
// or recorded is still there.
func TestReopen(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "superstep.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	cps := []*pregel.Checkpoint{
		{
			RunID: "r", Graph: "g", Step: 0,
			Values:   map[string]json.RawMessage{"a": json.RawMessage(`{"x":"<1>"}`), "b": json.RawMessage(`"b"`)},
			Versions: map[string]int{"a": 0, "b": 0},
			Next:     []pregel.Trigger{{Node: "n", From: []string{"__start__"}}},
		},
		{
			RunID: "r", Graph: "g", Step: 1,
			Values:       map[string]json.RawMessage{"a": json.RawMessage(`{"x":"<1>"}`), "b": json.RawMessage(`"b1"`)},
			Versions:     map[string]int{"a": 0, "b": 1},
			Next:         []pregel.Trigger{{Node: "w", Send: true, Arg: json.RawMessage(`[1,2]`)}},
			Barriers:     map[string][]string{"j": {"n"}},
			Tasks:        []pregel.TaskStatus{{TaskID: "t1", Node: "n", Status: pregel.NodeCompleted, Attempts: 1}},
			Counters:     pregel.Counters{Completed: 1},
			DrainRequest: "later",
		},
	}
	for _, cp := range cps {
		if err := s.Commit(ctx, cp); err != nil {
			t.Fatal(err)
		}
	}
	pending := pregel.TaskResult{TaskID: "t2", Node: "w", Status: pregel.NodeCompleted, Writes: map[string]json.RawMessage{"b": json.RawMessage(`"b2"`)}}
	if _, err := s.RecordTask(ctx, "r", 2, pending); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = open(t, path)
	for _, want := range cps {
		got, err := s.Load(ctx, "r", want.Step)
		if err != nil {
			t.Fatal(err)
		}
		if g, w := mustJSON(t, got), mustJSON(t, want); g != w {
			t.Errorf("step %d after reopening:\n\tgot  %s\n\twant %s", want.Step, g, w)
		}
	}
	got, err := s.PendingTasks(ctx, "r", 2)
	if err != nil {
		t.Fatal(err)
	}
	if g, w := mustJSON(t, got), mustJSON(t, []pregel.TaskResult{pending}); g != w {
		t.Errorf("pending tasks after reopening:\n\tgot  %s\n\twant %s", g, w)
	}
	// The fence survived too.
	if err := s.Commit(ctx, cps[1]); !errors.Is(err, pregel.ErrStepConflict) {
		t.Errorf("committing step 1 again after reopening: got %v, want ErrStepConflict", err)
	}
	// And the database is on the current schema, in WAL mode.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var version int
	var mode string
	if err := db.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if version != 9 || mode != "wal" {
		t.Errorf("schema version %d, journal mode %q; want 9 and wal", version, mode)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestOpenNewerSchema refuses a database written by a newer program.
func TestOpenNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "superstep.db")
	open(t, path)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(t.Context(), `UPDATE schema_version SET version = 99`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if s, err := sqlite.Open(t.Context(), path); err == nil {
		s.Close()
		t.Fatal("Open of a database with schema version 99 succeeded, want an error")
	} else if !strings.Contains(err.Error(), "schema version 99") {
		t.Errorf("Open of a database with schema version 99: %v, want an error naming the version", err)
	}
}

// TestOpenPathWithSpecialCharacters opens a file whose name would be
// misread as a URI query or fragment.
func TestOpenPathWithSpecialCharacters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a dir?x=1#frag", "run%20s.db")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	s := open(t, path)
	cp := &pregel.Checkpoint{RunID: "r", Values: map[string]json.RawMessage{"a": json.RawMessage(`1`)}, Versions: map[string]int{"a": 0}}
	if err := s.Commit(t.Context(), cp); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database file not at the given path: %v", err)
	}
}

// TestCommitRejectsInconsistentCheckpoint refuses checkpoints that a delta
// store could not load back as committed.
func TestCommitRejectsInconsistentCheckpoint(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "superstep.db"))
	for name, cp := range map[string]*pregel.Checkpoint{
		"ValueWithoutVersion": {RunID: "r", Values: map[string]json.RawMessage{"a": json.RawMessage(`1`)}},
		"FutureVersion":       {RunID: "r", Values: map[string]json.RawMessage{"a": json.RawMessage(`1`)}, Versions: map[string]int{"a": 1}},
	} {
		t.Run(name, func(t *testing.T) {
			err := s.Commit(t.Context(), cp)
			if err == nil || errors.Is(err, pregel.ErrStepConflict) {
				t.Fatalf("Commit: got %v, want an invalid checkpoint error", err)
			}
			if _, err := s.Load(t.Context(), "r", pregel.Latest); !errors.Is(err, pregel.ErrNotFound) {
				t.Fatalf("Load after the refused commit: %v, want ErrNotFound", err)
			}
		})
	}
}

// BenchmarkCommit commits steps that change one small channel of a state
// with ten channels.
func BenchmarkCommit(b *testing.B) {
	ctx := context.Background()
	s := open(b, filepath.Join(b.TempDir(), "superstep.db"))
	cp := &pregel.Checkpoint{RunID: "bench", Graph: "g", Values: map[string]json.RawMessage{}, Versions: map[string]int{}}
	for i := range 10 {
		ch := fmt.Sprint("c", i)
		cp.Values[ch], cp.Versions[ch] = json.RawMessage(`{"text":"some state of modest size"}`), 0
	}
	if err := s.Commit(ctx, cp); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		next := &pregel.Checkpoint{
			RunID: cp.RunID, Graph: cp.Graph, Step: cp.Step + 1,
			Values: maps.Clone(cp.Values), Versions: maps.Clone(cp.Versions),
			Next:     []pregel.Trigger{{Node: "n", From: []string{"n"}}},
			Tasks:    []pregel.TaskStatus{{TaskID: "t", Node: "n", Status: pregel.NodeCompleted, Attempts: 1}},
			Counters: pregel.Counters{Completed: cp.Step + 1},
		}
		next.Values["c0"] = json.RawMessage(fmt.Sprintf(`{"count":%d}`, next.Step))
		next.Versions["c0"] = next.Step
		if err := s.Commit(ctx, next); err != nil {
			b.Fatal(err)
		}
		cp = next
	}
}

// BenchmarkLoad loads the latest step of a run of ten channels after 100
// steps that each changed one of them.
func BenchmarkLoad(b *testing.B) {
	ctx := context.Background()
	s := open(b, filepath.Join(b.TempDir(), "superstep.db"))
	cp := &pregel.Checkpoint{RunID: "bench", Graph: "g", Values: map[string]json.RawMessage{}, Versions: map[string]int{}}
	for i := range 10 {
		ch := fmt.Sprint("c", i)
		cp.Values[ch], cp.Versions[ch] = json.RawMessage(`{"text":"some state of modest size"}`), 0
	}
	for step := 0; step <= 100; step++ {
		if step > 0 {
			next := &pregel.Checkpoint{
				RunID: cp.RunID, Graph: cp.Graph, Step: step,
				Values: maps.Clone(cp.Values), Versions: maps.Clone(cp.Versions),
				Next: []pregel.Trigger{{Node: "n"}},
			}
			ch := fmt.Sprint("c", step%10)
			next.Values[ch], next.Versions[ch] = json.RawMessage(fmt.Sprintf(`{"count":%d}`, step)), step
			cp = next
		}
		if err := s.Commit(ctx, cp); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		got, err := s.Load(ctx, cp.RunID, pregel.Latest)
		if err != nil {
			b.Fatal(err)
		}
		if len(got.Values) != 10 {
			b.Fatalf("loaded %d channels, want 10", len(got.Values))
		}
	}
}

// TestCommitWaitsForWriteLock holds the database's write lock on another
// connection, as another process would: a commit waits for it, until its
// context is done or the lock is released.
func TestCommitWaitsForWriteLock(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "superstep.db")
	s := open(t, path)
	cp := &pregel.Checkpoint{RunID: "r", Graph: "g", Values: map[string]json.RawMessage{"a": json.RawMessage(`1`)}, Versions: map[string]int{"a": 0}}
	if err := s.Commit(ctx, cp); err != nil {
		t.Fatal(err)
	}
	next := &pregel.Checkpoint{RunID: "r", Graph: "g", Step: 1, Values: map[string]json.RawMessage{"a": json.RawMessage(`2`)}, Versions: map[string]int{"a": 1}}

	other, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	lock := func() *sql.Conn {
		t.Helper()
		conn, err := other.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
			t.Fatal(err)
		}
		return conn
	}
	unlock := func(conn *sql.Conn) {
		t.Helper()
		if _, err := conn.ExecContext(ctx, `ROLLBACK`); err != nil {
			t.Error(err)
		}
		conn.Close()
	}

	t.Run("ContextDone", func(t *testing.T) {
		conn := lock()
		defer unlock(conn)
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if err := s.Commit(short, next); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Commit while another connection holds the write lock: %v, want context.DeadlineExceeded", err)
		}
	})
	t.Run("LockReleased", func(t *testing.T) {
		conn := lock()
		time.AfterFunc(50*time.Millisecond, func() { unlock(conn) })
		start := time.Now()
		if err := s.Commit(ctx, next); err != nil {
			t.Fatalf("Commit once the lock is released: %v", err)
		}
		if waited := time.Since(start); waited < 40*time.Millisecond {
			t.Errorf("Commit returned after %v, before the lock was released", waited)
		}
	})
	got, err := s.Load(ctx, "r", pregel.Latest)
	if err != nil {
		t.Fatal(err)
	}
	if got.Step != 1 || string(got.Values["a"]) != "2" {
		t.Errorf("latest step %d with a = %s, want step 1 with a = 2", got.Step, got.Values["a"])
	}
}

func (a *alternate) CommitFrom(ctx context.Context, cp *pregel.Checkpoint, base runs.StepRef) error {
	return a.next().(*sqlite.Store).CommitFrom(ctx, cp, base)
}

// TestFanOutPolicies runs the fan-out completion policies on the embedded
// engine over SQLite.
func TestFanOutPolicies(t *testing.T) {
	fanouttest.Run(t, func(t *testing.T) pregel.Checkpointer {
		return open(t, filepath.Join(t.TempDir(), "superstep.db"))
	})
}
