package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/longterm"
	"github.com/superstep/superstep/pkg/longterm/longtermtest"
)

func withLongTerm(s *longterm.Store) envOption { return func(c *api.Config) { c.LongTerm = s } }

// TestStoreAPI puts, gets, lists, searches and deletes items over HTTP,
// behind the API's token.
func TestStoreAPI(t *testing.T) {
	lt := longterm.New(longterm.NewMemory(), longterm.WithEmbedder(&longtermtest.WordEmbedder{Vocabulary: longtermtest.Vocabulary}, "text"))
	e := newEnv(t, withToken("s3cret"), withLongTerm(lt))
	auth := []string{} // e.do sends the token

	if r := e.do("GET", "/v1/store/items?namespace=users/u-1&key=tea", nil, "Authorization", ""); r.status != http.StatusUnauthorized {
		t.Errorf("without the token: %d, want 401", r.status)
	}
	put := func(ns []string, key, value string) response {
		return e.do("PUT", "/v1/store/items", map[string]any{"namespace": ns, "key": key, "value": json.RawMessage(value)}, auth...)
	}
	if r := put([]string{"users", "u-1", "prefs"}, "tea", `{"text":"prefers green tea"}`); r.status != http.StatusOK {
		t.Fatalf("PUT: %d %s", r.status, r.body)
	}
	put([]string{"users", "u-1", "prefs"}, "seat", `{"text":"prefers aisle seats on flights"}`)
	put([]string{"users", "u-2"}, "tea", `{"text":"black coffee"}`)

	r := e.do("GET", "/v1/store/items?namespace=users/u-1/prefs&key=tea", nil, auth...)
	var it longterm.Item
	if err := json.Unmarshal(r.body, &it); r.status != http.StatusOK || err != nil || string(it.Value) != `{"text":"prefers green tea"}` || it.Namespace.String() != "users/u-1/prefs" {
		t.Errorf("GET: %d %s", r.status, r.body)
	}
	var page longterm.Page
	r = e.do("POST", "/v1/store/items/search", map[string]any{"namespace_prefix": []string{"users", "u-1"}, "limit": 1}, auth...)
	if err := json.Unmarshal(r.body, &page); err != nil || len(page.Items) != 1 || page.NextPageToken == "" {
		t.Fatalf("list page 1: %d %s", r.status, r.body)
	}
	r = e.do("POST", "/v1/store/items/search", map[string]any{"namespace_prefix": []string{"users", "u-1"}, "limit": 1, "page_token": page.NextPageToken}, auth...)
	var page2 longterm.Page
	if err := json.Unmarshal(r.body, &page2); err != nil || len(page2.Items) != 1 || page2.Items[0].Key == page.Items[0].Key {
		t.Errorf("list page 2: %d %s", r.status, r.body)
	}
	r = e.do("POST", "/v1/store/items/search", map[string]any{"namespace_prefix": []string{"users", "u-1"}, "query": "aisle seats"}, auth...)
	if err := json.Unmarshal(r.body, &page); err != nil || len(page.Items) == 0 || page.Items[0].Key != "seat" || page.Items[0].Score == nil {
		t.Errorf("search: %d %s", r.status, r.body)
	}
	r = e.do("GET", "/v1/store/namespaces?prefix=users&max_depth=2", nil, auth...)
	var nss api.Namespaces
	if err := json.Unmarshal(r.body, &nss); err != nil || len(nss.Namespaces) != 2 || nss.Namespaces[0].String() != "users/u-1" {
		t.Errorf("namespaces: %d %s", r.status, r.body)
	}
	if r := e.do("DELETE", "/v1/store/items?namespace=users/u-1/prefs&key=tea", nil, auth...); r.status != http.StatusNoContent {
		t.Errorf("DELETE: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/v1/store/items?namespace=users/u-1/prefs&key=tea", nil, auth...); r.status != http.StatusNotFound || !strings.Contains(string(r.body), `no item \"tea\" in namespace users/u-1/prefs`) {
		t.Errorf("GET after DELETE: %d %s", r.status, r.body)
	}
}

// failing is a backend whose every call fails with words naming it.
type failing struct{ longterm.Backend }

func (failing) Get(context.Context, string) (longterm.Record, error) {
	return longterm.Record{}, errors.New("sqlite: database disk image is malformed")
}

// TestStoreAPIBadInput: what the caller must fix is said; the store's
// own failures are a bare 500.
func TestStoreAPIBadInput(t *testing.T) {
	e := newEnv(t, withLongTerm(longterm.New(failing{longterm.NewMemory()})))
	big := `{"x":"` + strings.Repeat("x", longterm.MaxValueBytes) + `"}`
	for _, tc := range []struct {
		method, path string
		body         any
		status       int
		says         string
	}{
		{"PUT", "/v1/store/items", map[string]any{"namespace": []string{"a/b"}, "key": "k", "value": map[string]any{}}, 400, "one component per level"},
		{"PUT", "/v1/store/items", map[string]any{"namespace": []string{}, "key": "k", "value": map[string]any{}}, 400, "namespace is empty"},
		{"PUT", "/v1/store/items", map[string]any{"namespace": []string{"a"}, "key": "", "value": map[string]any{}}, 400, "key is empty"},
		{"PUT", "/v1/store/items", map[string]any{"namespace": []string{"a"}, "key": "k", "value": []int{1}}, 400, "JSON object"},
		{"PUT", "/v1/store/items", map[string]any{"namespace": []string{"a"}, "key": "k"}, 400, "value is missing"},
		{"PUT", "/v1/store/items", map[string]any{"namespace": []string{"a"}, "key": "k", "value": map[string]any{}, "ttl_seconds": -1}, 400, "ttl_seconds"},
		{"PUT", "/v1/store/items", `{"namespace":["a"],"key":"k","value":` + big + `}`, 413, "store a reference"},
		{"GET", "/v1/store/items?namespace=a", nil, 400, "key is missing"},
		{"GET", "/v1/store/items?key=k", nil, 400, "namespace is empty"},
		{"POST", "/v1/store/items/search", map[string]any{"namespace_prefix": []string{"a"}, "query": "x"}, 400, "embedding model"},
		{"POST", "/v1/store/items/search", map[string]any{"namespace_prefix": []string{"a"}, "filter": map[string]any{"n": map[string]any{"$near": 1}}}, 400, "unknown operator"},
		{"POST", "/v1/store/items/search", map[string]any{"namespace_prefix": []string{"a"}, "page_token": "zz"}, 400, "page token"},
		{"GET", "/v1/store/namespaces?max_depth=x", nil, 400, "max_depth"},
		{"GET", "/v1/store/items?namespace=a&key=k&keys=1", nil, 400, "unknown query parameter"},
		{"GET", "/v1/store/items?namespace=a&key=k", nil, 500, "internal error"},
	} {
		r := e.do(tc.method, tc.path, tc.body)
		if r.status != tc.status || !strings.Contains(string(r.body), tc.says) {
			t.Errorf("%s %s: %d %s, want %d saying %q", tc.method, tc.path, r.status, r.body, tc.status, tc.says)
		}
		for _, leak := range []string{"sqlite", "longterm", "invalid:", "too large:"} {
			if strings.Contains(string(r.body), leak) {
				t.Errorf("%s %s: the answer %s names %q", tc.method, tc.path, r.body, leak)
			}
		}
	}
	none := newEnv(t)
	if r := none.do("GET", "/v1/store/items?namespace=a&key=k", nil); r.status != 404 || !strings.Contains(string(r.body), "no long-term store") {
		t.Errorf("without a store: %d %s", r.status, r.body)
	}
}
