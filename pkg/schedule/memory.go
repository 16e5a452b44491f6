package schedule

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/superstep/superstep/pkg/runs"
)

// MemoryStore is a Backend in memory, for tests and a dev server without
// a file.
type MemoryStore struct {
	mu sync.Mutex
	m  map[string]Schedule
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{m: map[string]Schedule{}} }

func clone(s Schedule) Schedule {
	s.Input = bytes.Clone(s.Input)
	for _, p := range []**time.Time{&s.NextFireAt, &s.LastFireAt} {
		if *p != nil {
			t := **p
			*p = &t
		}
	}
	return s
}

func notFound(name string) error {
	return fmt.Errorf("there is no schedule %q: %w", name, runs.ErrNotFound)
}

// Create implements Backend.
func (m *MemoryStore) Create(ctx context.Context, s Schedule) (Schedule, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.m[s.Name]; ok {
		return Schedule{}, fmt.Errorf("schedule %q exists; choose another name, or update it: %w", s.Name, runs.ErrConflict)
	}
	m.m[s.Name] = clone(s)
	return clone(s), nil
}

// Get implements Backend.
func (m *MemoryStore) Get(ctx context.Context, name string) (Schedule, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.m[name]
	if !ok {
		return Schedule{}, notFound(name)
	}
	return clone(s), nil
}

// List implements Backend.
func (m *MemoryStore) List(ctx context.Context) ([]Schedule, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Schedule, 0, len(m.m))
	for _, s := range m.m {
		out = append(out, clone(s))
	}
	slices.SortFunc(out, func(a, b Schedule) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Mutate implements Backend.
func (m *MemoryStore) Mutate(ctx context.Context, name string, fn func(*Schedule) error) (Schedule, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.m[name]
	if !ok {
		return Schedule{}, notFound(name)
	}
	s = clone(s)
	if err := fn(&s); err != nil {
		return Schedule{}, err
	}
	m.m[name] = clone(s)
	return s, nil
}

// Delete implements Backend.
func (m *MemoryStore) Delete(ctx context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.m[name]; !ok {
		return notFound(name)
	}
	delete(m.m, name)
	return nil
}
