// Package api is superstep's HTTP API: a plain [net/http] handler over a
// [runs.Service], shared by `superstep dev` and the api Lambda.
//
// It lists and describes graphs (with a Mermaid diagram), creates runs
// (idempotently when the client supplies a run id), lists and inspects runs
// step by step, shows each run's history of events, and drains, cancels
// and resumes them. Errors are RFC 9457
// problem documents (application/problem+json). The endpoints, the JSON
// shapes and the error types are documented in README.md next to this file.
//
//	h, err := api.New(api.Config{Service: svc, Token: os.Getenv("SUPERSTEP_TOKEN")})
//	if err != nil {
//		return err // what the Config lacks
//	}
//	h.Handle("/a2a/", a2aHandler) // more routes, behind the same auth
//	http.ListenAndServe("localhost:8080", h)
package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/superstep/superstep/pkg/longterm"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/schedule"
)

// DefaultMaxBodyBytes bounds request bodies when Config.MaxBodyBytes is not
// set.
const DefaultMaxBodyBytes int64 = 1 << 20

// Config configures the API handler.
type Config struct {
	// Service carries out the requests. Required.
	Service *runs.Service
	// Token, when non-empty, is the bearer token every request but
	// GET /healthz must present in its Authorization header.
	Token string
	// MaxBodyBytes bounds request bodies (default DefaultMaxBodyBytes);
	// larger bodies are refused with 413.
	MaxBodyBytes int64
	// Logger receives server errors and a debug line per request
	// (default slog.Default()).
	Logger *slog.Logger
	// HostCheck protects a server without a Token from DNS rebinding (a
	// web page whose DNS name an attacker points at 127.0.0.1): requests
	// are answered only when their Host header is a loopback name
	// (localhost, *.localhost), an IP address, or one of AllowedHosts;
	// others get 403. It is ignored when Token is set. `superstep dev`
	// turns it on; leave it off behind a gateway whose host names vary.
	HostCheck bool
	// AllowedHosts are more host names (without port, compared without
	// regard to case) accepted by HostCheck.
	AllowedHosts []string
	// Events serves GET /v1/runs/{run_id}/stream (stream.go). Default:
	// Service.Dispatcher, if it is a runs.EventReader (the Scheduler is);
	// without either, New fails unless NoStreams is set.
	Events runs.EventReader
	// NoStreams serves no streams: GET /v1/runs/{run_id}/stream and
	// creating a run with "stream": true answer 501 (not implemented),
	// telling the client to poll. Set it only for a server that has no
	// event source on purpose.
	NoStreams bool
	// Heartbeat is how often an idle stream writes a comment line
	// (default DefaultHeartbeat).
	Heartbeat time.Duration
	// LongTerm, when set, is served at /v1/store (pkg/longterm): items,
	// search and namespaces, behind the same auth as the rest.
	LongTerm *longterm.Store
	// Schedules serves /v1/schedules (schedules.go); nil: 501.
	Schedules *schedule.Service
}

// Handler serves the HTTP API. Create it with [New]; it is safe for
// concurrent use once serving starts.
type Handler struct {
	svc          *runs.Service
	log          *slog.Logger
	maxBody      int64
	auth         bool
	tokenHash    [sha256.Size]byte
	hostCheck    bool
	allowedHosts []string
	mux          *http.ServeMux
	handler      http.Handler
	// Streams: stream.go.
	events    runs.EventReader
	heartbeat time.Duration
	poll      time.Duration
	// lt is the long-term store of /v1/store (store.go), if any.
	lt *longterm.Store
	// Schedules: schedules.go.
	schedules *schedule.Service
}

// New returns the API handler for cfg, or an error naming everything cfg
// lacks (see [runs.Service.Check]; an event source for streams unless
// NoStreams is set), so that a misconfigured server fails when it starts,
// not on a request.
func New(cfg Config) (*Handler, error) {
	if err := check(cfg); err != nil {
		return nil, err
	}
	h := &Handler{
		svc:     cfg.Service,
		log:     cfg.Logger,
		maxBody: cfg.MaxBodyBytes,
		auth:    cfg.Token != "",
		mux:     http.NewServeMux(),
		// A token already keeps other web pages out.
		hostCheck:    cfg.HostCheck && cfg.Token == "",
		allowedHosts: cfg.AllowedHosts,
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	if h.maxBody <= 0 {
		h.maxBody = DefaultMaxBodyBytes
	}
	if h.auth {
		h.tokenHash = sha256.Sum256([]byte(cfg.Token))
	}
	h.events, h.heartbeat = cfg.Events, cfg.Heartbeat
	h.lt = cfg.LongTerm
	if h.events == nil && !cfg.NoStreams {
		h.events, _ = cfg.Service.Dispatcher.(runs.EventReader)
	}
	if cfg.NoStreams {
		h.events = nil
	}
	if h.heartbeat <= 0 {
		h.heartbeat = DefaultHeartbeat
	}
	h.schedules = cfg.Schedules
	h.routes()
	var inner http.Handler = h.crossOrigin(h.authenticate(http.HandlerFunc(h.serveMux)))
	if h.hostCheck {
		inner = h.checkHost(inner)
	}
	h.handler = h.recoverer(inner)
	return h, nil
}

// check reports what cfg lacks.
func check(cfg Config) error {
	if cfg.Service == nil {
		return errors.New("api: Config.Service is nil")
	}
	var errs []error
	if err := cfg.Service.Check(); err != nil {
		errs = append(errs, err)
	}
	if _, ok := cfg.Service.Dispatcher.(runs.EventReader); cfg.Events == nil && !cfg.NoStreams && cfg.Service.Dispatcher != nil && !ok {
		errs = append(errs, fmt.Errorf("streams need an event source: Config.Events is nil and Service.Dispatcher (%T) is no runs.EventReader; set Config.Events (the store's event log), or Config.NoStreams to serve none", cfg.Service.Dispatcher))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("api: %w", err)
	}
	return nil
}

// ServeHTTP implements [http.Handler].
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.handler.ServeHTTP(w, r)
}

