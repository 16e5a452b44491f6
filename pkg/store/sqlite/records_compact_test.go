package sqlite_test

import (
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// TestRunRecordsCompact: a run record is stored without the fields its
// row's columns hold and with its graph version by number (schema version
// 9), and every read (GetRun, ListRuns, UpdateRun's answer, after a
// reopen) gives back the run as stored: graph version, a CreatedAt in
// another zone, counters. A record of the earlier form (the whole run as
// JSON) still reads, lists and updates.
func TestRunRecordsCompact(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "superstep.db")
	s := open(t, path)
	utc := time.Date(2026, 11, 27, 9, 0, 0, 123456789, time.UTC)
	stamp := &pregel.Stamp{Version: "v2", Fingerprint: "40bdc09d29a3ecfb", Reducers: map[string]string{"ticks": "append"}}
	in := []runs.Run{
		{ID: "plain", Graph: "counter", Status: pregel.RunPending, Input: json.RawMessage(`{"limit":5}`), CreatedAt: utc, GraphVersion: stamp},
		{ID: "zoned", Graph: "counter", Status: pregel.RunPending, ContextID: "ctx-1", CreatedAt: utc.In(time.FixedZone("CET", 3600)).Add(time.Second), GraphVersion: stamp},
		{ID: "unversioned", Graph: "other", Status: pregel.RunPending, CreatedAt: utc.Add(2 * time.Second)},
	}
	want := map[string]string{}
	for _, r := range in {
		got, created, err := s.CreateRun(ctx, r)
		if err != nil || !created {
			t.Fatalf("CreateRun %s: created %v, %v", r.ID, created, err)
		}
		r.Version, r.UpdatedAt = 1, r.CreatedAt
		if g, w := mustJSON(t, got), mustJSON(t, r); g != w {
			t.Errorf("created:\n\tgot  %s\n\twant %s", g, w)
		}
		want[r.ID] = mustJSON(t, got)
	}
	// An update: counters, status, events.
	r, err := s.GetRun(ctx, "plain")
	if err != nil {
		t.Fatal(err)
	}
	r.Status, r.Step, r.Counters = pregel.RunCompleted, 5, pregel.Counters{Completed: 5}
	r.Events = append(r.Events, runs.Event{At: utc, Type: "completed", Status: pregel.RunCompleted, Step: 5})
	updated, err := s.UpdateRun(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if updated.Version != 2 || updated.Status != pregel.RunCompleted || updated.Counters.Completed != 5 || updated.GraphVersion == nil || updated.GraphVersion.Version != "v2" {
		t.Errorf("updated: %+v", updated)
	}
	want["plain"] = mustJSON(t, updated)

	// The stored form.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT id, record, stamp_id FROM run_records`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var (
			id, record string
			stampID    int64
		)
		if err := rows.Scan(&id, &record, &stampID); err != nil {
			t.Fatal(err)
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal([]byte(record), &fields); err != nil {
			t.Fatal(err)
		}
		for _, bad := range []string{"run_id", "graph", "status", "context_id", "version", "graph_version"} {
			if _, ok := fields[bad]; ok {
				t.Errorf("run %s's record holds %s: %s", id, bad, record)
			}
		}
		if strings.Contains(record, `"skipped":0`) {
			t.Errorf("run %s's record holds zero counters: %s", id, record)
		}
		if _, hasZone := fields["created_at"]; hasZone != (id == "zoned") {
			t.Errorf("run %s's record holds created_at: %v, want it only for a time not in UTC: %s", id, hasZone, record)
		}
		if (stampID != 0) != (id != "unversioned") {
			t.Errorf("run %s's record names stamp %d", id, stampID)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}

	// A record of schema version 8 and before: the whole run.
	old := runs.Run{ID: "old", Graph: "counter", Status: pregel.RunCompleted, Input: json.RawMessage(`{"limit":5}`),
		CreatedAt: utc.Add(-time.Hour), UpdatedAt: utc, GraphVersion: &pregel.Stamp{Fingerprint: "0123456789abcdef"},
		Step: 5, Counters: pregel.Counters{Completed: 5}, Version: 4}
	oldJSON := mustJSON(t, old)
	if _, err := db.ExecContext(ctx, `INSERT INTO run_records (id, graph, status, context_id, created_at, version, record, graph_version, graph_fingerprint)
VALUES (?, ?, ?, '', ?, 4, ?, '', ?)`, old.ID, old.Graph, string(old.Status), old.CreatedAt.UnixNano(), oldJSON, old.GraphVersion.Fingerprint); err != nil {
		t.Fatal(err)
	}
	want["old"] = oldJSON

	for _, reopen := range []bool{false, true} {
		if reopen {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = open(t, path)
		}
		for id, w := range want {
			got, err := s.GetRun(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if g := mustJSON(t, got); g != w {
				t.Errorf("reopened %v, GetRun:\n\tgot  %s\n\twant %s", reopen, g, w)
			}
		}
		page, err := s.ListRuns(ctx, runs.Filter{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Runs) != len(want) {
			t.Fatalf("listed %d runs, want %d", len(page.Runs), len(want))
		}
		for _, got := range page.Runs {
			if g, w := mustJSON(t, got), want[got.ID]; g != w {
				t.Errorf("reopened %v, ListRuns:\n\tgot  %s\n\twant %s", reopen, g, w)
			}
		}
		for _, f := range []runs.Filter{{Version: "v2"}, {Version: "0123456789abcdef"}} {
			page, err := s.ListRuns(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			if f.Version == "v2" && len(page.Runs) != 2 || f.Version != "v2" && (len(page.Runs) != 1 || page.Runs[0].ID != "old") {
				t.Errorf("runs of version %s: %d", f.Version, len(page.Runs))
			}
		}
	}

	// The old record updated: stored in the compact form, read as before.
	o, err := s.GetRun(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	o.DrainReason = "upgrade"
	o2, err := s.UpdateRun(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	o.Version, o.UpdatedAt = 5, o2.UpdatedAt
	if g, w := mustJSON(t, o2), mustJSON(t, o); g != w {
		t.Errorf("old record updated:\n\tgot  %s\n\twant %s", g, w)
	}
	got, err := s.GetRun(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	if g, w := mustJSON(t, got), mustJSON(t, o); g != w {
		t.Errorf("old record updated, read:\n\tgot  %s\n\twant %s", g, w)
	}
	var record string
	if err := db.QueryRowContext(ctx, `SELECT record FROM run_records WHERE id = 'old'`).Scan(&record); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(record, `"run_id"`) || strings.Contains(record, `"fingerprint"`) {
		t.Errorf("old record updated is not compact: %s", record)
	}
}

// TestStepRowsOfSchema8 reads a step written by schema version 8: its
// graph in the row and its stamp by number, the stamp's row without a
// graph.
func TestStepRowsOfSchema8(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "superstep.db")
	st := open(t, path)
	cp := &pregel.Checkpoint{RunID: "old", Graph: "g", Step: 0,
		Values:   map[string]json.RawMessage{"limit": json.RawMessage(`5`)},
		Versions: map[string]int{"limit": 0}}
	if err := st.Commit(ctx, cp); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `INSERT INTO stamps (id, stamp) VALUES (77, '{"fingerprint":"40bdc09d29a3ecfb","reducers":{"ticks":"append"}}')`); err != nil {
		t.Fatal(err)
	}
	const old = `{"graph":"g8","next":[{"node":"count","from":["count"]}],"counters":{"completed":1},"sid":77,"versions":{"limit":0}}`
	if _, err := db.ExecContext(ctx, `UPDATE steps SET meta = ? WHERE id = (SELECT MAX(id) FROM steps)`, old); err != nil {
		t.Fatal(err)
	}
	got, err := st.Load(ctx, "old", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got.Graph != "g8" || got.Stamp == nil || got.Stamp.Fingerprint != "40bdc09d29a3ecfb" || got.Stamp.Reducers["ticks"] != "append" {
		t.Errorf("graph %q stamp %+v", got.Graph, got.Stamp)
	}
}
