package lambdafn

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/superstep/superstep/examples/loop"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/serverless"
)

// lambdaEnv sets what a deployed function's environment holds; nothing
// is reached while a function wires itself (the endpoint is closed).
func lambdaEnv(t *testing.T) {
	t.Helper()
	for k, v := range map[string]string{
		serverless.EnvTable:      "t",
		serverless.EnvTickQueue:  "http://127.0.0.1:9/q/tick.fifo",
		serverless.EnvNodeQueue:  "http://127.0.0.1:9/q/node",
		serverless.EnvStartQueue: "",
		serverless.EnvAPIToken:   "",
		"AWS_ENDPOINT_URL":       "http://127.0.0.1:9",
		"AWS_REGION":             "us-east-1",
		"AWS_ACCESS_KEY_ID":      "test",
		"AWS_SECRET_ACCESS_KEY":  "test",
	} {
		t.Setenv(k, v)
	}
}

// serve runs Serve with vars as the environment Serve reads and returns
// its exit code, its stderr and the handler it would have served.
func serve(t *testing.T, vars map[string]string, opts ...Option) (code int, stderr string, h any) {
	t.Helper()
	var errb strings.Builder
	opts = append(opts, WithStart(func(handler any) { h = handler }))
	code = Serve(t.Context(), func(k string) string { return vars[k] }, &errb, opts...)
	return code, errb.String(), h
}

// TestServeRefuses: outside Lambda, with no function named, an unknown
// one, two that disagree or bad graphs, Serve stops with exit code 2 and
// a message saying what to set, and serves nothing.
func TestServeRefuses(t *testing.T) {
	lambdaEnv(t)
	broken := func() (*pregel.Graph, error) { return pregel.NewGraph[struct{}]("broken").Compile() }
	in := map[string]string{RuntimeEnv: "127.0.0.1:9"}
	for _, tc := range []struct {
		name string
		vars map[string]string
		opts []Option
		want string
	}{
		{"outside Lambda", map[string]string{FunctionEnv: "api"}, []Option{WithGraphs(loop.Graph)}, "AWS_LAMBDA_RUNTIME_API is unset: this program is a Lambda function's bootstrap"},
		{"no function", in, []Option{WithGraphs(loop.Graph)}, "no function is named: set SUPERSTEP_FUNCTION to one of api, tick, node, sweep, stream"},
		{"unknown function", map[string]string{RuntimeEnv: "x", FunctionEnv: "ticks"}, []Option{WithGraphs(loop.Graph)}, `unknown function "ticks" in SUPERSTEP_FUNCTION`},
		{"disagree", map[string]string{RuntimeEnv: "x", FunctionEnv: "api"}, []Option{WithGraphs(loop.Graph), WithFunction("tick")}, "this binary serves the tick function, but SUPERSTEP_FUNCTION=api"},
		{"no graphs", in, []Option{WithFunction("tick")}, "no graphs: pass them with WithGraphs"},
		{"two graphs with one name", in, []Option{WithFunction("tick"), WithGraphs(loop.Graph, loop.Graph)}, `two graphs are named "counter"`},
		{"graph that does not compile", in, []Option{WithFunction("tick"), WithGraphs(broken)}, "compile graph 1:"},
		{"nil graph", in, []Option{WithFunction("tick"), WithGraphs(loop.Graph, nil)}, "graph 2 of WithGraphs is nil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stderr, h := serve(t, tc.vars, tc.opts...)
			if code != ExitUsage || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, stderr, ExitUsage, tc.want)
			}
			if h != nil {
				t.Error("a handler was served")
			}
		})
	}
}

