package runs

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// PushConfig is a protocol binding's push-notification config for a run
// (an A2A task's webhook), kept with the run so that it outlives the
// process that received it and is deleted with the run. Stores treat
// Config as opaque bytes; it may hold secrets (tokens, credentials), so
// they never log it.
type PushConfig struct {
	// RunID is the run (task) notified about.
	RunID string `json:"run_id"`
	// ID names the config among the run's configs.
	ID string `json:"id"`
	// Config is the binding's config, as JSON.
	Config []byte `json:"config"`
	// Seen is the delivery cursor: how many events of the run's history
	// (Run.Events, counting Run.EventsDropped) have been handled.
	Seen int `json:"seen"`
	// Last is the last state delivered (the binding's name for it), so
	// that a state is not delivered twice in a row.
	Last string `json:"last,omitempty"`
	// CreatedAt is when the config was first stored.
	CreatedAt time.Time `json:"created_at"`
}

// PushStore keeps push configs durably with their runs, and each
// config's delivery cursor, so that configs survive a restart and every
// process serving the runs (every Lambda) sees them. The A2A binding
// (pkg/a2a PushOptions.Store) uses it. MemoryPushStore, the SQLite store
// (pkg/store/sqlite) and the DynamoDB store (pkg/store/dynamo, in the
// run's partition, purged with it) implement it; runstest.PushStores is
// its conformance suite.
type PushStore interface {
	// PutPushConfig stores a config, replacing the run's config of the
	// same ID.
	PutPushConfig(ctx context.Context, c PushConfig) error
	// GetPushConfig returns a config or an error wrapping ErrNotFound.
	GetPushConfig(ctx context.Context, runID, id string) (PushConfig, error)
	// ListPushConfigs returns a run's configs, by ID.
	ListPushConfigs(ctx context.Context, runID string) ([]PushConfig, error)
	// DeletePushConfig deletes a config (none there is not an error).
	DeletePushConfig(ctx context.Context, runID, id string) error
	// AdvancePushConfig moves a config's cursor forward (never back).
	AdvancePushConfig(ctx context.Context, runID, id string, seen int, last string) error
}

var _ PushStore = (*MemoryPushStore)(nil)

// MemoryPushStore keeps push configs in memory. It suits tests and
// processes whose runs are in memory too; the zero value is ready to use.
type MemoryPushStore struct {
	mu      sync.Mutex
	configs map[string]map[string]PushConfig // run id -> config id -> config
}

// NewMemoryPushStore returns an empty MemoryPushStore.
func NewMemoryPushStore() *MemoryPushStore { return &MemoryPushStore{} }

func clonePush(c PushConfig) PushConfig {
	c.Config = slices.Clone(c.Config)
	return c
}

func checkPushKey(runID, id string) error {
	if runID == "" || id == "" {
		return fmt.Errorf("push config: empty run id or config id: %w", ErrInvalid)
	}
	return nil
}

// PutPushConfig stores c, replacing the run's config of the same ID
// (whose CreatedAt is kept).
func (m *MemoryPushStore) PutPushConfig(ctx context.Context, c PushConfig) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkPushKey(c.RunID, c.ID); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.configs == nil {
		m.configs = make(map[string]map[string]PushConfig)
	}
	byID := m.configs[c.RunID]
	if byID == nil {
		byID = make(map[string]PushConfig)
		m.configs[c.RunID] = byID
	}
	if old, ok := byID[c.ID]; ok {
		c.CreatedAt = old.CreatedAt
	}
	byID[c.ID] = clonePush(c)
	return nil
}

// GetPushConfig returns a config or an error wrapping ErrNotFound.
func (m *MemoryPushStore) GetPushConfig(ctx context.Context, runID, id string) (PushConfig, error) {
	if err := ctx.Err(); err != nil {
		return PushConfig{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.configs[runID][id]
	if !ok {
		return PushConfig{}, fmt.Errorf("push config %q of run %q: %w", id, runID, ErrNotFound)
	}
	return clonePush(c), nil
}

// ListPushConfigs returns a run's configs by ID.
func (m *MemoryPushStore) ListPushConfigs(ctx context.Context, runID string) ([]PushConfig, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []PushConfig
	for _, c := range m.configs[runID] {
		out = append(out, clonePush(c))
	}
	slices.SortFunc(out, func(a, b PushConfig) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// DeletePushConfig deletes a config; deleting one that is not there is
// not an error.
func (m *MemoryPushStore) DeletePushConfig(ctx context.Context, runID, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.configs[runID], id)
	if len(m.configs[runID]) == 0 {
		delete(m.configs, runID)
	}
	return nil
}

// AdvancePushConfig moves a config's cursor forward to seen and last; a
// cursor at or past seen is left alone. An unknown config is an error
// wrapping ErrNotFound.
func (m *MemoryPushStore) AdvancePushConfig(ctx context.Context, runID, id string, seen int, last string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.configs[runID][id]
	if !ok {
		return fmt.Errorf("push config %q of run %q: %w", id, runID, ErrNotFound)
	}
	if seen > c.Seen {
		c.Seen, c.Last = seen, last
		m.configs[runID][id] = c
	}
	return nil
}

// PushRuns returns the ids of the runs that have configs, sorted.
func (m *MemoryPushStore) PushRuns(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.configs))
	for id := range m.configs {
		out = append(out, id)
	}
	slices.Sort(out)
	return out, nil
}
