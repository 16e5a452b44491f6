package longterm

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Embedder turns texts into embedding vectors, one per text, in order.
// pkg/agent/bedrock's Embedder is one on Amazon Bedrock.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// EncodeVector encodes a vector as a Backend stores it: each component a
// little-endian float32.
func EncodeVector(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// DecodeVector decodes what EncodeVector encoded.
func DecodeVector(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// indexText is the text to embed of a value: the fields named, each as
// "field: text" on its own line (strings as they are, other values as
// JSON), or the whole value as JSON when no field is named. A value with
// none of the fields has no text.
func indexText(value json.RawMessage, fields []string) string {
	if len(fields) == 0 {
		return string(value)
	}
	var doc any
	if json.Unmarshal(value, &doc) != nil {
		return ""
	}
	var lines []string
	for _, f := range fields {
		v, ok := lookup(doc, f)
		if !ok || v == nil {
			continue
		}
		s, isString := v.(string)
		if !isString {
			b, _ := json.Marshal(v)
			s = string(b)
		}
		if len(fields) == 1 {
			lines = append(lines, s)
		} else {
			lines = append(lines, f+": "+s)
		}
	}
	return strings.Join(lines, "\n")
}

// SearchOptions is a semantic search.
type SearchOptions struct {
	// Query is the text to look for.
	Query string
	// Filter selects items by their values' fields, before ranking.
	Filter Filter
	// Limit is the most results (default 10, at most MaxPageSize).
	Limit int
}

// Search returns the live items of prefix and the namespaces below it that
// were embedded (see [WithEmbedder]) and match the filter, the most similar
// to the query first, each with its cosine similarity as Score.
//
// It compares the query with every item under prefix: it reads them all,
// so it refuses (ErrTooLarge) a prefix holding more items than the Store's
// search limit (WithSearchLimit; DefaultSearchLimit, 2000). Name a
// narrower namespace, such as one user's. README.md describes the vector
// index to move to beyond that.
func (s *Store) Search(ctx context.Context, prefix Namespace, o SearchOptions) ([]Item, error) {
	if s.embedder == nil {
		return nil, fmt.Errorf("%w: semantic search needs an embedding model: configure one, or list with a filter instead", ErrNoEmbedder)
	}
	if err := prefix.Check(); err != nil {
		return nil, err
	}
	if strings.TrimSpace(o.Query) == "" {
		return nil, fmt.Errorf("%w: the query is empty: give the text to look for", ErrInvalid)
	}
	limit := o.Limit
	if limit == 0 {
		limit = 10
	}
	if limit < 0 || limit > MaxPageSize {
		return nil, fmt.Errorf("%w: the limit is %d; give 1 to %d", ErrInvalid, limit, MaxPageSize)
	}
	f, err := o.Filter.normalize()
	if err != nil {
		return nil, err
	}
	type scored struct {
		r     Record
		score float64
	}
	var cands []scored
	after, scanned := "", 0
	for {
		recs, err := s.b.Scan(ctx, prefix, after, MaxPageSize)
		if err != nil {
			return nil, fmt.Errorf("longterm: search %s: %w", prefix, err)
		}
		scanned += len(recs)
		if scanned > s.searchLimit {
			return nil, fmt.Errorf("%w: %s holds more than %d items, the most a semantic search compares: search a narrower namespace", ErrTooLarge, prefix, s.searchLimit)
		}
		for _, r := range recs {
			after = r.SortKey
			if len(r.Vector) > 0 && !s.expired(r) && f.matches(r.Value) {
				cands = append(cands, scored{r: r})
			}
		}
		if len(recs) < MaxPageSize {
			break
		}
	}
	if len(cands) == 0 {
		return []Item{}, nil
	}
	vecs, err := s.embedder.Embed(ctx, []string{o.Query})
	if err != nil {
		return nil, fmt.Errorf("longterm: search %s: embed the query: %w", prefix, err)
	}
	if len(vecs) != 1 {
		return nil, fmt.Errorf("longterm: search %s: the embedding model returned %d vectors for 1 text", prefix, len(vecs))
	}
	q := vecs[0]
	kept := cands[:0]
	for _, c := range cands {
		v := DecodeVector(c.r.Vector)
		if len(v) != len(q) {
			continue // embedded by another model: put it again to index it
		}
		c.score = Cosine(q, v)
		kept = append(kept, c)
	}
	slices.SortStableFunc(kept, func(a, b scored) int { return cmp.Compare(b.score, a.score) })
	out := make([]Item, 0, min(limit, len(kept)))
	for _, c := range kept[:min(limit, len(kept))] {
		it := c.r.item()
		sc := c.score
		it.Score = &sc
		out = append(out, it)
	}
	return out, nil
}

// Cosine is the cosine similarity of two vectors of the same length: 1 for
// the same direction, 0 for orthogonal ones (and for a zero vector).
func Cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		dot += x * y
		na += x * x
		nb += y * y
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / (math.Sqrt(na) * math.Sqrt(nb))
}