// TestServeWiringFails: a configuration the function cannot start with
// exits 1, the reason in the function's log (JSON on stderr).
func TestServeWiringFails(t *testing.T) {
	lambdaEnv(t)
	vars := map[string]string{RuntimeEnv: "127.0.0.1:9"}
	t.Run("route conflict", func(t *testing.T) {
		code, stderr, _ := serve(t, vars, WithGraphs(loop.Graph), WithFunction("api"), WithRoute("GET /v1/graphs", http.NotFoundHandler()))
		if code != ExitFailed || !strings.Contains(stderr, `WithRoute(\"GET /v1/graphs\")`) || !strings.Contains(stderr, `"level":"ERROR"`) {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
	})
	t.Run("tick queue not FIFO", func(t *testing.T) {
		t.Setenv(serverless.EnvTickQueue, "http://127.0.0.1:9/q/tick")
		code, stderr, _ := serve(t, vars, WithGraphs(loop.Graph), WithFunction("tick"))
		if code != ExitFailed || !strings.Contains(stderr, "not a FIFO queue") {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
	})
}

// TestServeAPI: the api function serves the HTTP API with the extra
// routes behind the middlewares (first given outermost) and the token
// of WithToken, as API Gateway invokes it.
func TestServeAPI(t *testing.T) {
	lambdaEnv(t)
	var mu sync.Mutex
	var order []string
	mw := func(name string) func(http.Handler) http.Handler {
		return func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				order = append(order, name)
				mu.Unlock()
				next.ServeHTTP(w, r)
			})
		}
	}
	code, stderr, h := serve(t, map[string]string{RuntimeEnv: "127.0.0.1:9", FunctionEnv: "api"}, WithGraphs(loop.Graph),
		WithToken("fn-token"), WithMiddleware(mw("outer")), WithMiddleware(mw("inner")),
		WithRoute("GET /hello", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hi") })))
	if code != ExitOK || h == nil {
		t.Fatalf("exit %d, handler %v, stderr %q", code, h, stderr)
	}
	invoke := func(path, token string) (status int, body string) {
		headers := map[string]string{}
		if token != "" {
			headers["authorization"] = "Bearer " + token
		}
		ev, _ := json.Marshal(map[string]any{
			"version": "2.0", "routeKey": "$default", "rawPath": path, "headers": headers,
			"requestContext": map[string]any{"http": map[string]any{"method": "GET", "path": path}},
		})
		out, err := lambda.NewHandler(h).Invoke(context.Background(), ev)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		var resp struct {
			StatusCode int    `json:"statusCode"`
			Body       string `json:"body"`
		}
		if err := json.Unmarshal(out, &resp); err != nil {
			t.Fatalf("GET %s: %s: %v", path, out, err)
		}
		return resp.StatusCode, resp.Body
	}
	if status, body := invoke("/hello", "fn-token"); status != 200 || body != "hi" {
		t.Errorf("GET /hello: %d %q", status, body)
	}
	if status, _ := invoke("/v1/graphs", ""); status != http.StatusUnauthorized {
		t.Errorf("GET /v1/graphs without the token: %d, want 401", status)
	}
	if status, body := invoke("/v1/graphs", "fn-token"); status != 200 || !strings.Contains(body, "counter") {
		t.Errorf("GET /v1/graphs: %d %s", status, body)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 6 || order[0] != "outer" || order[1] != "inner" {
		t.Errorf("middlewares ran %v; want outer then inner on each of 3 requests", order)
	}
}

// TestHandlerPerFunction: every function wires itself and is served a
// handler (what each wires: serverless's TestFunctionWiresItsParts).
func TestHandlerPerFunction(t *testing.T) {
	lambdaEnv(t)
	for _, fn := range Functions() {
		t.Run(fn, func(t *testing.T) {
			code, stderr, h := serve(t, map[string]string{RuntimeEnv: "x"}, WithGraphs(loop.Graph), WithFunction(fn))
			if code != ExitOK || h == nil {
				t.Fatalf("exit %d, handler %v, stderr %q", code, h, stderr)
			}
		})
	}
	if _, err := Handler(nil, "ticks"); err == nil || !strings.Contains(err.Error(), `unknown function "ticks"`) {
		t.Errorf("Handler of an unknown function: %v", err)
	}
}
