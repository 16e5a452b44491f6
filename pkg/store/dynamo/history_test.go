package dynamo_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/store/dynamo"
)

// TestHistoryPageStopMarker pages the history of a run whose partition
// holds a stop marker after its newest step (stop.go): no page lists the
// marker, pages reaching it are full or the last, and the Service's
// tokens walk the steps once each. A page reads its own items only: one
// Query when it ends before the marker, a fraction of the bytes of the
// whole History.
func TestHistoryPageStopMarker(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEnv(t)
	a := e.store()
	const id, steps = "paged", 14
	if _, _, err := a.CreateRun(ctx, runs.Run{ID: id, Graph: "loop", Status: pregel.RunRunning, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	for _, cp := range loopCheckpoints(id, steps) {
		if err := a.Commit(ctx, cp); err != nil {
			t.Fatal(err)
		}
	}
	// A drain request puts the marker at step 14.
	r, err := a.GetRun(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	r.DrainRequested, r.DrainReason = true, "deploy"
	if _, err := a.UpdateRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	if got := sortKeys(t, e, id, "STEP#"); len(got) != steps+1 {
		t.Fatalf("step keys %v; want steps 0-%d and a marker", got, steps-1)
	}

	for _, tc := range []struct {
		name         string
		after, limit int
		first, n     int
	}{
		{"First", -1, 5, 0, 5},
		{"EndsBeforeMarker", 8, 3, 9, 3},
		{"ReachesMarker", 10, 5, 11, 3},
		{"NewestOnly", 12, 1, 13, 1},
		{"NewestThenMarker", 12, 2, 13, 1},
		{"AfterNewest", 13, 5, 0, 0},
		{"All", -1, 500, 0, steps},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i, s := range []*dynamo.Store{e.store(), a} {
				got, err := s.HistoryPage(ctx, id, tc.after, tc.limit)
				if err != nil {
					t.Fatalf("store %d: HistoryPage(after %d, limit %d): %v", i, tc.after, tc.limit, err)
				}
				var want []int
				for st := tc.first; st < tc.first+tc.n; st++ {
					want = append(want, st)
				}
				var have []int
				for _, si := range got {
					have = append(have, si.Step)
				}
				if fmt.Sprint(have) != fmt.Sprint(want) {
					t.Errorf("store %d: HistoryPage(after %d, limit %d) = steps %v, want %v", i, tc.after, tc.limit, have, want)
				}
			}
		})
	}

	t.Run("ServiceTokens", func(t *testing.T) {
		svc := &runs.Service{Runs: a, Checkpoints: e.store()}
		var have []int
		tok := ""
		for range steps + 1 {
			page, err := svc.HistoryPage(ctx, id, runs.HistoryFilter{Limit: 4, PageToken: tok})
			if err != nil {
				t.Fatal(err)
			}
			for _, si := range page.Steps {
				have = append(have, si.Step)
			}
			if tok = page.NextPageToken; tok == "" {
				break
			}
		}
		if len(have) != steps {
			t.Fatalf("pages of 4 listed steps %v; want 0-%d once each", have, steps-1)
		}
		for i, st := range have {
			if st != i {
				t.Fatalf("pages of 4 listed steps %v; want 0-%d in order", have, steps-1)
			}
		}
	})

	t.Run("Cost", func(t *testing.T) {
		s := e.store()
		page := e.measure(t, func() error { _, err := s.HistoryPage(ctx, id, 5, 3); return err })
		whole := e.measure(t, func() error { _, err := s.History(ctx, id); return err })
		if q := page.calls.Op("Query"); q.Requests != 1 || page.calls.Total().Requests != 1 {
			t.Errorf("a page of 3 made %s; want one Query", opsString(page.calls))
		}
		pb, wb := page.calls.Total().ResponseBytes, whole.calls.Total().ResponseBytes
		t.Logf("a page of 3 of %d steps: %d B received, %.1f RRU; the whole History: %d B, %.1f RRU",
			steps, pb, page.units.total().RRU, wb, whole.units.total().RRU)
		if pb <= 0 || pb*3 > wb {
			t.Errorf("a page of 3 of %d steps received %d B, the whole History %d B; want at most a third", steps, pb, wb)
		}
	})
}
