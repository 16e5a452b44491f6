package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/superstep/superstep/pkg/longterm"
)

// storeRoutes are the long-term store's (pkg/longterm): items under
// namespaces, written in paths and query strings as their components
// joined by '/', in bodies as JSON arrays.
func (h *Handler) storeRoutes() []route {
	return []route{
		{"GET", "/v1/store/items", h.withStore(h.getItem)},
		{"PUT", "/v1/store/items", h.withStore(h.putItem)},
		{"DELETE", "/v1/store/items", h.withStore(h.deleteItem)},
		{"POST", "/v1/store/items/search", h.withStore(h.searchItems)},
		{"GET", "/v1/store/namespaces", h.withStore(h.listNamespaces)},
	}
}

// withStore hands fn the configured long-term store, or answers the
// problem saying there is none.
func (h *Handler) withStore(fn func(http.ResponseWriter, *http.Request, *longterm.Store) error) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		s, err := h.ltStore()
		if err != nil {
			return err
		}
		return fn(w, r, s)
	}
}

// PutItemRequest is the body of PUT /v1/store/items.
type PutItemRequest struct {
	Namespace []string        `json:"namespace"`
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
	// TTLSeconds, when set, makes the item expire that long after this
	// put.
	TTLSeconds float64 `json:"ttl_seconds,omitempty"`
	// Index names the value's fields to embed for semantic search
	// instead of the store's; an empty array: do not embed this item.
	Index *[]string `json:"index,omitempty"`
}

// SearchItemsRequest is the body of POST /v1/store/items/search: with a
// query, a semantic search (ranked, no pages); without, a listing (pages).
type SearchItemsRequest struct {
	NamespacePrefix []string        `json:"namespace_prefix"`
	Query           string          `json:"query,omitempty"`
	Filter          longterm.Filter `json:"filter,omitempty"`
	Limit           int             `json:"limit,omitempty"`
	PageToken       string          `json:"page_token,omitempty"`
}

// Namespaces is the body of GET /v1/store/namespaces.
type Namespaces struct {
	Namespaces []longterm.Namespace `json:"namespaces"`
}

// ltStore returns the configured long-term store, or the problem saying
// there is none.
func (h *Handler) ltStore() (*longterm.Store, error) {
	if h.lt == nil {
		return nil, &problem{Status: http.StatusNotFound, Type: typeNotFound, Title: titleNotFound,
			Detail: "this server has no long-term store configured"}
	}
	return h.lt, nil
}

// itemRef reads ?namespace=a/b&key=k.
func (h *Handler) itemRef(r *http.Request) (longterm.Namespace, string, error) {
	if err := allowedQuery(r, "namespace", "key"); err != nil {
		return nil, "", err
	}
	q := r.URL.Query()
	ns, err := longterm.ParseNamespace(q.Get("namespace"))
	if err != nil {
		return nil, "", h.storeError(r, err)
	}
	key := q.Get("key")
	if key == "" {
		return nil, "", invalidf("the query parameter key is missing: ?namespace=users/u-42&key=favorite")
	}
	return ns, key, nil
}

func (h *Handler) getItem(w http.ResponseWriter, r *http.Request, s *longterm.Store) error {
	ns, key, err := h.itemRef(r)
	if err != nil {
		return err
	}
	it, err := s.Get(r.Context(), ns, key)
	if errors.Is(err, longterm.ErrNotFound) {
		return notFoundf("no item %q in namespace %s", key, ns)
	}
	if err != nil {
		return h.storeError(r, err)
	}
	return h.writeJSON(w, r, http.StatusOK, it)
}

