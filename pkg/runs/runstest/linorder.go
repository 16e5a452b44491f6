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
	versions map[string]map[int64]holders // thread → version → its runs
}

// holders are the runs a version of a thread's record names: the active
// run, then the queued ones in their order, then the superseding one.
type holders []string

func newOrderLog(s runs.ThreadStore) *orderLog {
	return &orderLog{ThreadStore: s, versions: map[string]map[int64]holders{}}
}

func (l *orderLog) saw(t runs.Thread) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v := l.versions[t.ID]
	if v == nil {
		v = map[int64]holders{}
		l.versions[t.ID] = v
	}
	h := append(holders{t.Active}, t.Queue...)
	if t.Superseding != nil {
		h = append(h, t.Superseding.Run)
	}
	v[t.Version] = h
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

// orders returns, for each run that its thread's records name, its
// place in the order in which runs claimed the thread (the claim that
// queued it or made it active; 1 for the first) and its place in the
// order in which runs took the thread (became active). A run that held
// the thread only in versions not seen has no place in the second.
func (l *orderLog) orders() (claims, activations map[string]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	claims, activations = map[string]int{}, map[string]int{}
	for _, byVersion := range l.versions {
		vs := make([]int64, 0, len(byVersion))
		for v := range byVersion {
			vs = append(vs, v)
		}
		slices.Sort(vs)
		var nc, na int
		for _, v := range vs {
			h := byVersion[v]
			if r := h[0]; r != "" {
				if _, ok := activations[r]; !ok {
					na++
					activations[r] = na
				}
			}
			for _, r := range h {
				if _, ok := claims[r]; r != "" && !ok {
					nc++
					claims[r] = nc
				}
			}
		}
	}
	return claims, activations
}
