package runs

import (
	"context"
	"fmt"
	"slices"
)

var _ ThreadStore = (*MemoryStore)(nil)

// CreateThread implements ThreadStore. A new record gets Version 1; a zero
// UpdatedAt is set to CreatedAt.
func (m *MemoryStore) CreateThread(ctx context.Context, t Thread) (Thread, bool, error) {
	if err := ctx.Err(); err != nil {
		return Thread{}, false, err
	}
	if t.ID == "" {
		return Thread{}, false, fmt.Errorf("create thread: empty thread id: %w", ErrInvalid)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.threads == nil {
		m.threads = make(map[string]Thread)
	}
	if old, ok := m.threads[t.ID]; ok {
		return cloneThread(old), false, nil
	}
	t = cloneThread(t)
	t.CreatedAt = t.CreatedAt.Round(0)
	if t.UpdatedAt.IsZero() {
		t.UpdatedAt = t.CreatedAt
	}
	t.Version = 1
	m.threads[t.ID] = t
	return cloneThread(t), true, nil
}

// GetThread implements ThreadStore.
func (m *MemoryStore) GetThread(ctx context.Context, id string) (Thread, error) {
	if err := ctx.Err(); err != nil {
		return Thread{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.threads[id]
	if !ok {
		return Thread{}, fmt.Errorf("thread %q: %w", id, ErrNotFound)
	}
	return cloneThread(t), nil
}

// UpdateThread implements ThreadStore. CreatedAt cannot change.
func (m *MemoryStore) UpdateThread(ctx context.Context, t Thread) (Thread, error) {
	if err := ctx.Err(); err != nil {
		return Thread{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old, ok := m.threads[t.ID]
	if !ok {
		return Thread{}, fmt.Errorf("update thread %q: %w", t.ID, ErrNotFound)
	}
	if old.Version != t.Version {
		return Thread{}, fmt.Errorf("update thread %q at version %d: stored version is %d: %w", t.ID, t.Version, old.Version, ErrConflict)
	}
	t = cloneThread(t)
	t.CreatedAt = old.CreatedAt
	t.UpdatedAt = m.now()
	t.Version++
	m.threads[t.ID] = t
	return cloneThread(t), nil
}

// DeleteThread implements ThreadStore.
func (m *MemoryStore) DeleteThread(ctx context.Context, id string, version int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old, ok := m.threads[id]
	if !ok {
		return fmt.Errorf("delete thread %q: %w", id, ErrNotFound)
	}
	if old.Version != version {
		return fmt.Errorf("delete thread %q at version %d: stored version is %d: %w", id, version, old.Version, ErrConflict)
	}
	delete(m.threads, id)
	return nil
}

// ListThreads implements ThreadStore, with the page tokens of ListRuns.
func (m *MemoryStore) ListThreads(ctx context.Context, f ThreadFilter) (ThreadPage, error) {
	if err := ctx.Err(); err != nil {
		return ThreadPage{}, err
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
			return ThreadPage{}, err
		}
		after = &k
	}
	key := func(t Thread) listKey { return listKey{t.CreatedAt.UnixNano(), t.ID} }
	m.mu.Lock()
	var sel []Thread
	for _, t := range m.threads {
		if after == nil || compareKeys(key(t), *after) > 0 {
			sel = append(sel, cloneThread(t))
		}
	}
	m.mu.Unlock()
	slices.SortFunc(sel, func(a, b Thread) int { return compareKeys(key(a), key(b)) })
	var page ThreadPage
	if len(sel) > limit {
		sel = sel[:limit]
		page.NextPageToken = encodePageToken(key(sel[limit-1]))
	}
	page.Threads = sel
	if page.Threads == nil {
		page.Threads = []Thread{}
	}
	return page, nil
}

var _ RunDeleter = (*MemoryStore)(nil)

// DeleteRun implements [RunDeleter]: it deletes the run's record (the
// store keeps nothing else of it).
func (m *MemoryStore) DeleteRun(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.runs, id)
	return nil
}
