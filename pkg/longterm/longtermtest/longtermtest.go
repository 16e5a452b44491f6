// Package longtermtest is the conformance suite of long-term store
// backends ([longterm.Backend]): pkg/longterm's memory backend,
// pkg/store/sqlite and pkg/store/dynamo run it, so the three keep the same
// semantics.
package longtermtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/longterm"
)

// Run runs the suite; newBackend returns the backend a sub-test uses (a
// new one each time, or one shared: every sub-test works under a
// namespace root of its own).
func Run(t *testing.T, newBackend func(t *testing.T) longterm.Backend) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, e *env)
	}{
		{"PutGetDelete", testPutGetDelete},
		{"Replace", testReplace},
		{"Namespaces", testNamespaces},
		{"Paging", testPaging},
		{"Filters", testFilters},
		{"TTL", testTTL},
		{"ConcurrentPuts", testConcurrentPuts},
		{"BadInput", testBadInput},
		{"ListNamespaces", testListNamespaces},
		{"Search", testSearch},
		{"SearchLimit", testSearchLimit},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newBackend(t)
			tc.fn(t, newEnv(b))
		})
	}
}

// Clock is a settable clock for tests.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock at t.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// WordEmbedder is a deterministic Embedder for tests: a text's vector
// counts the occurrences of each of Vocabulary's words in it.
type WordEmbedder struct {
	Vocabulary []string
	mu         sync.Mutex
	calls      int
}

// Embed implements longterm.Embedder.
func (w *WordEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	w.mu.Lock()
	w.calls++
	w.mu.Unlock()
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float32, len(w.Vocabulary))
		for _, word := range strings.Fields(strings.ToLower(t)) {
			word = strings.Trim(word, `.,!?:;"{}`)
			for j, voc := range w.Vocabulary {
				if word == voc {
					v[j]++
				}
			}
		}
		out[i] = v
	}
	return out, nil
}

// Calls returns how many times Embed was called.
func (w *WordEmbedder) Calls() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.calls
}

type env struct {
	b     longterm.Backend
	clock *Clock
	s     *longterm.Store
	root  string
}

func newEnv(b longterm.Backend) *env {
	var r [4]byte
	_, _ = rand.Read(r[:])
	clock := NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	return &env{b: b, clock: clock, s: longterm.New(b, longterm.WithClock(clock.Now)), root: "t-" + hex.EncodeToString(r[:])}
}

// ns is a namespace under the sub-test's root.
func (e *env) ns(parts ...string) longterm.Namespace {
	return append(longterm.Namespace{e.root}, parts...)
}

func (e *env) put(t *testing.T, ns longterm.Namespace, key, value string, opts ...longterm.PutOption) longterm.Item {
	t.Helper()
	it, err := e.s.Put(t.Context(), ns, key, json.RawMessage(value), opts...)
	if err != nil {
		t.Fatalf("Put(%s, %q): %v", ns, key, err)
	}
	return it
}

func (e *env) list(t *testing.T, s *longterm.Store, prefix longterm.Namespace, o longterm.ListOptions) []string {
	t.Helper()
	var out []string
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatalf("List(%s): more than 100 pages", prefix)
		}
		p, err := s.List(t.Context(), prefix, o)
		if err != nil {
			t.Fatalf("List(%s): %v", prefix, err)
		}
		for _, it := range p.Items {
			out = append(out, it.Namespace.String()+"#"+it.Key)
		}
		if p.NextPageToken == "" {
			return out
		}
		o.PageToken = p.NextPageToken
	}
}

func testPutGetDelete(t *testing.T, e *env) {
	ctx := t.Context()
	ns := e.ns("users", "u-42")
	put := e.put(t, ns, "color", `{ "text": "likes green",  "n": 1 }`)
	got, err := e.s.Get(ctx, ns, "color")
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Value) != `{"text":"likes green","n":1}` || !slices.Equal(got.Namespace, ns) || got.Key != "color" {
		t.Errorf("Get = %s %s %q, want the compacted value under %s color", got.Value, got.Namespace, got.Key, ns)
	}
	if !got.CreatedAt.Equal(e.clock.Now()) || !got.UpdatedAt.Equal(e.clock.Now()) || got.ExpiresAt != nil {
		t.Errorf("Get times = %v %v %v, want created and updated %v, no expiry", got.CreatedAt, got.UpdatedAt, got.ExpiresAt, e.clock.Now())
	}
	if !put.CreatedAt.Equal(got.CreatedAt) {
		t.Errorf("Put returned CreatedAt %v, Get %v", put.CreatedAt, got.CreatedAt)
	}
	if _, err := e.s.Get(ctx, ns, "other"); !errors.Is(err, longterm.ErrNotFound) {
		t.Errorf("Get of a missing key: %v, want ErrNotFound", err)
	}
	if err := e.s.Delete(ctx, ns, "color"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.Get(ctx, ns, "color"); !errors.Is(err, longterm.ErrNotFound) {
		t.Errorf("Get after Delete: %v, want ErrNotFound", err)
	}
	if err := e.s.Delete(ctx, ns, "color"); err != nil {
		t.Errorf("Delete of a missing item: %v, want nil", err)
	}
}

