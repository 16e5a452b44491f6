package inspector_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/superstep/superstep/pkg/inspector"
)

// TestRoutes checks what the inspector serves itself and what it hands to
// the API: the page and its assets are public, everything else (the API's
// routes, unknown paths, other methods on /) reaches the API unchanged.
func TestRoutes(t *testing.T) {
	apiHandler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Handled-By", "api")
		w.WriteHeader(http.StatusTeapot)
	})
	srv := httptest.NewServer(inspector.New(apiHandler))
	t.Cleanup(srv.Close)

	tests := []struct {
		method, path string
		status       int
		api          bool   // handled by the API
		body, ctype  string // expected in the body, content type prefix
	}{
		{"GET", "/", 200, false, `<script src="/inspector/app.js"`, "text/html"},
		{"HEAD", "/", 200, false, "", "text/html"},
		{"GET", "/inspector/app.js", 200, false, "class Feed", "text/javascript"},
		{"GET", "/inspector/style.css", 200, false, "--completed", "text/css"},
		{"GET", "/inspector/vendor/dagre.min.js", 200, false, "graphlib", "text/javascript"},
		{"GET", "/inspector/nope.js", 404, false, "", ""},
		{"GET", "/inspector/", 418, true, "", ""},
		{"POST", "/", 418, true, "", ""},
		{"GET", "/v1/graphs", 418, true, "", ""},
		{"GET", "/healthz", 418, true, "", ""},
		{"GET", "/index.html", 418, true, "", ""},
		{"POST", "/inspector/app.js", 418, true, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, srv.URL+tt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			body, _ := io.ReadAll(res.Body)
			if res.StatusCode != tt.status {
				t.Fatalf("status %d, want %d", res.StatusCode, tt.status)
			}
			if got := res.Header.Get("X-Handled-By") == "api"; got != tt.api {
				t.Fatalf("handled by the API: %v, want %v", got, tt.api)
			}
			if !strings.Contains(string(body), tt.body) {
				t.Errorf("body lacks %q", tt.body)
			}
			if tt.ctype != "" && !strings.HasPrefix(res.Header.Get("Content-Type"), tt.ctype) {
				t.Errorf("Content-Type %q, want %s", res.Header.Get("Content-Type"), tt.ctype)
			}
			if !tt.api && res.StatusCode == 200 && !strings.Contains(res.Header.Get("Content-Security-Policy"), "default-src 'none'") {
				t.Errorf("no Content-Security-Policy on %s", tt.path)
			}
		})
	}
}
