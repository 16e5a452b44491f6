package runs

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/superstep/superstep/pkg/pregel"
)

// HistoryPageSize is the number of steps a page of a run's history holds
// when the caller asks for no number.
const HistoryPageSize = 100

// MaxHistoryPageSize is the most steps a page of a run's history holds.
const MaxHistoryPageSize = 500

// HistoryPager is a [pregel.Checkpointer] that reads a run's history a
// page at a time, without reading the steps before the page. The stores
// of this module implement it; for any other Checkpointer the Service
// slices the whole History.
type HistoryPager interface {
	// HistoryPage lists at most limit committed steps of run runID
	// after step after (-1 for the first ones), oldest first. A run
	// with steps but none after after has an empty page, not an error;
	// a run with no committed step has an empty page or an error
	// wrapping pregel.ErrNotFound.
	HistoryPage(ctx context.Context, runID string, after, limit int) ([]pregel.StepInfo, error)
}

// HistoryFilter selects a page of a run's history.
type HistoryFilter struct {
	// Limit is the most steps the page holds: 1 to MaxHistoryPageSize;
	// 0 means HistoryPageSize.
	Limit int
	// PageToken is the NextPageToken of the previous page; empty for the
	// first page. A token pages in the order that issued it.
	PageToken string
	// NewestFirst lists the steps newest first: the first page holds the
	// newest steps, each next page the ones before.
	NewestFirst bool
}

// HistoryPage is a page of a run's history, oldest step first (newest
// first when asked).
type HistoryPage struct {
	Steps []pregel.StepInfo `json:"steps"`
	// NextPageToken is empty on the last page.
	NextPageToken string `json:"next_page_token,omitempty"`
}

// HistoryPage lists a page of a run's committed steps, oldest first. A
// step committed after a page was read appears on a later page (or on
// the last one, which then gets a NextPageToken only if more follow).
//
// With NewestFirst, the first page is the newest steps (newest first)
// and each next page the steps before the previous page's oldest; a
// step committed meanwhile is on a new first page, not on later ones.
// Each page reads only its own steps (and a newest-first page a few
// more when the run record's step lags the checkpoints).
func (s *Service) HistoryPage(ctx context.Context, id string, f HistoryFilter) (HistoryPage, error) {
	if f.Limit < 0 || f.Limit > MaxHistoryPageSize {
		return HistoryPage{}, fmt.Errorf("limit %d must be between 1 and %d (0 means %d): %w", f.Limit, MaxHistoryPageSize, HistoryPageSize, ErrInvalid)
	}
	limit := f.Limit
	if limit == 0 {
		limit = HistoryPageSize
	}
	pos := -1
	if f.PageToken != "" {
		var err error
		if pos, err = decodeHistoryToken(f.PageToken, f.NewestFirst); err != nil {
			return HistoryPage{}, err
		}
	}
	run, err := s.Runs.GetRun(ctx, id)
	if err != nil {
		return HistoryPage{}, err
	}
	var page HistoryPage
	if f.NewestFirst {
		page, err = s.newestFirst(ctx, id, run.Step, f.PageToken != "", pos, limit)
	} else {
		page, err = s.oldestFirst(ctx, id, pos, limit)
	}
	if err != nil {
		return HistoryPage{}, err
	}
	if page.Steps == nil {
		page.Steps = []pregel.StepInfo{}
	}
	return page, nil
}

// oldestFirst reads the page of at most limit steps after step after.
func (s *Service) oldestFirst(ctx context.Context, id string, after, limit int) (HistoryPage, error) {
	// One step more than the page tells whether another page follows.
	steps, err := historyPage(ctx, s.Checkpoints, id, after, limit+1)
	if errors.Is(err, pregel.ErrNotFound) {
		steps, err = nil, nil
	}
	if err != nil {
		return HistoryPage{}, err
	}
	page := HistoryPage{Steps: steps}
	if len(steps) > limit {
		page.Steps = steps[:limit]
		page.NextPageToken = encodeHistoryToken(steps[limit-1].Step, false)
	}
	return page, nil
}

