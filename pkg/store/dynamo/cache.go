package dynamo

import (
	"container/list"
	"sync"

	"github.com/superstep/superstep/pkg/pregel"
)

// DefaultCacheSize is the default of [WithCacheSize]: how many bytes of
// committed steps a Store keeps in memory.
const DefaultCacheSize = 16 << 20

// stepKey names a step of a run.
type stepKey struct {
	run  string
	step int
}

// stepEntry is what a Store knows of a committed step. Committed steps
// never change and are never deleted while their run lives, so an entry
// never goes stale: it saves the reads of the step's item (Load), of its
// manifest and existence (Commit of the next step, RecordTask) and of the
// values it holds (Load of later steps).
type stepEntry struct {
	// commit is the id of the commit that wrote the step item.
	commit string
	// size is the item's size as DynamoDB counts it.
	size int
	// man is the step's whole manifest, base the whole manifest it is
	// read from (the step's own when its item holds it whole).
	man  manifest
	base *manifestBase
	// cp is the whole checkpoint in its stored form (pregel.PackSegments:
	// segments of array channels as channels of their own); nil when only
	// the manifest is known.
	cp *pregel.Checkpoint
	// full is cp as loaded (pregel.UnpackSegments), shared with the
	// callers of Commit and Load, who must not modify it; cp itself when
	// no channel is stored in segments.
	full *pregel.Checkpoint
}

// cost estimates the memory an entry holds, in bytes.
func (e *stepEntry) cost() int64 {
	n := int64(256 + 64*len(e.man))
	if e.cp != nil {
		for ch, v := range e.cp.Values {
			n += int64(len(ch) + len(v) + 64)
		}
		if e.full != e.cp {
			for ch, v := range e.full.Values {
				n += int64(len(ch) + len(v) + 64)
			}
		}
	}
	return n
}

// taskNote lists the task result items a Store has seen for an open step,
// with the blobs they reference, for the step's commit to delete.
type taskNote map[string]*blobRef

// lru is a map bounded by the summed costs of its entries that drops the
// least recently used ones first. The zero limit keeps nothing. It is safe
// for concurrent use.
type lru[K comparable, V any] struct {
	mu    sync.Mutex
	limit int64
	used  int64
	order list.List // of *lruEntry[K, V], most recently used first
	index map[K]*list.Element
}

type lruEntry[K comparable, V any] struct {
	key  K
	val  V
	cost int64
}

func newLRU[K comparable, V any](limit int64) *lru[K, V] {
	return &lru[K, V]{limit: limit, index: map[K]*list.Element{}}
}

// get returns the value of k and marks it used.
func (c *lru[K, V]) get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.index[k]
	if !ok {
		var zero V
		return zero, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*lruEntry[K, V]).val, true
}

// put stores v under k, replacing what k had, and drops the least recently
// used entries until the costs fit the limit. A value that costs more than
// the limit is not stored.
func (c *lru[K, V]) put(k K, v V, cost int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(k, v, cost)
}

func (c *lru[K, V]) putLocked(k K, v V, cost int64) {
	c.removeLocked(k)
	if cost > c.limit {
		return
	}
	c.index[k] = c.order.PushFront(&lruEntry[K, V]{key: k, val: v, cost: cost})
	c.used += cost
	for c.used > c.limit {
		c.removeLocked(c.order.Back().Value.(*lruEntry[K, V]).key)
	}
}

// update replaces the value of k with fn(old, ok), at the given cost.
// fn runs with the cache locked.
func (c *lru[K, V]) update(k K, fn func(old V, ok bool) (V, int64)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var old V
	el, ok := c.index[k]
	if ok {
		old = el.Value.(*lruEntry[K, V]).val
	}
	v, cost := fn(old, ok)
	c.putLocked(k, v, cost)
}

// take removes k and returns what it had.
func (c *lru[K, V]) take(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.index[k]
	if !ok {
		var zero V
		return zero, false
	}
	c.removeLocked(k)
	return el.Value.(*lruEntry[K, V]).val, true
}

// removeIf removes the keys for which drop is true.
func (c *lru[K, V]) removeIf(drop func(K) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.index {
		if drop(k) {
			c.removeLocked(k)
		}
	}
}

func (c *lru[K, V]) removeLocked(k K) {
	el, ok := c.index[k]
	if !ok {
		return
	}
	c.order.Remove(el)
	delete(c.index, k)
	c.used -= el.Value.(*lruEntry[K, V]).cost
}