func (h *Handler) putItem(w http.ResponseWriter, r *http.Request, s *longterm.Store) error {
	var req PutItemRequest
	if err := h.decode(w, r, &req, false); err != nil {
		return err
	}
	if len(req.Value) == 0 {
		return invalidf("value is missing: send the item's value, a JSON object")
	}
	var opts []longterm.PutOption
	if req.TTLSeconds != 0 {
		if req.TTLSeconds < 0 || req.TTLSeconds > longterm.MaxTTL.Seconds() {
			return invalidf("ttl_seconds is %g; give 1 to %d, or leave it out for an item that does not expire", req.TTLSeconds, int64(longterm.MaxTTL.Seconds()))
		}
		opts = append(opts, longterm.TTL(time.Duration(req.TTLSeconds*float64(time.Second))))
	}
	if req.Index != nil {
		opts = append(opts, longterm.Index(*req.Index...))
	}
	it, err := s.Put(r.Context(), req.Namespace, req.Key, req.Value, opts...)
	if err != nil {
		return h.storeError(r, err)
	}
	return h.writeJSON(w, r, http.StatusOK, it)
}

func (h *Handler) deleteItem(w http.ResponseWriter, r *http.Request, s *longterm.Store) error {
	ns, key, err := h.itemRef(r)
	if err != nil {
		return err
	}
	if err := s.Delete(r.Context(), ns, key); err != nil {
		return h.storeError(r, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h *Handler) searchItems(w http.ResponseWriter, r *http.Request, s *longterm.Store) error {
	var req SearchItemsRequest
	if err := h.decode(w, r, &req, false); err != nil {
		return err
	}
	if req.Query != "" {
		if req.PageToken != "" {
			return invalidf("page_token does not apply to a search with a query: its results are the best matches, without pages")
		}
		items, err := s.Search(r.Context(), req.NamespacePrefix, longterm.SearchOptions{Query: req.Query, Filter: req.Filter, Limit: req.Limit})
		if err != nil {
			return h.storeError(r, err)
		}
		return h.writeJSON(w, r, http.StatusOK, longterm.Page{Items: items})
	}
	page, err := s.List(r.Context(), req.NamespacePrefix, longterm.ListOptions{Filter: req.Filter, Limit: req.Limit, PageToken: req.PageToken})
	if err != nil {
		return h.storeError(r, err)
	}
	return h.writeJSON(w, r, http.StatusOK, page)
}

func (h *Handler) listNamespaces(w http.ResponseWriter, r *http.Request, s *longterm.Store) error {
	if err := allowedQuery(r, "prefix", "max_depth"); err != nil {
		return err
	}
	q := r.URL.Query()
	var (
		prefix longterm.Namespace
		err    error
	)
	if p := strings.Trim(q.Get("prefix"), "/"); p != "" {
		if prefix, err = longterm.ParseNamespace(p); err != nil {
			return h.storeError(r, err)
		}
	}
	depth := 0
	if d := q.Get("max_depth"); d != "" {
		if depth, err = strconv.Atoi(d); err != nil || depth < 0 || depth > longterm.MaxDepth {
			return invalidf("max_depth %q: give 1 to %d, or leave it out for whole namespaces", d, longterm.MaxDepth)
		}
	}
	nss, err := s.ListNamespaces(r.Context(), prefix, depth)
	if err != nil {
		return h.storeError(r, err)
	}
	return h.writeJSON(w, r, http.StatusOK, Namespaces{Namespaces: nss})
}

// storeError maps the long-term store's errors: what the caller must fix
// is said (the package's own words, which name no internals); anything
// else is logged and a bare 500.
func (h *Handler) storeError(r *http.Request, err error) error {
	var p *problem
	switch {
	case errors.As(err, &p):
		return err
	case errors.Is(err, longterm.ErrTooLarge) && !errors.Is(err, longterm.ErrInvalid):
		return &problem{Status: http.StatusRequestEntityTooLarge, Type: typeValueTooLarge, Title: "Too large",
			Detail: strings.TrimPrefix(err.Error(), longterm.ErrTooLarge.Error()+": ")}
	case longterm.IsInvalid(err):
		return invalidf("%s", strings.TrimPrefix(err.Error(), longterm.ErrInvalid.Error()+": "))
	case errors.Is(err, longterm.ErrNotFound):
		return notFoundf("no such item")
	}
	h.log.ErrorContext(r.Context(), "api: store request failed", "method", r.Method, "path", r.URL.Path, "error", err)
	return internalProblem()
}
