package runs_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// wholeHistory is a Checkpointer that can only read a run's whole
// history: the Service pages it by slicing.
type wholeHistory struct{ pregel.Checkpointer }

// historyService returns a Service over cps holding run "h" with steps
// 0 to steps-1, and run "empty" with none.
func historyService(t *testing.T, cps pregel.Checkpointer, steps int) *runs.Service {
	t.Helper()
	svc := &runs.Service{Runs: runs.NewMemoryStore(), Checkpoints: cps}
	for _, id := range []string{"h", "empty"} {
		if _, _, err := svc.Runs.CreateRun(t.Context(), runs.Run{ID: id, Graph: "g", Status: pregel.RunRunning}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range steps {
		cp := &pregel.Checkpoint{RunID: "h", Graph: "g", Step: i,
			Values:   map[string]json.RawMessage{"n": json.RawMessage(fmt.Sprint(i))},
			Versions: map[string]int{"n": i},
			Next:     []pregel.Trigger{{Node: "count"}}}
		if err := cps.Commit(t.Context(), cp); err != nil {
			t.Fatal(err)
		}
	}
	return svc
}

// TestHistoryPage reads a run's history in pages through the Service,
// from a store that pages it and from one that only lists it whole.
func TestHistoryPage(t *testing.T) {
	const steps = 7
	stores := map[string]func() pregel.Checkpointer{
		"native": func() pregel.Checkpointer { return pregel.NewMemoryStore() },
		"sliced": func() pregel.Checkpointer { return wholeHistory{pregel.NewMemoryStore()} },
	}
	for name, newStore := range stores {
		t.Run(name, func(t *testing.T) {
			svc := historyService(t, newStore(), steps)
			ctx := t.Context()

			// Follow the tokens with pages of limit: the steps in order,
			// once each, the last page without a token.
			for _, tc := range []struct {
				limit int
				sizes []int
			}{
				{1, []int{1, 1, 1, 1, 1, 1, 1}},
				{3, []int{3, 3, 1}},
				{7, []int{7}},
				{0, []int{7}}, // the default page holds them all
				{500, []int{7}},
			} {
				t.Run(fmt.Sprintf("limit%d", tc.limit), func(t *testing.T) {
					var sizes, got []int
					tok := ""
					for range steps + 1 {
						page, err := svc.HistoryPage(ctx, "h", runs.HistoryFilter{Limit: tc.limit, PageToken: tok})
						if err != nil {
							t.Fatalf("HistoryPage(limit %d, token %q): %v", tc.limit, tok, err)
						}
						sizes = append(sizes, len(page.Steps))
						for _, s := range page.Steps {
							got = append(got, s.Step)
						}
						if tok = page.NextPageToken; tok == "" {
							break
						}
					}
					if fmt.Sprint(sizes) != fmt.Sprint(tc.sizes) {
						t.Errorf("page sizes %v, want %v", sizes, tc.sizes)
					}
					if fmt.Sprint(got) != "[0 1 2 3 4 5 6]" {
						t.Errorf("steps %v, want 0 to 6 once each", got)
					}
				})
			}

			t.Run("EmptyRun", func(t *testing.T) {
				page, err := svc.HistoryPage(ctx, "empty", runs.HistoryFilter{})
				if err != nil || page.Steps == nil || len(page.Steps) != 0 || page.NextPageToken != "" {
					t.Fatalf("HistoryPage of a run with no step = %+v, %v; want an empty list, no token", page, err)
				}
			})
			t.Run("UnknownRun", func(t *testing.T) {
				if _, err := svc.HistoryPage(ctx, "nope", runs.HistoryFilter{}); !errors.Is(err, runs.ErrNotFound) {
					t.Fatalf("HistoryPage of an unknown run: %v, want ErrNotFound", err)
				}
			})
			t.Run("StepCommittedAfterLastPage", func(t *testing.T) {
				svc := historyService(t, newStore(), 3)
				page, err := svc.HistoryPage(ctx, "h", runs.HistoryFilter{Limit: 2})
				if err != nil || len(page.Steps) != 2 || page.NextPageToken == "" {
					t.Fatalf("first page = %+v, %v", page, err)
				}
				tok := page.NextPageToken
				page, err = svc.HistoryPage(ctx, "h", runs.HistoryFilter{Limit: 2, PageToken: tok})
				if err != nil || len(page.Steps) != 1 || page.NextPageToken != "" {
					t.Fatalf("last page = %+v, %v", page, err)
				}
				cp := &pregel.Checkpoint{RunID: "h", Graph: "g", Step: 3, Values: map[string]json.RawMessage{}, Versions: map[string]int{}}
				if err := svc.Checkpoints.Commit(ctx, cp); err != nil {
					t.Fatal(err)
				}
				// The same token again reads the new step too.
				page, err = svc.HistoryPage(ctx, "h", runs.HistoryFilter{Limit: 2, PageToken: tok})
				if err != nil || len(page.Steps) != 2 || page.Steps[1].Step != 3 {
					t.Fatalf("page after a commit = %+v, %v; want steps 2 and 3", page, err)
				}
			})
		})
	}
}

// TestHistoryPageRefusals: a limit out of range and a page token the
// Service did not issue are the caller's mistake, said so.
func TestHistoryPageRefusals(t *testing.T) {
	svc := historyService(t, pregel.NewMemoryStore(), 3)
	runsToken := func() string { // a token of the runs listing
		for i := range 3 {
			if _, _, err := svc.Runs.CreateRun(t.Context(), runs.Run{ID: fmt.Sprint("r", i), Graph: "g", Status: pregel.RunPending}); err != nil {
				t.Fatal(err)
			}
		}
		p, err := svc.Runs.ListRuns(t.Context(), runs.Filter{Limit: 1})
		if err != nil || p.NextPageToken == "" {
			t.Fatalf("ListRuns = %+v, %v", p, err)
		}
		return p.NextPageToken
	}()
	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, tc := range []struct {
		name string
		f    runs.HistoryFilter
		want string
	}{
		{"NegativeLimit", runs.HistoryFilter{Limit: -1}, "limit -1 must be between 1 and 500"},
		{"LimitTooLarge", runs.HistoryFilter{Limit: 501}, "limit 501 must be between 1 and 500"},
		{"NotBase64", runs.HistoryFilter{PageToken: "!!"}, `page token "!!" is not one this store issued; start the listing again without it`},
		{"RunsListingToken", runs.HistoryFilter{PageToken: runsToken}, "is not one this store issued"},
		{"NegativeStep", runs.HistoryFilter{PageToken: b64("step|-1")}, "is not one this store issued"},
		{"NotANumber", runs.HistoryFilter{PageToken: b64("step|x")}, "is not one this store issued"},
		{"LeadingZero", runs.HistoryFilter{PageToken: b64("step|01")}, "is not one this store issued"},
		{"Empty", runs.HistoryFilter{PageToken: b64("step|")}, "is not one this store issued"},
		{"NewestFirstTokenOldestFirst", runs.HistoryFilter{PageToken: b64("before|2")}, "lists the steps newest first"},
		{"OldestFirstTokenNewestFirst", runs.HistoryFilter{PageToken: b64("step|2"), NewestFirst: true}, "lists the steps oldest first"},
		{"NewestFirstNegative", runs.HistoryFilter{PageToken: b64("before|-3"), NewestFirst: true}, "is not one this store issued"},
		{"NewestFirstRunsToken", runs.HistoryFilter{PageToken: runsToken, NewestFirst: true}, "is not one this store issued"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := svc.HistoryPage(t.Context(), "h", tc.f)
			if !errors.Is(err, runs.ErrInvalid) {
				t.Fatalf("HistoryPage(%+v): %v, want an error wrapping ErrInvalid", tc.f, err)
			}
			if got := err.Error(); !strings.Contains(got, tc.want) {
				t.Errorf("error %q does not say %q", got, tc.want)
			}
		})
	}
}

// TestHistoryPageNewestFirst reads a run's history newest first: the
// first page is the newest steps, the next ones the steps before, each
// step once, whether the run record's step is current or lags its
// checkpoints, from a store that pages and from one that does not.
func TestHistoryPageNewestFirst(t *testing.T) {
	const steps = 7
	stores := map[string]func() pregel.Checkpointer{
		"native": func() pregel.Checkpointer { return pregel.NewMemoryStore() },
		"sliced": func() pregel.Checkpointer { return wholeHistory{pregel.NewMemoryStore()} },
	}
	for name, newStore := range stores {
		for _, recordStep := range []int{steps - 1, 0, 2} { // current, lagging far, lagging some
			t.Run(fmt.Sprintf("%s/record%d", name, recordStep), func(t *testing.T) {
				svc := historyService(t, newStore(), steps)
				ctx := t.Context()
				r, err := svc.Runs.GetRun(ctx, "h")
				if err != nil {
					t.Fatal(err)
				}
				r.Step = recordStep
				if _, err := svc.Runs.UpdateRun(ctx, r); err != nil {
					t.Fatal(err)
				}
				for _, tc := range []struct {
					limit int
					sizes []int
				}{
					{1, []int{1, 1, 1, 1, 1, 1, 1}},
					{3, []int{3, 3, 1}},
					{6, []int{6, 1}},
					{7, []int{7}},
					{0, []int{7}},
					{500, []int{7}},
				} {
					var sizes, got []int
					tok := ""
					for range steps + 1 {
						page, err := svc.HistoryPage(ctx, "h", runs.HistoryFilter{Limit: tc.limit, PageToken: tok, NewestFirst: true})
						if err != nil {
							t.Fatalf("HistoryPage(limit %d, token %q, newest first): %v", tc.limit, tok, err)
						}
						sizes = append(sizes, len(page.Steps))
						for _, s := range page.Steps {
							got = append(got, s.Step)
						}
						if tok = page.NextPageToken; tok == "" {
							break
						}
					}
					if fmt.Sprint(sizes) != fmt.Sprint(tc.sizes) {
						t.Errorf("limit %d: page sizes %v, want %v", tc.limit, sizes, tc.sizes)
					}
					if fmt.Sprint(got) != "[6 5 4 3 2 1 0]" {
						t.Errorf("limit %d: steps %v, want 6 down to 0 once each", tc.limit, got)
					}
				}
				page, err := svc.HistoryPage(ctx, "empty", runs.HistoryFilter{NewestFirst: true})
				if err != nil || page.Steps == nil || len(page.Steps) != 0 || page.NextPageToken != "" {
					t.Fatalf("newest first of a run with no step = %+v, %v; want an empty list, no token", page, err)
				}
				if _, err := svc.HistoryPage(ctx, "nope", runs.HistoryFilter{NewestFirst: true}); !errors.Is(err, runs.ErrNotFound) {
					t.Fatalf("newest first of an unknown run: %v, want ErrNotFound", err)
				}
			})
		}
	}
	t.Run("StepCommittedWhilePaging", func(t *testing.T) {
		svc := historyService(t, pregel.NewMemoryStore(), steps)
		ctx := t.Context()
		page, err := svc.HistoryPage(ctx, "h", runs.HistoryFilter{Limit: 3, NewestFirst: true})
		if err != nil || fmt.Sprint(stepsOf(page)) != "[6 5 4]" {
			t.Fatalf("first page = %v, %v", stepsOf(page), err)
		}
		cp := &pregel.Checkpoint{RunID: "h", Graph: "g", Step: steps, Values: map[string]json.RawMessage{}, Versions: map[string]int{}}
		if err := svc.Checkpoints.Commit(ctx, cp); err != nil {
			t.Fatal(err)
		}
		// The older pages are unchanged; a new first page shows the step.
		next, err := svc.HistoryPage(ctx, "h", runs.HistoryFilter{Limit: 3, NewestFirst: true, PageToken: page.NextPageToken})
		if err != nil || fmt.Sprint(stepsOf(next)) != "[3 2 1]" {
			t.Fatalf("second page = %v, %v; want 3 2 1", stepsOf(next), err)
		}
		first, err := svc.HistoryPage(ctx, "h", runs.HistoryFilter{Limit: 3, NewestFirst: true})
		if err != nil || fmt.Sprint(stepsOf(first)) != "[7 6 5]" {
			t.Fatalf("new first page = %v, %v; want 7 6 5", stepsOf(first), err)
		}
	})
}

func stepsOf(p runs.HistoryPage) []int {
	var out []int
	for _, s := range p.Steps {
		out = append(out, s.Step)
	}
	return out
}
