//go:build !superstep.lambda

package superstep

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/superstep/superstep/pkg/api"
)

// Environment variables that set the defaults of --server and --token.
const (
	ServerEnv = "SUPERSTEP_SERVER"
	TokenEnv  = "SUPERSTEP_TOKEN"
)

// DefaultServer is the dev server's address when neither --server nor
// SUPERSTEP_SERVER says otherwise.
const DefaultServer = "http://127.0.0.1:8080"

// serverFlags are the flags of the commands that talk to a dev server.
type serverFlags struct {
	server string
	token  string
	json   bool
}

// register adds --server, --token and --json to c. defServer is the
// default of --server, before SUPERSTEP_SERVER.
func (f *serverFlags) register(c *cobra.Command, env Env, defServer string) {
	if s := env.getenv(ServerEnv); s != "" {
		defServer = s
	}
	fl := c.PersistentFlags()
	fl.StringVar(&f.server, "server", defServer, "`URL` of the superstep dev server (env "+ServerEnv+")")
	fl.StringVar(&f.token, "token", cmp.Or(env.getenv(TokenEnv), env.defaultToken()), "bearer token of the server (env "+TokenEnv+")")
	fl.BoolVar(&f.json, "json", false, "print the server's JSON answer instead of a table")
}

func (f *serverFlags) client() (*client, error) {
	s := strings.TrimSpace(f.server)
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, badInput(fmt.Errorf("--server %q is not an http(s) URL such as %s", f.server, DefaultServer))
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	return &client{base: u, token: f.token, http: &http.Client{Timeout: 30 * time.Second}}, nil
}

// client calls the HTTP API of a dev server (pkg/api).
type client struct {
	base  *url.URL
	token string
	http  *http.Client
}

// apiError is a problem document answered by the server.
type apiError struct {
	Status  int
	Problem api.Problem
}

func (e *apiError) Error() string {
	if e.Problem.Detail != "" {
		return e.Problem.Detail
	}
	if e.Problem.Title != "" {
		return e.Problem.Title
	}
	return fmt.Sprintf("the server answered %d %s", e.Status, http.StatusText(e.Status))
}

// do sends a request with body encoded as JSON (when not nil) and decodes
// the answer into out (when not nil). It returns the raw answer too, for
// --json. Errors are ExitErrors: 4xx answers are usage errors, the rest
// failures.
func (c *client) do(ctx context.Context, method, path string, query url.Values, body, out any) ([]byte, error) {
	u := *c.base
	// path is escaped (url.PathEscape of ids): keep it so, rather than
	// escaping its '%' again.
	unescaped, err := url.PathUnescape(path)
	if err != nil {
		return nil, failed(fmt.Errorf("%s %s: %w", method, path, err))
	}
	u.RawPath = u.EscapedPath() + path
	u.Path += unescaped
	u.RawQuery = query.Encode()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, failed(fmt.Errorf("encode request: %w", err))
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, failed(fmt.Errorf("%s %s: %w", method, path, err))
	}
	req.Header.Set("Accept", "application/json, application/problem+json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if _, ok := errors.AsType[*net.OpError](err); ok {
			return nil, failed(fmt.Errorf("cannot reach the server at %s (is 'superstep dev' running? set --server or %s): %w", c.base, ServerEnv, err))
		}
		return nil, failed(fmt.Errorf("%s %s: %w", method, u.String(), err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, failed(fmt.Errorf("%s %s: read answer: %w", method, path, err))
	}
	if resp.StatusCode >= 300 {
		ae := &apiError{Status: resp.StatusCode}
		if json.Unmarshal(data, &ae.Problem) != nil || (ae.Problem.Detail == "" && ae.Problem.Title == "") {
			ae.Problem.Detail = fmt.Sprintf("the server answered %s: %s", resp.Status, oneLine(string(data), 200))
		}
		if resp.StatusCode >= 400 && resp.StatusCode < 500 {
			return data, badInput(ae)
		}
		return data, failed(ae)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return data, failed(fmt.Errorf("%s %s: decode answer: %w", method, path, err))
		}
	}
	return data, nil
}

// call sends one request to the server f names: see client.do.
func (f *serverFlags) call(ctx context.Context, method, path string, query url.Values, body, out any) ([]byte, error) {
	cl, err := f.client()
	if err != nil {
		return nil, err
	}
	return cl.do(ctx, method, path, query, body, out)
}

// listQuery is the query of a listing: limit when positive, and each
// name, value pair of kv whose value is not empty.
func listQuery(limit int, kv ...string) url.Values {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	return q
}

// morePages tells, on stderr, how to list the next page of what, if any.
func morePages(env Env, what, token string) {
	if token != "" {
		fmt.Fprintf(env.Stderr, "more %s: add --page-token %s\n", what, token)
	}
}
