package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/superstep/superstep/pkg/pregel"
)

// TestMigrateFromVersion1 opens a file of schema version 1, as the first
// release of the store wrote it, and finds its checkpoints, history and
// pending task results as they were, and its fence in place.
func TestMigrateFromVersion1(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "superstep.db")
	db, err := sql.Open("sqlite", path+"?_journal_mode=WAL&_foreign_keys=1")
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := migrations()[0](ctx, tx); err != nil {
		t.Fatal(err)
	}
	// Run r: step 0 sets a and b; step 1 changes b (to a value with
	// insignificant space); step 2 clears a. Run q: step 0 only.
	// Task t3 of r's open step 3 is recorded.
	for _, q := range []string{
		`CREATE TABLE schema_version (version INTEGER NOT NULL)`,
		`INSERT INTO schema_version VALUES (1)`,
		`INSERT INTO runs VALUES ('r', 2), ('q', 0)`,
		`INSERT INTO steps VALUES
			('r', 0, '{"graph":"g","next":[{"node":"n","from":["__start__"]}],"counters":{"completed":0,"skipped":0,"cancelled":0,"failed":0}}'),
			('r', 1, '{"graph":"g","next":[{"node":"w","send":true,"arg":[1,"<2>"]}],"barriers":{"j":["n"]},"tasks":[{"task_id":"t1","node":"n","status":"completed","attempts":1}],"counters":{"completed":1,"skipped":0,"cancelled":0,"failed":0}}'),
			('r', 2, '{"graph":"g","next":[{"node":"n"}],"tasks":[{"task_id":"t2","node":"w","status":"completed"}],"counters":{"completed":2,"skipped":0,"cancelled":0,"failed":0},"drain_request":"later"}'),
			('q', 0, '{"graph":"h","counters":{"completed":0,"skipped":0,"cancelled":0,"failed":0}}')`,
		`INSERT INTO channel_values VALUES
			('r', 'a', 0, '{"x":"<1>"}'), ('r', 'b', 0, '"b"'),
			('r', 'b', 1, '[1, 2]'),
			('r', 'a', 2, NULL),
			('q', 'a', 0, 'null')`,
		`INSERT INTO pending_tasks (run_id, step, task_id, final, result) VALUES
			('r', 3, 't3', 1, '{"task_id":"t3","node":"n","status":"completed","writes":{"b":"b3"}}')`,
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	counters := func(n int) pregel.Counters { return pregel.Counters{Completed: n} }
	want := []*pregel.Checkpoint{
		{
			RunID: "r", Graph: "g", Step: 0,
			Values:   map[string]json.RawMessage{"a": json.RawMessage(`{"x":"<1>"}`), "b": json.RawMessage(`"b"`)},
			Versions: map[string]int{"a": 0, "b": 0},
			Next:     []pregel.Trigger{{Node: "n", From: []string{"__start__"}}},
		},
		{
			RunID: "r", Graph: "g", Step: 1,
			Values:   map[string]json.RawMessage{"a": json.RawMessage(`{"x":"<1>"}`), "b": json.RawMessage(`[1,2]`)},
			Versions: map[string]int{"a": 0, "b": 1},
			Next:     []pregel.Trigger{{Node: "w", Send: true, Arg: json.RawMessage(`[1,"<2>"]`)}},
			Barriers: map[string][]string{"j": {"n"}},
			Tasks:    []pregel.TaskStatus{{TaskID: "t1", Node: "n", Status: pregel.NodeCompleted, Attempts: 1}},
			Counters: counters(1),
		},
		{
			RunID: "r", Graph: "g", Step: 2,
			Values:       map[string]json.RawMessage{"b": json.RawMessage(`[1,2]`)},
			Versions:     map[string]int{"a": 2, "b": 1},
			Next:         []pregel.Trigger{{Node: "n"}},
			Tasks:        []pregel.TaskStatus{{TaskID: "t2", Node: "w", Status: pregel.NodeCompleted}},
			Counters:     counters(2),
			DrainRequest: "later",
		},
	}
	for _, w := range want {
		got, err := s.Load(ctx, "r", w.Step)
		if err != nil {
			t.Fatal(err)
		}
		if g, w := mustJSON(t, got), mustJSON(t, w); g != w {
			t.Errorf("step %d after migrating:\n\tgot  %s\n\twant %s", got.Step, g, w)
		}
	}
	latest, err := s.Load(ctx, "q", pregel.Latest)
	if err != nil {
		t.Fatal(err)
	}
	if latest.Step != 0 || latest.Graph != "h" || string(latest.Values["a"]) != "null" {
		t.Errorf("run q after migrating: step %d of graph %q with a = %s; want step 0 of h with a = null", latest.Step, latest.Graph, latest.Values["a"])
	}
	hist, err := s.History(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	var changed [][]string
	for _, h := range hist {
		changed = append(changed, h.Changed)
	}
	if !slices.EqualFunc(changed, [][]string{{"a", "b"}, {"b"}, {"a"}}, slices.Equal) {
		t.Errorf("history after migrating: changed channels %v, want [[a b] [b] [a]]", changed)
	}
	pending, err := s.PendingTasks(ctx, "r", 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 1 || pending[0].TaskID != "t3" || string(pending[0].Writes["b"]) != `"b3"` {
		t.Errorf("pending tasks after migrating: %+v, want t3", pending)
	}

	// The fence: step 2 again conflicts; step 3 commits and discards t3.
	next := &pregel.Checkpoint{RunID: "r", Graph: "g", Step: 3, Values: map[string]json.RawMessage{"b": json.RawMessage(`"b3"`)}, Versions: map[string]int{"a": 2, "b": 3}}
	again := *want[2]
	if err := s.Commit(ctx, &again); !errors.Is(err, pregel.ErrStepConflict) {
		t.Errorf("committing step 2 again after migrating: %v, want ErrStepConflict", err)
	}
	if err := s.Commit(ctx, next); err != nil {
		t.Fatal(err)
	}
	if pending, err := s.PendingTasks(ctx, "r", 3); err != nil || len(pending) != 0 {
		t.Errorf("pending tasks after committing step 3: %v, %v; want none", pending, err)
	}
	got, err := s.Load(ctx, "r", pregel.Latest)
	if err != nil {
		t.Fatal(err)
	}
	if got.Step != 3 || string(got.Values["b"]) != `"b3"` || len(got.Values) != 1 {
		t.Errorf("latest step after migrating and committing: %s", mustJSON(t, got))
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

// TestMigrationsOnEmptyFile checks that a file created by this program is
// on the newest schema, with none of version 1's tables left.
func TestMigrationsOnEmptyFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "superstep.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rows, err := s.db.QueryContext(ctx, `SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	if want := []string{"longterm_items", "pending_tasks", "push_configs", "run_origins", "run_records", "runs", "schema_version", "stamps", "steps", "threads"}; !slices.Equal(tables, want) {
		t.Errorf("tables %v, want %v", tables, want)
	}
}