func testReplace(t *testing.T, e *env) {
	ns := e.ns("prefs")
	e.put(t, ns, "k", `{"v":1}`, longterm.TTL(time.Hour))
	e.clock.Advance(time.Minute)
	e.put(t, ns, "k", `{"v":2}`)
	got, err := e.s.Get(t.Context(), ns, "k")
	if err != nil {
		t.Fatal(err)
	}
	created := e.clock.Now().Add(-time.Minute)
	if string(got.Value) != `{"v":2}` || !got.CreatedAt.Equal(created) || !got.UpdatedAt.Equal(e.clock.Now()) || got.ExpiresAt != nil {
		t.Errorf("after a second Put: %s created %v updated %v expires %v; want {\"v\":2}, created %v, updated %v, no expiry",
			got.Value, got.CreatedAt, got.UpdatedAt, got.ExpiresAt, created, e.clock.Now())
	}
	if keys := e.list(t, e.s, ns, longterm.ListOptions{}); len(keys) != 1 {
		t.Errorf("List after two Puts to one key = %v, want one item", keys)
	}
}

func testNamespaces(t *testing.T, e *env) {
	// Same key in sibling namespaces, in a parent, in a namespace whose
	// name extends a sibling's ("u-1" and "u-10"), and in another root.
	for _, ns := range []longterm.Namespace{e.ns("users", "u-1"), e.ns("users", "u-1", "prefs"), e.ns("users", "u-10"), e.ns("users"), e.ns("users", "u-1 x"), e.ns("users", "u-1-x")} {
		e.put(t, ns, "k", fmt.Sprintf(`{"ns":%q}`, ns.String()))
	}
	other := longterm.Namespace{e.root + "x", "users", "u-1"}
	e.put(t, other, "k", `{}`)
	defer e.s.Delete(t.Context(), other, "k")

	got := e.list(t, e.s, e.ns("users", "u-1"), longterm.ListOptions{})
	want := []string{e.ns("users", "u-1", "prefs").String() + "#k", e.ns("users", "u-1").String() + "#k"}
	if !slices.Equal(got, want) {
		t.Errorf("List(users/u-1) = %q, want %q (the namespace and those below it, sub-namespaces first)", got, want)
	}
	all := e.list(t, e.s, e.ns(), longterm.ListOptions{})
	if len(all) != 6 {
		t.Errorf("List(root) = %q, want the 6 items under the root", all)
	}
	for _, ns := range []longterm.Namespace{e.ns("users", "u-1"), e.ns("users", "u-10")} {
		it, err := e.s.Get(t.Context(), ns, "k")
		if err != nil || string(it.Value) != fmt.Sprintf(`{"ns":%q}`, ns.String()) {
			t.Errorf("Get(%s, k) = %s, %v; want its own value", ns, it.Value, err)
		}
	}
	if got := e.list(t, e.s, e.ns("nobody"), longterm.ListOptions{}); len(got) != 0 {
		t.Errorf("List of an empty namespace = %q, want none", got)
	}
}

