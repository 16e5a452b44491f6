package sqlite_test

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/longterm"
	"github.com/superstep/superstep/pkg/longterm/longtermtest"
	"github.com/superstep/superstep/pkg/store/sqlite"
)

// TestLongTermConformance runs the long-term store suite on one database
// file, shared by the sub-tests as a deployment shares it.
func TestLongTermConformance(t *testing.T) {
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "superstep.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	longtermtest.Run(t, func(*testing.T) longterm.Backend { return s.LongTerm() })
}

// TestLongTermPurge: a put deletes expired items from the file, a few at
// a time, so expired memories do not pile up.
func TestLongTermPurge(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "superstep.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	lt := longterm.New(s.LongTerm(), longterm.WithClock(func() time.Time { return now }))
	for i := range 20 {
		if _, err := lt.Put(ctx, longterm.Namespace{"u"}, fmt.Sprint(i), json.RawMessage(`{}`), longterm.TTL(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(time.Hour)
	rows := func() int {
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM longterm_items`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if _, err := lt.Put(ctx, longterm.Namespace{"u"}, "live", json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	if n := rows(); n != 21-16 {
		t.Errorf("after one put %d rows, want %d (16 expired purged)", n, 21-16)
	}
	if _, err := lt.Put(ctx, longterm.Namespace{"u"}, "live", json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	if n := rows(); n != 1 {
		t.Errorf("after two puts %d rows, want 1 (every expired item purged)", n)
	}
}
