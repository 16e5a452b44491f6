package api_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/internal/jsonin"
)

func deep(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

// TestHostileInputs sends what a hostile or careless client would: each is
// refused with a 4xx problem that says what to fix in the caller's terms,
// and nothing stored changes.
func TestHostileInputs(t *testing.T) {
	e := newEnv(t)
	e.create("echo", api.CreateRunRequest{RunID: "r1", Input: json.RawMessage(`{"text":"hi"}`)})
	e.create("ask", api.CreateRunRequest{RunID: "a1"})
	e.finish("a1")

	for _, tc := range []struct {
		name         string
		method, path string
		body         string
		status       int
		detail       []string
	}{
		{"deep input", "POST", "/v1/graphs/echo/runs", `{"input":{"text":` + deep(10000) + `}}`, 400, []string{"more than 64 levels deep", "at $.input.text[0]"}},
		{"input one level too deep", "POST", "/v1/graphs/echo/runs", `{"input":{"trail":` + deep(jsonin.MaxDepth-1) + `}}`, 400, []string{"more than 64 levels"}},
		{"repeated key", "POST", "/v1/graphs/echo/runs", `{"input":{"text":"a"},"input":{"text":"b"}}`, 400, []string{`key "input" is repeated`}},
		{"case-variant key", "POST", "/v1/graphs/echo/runs", `{"input":{"text":"a"},"Input":{"text":"b"}}`, 400, []string{`key "Input" repeats key "input" in another case`}},
		{"case-variant channel", "POST", "/v1/graphs/echo/runs", `{"input":{"text":"a","TEXT":"b"}}`, 400, []string{`at $.input`}},
		{"invalid UTF-8", "POST", "/v1/graphs/echo/runs", "{\"input\":{\"text\":\"a\xffb\"}}", 400, []string{"not valid UTF-8"}},
		{"channel value of the wrong type", "POST", "/v1/graphs/echo/runs", `{"input":{"text":5}}`, 400, []string{`channel "text"`, "must be a string, not a number"}},
		{"resume with repeated key", "POST", "/v1/runs/a1/resume", `{"resume":"x","resume":"y"}`, 400, []string{`key "resume" is repeated`}},
		{"resume too deep", "POST", "/v1/runs/a1/resume", `{"resume":` + deep(100) + `}`, 400, []string{"more than 64 levels"}},
		{"drain with invalid UTF-8", "POST", "/v1/runs/r1/drain", "{\"reason\":\"\xc3\"}", 400, []string{"not valid UTF-8"}},
		{"malformed limit", "GET", "/v1/runs?limit=%zz", "", 400, []string{`query string is malformed`, `"%zz"`}},
		{"malformed graph", "GET", "/v1/runs?graph=%zz", "", 400, []string{`query string is malformed`}},
		{"malformed status", "GET", "/v1/runs?status=%zz", "", 400, []string{`query string is malformed`}},
		{"malformed run", "GET", "/v1/graphs/echo?run=%zz", "", 400, []string{`query string is malformed`}},
		{"query not UTF-8", "GET", "/v1/runs?context_id=%ff", "", 400, []string{`not valid UTF-8`}},
		{"unknown graph filter", "GET", "/v1/runs?graph=nope", "", 400, []string{`graph "nope" is not registered`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.snapshot()
			var body any
			if tc.body != "" {
				body = tc.body
			}
			p := e.do(tc.method, tc.path, body).problem(t, tc.status, tc.detail...)
			for _, leak := range []string{"Go value", "Go struct", "api.", "runs.", "pregel.", "json: "} {
				if strings.Contains(p.Detail, leak) {
					t.Errorf("detail %q shows Go internals (%q)", p.Detail, leak)
				}
			}
			if after := e.snapshot(); after != before {
				t.Errorf("stored data changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

func TestHostCheck(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    api.Config
		host   string
		status int
	}{
		{"rebinding name refused", api.Config{HostCheck: true}, "rebind.evil.example", 403},
		{"rebinding name with port refused", api.Config{HostCheck: true}, "rebind.evil.example:8080", 403},
		{"localhost", api.Config{HostCheck: true}, "localhost:8080", 200},
		{"dev.localhost", api.Config{HostCheck: true}, "dev.localhost", 200},
		{"IPv4", api.Config{HostCheck: true}, "127.0.0.1:8080", 200},
		{"IPv6", api.Config{HostCheck: true}, "[::1]:8080", 200},
		{"LAN address", api.Config{HostCheck: true}, "192.168.1.5", 200},
		{"allowed name", api.Config{HostCheck: true, AllowedHosts: []string{"box.lan"}}, "BOX.lan:8080", 200},
		{"with a token, any host", api.Config{HostCheck: true, Token: "s3cret"}, "rebind.evil.example", 200},
		{"check off", api.Config{}, "rebind.evil.example", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(c *api.Config) {
				c.HostCheck, c.AllowedHosts, c.Token = tc.cfg.HostCheck, tc.cfg.AllowedHosts, tc.cfg.Token
			})
			before := e.snapshot()
			res := e.do("POST", "/v1/graphs/echo/runs", `{}`, "Host", tc.host)
			if tc.status == 200 {
				if res.status != http.StatusAccepted {
					t.Fatalf("status %d, want 202; body %s", res.status, res.body)
				}
				return
			}
			res.problem(t, tc.status, "answers only requests addressed to this machine")
			if e.do("GET", "/v1/runs", nil, "Host", tc.host).status != 403 {
				t.Error("GET was answered")
			}
			if after := e.snapshot(); after != before {
				t.Errorf("stored data changed")
			}
		})
	}
}

// TestServerTimeouts: a request that announces a body and stalls is cut
// off after the read timeout, while a handler that takes longer than the
// read timeout after reading its body is not.
func TestServerTimeouts(t *testing.T) {
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, "cut", http.StatusRequestTimeout)
			return
		}
		select {
		case <-time.After(600 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "done")
	})
	srv := httptest.NewUnstartedServer(nil)
	srv.Config = api.NewServer(slow, api.ServerConfig{ReadTimeout: 200 * time.Millisecond, ReadHeaderTimeout: 100 * time.Millisecond, Logger: testLogger(t)})
	srv.Start()
	t.Cleanup(srv.Close)

	t.Run("stalled body is cut", func(t *testing.T) {
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		start := time.Now()
		if _, err := io.WriteString(conn, "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n{"); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = io.ReadAll(conn) // the server answers and closes, or just closes
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("the server still holds the stalled connection after %v", time.Since(start))
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("cut after %v, want about the read timeout", d)
		}
	})
	t.Run("stalled headers are cut", func(t *testing.T) {
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_, _ = io.WriteString(conn, "POST / HTTP/1.1\r\nHost: local")
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = io.ReadAll(conn)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("the server still holds a connection with stalled headers")
		}
	})
	t.Run("long response after the body is not cut", func(t *testing.T) {
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_, _ = io.WriteString(conn, "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n\r\n{}")
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 || string(body) != "done" {
			t.Fatalf("got %d %q, want 200 done", res.StatusCode, body)
		}
	})
	t.Run("defaults", func(t *testing.T) {
		s := api.NewServer(slow, api.ServerConfig{})
		if s.ReadHeaderTimeout != api.DefaultReadHeaderTimeout || s.ReadTimeout != api.DefaultReadTimeout || s.IdleTimeout != api.DefaultIdleTimeout {
			t.Errorf("timeouts %v %v %v", s.ReadHeaderTimeout, s.ReadTimeout, s.IdleTimeout)
		}
	})
}
