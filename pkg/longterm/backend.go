package longterm

import (
	"context"
	"encoding/json"
	"strings"
	"time"
)

// Record is an item as a [Backend] keeps it.
type Record struct {
	// SortKey orders records and locates them: see [SortKey].
	SortKey   string
	Namespace Namespace
	Key       string
	Value     json.RawMessage
	CreatedAt time.Time
	UpdatedAt time.Time
	// ExpiresAt is zero for an item that does not expire.
	ExpiresAt time.Time
	// Vector is the item's embedding, encoded by [EncodeVector]; nil for
	// an item that is not indexed.
	Vector []byte
}

// Backend keeps the records of a [Store]. The Store checks every argument
// before it calls a Backend, and reads expiry itself: a Backend may return
// expired records (and may delete them whenever it likes).
//
// Implementations must be safe for concurrent use. Their errors may name
// internals (tables, drivers): the Store wraps them, and the API shows
// callers a generic message instead.
type Backend interface {
	// Put stores r, replacing the record of the same SortKey; a replaced
	// record keeps its CreatedAt unless it had expired by r.UpdatedAt. Of concurrent Puts to one key, the one
	// stored last wins.
	Put(ctx context.Context, r Record) error
	// Get returns the record of sortKey, or an error wrapping
	// ErrNotFound.
	Get(ctx context.Context, sortKey string) (Record, error)
	// Delete deletes the record of sortKey; a missing one is not an
	// error.
	Delete(ctx context.Context, sortKey string) error
	// Scan returns up to limit records of the namespaces under prefix
	// (prefix itself and those below it), in SortKey order, starting
	// after the SortKey after ("" for the first).
	Scan(ctx context.Context, prefix Namespace, after string, limit int) ([]Record, error)
}

// Roots is implemented by a Backend that can list the first components of
// its namespaces (for [Store.ListNamespaces] with an empty prefix).
type Roots interface {
	// Roots returns the first components of the namespaces that hold
	// records (or held them: a Backend may list a root whose records
	// are gone), sorted.
	Roots(ctx context.Context) ([]string, error)
}

// Separators of the sort key, below every character a namespace component
// or key may hold (see checkText), so that a namespace's records and those
// of the namespaces below it form one range of sort keys.
const (
	sepLabel = "\x1e"
	sepKey   = "\x1f"
	// rangeEnd is the first string above every sort key of a prefix's
	// range: ' ' (0x20) is above both separators and every sort key
	// holds sepKey after its namespace, so none equals prefix + rangeEnd.
	rangeEnd = "\x20"
)

// SortKey is the key a Backend stores a record under: the namespace's
// components joined by 0x1E, then 0x1F and the key. Records in SortKey
// order are grouped by namespace, a namespace's sub-namespaces before its
// own items.
func SortKey(ns Namespace, key string) string {
	return strings.Join(ns, sepLabel) + sepKey + key
}

// PrefixRange returns the range [lo, hi) of the sort keys of the records
// of prefix and the namespaces below it: lo <= SortKey < hi. Backends
// query it (hi itself is never a sort key, so an inclusive BETWEEN lo AND
// hi is the same range).
func PrefixRange(prefix Namespace) (lo, hi string) {
	p := strings.Join(prefix, sepLabel)
	return p + sepLabel, p + rangeEnd
}

// InRange reports whether sortKey lies in prefix's range; a Backend whose
// range query may return more filters with it.
func InRange(prefix Namespace, sortKey string) bool {
	p := strings.Join(prefix, sepLabel)
	return strings.HasPrefix(sortKey, p+sepLabel) || strings.HasPrefix(sortKey, p+sepKey)
}
