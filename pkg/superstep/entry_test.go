//go:build !superstep.lambda

package superstep

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/superstep/superstep/examples/loop"
	"github.com/superstep/superstep/examples/triage"
	"github.com/superstep/superstep/pkg/pregel"
)

// runWith runs the program with opts, args and the environment vars.
func runWith(t *testing.T, vars map[string]string, args []string, opts ...Option) result {
	t.Helper()
	var out, errb syncBuffer
	env := Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return vars[k] }}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code := Run(ctx, env, args, opts...)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// TestEntryPointBadOptions: options a program cannot start with exit 2
// before any command runs, saying what to fix, and write nothing.
func TestEntryPointBadOptions(t *testing.T) {
	broken := func() (*pregel.Graph, error) { return pregel.NewGraph[struct{}]("broken").Compile() }
	for _, tc := range []struct {
		name string
		opts []Option
		want string
	}{
		{"no graphs", nil, "no graphs: pass them with superstep.WithGraphs"},
		{"two graphs with one name", []Option{WithGraphs(loop.Graph, triage.Graph, loop.Graph)}, `two graphs are named "counter": give each graph its own name`},
		{"nil graph", []Option{WithGraphs(loop.Graph, nil)}, "graph 2 of WithGraphs is nil"},
		{"graph that does not compile", []Option{WithGraphs(broken)}, "compile graph 1:"},
		{"empty store path", []Option{WithGraphs(loop.Graph), WithStorePath("")}, "WithStorePath: the path is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			store := filepath.Join(dir, "s.db")
			r := runWith(t, nil, []string{"run", "counter", "--input", `{"limit": 1}`, "--store", store}, tc.opts...)
			if r.code != ExitUsage || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", r.code, r.stderr, ExitUsage, tc.want)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("wrote %v", entries)
			}
		})
	}
}

// TestEntryPointUnknownGraph: a graph the program does not serve is a
// usage error listing the graphs it does.
func TestEntryPointUnknownGraph(t *testing.T) {
	dir := t.TempDir()
	r := runWith(t, nil, []string{"run", "orders", "--input", "{}", "--store", filepath.Join(dir, "s.db")}, WithGraphs(loop.Graph))
	if r.code != ExitUsage || !strings.Contains(r.stderr, `graph "orders" is not registered; graphs are counter`) {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("wrote %v", entries)
	}
}

// TestEntryPointServesOnlyItsGraphs: the CLI lists the graphs of the
// options, not the examples.
func TestEntryPointServesOnlyItsGraphs(t *testing.T) {
	r := runWith(t, nil, []string{"graph", "list"}, WithGraphs(loop.Graph)).want(t, ExitOK)
	if !strings.Contains(r.stdout, "counter") || strings.Contains(r.stdout, "support-triage") {
		t.Fatalf("graph list:\n%s", r.stdout)
	}
}

// TestLambdaFunctionChoice: started by Lambda, the program serves the
// function WithFunction or SUPERSTEP_FUNCTION names; none, an unknown one
// or two that disagree stop it with exit 2 and a message saying what to set.
func TestLambdaFunctionChoice(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      string
		fixed    string
		wantCode int
		want     string
	}{
		{"none", "", "", ExitUsage, "no function is named: set SUPERSTEP_FUNCTION to one of api, tick, node, sweep"},
		{"unknown", "ticks", "", ExitUsage, `unknown function "ticks" in SUPERSTEP_FUNCTION: want one of api, tick, node, sweep`},
		{"unknown fixed", "", "nodes", ExitUsage, `unknown function "nodes"`},
		{"disagree", "api", "tick", ExitUsage, "this binary serves the tick function, but SUPERSTEP_FUNCTION=api"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			started := false
			vars := map[string]string{LambdaRuntimeEnv: "127.0.0.1:9", FunctionEnv: tc.env}
			opts := []Option{WithGraphs(loop.Graph), func(s *settings) { s.lambdaStart = func(any) { started = true } }}
			if tc.fixed != "" {
				opts = append(opts, WithFunction(tc.fixed))
			}
			r := runWith(t, vars, []string{"dev"}, opts...)
			if r.code != tc.wantCode || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", r.code, r.stderr, tc.wantCode, tc.want)
			}
			if started || r.stdout != "" {
				t.Errorf("started=%v, stdout %q: the CLI or a handler ran", started, r.stdout)
			}
		})
	}
}

