package runs

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
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
	// first page.
	PageToken string
}

// HistoryPage is a page of a run's history, oldest step first.
type HistoryPage struct {
	Steps []pregel.StepInfo `json:"steps"`
	// NextPageToken is empty on the last page.
	NextPageToken string `json:"next_page_token,omitempty"`
}

// HistoryPage lists a page of a run's committed steps, oldest first. A
// step committed after a page was read appears on a later page (or on
// the last one, which then gets a NextPageToken only if more follow).
func (s *Service) HistoryPage(ctx context.Context, id string, f HistoryFilter) (HistoryPage, error) {
	if f.Limit < 0 || f.Limit > MaxHistoryPageSize {
		return HistoryPage{}, fmt.Errorf("limit %d must be between 1 and %d (0 means %d): %w", f.Limit, MaxHistoryPageSize, HistoryPageSize, ErrInvalid)
	}
	limit := f.Limit
	if limit == 0 {
		limit = HistoryPageSize
	}
	after := -1
	if f.PageToken != "" {
		var err error
		if after, err = decodeHistoryToken(f.PageToken); err != nil {
			return HistoryPage{}, err
		}
	}
	if _, err := s.Runs.GetRun(ctx, id); err != nil {
		return HistoryPage{}, err
	}
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
		page.NextPageToken = encodeHistoryToken(steps[limit-1].Step)
	}
	if page.Steps == nil {
		page.Steps = []pregel.StepInfo{}
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

// historyTokenPrefix starts every history page token, so that a token
// of another listing is refused.
const historyTokenPrefix = "step|"

func encodeHistoryToken(step int) string {
	return base64.RawURLEncoding.EncodeToString([]byte(historyTokenPrefix + strconv.Itoa(step)))
}

func decodeHistoryToken(tok string) (int, error) {
	bad := fmt.Errorf("page token %q is not one this store issued; start the listing again without it: %w", tok, ErrInvalid)
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return 0, bad
	}
	n, ok := strings.CutPrefix(string(raw), historyTokenPrefix)
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