func testPaging(t *testing.T, e *env) {
	var want []string
	for i := range 13 {
		ns := e.ns("notes", fmt.Sprintf("n%d", i%3))
		key := fmt.Sprintf("k%02d", i)
		e.put(t, ns, key, `{}`)
		want = append(want, ns.String()+"#"+key)
	}
	slices.Sort(want) // namespaces n0 < n1 < n2, then keys
	var got []string
	o := longterm.ListOptions{Limit: 4}
	pages := 0
	for {
		p, err := e.s.List(t.Context(), e.ns("notes"), o)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(p.Items) > 4 {
			t.Fatalf("page of %d items, want at most 4", len(p.Items))
		}
		for _, it := range p.Items {
			got = append(got, it.Namespace.String()+"#"+it.Key)
		}
		if p.NextPageToken == "" {
			break
		}
		if pages > 10 {
			t.Fatal("more than 10 pages of 4 for 13 items")
		}
		o.PageToken = p.NextPageToken
		if pages == 2 {
			// An item put behind the position does not shift the pages.
			e.put(t, e.ns("notes", "n0"), "a-late", `{}`)
		}
	}
	if !slices.Equal(got, want) || pages != 4 {
		t.Errorf("pages of 4 = %d pages %q, want 4 pages %q", pages, got, want)
	}
	p, err := e.s.List(t.Context(), e.ns("notes"), longterm.ListOptions{Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.List(t.Context(), e.ns("other"), longterm.ListOptions{PageToken: p.NextPageToken}); !errors.Is(err, longterm.ErrInvalid) {
		t.Errorf("a page token of another namespace: %v, want ErrInvalid", err)
	}
	if _, err := e.s.List(t.Context(), e.ns("notes"), longterm.ListOptions{PageToken: "!!"}); !errors.Is(err, longterm.ErrInvalid) {
		t.Errorf("a garbled page token: %v, want ErrInvalid", err)
	}
	if _, err := e.s.List(t.Context(), e.ns("notes"), longterm.ListOptions{Limit: longterm.MaxPageSize + 1}); !errors.Is(err, longterm.ErrInvalid) {
		t.Errorf("a limit above the most: %v, want ErrInvalid", err)
	}
}

func testFilters(t *testing.T, e *env) {
	ns := e.ns("facts")
	e.put(t, ns, "a", `{"kind":"pref","score":3,"who":{"name":"ann"}}`)
	e.put(t, ns, "b", `{"kind":"pref","score":7,"who":{"name":"bob"}}`)
	e.put(t, ns, "c", `{"kind":"fact","score":5}`)
	e.put(t, ns, "d", `{"kind":"pref","score":"high"}`)
	for _, tc := range []struct {
		filter longterm.Filter
		want   []string
	}{
		{longterm.Filter{"kind": "pref"}, []string{"a", "b", "d"}},
		{longterm.Filter{"kind": "pref", "score": 7}, []string{"b"}},
		{longterm.Filter{"score": map[string]any{"$gte": 5}}, []string{"b", "c"}},
		{longterm.Filter{"score": map[string]any{"$gt": 3, "$lt": 7}}, []string{"c"}},
		{longterm.Filter{"kind": map[string]any{"$ne": "pref"}}, []string{"c"}},
		{longterm.Filter{"who.name": "bob"}, []string{"b"}},
		{longterm.Filter{"missing": "x"}, nil},
	} {
		var got []string
		for _, k := range e.list(t, e.s, ns, longterm.ListOptions{Filter: tc.filter, Limit: 1}) {
			got = append(got, k[strings.LastIndex(k, "#")+1:])
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("filter %v = %q, want %q", tc.filter, got, tc.want)
		}
	}
	if _, err := e.s.List(t.Context(), ns, longterm.ListOptions{Filter: longterm.Filter{"score": map[string]any{"$near": 1}}}); !errors.Is(err, longterm.ErrInvalid) || !strings.Contains(err.Error(), "$gte") {
		t.Errorf("an unknown operator: %v, want ErrInvalid naming the operators", err)
	}
}

func testTTL(t *testing.T, e *env) {
	ctx := t.Context()
	ns := e.ns("session")
	it := e.put(t, ns, "short", `{"text":"remember briefly"}`, longterm.TTL(time.Minute))
	e.put(t, ns, "long", `{"text":"remember"}`)
	if it.ExpiresAt == nil || !it.ExpiresAt.Equal(e.clock.Now().Add(time.Minute)) {
		t.Errorf("ExpiresAt = %v, want %v", it.ExpiresAt, e.clock.Now().Add(time.Minute))
	}
	e.clock.Advance(59 * time.Second)
	if _, err := e.s.Get(ctx, ns, "short"); err != nil {
		t.Errorf("Get before expiry: %v", err)
	}
	e.clock.Advance(time.Second)
	if _, err := e.s.Get(ctx, ns, "short"); !errors.Is(err, longterm.ErrNotFound) {
		t.Errorf("Get at expiry: %v, want ErrNotFound", err)
	}
	if got := e.list(t, e.s, ns, longterm.ListOptions{}); !slices.Equal(got, []string{ns.String() + "#long"}) {
		t.Errorf("List after expiry = %q, want only the item without TTL", got)
	}
	// A Put after expiry makes a new item.
	e.put(t, ns, "short", `{"text":"again"}`)
	got, err := e.s.Get(ctx, ns, "short")
	if err != nil || got.ExpiresAt != nil {
		t.Errorf("Get of an expired item put again = %v, %v; want it, without expiry", got, err)
	}
	for _, d := range []time.Duration{-time.Second, time.Millisecond, longterm.MaxTTL + time.Hour} {
		if _, err := e.s.Put(ctx, ns, "bad", json.RawMessage(`{}`), longterm.TTL(d)); !errors.Is(err, longterm.ErrInvalid) {
			t.Errorf("TTL %s: %v, want ErrInvalid", d, err)
		}
	}
}

func testConcurrentPuts(t *testing.T, e *env) {
	ns := e.ns("race")
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := e.s.Put(t.Context(), ns, "k", json.RawMessage(fmt.Sprintf(`{"writer":%d}`, i)))
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent Put: %v", err)
		}
	}
	got, err := e.s.Get(t.Context(), ns, "k")
	if err != nil {
		t.Fatal(err)
	}
	var v struct{ Writer *int }
	if err := json.Unmarshal(got.Value, &v); err != nil || v.Writer == nil || *v.Writer < 0 || *v.Writer >= n {
		t.Errorf("after %d concurrent Puts the value is %s, want one writer's whole value", n, got.Value)
	}
	if keys := e.list(t, e.s, ns, longterm.ListOptions{}); len(keys) != 1 {
		t.Errorf("List after concurrent Puts to one key = %q, want one item", keys)
	}
}