// TestDevOptions: dev serves the extra routes behind the middleware, and
// requires the WithToken token when no --token is given.
func TestDevOptions(t *testing.T) {
	dir := t.TempDir()
	var out, errb syncBuffer
	env, sigs := serverEnv(&out, &errb)
	code := make(chan int, 1)
	go func() {
		code <- Run(context.Background(), env, []string{"dev", "--addr", "127.0.0.1:0", "--dir", dir}, WithGraphs(loop.Graph),
			WithToken("opt-token"),
			WithStorePath("data/app.db"),
			WithRoute("GET /hello", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })),
			WithMiddleware(func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("X-Middleware", "yes")
					h.ServeHTTP(w, r)
				})
			}))
	}()
	url := waitURL(t, &out, &errb, code)
	get := func(path, token string) (*http.Response, string) {
		req, _ := http.NewRequest("GET", url+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	if resp, body := get("/hello", "opt-token"); resp.StatusCode != 200 || body != "ok" || resp.Header.Get("X-Middleware") != "yes" {
		t.Errorf("/hello: %d %q middleware %q", resp.StatusCode, body, resp.Header.Get("X-Middleware"))
	}
	if resp, _ := get("/v1/graphs", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("/v1/graphs without the token: %d, want 401", resp.StatusCode)
	}
	if resp, body := get("/v1/graphs", "opt-token"); resp.StatusCode != 200 || !strings.Contains(body, "counter") || strings.Contains(body, "support-triage") {
		t.Errorf("/v1/graphs: %d %s", resp.StatusCode, body)
	}
	sigs <- os.Interrupt
	if c := <-code; c != ExitOK {
		t.Fatalf("dev exited %d:\n%s", c, errb.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "app.db")); err != nil {
		t.Errorf("dev's store is not named after WithStorePath: %v", err)
	}
}

// TestDevRouteConflict: a route that collides with the API's is a usage
// error, not a panic.
func TestDevRouteConflict(t *testing.T) {
	r := runWith(t, nil, []string{"dev", "--addr", "127.0.0.1:0", "--dir", t.TempDir()}, WithGraphs(loop.Graph),
		WithRoute("GET /v1/graphs", http.NotFoundHandler()))
	if r.code != ExitUsage || !strings.Contains(r.stderr, `WithRoute("GET /v1/graphs")`) {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
}

// waitURL waits for dev to print its URL.
func waitURL(t *testing.T, out, errb *syncBuffer, code chan int) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case c := <-code:
			t.Fatalf("dev exited with %d:\n%s", c, errb.String())
		case <-time.After(20 * time.Millisecond):
		}
		if _, rest, ok := strings.Cut(out.String(), "serving "); ok {
			return strings.TrimSpace(rest)
		}
	}
	t.Fatalf("dev printed no URL:\n%s", errb.String())
	return ""
}

// TestInitCommand: init writes a project, refuses a non-empty directory
// and an invalid module path with exit 2 and nothing written, and only
// the programs that ask for it have it.
func TestInitCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "orders")
	r := runWith(t, nil, []string{"init", dir, "--module", "github.com/you/orders"}, WithGraphs(loop.Graph), WithInitCommand()).want(t, ExitOK)
	if !strings.Contains(r.stdout, "main.go") || !strings.Contains(r.stdout, "make run") {
		t.Errorf("init said:\n%s", r.stdout)
	}
	r = runWith(t, nil, []string{"init", dir}, WithGraphs(loop.Graph), WithInitCommand()).want(t, ExitUsage)
	if !strings.Contains(r.stderr, "is not empty") {
		t.Errorf("init into a non-empty dir: %s", r.stderr)
	}
	fresh := filepath.Join(t.TempDir(), "x")
	r = runWith(t, nil, []string{"init", fresh, "--module", "Not A Path"}, WithGraphs(loop.Graph), WithInitCommand()).want(t, ExitUsage)
	if !strings.Contains(r.stderr, `invalid module path "Not A Path"`) {
		t.Errorf("init with a bad module: %s", r.stderr)
	}
	if _, err := os.Stat(fresh); err == nil {
		t.Error("init with a bad module path created the directory")
	}
	runWith(t, nil, []string{"init", filepath.Join(t.TempDir(), "y")}, WithGraphs(loop.Graph)).want(t, ExitUsage)
}
