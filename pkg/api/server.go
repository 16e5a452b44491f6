package api

import (
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"
)

// Defaults of ServerConfig.
const (
	// DefaultReadHeaderTimeout bounds the reading of a request's headers.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout bounds the reading of a whole request, headers
	// and body: a client that announces a body and stalls is cut off.
	DefaultReadTimeout = 60 * time.Second
	// DefaultIdleTimeout bounds how long a kept-alive connection waits
	// for its next request.
	DefaultIdleTimeout = 120 * time.Second
)

// ServerConfig configures the http.Server that NewServer builds. Zero
// durations take the defaults above; negative ones turn a timeout off.
type ServerConfig struct {
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	IdleTimeout       time.Duration
	// Logger receives the server's own errors (TLS handshakes, broken
	// connections) at warn level (default slog.Default()).
	Logger *slog.Logger
}

// NewServer returns an http.Server serving handler with read timeouts:
// headers must arrive within ReadHeaderTimeout and the whole request
// within ReadTimeout, and idle connections are closed after IdleTimeout.
//
// The read timeout covers reading the request only: once the body has
// been read to its end, net/http clears the connection's read deadline,
// so long-lived responses (Server-Sent Events streams, a blocking A2A
// send waiting for its run) are not cut off by it. There is no write
// timeout, for the same reason; a handler that needs one sets it on its
// response with http.ResponseController.
//
//	h, err := api.New(cfg)
//	if err != nil {
//		return err
//	}
//	srv := api.NewServer(h, api.ServerConfig{Logger: log})
//	err := srv.Serve(listener)
func NewServer(handler http.Handler, cfg ServerConfig) *http.Server {
	pick := func(d, def time.Duration) time.Duration {
		switch {
		case d == 0:
			return def
		case d < 0:
			return 0
		}
		return d
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: pick(cfg.ReadHeaderTimeout, DefaultReadHeaderTimeout),
		ReadTimeout:       pick(cfg.ReadTimeout, DefaultReadTimeout),
		IdleTimeout:       pick(cfg.IdleTimeout, DefaultIdleTimeout),
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// checkHost refuses requests whose Host header names neither this machine
// nor one of the allowed names (see Config.HostCheck).
func (h *Handler) checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !h.hostAllowed(r.Host) {
			writeProblem(w, &problem{Status: http.StatusForbidden, Type: typeForbidden, Title: "Forbidden",
				Detail:   "this server has no token and answers only requests addressed to this machine (Host localhost, 127.0.0.1 or [::1]) or to its configured host names; use one of those, or give the server a token",
				Instance: r.URL.Path})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// GuardHost returns next behind the Host check this handler applies to
// its own routes (Config.HostCheck, on servers without a token), or next
// itself when it applies none. Handlers served beside the API rather
// than through Handle, such as the public agent cards of pkg/a2a, which
// put the request's host in what they answer, use it so that a page on
// another DNS name cannot read them either.
func (h *Handler) GuardHost(next http.Handler) http.Handler {
	if !h.hostCheck {
		return next
	}
	return h.checkHost(next)
}

// hostAllowed reports whether a Host header value is accepted: a
// loopback name (localhost, *.localhost), an IP address (DNS rebinding
// needs a DNS name), or an allowed name. The port is ignored.
func (h *Handler) hostAllowed(hostport string) bool {
	host := hostport
	if hst, _, err := net.SplitHostPort(hostport); err == nil {
		host = hst
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	switch {
	case host == "":
		return false
	case host == "localhost" || strings.HasSuffix(host, ".localhost"):
		return true
	case net.ParseIP(host) != nil:
		return true
	}
	for _, a := range h.allowedHosts {
		if strings.EqualFold(host, a) {
			return true
		}
	}
	return false
}