// Handle mounts more routes, such as the A2A binding at "/a2a/", on the
// API's mux, behind the same panic recovery, cross-origin check and
// bearer-token check. pattern follows [http.ServeMux]; like
// ServeMux.Handle, it panics if the pattern conflicts with a route already
// registered. Requests that match no route get a 404 problem, and a method
// a path does not accept a 405 problem.
func (h *Handler) Handle(pattern string, handler http.Handler) {
	h.mux.Handle(pattern, handler)
}

// route is one endpoint: a method, a ServeMux path pattern and its handler.
type route struct {
	method, path string
	fn           handlerFunc
}

// handlerFunc handles one request; a returned error becomes a problem
// response.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

func (h *Handler) routes() {
	table := []route{
		{"GET", "/healthz", h.healthz},
		{"GET", "/v1/graphs", h.listGraphs},
		{"GET", "/v1/graphs/{graph}", h.getGraph},
		{"POST", "/v1/graphs/{graph}/runs", h.createRun},
		{"GET", "/v1/runs", h.listRuns},
		{"POST", "/v1/runs/drain", h.drainFleet},
		{"POST", "/v1/runs/resume", h.resumeFleet},
		{"GET", "/v1/runs/{run_id}", h.getRun},
		{"GET", "/v1/runs/{run_id}/events", h.listEvents},
		{"GET", "/v1/runs/{run_id}/storage", h.getRunStorage},
		{"GET", "/v1/runs/{run_id}/stream", h.streamRun},
		{"GET", "/v1/runs/{run_id}/checkpoints", h.listCheckpoints},
		{"GET", "/v1/runs/{run_id}/checkpoints/{step}", h.getCheckpoint},
		{"GET", "/v1/runs/{run_id}/checkpoints/{step}/values/{channel}", h.getValue},
		{"GET", "/v1/runs/{run_id}/input", h.getInput},
		{"GET", "/v1/runs/{run_id}/input/{channel}", h.getInput},
		{"GET", "/v1/runs/{run_id}/interrupts/{interrupt_id}", h.getInterrupt},
		{"POST", "/v1/runs/{run_id}/drain", h.drainRun},
		{"POST", "/v1/runs/{run_id}/cancel", h.cancelRun},
		{"POST", "/v1/runs/{run_id}/resume", h.resumeRun},
	}
	table = append(table, h.threadRoutes()...)
	table = append(table, h.storeRoutes()...)
	table = append(table, h.scheduleRoutes()...)
	for _, rt := range table {
		h.mux.Handle(rt.method+" "+rt.path, h.wrap(rt.fn))
	}
}

// serveMux routes a request, answering with a problem where ServeMux
// would answer 404 or 405 in plain text.
func (h *Handler) serveMux(w http.ResponseWriter, r *http.Request) {
	mh, pattern := h.mux.Handler(r)
	if pattern != "" {
		h.mux.ServeHTTP(w, r)
		return
	}
	// No route matched. Ask the mux's own handler which status it would
	// give (and, for 405, which methods the path allows).
	probe := &statusProbe{header: http.Header{}}
	mh.ServeHTTP(probe, r)
	if probe.status == http.StatusMethodNotAllowed {
		allow := probe.header.Get("Allow")
		w.Header().Set("Allow", allow)
		h.writeError(w, r, &problem{Status: http.StatusMethodNotAllowed, Type: typeMethodNotAllowed, Title: "Method not allowed",
			Detail: fmt.Sprintf("%s does not accept %s; use %s", r.URL.Path, r.Method, allow)})
		return
	}
	h.writeError(w, r, notFoundf("there is no resource at %s; the API's paths start with /v1/graphs or /v1/runs", r.URL.Path))
}

// statusProbe records the status and headers a handler writes and discards
// its body.
type statusProbe struct {
	header http.Header
	status int
}

func (p *statusProbe) Header() http.Header { return p.header }

