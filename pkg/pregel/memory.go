package pregel

import (
	"context"
	"fmt"
	"sync"
)

// MemoryStore is a Checkpointer that keeps everything in memory. It suits
// tests and short-lived runs; the zero value is not usable, call
// NewMemoryStore.
type MemoryStore struct {
	mu   sync.Mutex
	runs map[string]*memoryRun
}

type memoryRun struct {
	steps   []*Checkpoint
	pending map[int][]TaskResult
}

// NewMemoryStore returns an empty in-memory Checkpointer.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{runs: make(map[string]*memoryRun)}
}

// Commit implements Checkpointer.
func (m *MemoryStore) Commit(ctx context.Context, cp *Checkpoint) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.runs[cp.RunID]
	have := -1
	if r != nil {
		have = len(r.steps) - 1
	}
	if cp.Step != have+1 {
		return fmt.Errorf("commit step %d of run %q after step %d: %w", cp.Step, cp.RunID, have, ErrStepConflict)
	}
	if r == nil {
		r = &memoryRun{pending: make(map[int][]TaskResult)}
		m.runs[cp.RunID] = r
	}
	r.steps = append(r.steps, cp)
	delete(r.pending, cp.Step)
	return nil
}

// RecordTask implements Checkpointer.
func (m *MemoryStore) RecordTask(ctx context.Context, runID string, step int, res TaskResult) (TaskResult, error) {
	if err := ctx.Err(); err != nil {
		return TaskResult{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.runs[runID]
	if r == nil {
		return TaskResult{}, fmt.Errorf("record task of run %q: %w", runID, ErrNotFound)
	}
	if step != len(r.steps) {
		return TaskResult{}, fmt.Errorf("record task of run %q for step %d while step %d is open: %w", runID, step, len(r.steps), ErrStepConflict)
	}
	list := r.pending[step]
	for i, old := range list {
		if old.TaskID != res.TaskID {
			continue
		}
		if old.Final() {
			return old, nil
		}
		list[i] = res
		return res, nil
	}
	r.pending[step] = append(list, res)
	return res, nil
}

// PendingTasks implements Checkpointer.
func (m *MemoryStore) PendingTasks(ctx context.Context, runID string, step int) ([]TaskResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.runs[runID]
	if r == nil {
		return nil, nil
	}
	return append([]TaskResult(nil), r.pending[step]...), nil
}

// Load implements Checkpointer.
func (m *MemoryStore) Load(ctx context.Context, runID string, step int) (*Checkpoint, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.runs[runID]
	if r == nil {
		return nil, fmt.Errorf("run %q: %w", runID, ErrNotFound)
	}
	if step == Latest {
		step = len(r.steps) - 1
	}
	if step < 0 || step >= len(r.steps) {
		return nil, fmt.Errorf("run %q step %d: %w", runID, step, ErrNotFound)
	}
	return r.steps[step], nil
}

// History implements Checkpointer.
func (m *MemoryStore) History(ctx context.Context, runID string) ([]StepInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.runs[runID]
	if r == nil {
		return nil, fmt.Errorf("run %q: %w", runID, ErrNotFound)
	}
	out := make([]StepInfo, 0, len(r.steps))
	for _, cp := range r.steps {
		out = append(out, cp.Info())
	}
	return out, nil
}

// HistoryPage lists at most limit committed steps of a run after step
// after (-1 for the first ones), oldest first; none after it is an empty
// page. (It makes the store a runs.HistoryPager.) It returns an error
// wrapping ErrNotFound for a run with no committed step.
func (m *MemoryStore) HistoryPage(ctx context.Context, runID string, after, limit int) ([]StepInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.runs[runID]
	if r == nil {
		return nil, fmt.Errorf("run %q: %w", runID, ErrNotFound)
	}
	from := max(after+1, 0)
	to := min(from+max(limit, 0), len(r.steps))
	var out []StepInfo
	for i := from; i < to; i++ {
		out = append(out, r.steps[i].Info())
	}
	return out, nil
}

// DeleteRun deletes a run's checkpoints and task results; a run with none
// is not an error. (It makes the store a runs.RunDeleter.)
func (m *MemoryStore) DeleteRun(ctx context.Context, runID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.runs, runID)
	return nil
}
