package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestErrorsNameNoStore: a page token the store did not issue is the
// caller's mistake; the answer says what to fix and does not name the
// store ("sqlite: list threads: …"), on every listing.
func TestErrorsNameNoStore(t *testing.T) {
	e := newStreamEnv(t)
	e.svc.Threads = e.store // the service reads its fields per call
	for _, path := range []string{"/v1/threads?page_token=x", "/v1/runs?page_token=x", "/v1/runs?page_token=%21%21", "/v1/runs/r1/checkpoints?page_token=x"} {
		t.Run(path, func(t *testing.T) {
			resp, err := http.Get(e.srv.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", resp.StatusCode, body)
			}
			var p struct{ Detail string }
			if err := json.Unmarshal(body, &p); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(p.Detail, "sqlite") || strings.Contains(p.Detail, "list ") {
				t.Errorf("detail names the store: %q", p.Detail)
			}
			if !strings.Contains(p.Detail, "page token") || !strings.Contains(p.Detail, "without it") {
				t.Errorf("detail does not say what to fix: %q", p.Detail)
			}
		})
	}
}

// TestLoneSurrogateRefused: an escaped half of a UTF-16 surrogate pair
// is not text; it is refused like other invalid UTF-8, never stored and
// echoed.
func TestLoneSurrogateRefused(t *testing.T) {
	e := newStreamEnv(t)
	body := `{"run_id":"s1","input":{"text":"\udfff"}}`
	resp, err := http.Post(e.srv.URL+"/v1/graphs/twice/runs", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(out), "surrogate") {
		t.Fatalf("status %d, body %s; want 400 saying the surrogate has no partner", resp.StatusCode, out)
	}
	if _, err := e.svc.Get(t.Context(), "s1"); err == nil {
		t.Fatal("the run was created")
	}
}
