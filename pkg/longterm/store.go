package longterm

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// DefaultSearchLimit is the most items a semantic search compares with its
// query unless [WithSearchLimit] says otherwise (see [Store.Search]).
const DefaultSearchLimit = 2000

// maxListScan bounds the records one List call reads while a filter skips
// them: the page then ends early, with a token to go on.
const maxListScan = 10 * MaxPageSize

// Store is a long-term store on a [Backend]. It is safe for concurrent use.
// Create one with [New].
type Store struct {
	b           Backend
	now         func() time.Time
	embedder    Embedder
	index       []string
	searchLimit int
}

// Option configures a Store.
type Option func(*Store)

// WithClock sets the clock of timestamps and expiry (default time.Now).
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// WithEmbedder enables semantic search: on Put, the fields named (dotted
// paths into the value, as in a [Filter]; the whole value when none are
// named) are embedded by e, and [Store.Search] ranks items by the cosine
// similarity of that embedding to its query's. A Put may name other
// fields with [Index].
func WithEmbedder(e Embedder, fields ...string) Option {
	return func(s *Store) { s.embedder, s.index = e, fields }
}

// WithSearchLimit sets the most items a semantic search compares with its
// query (default [DefaultSearchLimit]).
func WithSearchLimit(n int) Option { return func(s *Store) { s.searchLimit = n } }

// New returns a Store keeping its items in b.
func New(b Backend, opts ...Option) *Store {
	s := &Store{b: b, now: time.Now, searchLimit: DefaultSearchLimit}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Searchable reports whether the Store has an embedding model.
func (s *Store) Searchable() bool { return s.embedder != nil }

// PutOption configures one Put.
type PutOption func(*putConfig)

type putConfig struct {
	ttl     time.Duration
	index   []string
	indexed bool // index was given
}

// TTL makes the item expire d after this Put: it is then no longer
// returned, and the backend deletes it in its own time. A later Put
// without TTL makes it permanent again.
func TTL(d time.Duration) PutOption { return func(c *putConfig) { c.ttl = d } }

// Index names the fields of this item to embed, instead of the Store's
// (see [WithEmbedder]); with no fields, the item is not embedded and
// semantic search does not find it.
func Index(fields ...string) PutOption {
	return func(c *putConfig) { c.index, c.indexed = fields, true }
}

// Put stores value, a JSON object, under namespace ns and key, replacing
// the item there (last writer wins: of concurrent Puts to one key, the one
// the backend stores last is kept; the item keeps its CreatedAt). Putting
// the same value again is harmless, which is what makes a retried task's
// Put safe. It returns the item as stored.
func (s *Store) Put(ctx context.Context, ns Namespace, key string, value json.RawMessage, opts ...PutOption) (Item, error) {
	var c putConfig
	for _, o := range opts {
		o(&c)
	}
	if err := ns.Check(); err != nil {
		return Item{}, err
	}
	if err := checkKey(key); err != nil {
		return Item{}, err
	}
	compact, err := checkValue(value)
	if err != nil {
		return Item{}, err
	}
	if c.ttl < 0 || c.ttl > MaxTTL {
		return Item{}, fmt.Errorf("%w: the TTL is %s; give a duration between 1s and %s, or none for an item that does not expire", ErrInvalid, c.ttl, MaxTTL)
	}
	if c.ttl > 0 && c.ttl < time.Second {
		return Item{}, fmt.Errorf("%w: the TTL is %s; the shortest is 1s", ErrInvalid, c.ttl)
	}
	now := s.now().UTC()
	r := Record{SortKey: SortKey(ns, key), Namespace: slices.Clone(ns), Key: key, Value: compact, CreatedAt: now, UpdatedAt: now}
	if c.ttl > 0 {
		r.ExpiresAt = now.Add(c.ttl)
	}
	if s.embedder != nil {
		fields := s.index
		if c.indexed {
			fields = c.index
		}
		if !c.indexed || len(fields) > 0 {
			if text := indexText(compact, fields); text != "" {
				vecs, err := s.embedder.Embed(ctx, []string{text})
				if err != nil {
					return Item{}, fmt.Errorf("longterm: put %s %q: embed: %w", ns, key, err)
				}
				if len(vecs) != 1 || len(vecs[0]) == 0 {
					return Item{}, fmt.Errorf("longterm: put %s %q: the embedding model returned %d vectors for 1 text", ns, key, len(vecs))
				}
				r.Vector = EncodeVector(vecs[0])
			}
		}
	}
	if err := s.b.Put(ctx, r); err != nil {
		return Item{}, fmt.Errorf("longterm: put %s %q: %w", ns, key, err)
	}
	return r.item(), nil
}

// checkValue checks that value is a JSON object of at most MaxValueBytes,
// and returns it compacted.
func checkValue(value json.RawMessage) (json.RawMessage, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, value); err != nil {
		return nil, fmt.Errorf("%w: the value is not JSON: %v", ErrInvalid, err)
	}
	b := buf.Bytes()
	if len(b) == 0 || b[0] != '{' {
		return nil, fmt.Errorf("%w: the value must be a JSON object, such as {\"text\": \"...\"}", ErrInvalid)
	}
	if len(b) > MaxValueBytes {
		return nil, fmt.Errorf("%w: the value is %d bytes of JSON; the most is %d: keep large data elsewhere (a file, S3) and store a reference to it", ErrTooLarge, len(b), MaxValueBytes)
	}
	return b, nil
}