func (p *statusProbe) Write(b []byte) (int, error) {
	if p.status == 0 {
		p.status = http.StatusOK
	}
	return len(b), nil
}

func (p *statusProbe) WriteHeader(code int) {
	if p.status == 0 {
		p.status = code
	}
}

// wrap turns a handlerFunc into an http.Handler that writes its error as a
// problem.
func (h *Handler) wrap(fn handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := fn(w, r); err != nil {
			h.writeError(w, r, err)
		}
	})
}

func (h *Handler) healthz(w http.ResponseWriter, r *http.Request) error {
	return h.writeJSON(w, r, http.StatusOK, Health{Status: "ok"})
}

// recorder remembers whether a response was started and with which status.
type recorder struct {
	http.ResponseWriter
	status int
}

func (rec *recorder) WriteHeader(code int) {
	if rec.status == 0 {
		rec.status = code
	}
	rec.ResponseWriter.WriteHeader(code)
}

func (rec *recorder) Write(p []byte) (int, error) {
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return rec.ResponseWriter.Write(p)
}

// Flush lets streaming handlers mounted with Handle flush.
func (rec *recorder) Flush() {
	if f, ok := rec.ResponseWriter.(http.Flusher); ok {
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the underlying writer.
func (rec *recorder) Unwrap() http.ResponseWriter { return rec.ResponseWriter }

// recoverer turns a panic into a 500 problem (when the response has not
// started) and logs it with its stack, and logs every request at debug
// level.
func (h *Handler) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w}
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				h.log.ErrorContext(r.Context(), "api: panic serving request",
					"method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				if rec.status == 0 {
					p := internalProblem()
					p.Instance = r.URL.Path
					writeProblem(rec, p)
				}
			}
			h.log.DebugContext(r.Context(), "api: request",
				"method", r.Method, "path", r.URL.Path, "status", rec.status, "duration", time.Since(start))
		}()
		hdr := w.Header()
		hdr.Set("Cache-Control", "no-store")
		hdr.Set("X-Content-Type-Options", "nosniff")
		next.ServeHTTP(rec, r)
	})
}

// crossOrigin refuses state-changing requests that a browser sends from
// another origin (judged by Sec-Fetch-Site and Origin), so that a web page
// cannot drive a token-less `superstep dev` server on localhost. Clients
// other than browsers send neither header and are not affected.
func (h *Handler) crossOrigin(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := cop.Check(r); err != nil {
			writeProblem(w, &problem{Status: http.StatusForbidden, Type: typeForbidden, Title: "Forbidden",
				Detail: "cross-origin requests from a browser are refused; call the API from the same origin or from a non-browser client", Instance: r.URL.Path})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// authenticate checks the bearer token of every request but GET /healthz.
func (h *Handler) authenticate(next http.Handler) http.Handler {
	if !h.auth {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			next.ServeHTTP(w, r)
			return
		}
		scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="superstep"`)
			writeProblem(w, &problem{Status: http.StatusUnauthorized, Type: typeUnauthorized, Title: titleUnauthorized,
				Detail: "this API requires a bearer token: send the header \"Authorization: Bearer <token>\" with the token the server was configured with", Instance: r.URL.Path})
			return
		}
		// Comparing fixed-length hashes in constant time reveals neither
		// the token nor its length.
		got := sha256.Sum256([]byte(strings.TrimSpace(token)))
		if subtle.ConstantTimeCompare(got[:], h.tokenHash[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="superstep", error="invalid_token"`)
			writeProblem(w, &problem{Status: http.StatusUnauthorized, Type: typeUnauthorized, Title: titleUnauthorized,
				Detail: "the bearer token is not valid; check the token the server was configured with", Instance: r.URL.Path})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// allowedQuery rejects query parameters other than names, and repeated
// ones, so that a typo does not silently widen a listing.
func allowedQuery(r *http.Request, names ...string) error {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return invalidf("the query string is malformed: %v; percent-encode names and values (%%25 for a %%)", err)
	}
	if !utf8.ValidString(r.URL.RawQuery) || !validUTF8Values(q) {
		return invalidf("the query string is not valid UTF-8; send UTF-8, percent-encoded")
	}
	for k, vs := range q {
		if !slices.Contains(names, k) {
			if len(names) == 0 {
				return invalidf("unknown query parameter %q; %s takes none", k, r.URL.Path)
			}
			return invalidf("unknown query parameter %q; %s takes %s", k, r.URL.Path, strings.Join(names, ", "))
		}
		if len(vs) > 1 {
			return invalidf("query parameter %q is given %d times; give it once", k, len(vs))
		}
	}
	return nil
}

// validUTF8Values reports whether every decoded name and value of q is
// valid UTF-8.
func validUTF8Values(q url.Values) bool {
	for k, vs := range q {
		if !utf8.ValidString(k) {
			return false
		}
		for _, v := range vs {
			if !utf8.ValidString(v) {
				return false
			}
		}
	}
	return true
}
