package serverless_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/superstep/superstep/examples/loop"
	"github.com/superstep/superstep/pkg/pregel"
)

// What the store says about a missing run, a bad page token or a missing
// step reaches API and A2A callers as a plain 4xx message: no "dynamo:"
// prefix or other store internals.
func TestStoreErrorsReachCallersClean(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	s.create(loop.Name, "done", map[string]int{"limit": 1})
	s.waitStatus("done", pregel.RunCompleted)
	a2a := func(method string, params any) string {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
		return string(b)
	}
	cases := []struct {
		method, path, body string
		status             int
	}{
		{"GET", "/v1/runs/nope", "", http.StatusNotFound},
		{"GET", "/v1/runs/nope/events", "", http.StatusNotFound},
		{"GET", "/v1/runs/nope/checkpoints", "", http.StatusNotFound},
		{"GET", "/v1/runs/nope/checkpoints/latest", "", http.StatusNotFound},
		{"GET", "/v1/runs/nope/checkpoints/1", "", http.StatusNotFound},
		{"GET", "/v1/runs/done/checkpoints/99", "", http.StatusNotFound},
		{"POST", "/v1/runs/nope/drain", `{}`, http.StatusNotFound},
		{"POST", "/v1/runs/nope/cancel", `{}`, http.StatusNotFound},
		{"POST", "/v1/runs/nope/resume", `{}`, http.StatusNotFound},
		{"POST", "/v1/runs/done/cancel", `{}`, http.StatusConflict},
		{"GET", "/v1/runs?page_token=bm90LWEtdG9rZW4", "", http.StatusBadRequest},
		{"POST", "/a2a/" + loop.Name, a2a("tasks/get", map[string]any{"id": "nope"}), http.StatusOK},
		{"POST", "/a2a/" + loop.Name, a2a("tasks/cancel", map[string]any{"id": "nope"}), http.StatusOK},
	}
	for _, c := range cases {
		req, err := http.NewRequestWithContext(t.Context(), c.method, s.url+c.path, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s %s: status %d, want %d: %s", c.method, c.path, resp.StatusCode, c.status, body)
		}
		if bytes.Contains(bytes.ToLower(body), []byte("dynamo")) {
			t.Errorf("%s %s %s: the answer shows the store: %s", c.method, c.path, c.body, body)
		}
	}
}