// Get returns the item of ns and key, or an error wrapping ErrNotFound.
func (s *Store) Get(ctx context.Context, ns Namespace, key string) (Item, error) {
	if err := ns.Check(); err != nil {
		return Item{}, err
	}
	if err := checkKey(key); err != nil {
		return Item{}, err
	}
	r, err := s.b.Get(ctx, SortKey(ns, key))
	if err == nil && s.expired(r) {
		err = ErrNotFound
	}
	if err != nil {
		return Item{}, fmt.Errorf("longterm: get %s %q: %w", ns, key, err)
	}
	return r.item(), nil
}

// Delete deletes the item of ns and key; deleting a missing item is not an
// error.
func (s *Store) Delete(ctx context.Context, ns Namespace, key string) error {
	if err := ns.Check(); err != nil {
		return err
	}
	if err := checkKey(key); err != nil {
		return err
	}
	if err := s.b.Delete(ctx, SortKey(ns, key)); err != nil {
		return fmt.Errorf("longterm: delete %s %q: %w", ns, key, err)
	}
	return nil
}

// ListOptions selects and pages a listing.
type ListOptions struct {
	// Filter selects items by their values' fields.
	Filter Filter
	// Limit is the most items of the page (default DefaultPageSize, at
	// most MaxPageSize).
	Limit int
	// PageToken is a previous page's NextPageToken.
	PageToken string
}

// List returns the live items of prefix and of the namespaces below it
// that match the filter, a page at a time, in a fixed order (by namespace,
// a namespace's sub-namespaces before its own items, then by key). A page
// may hold fewer items than the limit when the filter skipped many; follow
// NextPageToken until it is empty. Items put meanwhile after the page's
// position appear in later pages; none repeats.
func (s *Store) List(ctx context.Context, prefix Namespace, o ListOptions) (Page, error) {
	if err := prefix.Check(); err != nil {
		return Page{}, err
	}
	limit, err := pageLimit(o.Limit)
	if err != nil {
		return Page{}, err
	}
	f, err := o.Filter.normalize()
	if err != nil {
		return Page{}, err
	}
	after, err := decodeToken(prefix, o.PageToken)
	if err != nil {
		return Page{}, err
	}
	page := Page{Items: []Item{}}
	batch := limit + 1
	for scanned := 0; scanned < maxListScan; {
		recs, err := s.b.Scan(ctx, prefix, after, batch)
		if err != nil {
			return Page{}, fmt.Errorf("longterm: list %s: %w", prefix, err)
		}
		for _, r := range recs {
			scanned++
			if s.expired(r) || !f.matches(r.Value) {
				after = r.SortKey
				continue
			}
			if len(page.Items) == limit {
				page.NextPageToken = encodeToken(after)
				return page, nil
			}
			page.Items = append(page.Items, r.item())
			after = r.SortKey
		}
		if len(recs) < batch {
			return page, nil
		}
		batch = min(max(batch, 100), MaxPageSize)
	}
	page.NextPageToken = encodeToken(after)
	return page, nil
}

