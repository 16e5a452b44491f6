package runs

import (
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
)

// defaultPageSize is the size of a listing's page when Filter.Limit is 0.
const defaultPageSize = 50

// MemoryStore is a Store that keeps run records in memory. It suits tests
// and `superstep run`; the zero value is not usable, call NewMemoryStore.
type MemoryStore struct {
	mu   sync.Mutex
	runs map[string]Run
	// threads is created on first use.
	threads map[string]Thread
	// now is the clock of UpdatedAt.
	now func() time.Time
}

// NewMemoryStore returns an empty in-memory Store.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{runs: make(map[string]Run), now: func() time.Time { return time.Now().UTC() }}
}

// CreateRun implements Store. A new record gets Version 1; a zero
// UpdatedAt is set to CreatedAt.
func (m *MemoryStore) CreateRun(ctx context.Context, r Run) (Run, bool, error) {
	if err := ctx.Err(); err != nil {
		return Run{}, false, err
	}
	if r.ID == "" {
		return Run{}, false, fmt.Errorf("create run: empty run id: %w", ErrInvalid)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.runs[r.ID]; ok {
		return cloneRun(old), false, nil
	}
	r = cloneRun(r)
	r.CreatedAt = r.CreatedAt.Round(0)
	if r.UpdatedAt.IsZero() {
		r.UpdatedAt = r.CreatedAt
	}
	r.Version = 1
	m.runs[r.ID] = r
	return cloneRun(r), true, nil
}

// GetRun implements Store.
func (m *MemoryStore) GetRun(ctx context.Context, id string) (Run, error) {
	if err := ctx.Err(); err != nil {
		return Run{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.runs[id]
	if !ok {
		return Run{}, fmt.Errorf("run %q: %w", id, ErrNotFound)
	}
	return cloneRun(r), nil
}

// UpdateRun implements Store. The record's CreatedAt cannot change.
func (m *MemoryStore) UpdateRun(ctx context.Context, r Run) (Run, error) {
	if err := ctx.Err(); err != nil {
		return Run{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old, ok := m.runs[r.ID]
	if !ok {
		return Run{}, fmt.Errorf("update run %q: %w", r.ID, ErrNotFound)
	}
	if old.Version != r.Version {
		return Run{}, fmt.Errorf("update run %q at version %d: stored version is %d: %w", r.ID, r.Version, old.Version, ErrConflict)
	}
	r = cloneRun(r)
	r.CreatedAt = old.CreatedAt
	r.UpdatedAt = m.now()
	r.Version++
	m.runs[r.ID] = r
	return cloneRun(r), nil
}

// ListRuns implements Store. Page tokens are opaque; they stay valid while
// runs are created or removed.
func (m *MemoryStore) ListRuns(ctx context.Context, f Filter) (Page, error) {
	if err := ctx.Err(); err != nil {
		return Page{}, err
	}
	limit := f.Limit
	if limit <= 0 {
		limit = defaultPageSize
	}
	limit = min(limit, MaxPageSize)
	var after *listKey
	if f.PageToken != "" {
		k, err := decodePageToken(f.PageToken)
		if err != nil {
			return Page{}, err
		}
		after = &k
	}
	m.mu.Lock()
	var sel []Run
	for _, r := range m.runs {
		if (f.Graph != "" && r.Graph != f.Graph) || (f.Status != "" && r.Status != f.Status) || (f.ContextID != "" && r.ContextID != f.ContextID) || (f.Version != "" && !r.VersionMatches(f.Version)) {
			continue
		}
		if after != nil && compareKeys(keyOf(r), *after) <= 0 {
			continue
		}
		sel = append(sel, r)
	}
	m.mu.Unlock()
	slices.SortFunc(sel, func(a, b Run) int { return compareKeys(keyOf(a), keyOf(b)) })
	var page Page
	if len(sel) > limit {
		sel = sel[:limit]
		page.NextPageToken = encodePageToken(keyOf(sel[limit-1]))
	}
	page.Runs = make([]Run, len(sel))
	for i, r := range sel {
		page.Runs[i] = cloneRun(r)
	}
	return page, nil
}

// listKey orders runs in a listing.
type listKey struct {
	created int64 // CreatedAt in Unix nanoseconds
	id      string
}

func keyOf(r Run) listKey { return listKey{r.CreatedAt.UnixNano(), r.ID} }

// CompareRuns orders runs as a listing (ListRuns, ThreadRuns) does: newest
// first (CreatedAt), then by id descending. It suits slices.SortFunc;
// CompareRuns(b, a) sorts oldest first.
func CompareRuns(a, b Run) int { return compareKeys(keyOf(a), keyOf(b)) }

// compareKeys orders keys newest first, then by id descending.
func compareKeys(a, b listKey) int {
	if c := cmp.Compare(b.created, a.created); c != 0 {
		return c
	}
	return strings.Compare(b.id, a.id)
}

func encodePageToken(k listKey) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(k.created, 10) + "|" + k.id))
}

func decodePageToken(tok string) (listKey, error) {
	bad := fmt.Errorf("page token %q is not one this server issued; start the listing again without it: %w", tok, ErrInvalid)
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return listKey{}, bad
	}
	ts, id, ok := strings.Cut(string(raw), "|")
	if !ok || id == "" {
		return listKey{}, bad
	}
	n, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return listKey{}, bad
	}
	return listKey{n, id}, nil
}

// cloneRun returns a copy of r that shares no memory with it.
func cloneRun(r Run) Run {
	r.Input = slices.Clone(r.Input)
	r.Events = slices.Clone(r.Events)
	if r.Base != nil {
		b := *r.Base
		r.Base = &b
	}
	if r.Interrupts != nil {
		ins := make([]pregel.InterruptInfo, len(r.Interrupts))
		copy(ins, r.Interrupts)
		for i := range ins {
			ins[i].Value = slices.Clone(ins[i].Value)
		}
		r.Interrupts = ins
	}
	if r.Resume != nil {
		res := &ResumeRequest{Value: slices.Clone(r.Resume.Value)}
		if r.Resume.Values != nil {
			res.Values = maps.Clone(r.Resume.Values)
			for k, v := range res.Values {
				res.Values[k] = slices.Clone(v)
			}
		}
		r.Resume = res
	}
	return r
}
