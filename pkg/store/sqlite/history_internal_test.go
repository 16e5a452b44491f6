package sqlite

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/superstep/superstep/pkg/pregel"
)

// TestHistoryPagePlan: a page of a run's history reads a range of the
// steps' keys, not the run's whole history: its query plan searches the
// steps table by key and scans nothing.
func TestHistoryPagePlan(t *testing.T) {
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "plan.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rows, err := s.db.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+sqlHistoryPage, "r1", 100, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	all := strings.Join(plan, "; ")
	t.Logf("plan: %s", all)
	if strings.Contains(all, "SCAN") || strings.Contains(all, "TEMP B-TREE") || !strings.Contains(all, "SEARCH s USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)") {
		t.Errorf("a history page's plan is %q; want a search of the steps by a range of their keys, no scan or sort", all)
	}
}

// BenchmarkHistory20k reads the history of a 20,000-step run whole and a
// page of 100 at its end (go test -run '^$' -bench History20k
// ./pkg/store/sqlite/): the page costs the same at any depth.
func BenchmarkHistory20k(b *testing.B) {
	ctx := b.Context()
	s, err := Open(ctx, filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const steps = 20_000
	for i := range steps {
		cp := &pregel.Checkpoint{RunID: "long", Graph: "g", Step: i,
			Values:   map[string]json.RawMessage{"n": json.RawMessage(strconv.Itoa(i))},
			Versions: map[string]int{"n": i},
			Next:     []pregel.Trigger{{Node: "n"}}}
		if err := s.Commit(ctx, cp); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("History", func(b *testing.B) {
		for b.Loop() {
			if h, err := s.History(ctx, "long"); err != nil || len(h) != steps {
				b.Fatal(len(h), err)
			}
		}
	})
	for _, after := range []int{-1, steps - 101} {
		b.Run(fmt.Sprintf("Page100After%d", after), func(b *testing.B) {
			for b.Loop() {
				if h, err := s.HistoryPage(ctx, "long", after, 100); err != nil || len(h) != 100 {
					b.Fatal(len(h), err)
				}
			}
		})
	}
}