func pageLimit(n int) (int, error) {
	switch {
	case n == 0:
		return DefaultPageSize, nil
	case n < 0 || n > MaxPageSize:
		return 0, fmt.Errorf("%w: the limit is %d; give 1 to %d", ErrInvalid, n, MaxPageSize)
	}
	return n, nil
}

// Page tokens are the sort key of the last record read, base64url-encoded.
func encodeToken(after string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(after))
}

func decodeToken(prefix Namespace, tok string) (string, error) {
	if tok == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || !InRange(prefix, string(b)) {
		return "", fmt.Errorf("%w: the page token is not one of this listing's: pass next_page_token unchanged, with the same namespace", ErrInvalid)
	}
	return string(b), nil
}

// ListNamespaces returns the namespaces that hold live items under prefix
// (all of them for an empty prefix, when the backend can list its roots),
// sorted, each cut to maxDepth components when maxDepth > 0. It reads every
// item under prefix: on a large store, name a narrow prefix.
func (s *Store) ListNamespaces(ctx context.Context, prefix Namespace, maxDepth int) ([]Namespace, error) {
	var prefixes []Namespace
	if len(prefix) == 0 {
		roots, ok := s.b.(Roots)
		if !ok {
			return nil, fmt.Errorf("%w: this store cannot list its namespaces without a prefix: name the first component, as in users", ErrInvalid)
		}
		names, err := roots.Roots(ctx)
		if err != nil {
			return nil, fmt.Errorf("longterm: list namespaces: %w", err)
		}
		for _, n := range names {
			prefixes = append(prefixes, Namespace{n})
		}
	} else {
		if err := prefix.Check(); err != nil {
			return nil, err
		}
		prefixes = []Namespace{prefix}
	}
	seen := map[string]Namespace{}
	for _, p := range prefixes {
		after := ""
		for {
			recs, err := s.b.Scan(ctx, p, after, MaxPageSize)
			if err != nil {
				return nil, fmt.Errorf("longterm: list namespaces under %s: %w", p, err)
			}
			for _, r := range recs {
				after = r.SortKey
				if s.expired(r) {
					continue
				}
				ns := r.Namespace
				if maxDepth > 0 && len(ns) > maxDepth {
					ns = ns[:maxDepth]
				}
				seen[ns.String()] = ns
			}
			if len(recs) < MaxPageSize {
				break
			}
		}
	}
	out := make([]Namespace, 0, len(seen))
	for _, ns := range seen {
		out = append(out, slices.Clone(ns))
	}
	slices.SortFunc(out, func(a, b Namespace) int { return strings.Compare(a.String(), b.String()) })
	return out, nil
}

func (s *Store) expired(r Record) bool {
	return !r.ExpiresAt.IsZero() && !s.now().Before(r.ExpiresAt)
}

func (r Record) item() Item {
	it := Item{Namespace: r.Namespace, Key: r.Key, Value: r.Value, CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC()}
	if !r.ExpiresAt.IsZero() {
		t := r.ExpiresAt.UTC()
		it.ExpiresAt = &t
	}
	return it
}

// IsInvalid reports whether err is the caller's to fix (ErrInvalid or
// ErrTooLarge), so its message can be shown to them.
func IsInvalid(err error) bool {
	return errors.Is(err, ErrInvalid) || errors.Is(err, ErrTooLarge) || errors.Is(err, ErrNoEmbedder)
}
