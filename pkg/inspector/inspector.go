// Package inspector is superstep's web inspector: one page, served at "/",
// that shows the graphs, the runs and each run step by step (its graph
// coloured by node status at any step, a timeline of supersteps, the state
// and its diff per step, its events) and drives them (start, answer an
// interrupt, drain, cancel, resume).
//
// The page talks only to the HTTP API of package api, from the same
// origin, so it needs no configuration: [New] wraps the API handler and
// serves the page next to it.
//
//	h, err := api.New(api.Config{Service: svc, Token: token})
//	if err != nil {
//		return err
//	}
//	http.ListenAndServe("localhost:8080", inspector.New(h))
//
// Its assets (HTML, CSS, JavaScript, and the dagre graph-layout library,
// vendored from npm) are embedded in the binary: the page works offline.
// When the API requires a bearer token the page asks for it once, keeps it
// in the tab's sessionStorage and sends it with every API request; the
// assets themselves are public and hold no data.
package inspector

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed assets
var assets embed.FS

// assetPrefix is the path under which the page's assets are served.
const assetPrefix = "/inspector/"

// New returns a handler that serves the inspector page at "/" (GET and
// HEAD) and its assets under /inspector/, and hands every other request
// to api unchanged, so the API's routes (/v1, /a2a, /healthz) and its
// answers to unknown paths keep precedence.
func New(api http.Handler) http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree always has assets/
	}
	files := http.StripPrefix(assetPrefix, http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		get := r.Method == http.MethodGet || r.Method == http.MethodHead
		switch {
		case get && r.URL.Path == "/":
			setHeaders(w)
			http.ServeFileFS(w, r, sub, "index.html")
		case get && strings.HasPrefix(r.URL.Path, assetPrefix) && !strings.HasSuffix(r.URL.Path, "/"):
			setHeaders(w)
			files.ServeHTTP(w, r)
		default:
			api.ServeHTTP(w, r)
		}
	})
}

// setHeaders makes the page load nothing but its own assets and talk to
// nothing but its own origin.
func setHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
}