func testBadInput(t *testing.T, e *env) {
	ctx := t.Context()
	ok := e.ns("ok")
	for _, tc := range []struct {
		name  string
		ns    longterm.Namespace
		key   string
		value string
		want  error
		says  string
	}{
		{"empty namespace", nil, "k", `{}`, longterm.ErrInvalid, "namespace is empty"},
		{"empty component", longterm.Namespace{e.root, ""}, "k", `{}`, longterm.ErrInvalid, "component 2 is empty"},
		{"slash", longterm.Namespace{e.root, "a/b"}, "k", `{}`, longterm.ErrInvalid, "one component per level"},
		{"control", longterm.Namespace{e.root, "a\x00"}, "k", `{}`, longterm.ErrInvalid, "control character"},
		{"too deep", longterm.Namespace{e.root, "1", "2", "3", "4", "5", "6", "7", "8"}, "k", `{}`, longterm.ErrInvalid, "the most is 8"},
		{"long component", longterm.Namespace{e.root, strings.Repeat("x", 129)}, "k", `{}`, longterm.ErrInvalid, "the most is 128"},
		{"empty key", ok, "", `{}`, longterm.ErrInvalid, "key is empty"},
		{"long key", ok, strings.Repeat("k", 257), `{}`, longterm.ErrInvalid, "the most is 256"},
		{"not JSON", ok, "k", `{"a":`, longterm.ErrInvalid, "not JSON"},
		{"not an object", ok, "k", `[1,2]`, longterm.ErrInvalid, "JSON object"},
		{"oversized", ok, "k", `{"x":"` + strings.Repeat("x", longterm.MaxValueBytes) + `"}`, longterm.ErrTooLarge, "store a reference"},
	} {
		_, err := e.s.Put(ctx, tc.ns, tc.key, json.RawMessage(tc.value))
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: Put: %v, want %v saying %q", tc.name, err, tc.want, tc.says)
		}
		if strings.Contains(fmt.Sprint(err), "longterm") {
			t.Errorf("%s: the error %q names the package; it is shown to callers", tc.name, err)
		}
	}
	if got := e.list(t, e.s, e.ns(), longterm.ListOptions{}); len(got) != 0 {
		t.Errorf("refused Puts stored %q", got)
	}
	if _, err := e.s.Get(ctx, longterm.Namespace{}, "k"); !errors.Is(err, longterm.ErrInvalid) {
		t.Errorf("Get with an empty namespace: %v, want ErrInvalid", err)
	}
	if _, err := e.s.List(ctx, longterm.Namespace{}, longterm.ListOptions{}); !errors.Is(err, longterm.ErrInvalid) {
		t.Errorf("List with an empty namespace: %v, want ErrInvalid", err)
	}
}

func testListNamespaces(t *testing.T, e *env) {
	e.put(t, e.ns("users", "u-1", "prefs"), "a", `{}`)
	e.put(t, e.ns("users", "u-1", "facts"), "a", `{}`)
	e.put(t, e.ns("users", "u-2"), "a", `{}`)
	e.put(t, e.ns("gone"), "a", `{}`, longterm.TTL(time.Second))
	e.clock.Advance(time.Second)
	got, err := e.s.ListNamespaces(t.Context(), e.ns(), 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []longterm.Namespace{e.ns("users", "u-1", "facts"), e.ns("users", "u-1", "prefs"), e.ns("users", "u-2")}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("ListNamespaces = %q, want %q", got, want)
	}
	got, err = e.s.ListNamespaces(t.Context(), e.ns(), 3)
	if err != nil {
		t.Fatal(err)
	}
	want = []longterm.Namespace{e.ns("users", "u-1"), e.ns("users", "u-2")}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("ListNamespaces to depth 3 = %q, want %q", got, want)
	}
	if _, ok := e.b.(longterm.Roots); ok {
		roots, err := e.s.ListNamespaces(t.Context(), nil, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(roots, func(ns longterm.Namespace) bool { return slices.Equal(ns, e.ns()) }) {
			t.Errorf("ListNamespaces of every root = %q, want it to hold %s", roots, e.ns())
		}
	}
}

