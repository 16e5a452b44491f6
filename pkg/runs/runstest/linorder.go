package runstest

import (
	"context"
	"slices"
	"sync"

	"github.com/superstep/superstep/pkg/runs"
)

// orderLog is a ThreadStore that keeps every version of each thread's
// record it stores or reads, to tell in which order runs took their
// thread (activations). The linearizability check uses that order as a
// fact about each run, as it uses how each run ended: the model then
// queues runs only in that order, which prunes at once the orders of
// concurrent creates that no later operation could tell apart before the
// runs executed (on SQLite, where creates wait for the write connection
// and overlap many other operations, porcupine explored thousands of such
// orders per thread). An order that disagrees with what the clients saw
// makes the history illegal; it never makes an illegal history legal.
type orderLog struct {
	runs.ThreadStore
	mu       sync.Mutex
	versions map[string]map[int64]string // thread → version → active run
}

func newOrderLog(s runs.ThreadStore) *orderLog {
	return &orderLog{ThreadStore: s, versions: map[string]map[int64]string{}}
}

func (l *orderLog) saw(t runs.Thread) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v := l.versions[t.ID]
	if v == nil {
		v = map[int64]string{}
		l.versions[t.ID] = v
	}
	v[t.Version] = t.Active
}

// CreateThread implements runs.ThreadStore.
func (l *orderLog) CreateThread(ctx context.Context, t runs.Thread) (runs.Thread, bool, error) {
	out, created, err := l.ThreadStore.CreateThread(ctx, t)
	if err == nil {
		l.saw(out)
	}
	return out, created, err
}

// GetThread implements runs.ThreadStore.
func (l *orderLog) GetThread(ctx context.Context, id string) (runs.Thread, error) {
	t, err := l.ThreadStore.GetThread(ctx, id)
	if err == nil {
		l.saw(t)
	}
	return t, err
}

// UpdateThread implements runs.ThreadStore.
func (l *orderLog) UpdateThread(ctx context.Context, t runs.Thread) (runs.Thread, error) {
	out, err := l.ThreadStore.UpdateThread(ctx, t)
	if err == nil {
		l.saw(out)
	}
	return out, err
}

// activations returns, for each run that took a thread, its place in
// its thread's order of activations (1 for the first).
func (l *orderLog) activations() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	order := map[string]int{}
	for _, byVersion := range l.versions {
		vs := make([]int64, 0, len(byVersion))
		for v := range byVersion {
			vs = append(vs, v)
		}
		slices.Sort(vs)
		n := 0
		for _, v := range vs {
			if r := byVersion[v]; r != "" {
				if _, ok := order[r]; !ok {
					n++
					order[r] = n
				}
			}
		}
	}
	return order
}