// newestFirst reads the page of at most limit steps before step before
// (when paged), or the newest limit steps, newest first. Steps are
// numbered from 0 without gaps, so the steps before step b are those
// after b-limit-1; recordStep, the run record's last step, says where
// the newest are, and the steps past it (a record that lags its
// checkpoints) are read on until the history ends.
func (s *Service) newestFirst(ctx context.Context, id string, recordStep int, paged bool, before, limit int) (HistoryPage, error) {
	var steps []pregel.StepInfo
	if paged {
		after := max(-1, before-limit-1)
		got, err := historyPage(ctx, s.Checkpoints, id, after, limit)
		if err != nil && !errors.Is(err, pregel.ErrNotFound) {
			return HistoryPage{}, err
		}
		for _, st := range got {
			if st.Step < before {
				steps = append(steps, st)
			}
		}
	} else {
		after := max(-1, recordStep-limit)
		for {
			got, err := historyPage(ctx, s.Checkpoints, id, after, limit+1)
			if err != nil && !errors.Is(err, pregel.ErrNotFound) {
				return HistoryPage{}, err
			}
			steps = append(steps, got...)
			if len(steps) > limit {
				steps = steps[len(steps)-limit:]
			}
			if len(got) <= limit {
				break
			}
			after = got[len(got)-1].Step
		}
	}
	slices.Reverse(steps)
	page := HistoryPage{Steps: steps}
	if len(steps) > 0 && steps[len(steps)-1].Step > 0 {
		page.NextPageToken = encodeHistoryToken(steps[len(steps)-1].Step, true)
	} else if len(steps) == 0 && paged && before-limit > 0 {
		// No step in this window (a gap): the next page reads the one
		// below it.
		page.NextPageToken = encodeHistoryToken(before-limit, true)
	}
	return page, nil
}

// historyPage reads steps after after from cp: natively when it is a
// HistoryPager, otherwise from its whole History.
func historyPage(ctx context.Context, cp pregel.Checkpointer, id string, after, limit int) ([]pregel.StepInfo, error) {
	if p, ok := cp.(HistoryPager); ok {
		return p.HistoryPage(ctx, id, after, limit)
	}
	all, err := cp.History(ctx, id)
	if err != nil {
		return nil, err
	}
	i := 0
	for i < len(all) && all[i].Step <= after {
		i++
	}
	all = all[i:]
	return all[:min(limit, len(all))], nil
}

// historyTokenPrefix starts every history page token listing oldest
// first (the step after which the page starts), and newestTokenPrefix
// every one listing newest first (the step before which it starts), so
// that a token of another listing or order is refused.
const (
	historyTokenPrefix = "step|"
	newestTokenPrefix  = "before|"
)

// ErrTokenOrder is wrapped (with ErrInvalid) by HistoryPage's error for
// a page token of the other order.
var ErrTokenOrder = errors.New("page token of the other order")

func encodeHistoryToken(step int, newestFirst bool) string {
	prefix := historyTokenPrefix
	if newestFirst {
		prefix = newestTokenPrefix
	}
	return base64.RawURLEncoding.EncodeToString([]byte(prefix + strconv.Itoa(step)))
}

func decodeHistoryToken(tok string, newestFirst bool) (int, error) {
	bad := fmt.Errorf("page token %q is not one this store issued; start the listing again without it: %w", tok, ErrInvalid)
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return 0, bad
	}
	prefix, other := historyTokenPrefix, newestTokenPrefix
	if newestFirst {
		prefix, other = other, prefix
	}
	if strings.HasPrefix(string(raw), other) {
		if newestFirst {
			return 0, fmt.Errorf("page token %q lists the steps oldest first; ask without the newest-first order: %w: %w", tok, ErrTokenOrder, ErrInvalid)
		}
		return 0, fmt.Errorf("page token %q lists the steps newest first; ask in that order: %w: %w", tok, ErrTokenOrder, ErrInvalid)
	}
	n, ok := strings.CutPrefix(string(raw), prefix)
	if !ok {
		return 0, bad
	}
	step, err := strconv.Atoi(n)
	if err != nil || step < 0 || strconv.Itoa(step) != n {
		return 0, bad
	}
	return step, nil
}

// The memory store reads a run's history a page at a time.
var _ HistoryPager = (*pregel.MemoryStore)(nil)
