package runs

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
)

// ThreadHistoryFilter selects a page of a thread's history.
type ThreadHistoryFilter struct {
	// Limit is the most steps the page holds: 1 to MaxHistory; 0 means
	// 20.
	Limit int
	// PageToken is the NextPageToken of the previous page; empty for the
	// newest steps.
	PageToken string
}

// ThreadHistoryPage is a page of a thread's history, newest step first.
type ThreadHistoryPage struct {
	Steps []ThreadStep `json:"steps"`
	// NextPageToken, empty on the last page, reads the steps before.
	NextPageToken string `json:"next_page_token,omitempty"`
}

// ThreadHistoryPage lists a page of the committed steps of a thread,
// newest first (see ThreadHistory); NextPageToken reads the steps before
// the page's oldest, down to the first step of the thread's first run.
// A page reads its own steps only: its cost does not grow with the
// thread's length. Steps committed after the first page was read are on
// a new first page, not on later ones.
func (s *Service) ThreadHistoryPage(ctx context.Context, id string, f ThreadHistoryFilter) (ThreadHistoryPage, error) {
	if f.Limit < 0 || f.Limit > MaxHistory {
		return ThreadHistoryPage{}, fmt.Errorf("limit %d must be between 1 and %d (0 means 20): %w", f.Limit, MaxHistory, ErrInvalid)
	}
	limit := f.Limit
	if limit == 0 {
		limit = 20
	}
	var from *StepRef
	if f.PageToken != "" {
		ref, err := decodeThreadToken(id, f.PageToken)
		if err != nil {
			return ThreadHistoryPage{}, err
		}
		from = &ref
	}
	t, err := s.GetThread(ctx, id)
	if err != nil {
		return ThreadHistoryPage{}, err
	}
	ref := from
	if ref == nil {
		if ref, err = s.current(ctx, t); err != nil {
			return ThreadHistoryPage{}, err
		}
	}
	out := ThreadHistoryPage{Steps: []ThreadStep{}}
	for ref != nil {
		r, err := s.Runs.GetRun(ctx, ref.RunID)
		if err != nil {
			return ThreadHistoryPage{}, fmt.Errorf("thread %q: run %q: %w", id, ref.RunID, err)
		}
		step := ref.Step
		for ; step >= 0 && len(out.Steps) < limit; step-- {
			cp, err := s.Checkpoints.Load(ctx, ref.RunID, step)
			if err != nil {
				return ThreadHistoryPage{}, fmt.Errorf("thread %q: load step %d of run %q: %w", id, step, ref.RunID, err)
			}
			out.Steps = append(out.Steps, ThreadStep{RunID: ref.RunID, Graph: cp.Graph, StepInfo: cp.Info(), Values: cp.Values})
		}
		next := r.Base
		if step >= 0 {
			next = &StepRef{RunID: ref.RunID, Step: step}
		}
		if len(out.Steps) == limit {
			if next != nil {
				out.NextPageToken = encodeThreadToken(id, *next)
			}
			break
		}
		ref = next
	}
	return out, nil
}

// threadTokenPrefix starts every thread history token, which names the
// thread, then the run and step the next page starts from.
const threadTokenPrefix = "thread|"

func encodeThreadToken(thread string, ref StepRef) string {
	return base64.RawURLEncoding.EncodeToString([]byte(threadTokenPrefix + thread + "|" + ref.RunID + "|" + strconv.Itoa(ref.Step)))
}

func decodeThreadToken(thread, tok string) (StepRef, error) {
	bad := fmt.Errorf("page token %q is not one this thread's history issued; start the listing again without it: %w", tok, ErrInvalid)
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return StepRef{}, bad
	}
	rest, ok := strings.CutPrefix(string(raw), threadTokenPrefix)
	if !ok {
		return StepRef{}, bad
	}
	parts := strings.Split(rest, "|")
	if len(parts) != 3 || parts[0] != thread || parts[1] == "" {
		return StepRef{}, bad
	}
	step, err := strconv.Atoi(parts[2])
	if err != nil || step < 0 || strconv.Itoa(step) != parts[2] {
		return StepRef{}, bad
	}
	return StepRef{RunID: parts[1], Step: step}, nil
}
