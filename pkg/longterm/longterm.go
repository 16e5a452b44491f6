// Package longterm is a long-term store for agents: memories that outlive a
// thread, such as a person's preferences, facts and past decisions. It is
// what LangGraph's Store is to its users: JSON items under hierarchical
// namespaces (["users", "u-42", "prefs"]), put, get and delete by key,
// listing by namespace prefix with paging and filters on value fields, an
// optional time to live per item, and semantic search by cosine similarity
// when an [Embedder] is configured.
//
// A [Store] holds the rules (what a valid namespace, key and value are, TTL,
// filters, paging, search); a [Backend] keeps the records. This package has
// the in-memory backend ([NewMemory]); pkg/store/sqlite and pkg/store/dynamo
// have the embedded and the AWS ones, and pkg/longterm/longtermtest is the
// conformance suite all three pass. README.md beside this file describes the
// semantics and the limits.
package longterm

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits on what a Store accepts. Each is checked before anything is
// stored, with an error saying what to fix.
const (
	// MaxDepth is the most components a namespace has.
	MaxDepth = 8
	// MaxLabelBytes is the longest namespace component, in bytes.
	MaxLabelBytes = 128
	// MaxKeyBytes is the longest key, in bytes.
	MaxKeyBytes = 256
	// MaxValueBytes is the largest value, as compact JSON. Memories are
	// small documents; keep large data elsewhere (a file, S3) and store
	// a reference to it.
	MaxValueBytes = 128 << 10
	// MaxTTL is the longest time to live.
	MaxTTL = 10 * 365 * 24 * time.Hour
	// MaxPageSize is the most items a page of List holds; DefaultPageSize
	// is the size of a page when none is asked for.
	MaxPageSize     = 1000
	DefaultPageSize = 100
)

// Errors a Store returns, wrapped with what to fix.
var (
	// ErrNotFound: no live item has that namespace and key.
	ErrNotFound = errors.New("item not found")
	// ErrInvalid: a namespace, key, value, TTL, filter or page token is
	// not acceptable; the message says why.
	ErrInvalid = errors.New("invalid")
	// ErrTooLarge: a value is larger than MaxValueBytes, or a semantic
	// search would scan more items than the Store's search limit.
	ErrTooLarge = errors.New("too large")
	// ErrNoEmbedder: semantic search was asked of a Store without an
	// embedding model.
	ErrNoEmbedder = errors.New("no embedding model is configured")
)

// Namespace is a hierarchical name, outermost first:
// ["users", "u-42", "prefs"]. Each component is 1 to MaxLabelBytes bytes of
// UTF-8 without '/' or control characters; a namespace has 1 to MaxDepth
// components.
type Namespace []string

// String is the namespace with its components joined by '/', as the API
// and the CLI write it.
func (ns Namespace) String() string { return strings.Join(ns, "/") }

// ParseNamespace splits a namespace written as its components joined by
// '/' ("users/u-42/prefs") and checks it.
func ParseNamespace(s string) (Namespace, error) {
	s = strings.Trim(s, "/")
	if s == "" {
		return nil, fmt.Errorf("%w: the namespace is empty: name at least its first component, as in users/u-42", ErrInvalid)
	}
	ns := Namespace(strings.Split(s, "/"))
	return ns, ns.Check()
}

// Check says what is wrong with a namespace, if anything.
func (ns Namespace) Check() error {
	if len(ns) == 0 {
		return fmt.Errorf("%w: the namespace is empty: name at least its first component, as in [\"users\", \"u-42\"]", ErrInvalid)
	}
	if len(ns) > MaxDepth {
		return fmt.Errorf("%w: the namespace has %d components; the most is %d", ErrInvalid, len(ns), MaxDepth)
	}
	for i, c := range ns {
		if err := checkText(c, MaxLabelBytes); err != nil {
			return fmt.Errorf("%w: namespace component %d %s", ErrInvalid, i+1, err)
		}
		if strings.Contains(c, "/") {
			return fmt.Errorf("%w: namespace component %d (%q) contains '/': use one component per level", ErrInvalid, i+1, c)
		}
	}
	return nil
}

// HasPrefix reports whether ns is p or lies under it.
func (ns Namespace) HasPrefix(p Namespace) bool {
	if len(p) > len(ns) {
		return false
	}
	for i := range p {
		if ns[i] != p[i] {
			return false
		}
	}
	return true
}

// checkKey says what is wrong with a key, if anything.
func checkKey(key string) error {
	if err := checkText(key, MaxKeyBytes); err != nil {
		return fmt.Errorf("%w: the key %s", ErrInvalid, err)
	}
	return nil
}

// checkText checks a namespace component or key: non-empty, UTF-8, at most
// max bytes, no control characters, no U+10FFFF (the stores' range bound).
func checkText(s string, max int) error {
	switch {
	case s == "":
		return errors.New("is empty")
	case len(s) > max:
		return fmt.Errorf("is %d bytes; the most is %d", len(s), max)
	case !utf8.ValidString(s):
		return errors.New("is not valid UTF-8")
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == utf8.MaxRune {
			return fmt.Errorf("contains the control character %U", r)
		}
	}
	return nil
}

// Item is a stored memory.
type Item struct {
	Namespace Namespace       `json:"namespace"`
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
	// ExpiresAt is when the item stops being visible; nil: never.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// Score is the cosine similarity to a search's query (search
	// results only).
	Score *float64 `json:"score,omitempty"`
}

// Page is a page of a listing. NextPageToken, when not empty, asks for the
// next page.
type Page struct {
	Items         []Item `json:"items"`
	NextPageToken string `json:"next_page_token,omitempty"`
}