// Corpus is the small fixed corpus of the search tests, and Vocabulary the
// words of a WordEmbedder that ranks it.
var (
	Corpus = map[string]string{
		"tea":     "prefers green tea in the morning",
		"coffee":  "drinks black coffee, never tea",
		"flights": "prefers aisle seats on flights",
		"hotel":   "likes quiet hotel rooms",
		"editor":  "writes code in vim",
	}
	Vocabulary = []string{"tea", "green", "coffee", "flights", "aisle", "seats", "hotel", "quiet", "code", "vim", "morning"}
)

func testSearch(t *testing.T, e *env) {
	emb := &WordEmbedder{Vocabulary: Vocabulary}
	s := longterm.New(e.b, longterm.WithClock(e.clock.Now), longterm.WithEmbedder(emb, "text"))
	ns := e.ns("users", "u-1")
	for k, text := range Corpus {
		if _, err := s.Put(t.Context(), ns, k, json.RawMessage(fmt.Sprintf(`{"text":%q,"kind":"pref"}`, text))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Put(t.Context(), ns, "unindexed", json.RawMessage(`{"text":"tea tea tea"}`), longterm.Index()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(t.Context(), e.ns("users", "u-2"), "tea", json.RawMessage(`{"text":"green tea"}`)); err != nil {
		t.Fatal(err)
	}
	res, err := s.Search(t.Context(), ns, longterm.SearchOptions{Query: "green tea please", Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for i, it := range res {
		keys = append(keys, it.Key)
		if it.Score == nil || (i > 0 && *it.Score > *res[i-1].Score) {
			t.Errorf("result %d (%s) score %v: want scores, best first", i, it.Key, it.Score)
		}
	}
	if want := []string{"tea", "coffee"}; len(keys) != 3 || !slices.Equal(keys[:2], want) || slices.Contains(keys, "unindexed") {
		t.Errorf("Search(green tea) = %q, want 3: tea then coffee first (not the unindexed item, nor another user's)", keys)
	}
	res, err = s.Search(t.Context(), ns, longterm.SearchOptions{Query: "aisle seats", Limit: 1})
	if err != nil || len(res) != 1 || res[0].Key != "flights" {
		t.Errorf("Search(aisle seats) = %v, %v; want flights", res, err)
	}
	res, err = s.Search(t.Context(), ns, longterm.SearchOptions{Query: "tea", Filter: longterm.Filter{"text": map[string]any{"$ne": Corpus["tea"]}}})
	if err != nil || len(res) == 0 || res[0].Key != "coffee" {
		t.Errorf("Search(tea) filtered = %v, %v; want coffee first", res, err)
	}
	if _, err := e.s.Search(t.Context(), ns, longterm.SearchOptions{Query: "tea"}); !errors.Is(err, longterm.ErrNoEmbedder) {
		t.Errorf("Search without an embedder: %v, want ErrNoEmbedder", err)
	}
}

func testSearchLimit(t *testing.T, e *env) {
	emb := &WordEmbedder{Vocabulary: Vocabulary}
	s := longterm.New(e.b, longterm.WithClock(e.clock.Now), longterm.WithEmbedder(emb), longterm.WithSearchLimit(5))
	for i := range 6 {
		if _, err := s.Put(t.Context(), e.ns("big"), fmt.Sprint(i), json.RawMessage(`{"text":"tea"}`)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Search(t.Context(), e.ns("big"), longterm.SearchOptions{Query: "tea"}); !errors.Is(err, longterm.ErrTooLarge) || !strings.Contains(err.Error(), "narrower namespace") {
		t.Errorf("Search over 6 items with a limit of 5: %v, want ErrTooLarge saying to narrow the namespace", err)
	}
	before := emb.Calls()
	if _, err := s.Search(t.Context(), e.ns("big"), longterm.SearchOptions{Query: "tea"}); err == nil || emb.Calls() != before {
		t.Errorf("a refused search embedded its query (%d calls before, %d after)", before, emb.Calls())
	}
}
