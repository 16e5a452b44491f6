package longterm

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Memory is a [Backend] in this process's memory: for tests, and for
// embedded programs that do not need their memories to outlive them.
type Memory struct {
	mu   sync.RWMutex
	keys []string // sorted
	recs map[string]Record
}

var (
	_ Backend = (*Memory)(nil)
	_ Roots   = (*Memory)(nil)
)

// NewMemory returns an empty in-memory Backend.
func NewMemory() *Memory { return &Memory{recs: make(map[string]Record)} }

// Put implements [Backend].
func (m *Memory) Put(_ context.Context, r Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.recs[r.SortKey]; ok {
		if old.ExpiresAt.IsZero() || old.ExpiresAt.After(r.UpdatedAt) {
			r.CreatedAt = old.CreatedAt // replaced; an expired item is new
		}
	} else {
		i, _ := slices.BinarySearch(m.keys, r.SortKey)
		m.keys = slices.Insert(m.keys, i, r.SortKey)
	}
	r.Value = slices.Clone(r.Value)
	r.Vector = slices.Clone(r.Vector)
	m.recs[r.SortKey] = r
	return nil
}

// Get implements [Backend].
func (m *Memory) Get(_ context.Context, sortKey string) (Record, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	r, ok := m.recs[sortKey]
	if !ok {
		return Record{}, fmt.Errorf("memory: %w", ErrNotFound)
	}
	return r, nil
}

// Delete implements [Backend].
func (m *Memory) Delete(_ context.Context, sortKey string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.recs[sortKey]; !ok {
		return nil
	}
	delete(m.recs, sortKey)
	i, _ := slices.BinarySearch(m.keys, sortKey)
	m.keys = slices.Delete(m.keys, i, i+1)
	return nil
}

// Scan implements [Backend].
func (m *Memory) Scan(_ context.Context, prefix Namespace, after string, limit int) ([]Record, error) {
	lo, hi := PrefixRange(prefix)
	m.mu.RLock()
	defer m.mu.RUnlock()
	i := sort.SearchStrings(m.keys, max(lo, after))
	var out []Record
	for ; i < len(m.keys) && len(out) < limit; i++ {
		k := m.keys[i]
		if k >= hi {
			break
		}
		if k == after {
			continue
		}
		out = append(out, m.recs[k])
	}
	return out, nil
}

// Roots implements [Roots].
func (m *Memory) Roots(context.Context) ([]string, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []string
	for _, k := range m.keys {
		root, _, _ := strings.Cut(k, sepLabel)
		root, _, _ = strings.Cut(root, sepKey)
		if len(out) == 0 || out[len(out)-1] != root {
			out = append(out, root)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
