package a2a_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	core "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	a2agrpc "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/superstep/superstep/pkg/a2a"
)

// TestBindings runs the lifecycle of TestLifecycle (send, get, input and
// auth required, rejected, cancel, drained, not found, list, streaming
// and resubscribe) with a2a-go's clients over the HTTP+JSON binding, the
// gRPC binding and the HTTP+JSON binding of A2A 0.3 (a2a-go's 0.3
// compatibility client), each chosen from the interface the card lists; and
// over HTTP+JSON without an event source or streaming, as on the api
// Lambda.
func TestBindings(t *testing.T) {
	e := newEnv(t, envConfig{events: true, grpc: true})
	for _, b := range []string{"rest", "grpc", "rest0.3"} {
		t.Run(b, func(t *testing.T) { testLifecycle(t, e, b) })
	}
	t.Run("rest polling", func(t *testing.T) {
		testLifecycle(t, newEnv(t, envConfig{}), "rest")
	})
}

// TestBindingsCard: the card lists JSON-RPC, HTTP+JSON and gRPC (with the
// graph as tenant) in its 1.0 form, JSON-RPC first; a gRPC address
// without a host takes the card's host.
func TestBindingsCard(t *testing.T) {
	e := newEnv(t, envConfig{events: true, grpc: true})
	card := e.card(t, "chat")
	var got []string
	for _, in := range card.SupportedInterfaces {
		got = append(got, fmt.Sprintf("%s %s %s %s", in.ProtocolBinding, in.ProtocolVersion, in.URL, in.Tenant))
	}
	want := []string{
		"JSONRPC 1.0 " + e.agentURL("chat") + " ",
		"HTTP+JSON 1.0 " + e.agentURL("chat") + " ",
		"GRPC 1.0 " + e.grpcAddr + " chat",
		"JSONRPC 0.3 " + e.agentURL("chat") + " ",
		"HTTP+JSON 0.3 " + e.agentURL("chat") + " ",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("interfaces:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// ":PORT" and "0.0.0.0:PORT" are served on every address: the card
	// names the host it was read from.
	for _, addr := range []string{":9999", "0.0.0.0:9999", "[::]:9999"} {
		e2 := newEnv(t, envConfig{opts: []a2a.Option{a2a.WithGRPCAddress(addr)}})
		card := e2.card(t, "sum")
		host := strings.TrimPrefix(e2.url, "http://")
		host = host[:strings.LastIndex(host, ":")]
		if in := card.SupportedInterfaces[2]; in.ProtocolBinding != core.TransportProtocolGRPC || in.URL != host+":9999" || in.Tenant != "sum" {
			t.Errorf("WithGRPCAddress(%q): card lists %+v, want GRPC at %s:9999 tenant sum", addr, in, host)
		}
	}
}

// card reads graph's agent card as a 1.0 client does.
func (e *env) card(t *testing.T, graph string) *core.AgentCard {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.agentURL(graph)+"/.well-known/agent-card.json", nil)
	req.Header.Set("A2A-Version", "1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var card core.AgentCard
	if err := json.NewDecoder(resp.Body).Decode(&card); err != nil {
		t.Fatal(err)
	}
	return &card
}

// restCall sends a raw HTTP+JSON request and returns the status and the
// body's error object (nil when the answer is not an error).
func restCall(t *testing.T, method, url, body string, headers ...string) (int, *restErr, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" {
			req.Host = headers[i+1]
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var e struct {
		Error *restErr `json:"error"`
	}
	_ = json.Unmarshal(raw, &e)
	return resp.StatusCode, e.Error, string(raw)
}

// restErr is the HTTP+JSON binding's error object.
type restErr struct {
	Code    int    `json:"code"`
	Status  string `json:"status"`
	Message string `json:"message"`
	Details []struct {
		Type   string `json:"@type"`
		Reason string `json:"reason"`
		Domain string `json:"domain"`
	} `json:"details"`
}

func (e *restErr) reason() string {
	for _, d := range e.Details {
		if d.Type == "type.googleapis.com/google.rpc.ErrorInfo" {
			return d.Reason
		}
	}
	return ""
}

// internals are words no error may show a caller: Go types and package
// paths, store names.
var internals = []string{"Go struct", "Go value", "a2a.", "core.", "runs.", "sqlite", "dynamo", "json: ", "*", "goroutine", "panic"}

// TestRESTHostile: the HTTP+JSON binding refuses what the JSON-RPC
// endpoint refuses (TestHostileRPC, TestMalformedRequests), with the
// binding's error object saying what to fix in the caller's terms, and
// nothing stored.
func TestRESTHostile(t *testing.T) {
	e := newEnv(t, envConfig{events: true, opts: []a2a.Option{a2a.WithMaxBodyBytes(4096)}})
	base := e.agentURL("chat")
	send := func(parts string) string {
		return `{"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [` + parts + `]}}`
	}
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		reason, says             string
	}{
		{"bad JSON", "POST", "/message:send", `{"message": {`, 400, "PARSE_ERROR", "not valid JSON"},
		{"empty body", "POST", "/message:send", ``, 400, "INVALID_PARAMS", "needs a JSON object"},
		{"not an object", "POST", "/message:send", `[1, 2]`, 400, "INVALID_PARAMS", "must be a JSON object"},
		{"oversized", "POST", "/message:send", send(`{"text": "` + strings.Repeat("x", 5000) + `"}`), 413, "INVALID_REQUEST", "larger than 4096 bytes"},
		{"invalid UTF-8", "POST", "/message:send", send("{\"text\": \"\xff\xfe\"}"), 400, "PARSE_ERROR", "UTF-8"},
		{"lone surrogate", "POST", "/message:send", send(`{"text": "\udfff"}`), 400, "INVALID_REQUEST", "surrogate"},
		{"repeated key", "POST", "/message:send", `{"message": {"messageId": "a", "messageId": "b", "role": "ROLE_USER", "parts": [{"text": "x"}]}}`, 400, "INVALID_REQUEST", "messageId"},
		{"case-variant key", "POST", "/message:send", `{"message": {"messageId": "a", "MessageId": "b", "role": "ROLE_USER", "parts": [{"text": "x"}]}}`, 400, "INVALID_REQUEST", "MessageId"},
		{"deep nesting", "POST", "/message:send", `{"message": ` + nest(2000) + `}`, 400, "INVALID_REQUEST", "deep"},
		{"ill-typed field", "POST", "/message:send", `{"message": {"messageId": 5, "role": "ROLE_USER", "parts": [{"text": "x"}]}}`, 400, "INVALID_PARAMS", "messageId"},
		{"no messageId", "POST", "/message:send", `{"message": {"role": "ROLE_USER", "parts": [{"text": "x"}]}}`, 400, "INVALID_PARAMS", "messageId"},
		{"unknown task", "GET", "/tasks/0194f1d2-0000-7000-8000-000000000000", ``, 404, "TASK_NOT_FOUND", "not found"},
		{"unknown task cancel", "POST", "/tasks/nope:cancel", ``, 404, "TASK_NOT_FOUND", "not found"},
		{"invalid UTF-8 task id", "GET", "/tasks/%FF%FE", ``, 400, "INVALID_REQUEST", "UTF-8"},
		{"pageSize 0", "GET", "/tasks?pageSize=0", ``, 400, "INVALID_PARAMS", "pageSize"},
		{"pageSize word", "GET", "/tasks?pageSize=ten", ``, 400, "INVALID_PARAMS", "pageSize"},
		{"pageSize twice", "GET", "/tasks?pageSize=1&pageSize=2", ``, 400, "INVALID_PARAMS", "once"},
		{"negative historyLength", "GET", "/tasks/x?historyLength=-1", ``, 400, "INVALID_PARAMS", "historyLength"},
		{"bad time", "GET", "/tasks?statusTimestampAfter=yesterday", ``, 400, "INVALID_PARAMS", "RFC 3339"},
		{"bad state", "GET", "/tasks?status=TASK_STATE_SLEEPING", ``, 400, "INVALID_PARAMS", "not a task state"},
		{"bad page token", "GET", "/tasks?pageToken=x", ``, 400, "INVALID_PARAMS", "pageToken"},
		{"body on a GET method", "POST", "/tasks/x/pushNotificationConfigs", `{"url": 5}`, 400, "INVALID_PARAMS", "url"},
		{"unknown path", "GET", "/nothing/here", ``, 404, "METHOD_NOT_FOUND", "message:send"},
		{"unknown action", "POST", "/tasks/x:explode", ``, 404, "METHOD_NOT_FOUND", "tasks/{id}:cancel"},
		{"wrong method", "GET", "/message:send", ``, 405, "METHOD_NOT_FOUND", "takes POST"},
		{"0.3 version", "POST", "/message:send", send(`{"text": "hi"}`), 400, "VERSION_NOT_SUPPORTED", "JSON-RPC"},
		{"extended card", "GET", "/extendedAgentCard", ``, 400, "UNSUPPORTED_OPERATION", "extended"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.stored(t)
			var headers []string
			if tc.name == "0.3 version" {
				headers = []string{"A2A-Version", "0.3"}
			}
			code, rerr, raw := restCall(t, tc.method, base+tc.path, tc.body, headers...)
			if code != tc.status || rerr == nil {
				t.Fatalf("%s %s: %d %s, want %d and an error object", tc.method, tc.path, code, raw, tc.status)
			}
			if rerr.reason() != tc.reason || rerr.Code != tc.status || !strings.Contains(strings.ToLower(rerr.Message), strings.ToLower(tc.says)) {
				t.Errorf("error %+v (reason %q), want reason %s saying %q", rerr, rerr.reason(), tc.reason, tc.says)
			}
			for _, w := range internals {
				if strings.Contains(rerr.Message, w) {
					t.Errorf("error %q shows %q", rerr.Message, w)
				}
			}
			if after := e.stored(t); after != before {
				t.Errorf("a refused request changed the runs:\n%s\n%s", before, after)
			}
		})
	}

	// A graph's failure reaches the caller as "the task failed", nothing
	// more.
	code, _, raw := restCall(t, "POST", base+"/message:send", send(`{"text": "fail"}`))
	if code != 200 || !strings.Contains(raw, "TASK_STATE_FAILED") || strings.Contains(raw, "10.0.0.7") || strings.Contains(raw, "secret") {
		t.Errorf("failed task: %d %s", code, raw)
	}
}

// TestRESTErrorsWithoutInternals: on SQLite, a page token the store
// refuses is answered without the store's words.
func TestRESTErrorsWithoutInternals(t *testing.T) {
	e := newEnv(t, envConfig{sqlite: true})
	code, rerr, raw := restCall(t, "GET", e.agentURL("chat")+"/tasks?pageToken=bm9wZQ", "")
	if code != 400 || rerr == nil || strings.Contains(raw, "sqlite") || !strings.Contains(rerr.Message, "pageToken") {
		t.Errorf("bad page token: %d %s", code, raw)
	}
}

// TestRESTStreamingOff: without streaming (API Gateway), message:stream
// and tasks/{id}:subscribe are refused with what to use instead, before
// anything is stored; the card says streaming: false.
func TestRESTStreamingOff(t *testing.T) {
	e := newEnv(t, envConfig{})
	c := e.client(t, "chat", "rest")
	task := send(t, c, text("hi"), nil)
	before := e.stored(t)
	for _, path := range []string{"/message:stream", "/tasks/" + string(task.ID) + ":subscribe"} {
		for _, method := range []string{"POST", "GET"} {
			if path == "/message:stream" && method == "GET" {
				continue
			}
			code, rerr, raw := restCall(t, method, e.agentURL("chat")+path, `{"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}`)
			if code != 400 || rerr == nil || rerr.reason() != "UNSUPPORTED_OPERATION" || !strings.Contains(rerr.Message, "does not stream") {
				t.Errorf("%s %s: %d %s, want UNSUPPORTED_OPERATION saying the server does not stream", method, path, code, raw)
			}
		}
	}
	if e.stored(t) != before {
		t.Error("a refused stream stored a run")
	}
	if e.card(t, "chat").Capabilities.Streaming {
		t.Error("the card claims streaming")
	}
}

// TestRESTAuthAndHost: the HTTP+JSON routes are behind the API's bearer
// token (the card stays public) and its Host check, as JSON-RPC is; the
// refusals are the binding's error object, so that a2a-go's REST client
// reports them as unauthenticated and permission denied (not as a
// server error).
func TestRESTAuthAndHost(t *testing.T) {
	const token = "s3cret"
	e := newEnv(t, envConfig{token: token})
	base := e.agentURL("chat")
	msg := `{"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}`
	before := e.stored(t)
	for _, auth := range []string{"", "Bearer wrong", "Basic czNjcmV0", token} {
		for _, r := range [][2]string{{"POST", "/message:send"}, {"POST", "/message:stream"}, {"GET", "/tasks"}, {"GET", "/tasks/x"}, {"POST", "/tasks/x:cancel"}, {"GET", "/tasks/x:subscribe"}, {"GET", "/tasks/x/pushNotificationConfigs"}, {"GET", "/nothing"}} {
			var headers []string
			if auth != "" {
				headers = []string{"Authorization", auth}
			}
			code, rerr, raw := restCall(t, r[0], base+r[1], map[bool]string{true: msg}[strings.HasPrefix(r[1], "/message:")], headers...)
			if code != http.StatusUnauthorized || rerr == nil || rerr.Code != 401 || rerr.Status != "UNAUTHENTICATED" || rerr.reason() != "UNAUTHENTICATED" || !strings.Contains(rerr.Message, "token") {
				t.Errorf("%s %s with Authorization %q: %d %s, want 401 with the error object, UNAUTHENTICATED, saying what to send", r[0], r[1], auth, code, raw)
			}
		}
	}
	// JSON-RPC keeps the API's answer: its clients read the HTTP status.
	if code, _, raw := restCall(t, "POST", base, `{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}`); code != http.StatusUnauthorized || !strings.Contains(raw, "bearer token") {
		t.Errorf("JSON-RPC without a token: %d %s", code, raw)
	}
	if code, _, raw := restCall(t, "GET", base+"/.well-known/agent-card.json", ""); code != 200 {
		t.Errorf("the card needs no token: %d %s", code, raw)
	}

	// a2a-go's REST client: no token, a wrong one, the right one.
	for _, tc := range []struct {
		name string
		opts []a2aclient.FactoryOption
	}{{"no token", nil}, {"wrong token", []a2aclient.FactoryOption{a2aclient.WithCallInterceptors(bearer("wrong"))}}} {
		c := e.client(t, "chat", "rest", tc.opts...)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := c.SendMessage(ctx, &core.SendMessageRequest{Message: text("hi")})
		if !errors.Is(err, core.ErrUnauthenticated) || errors.Is(err, core.ErrServerError) {
			t.Errorf("%s: SendMessage: %v, want unauthenticated", tc.name, err)
		}
		_, err = c.GetTask(ctx, &core.GetTaskRequest{ID: "x"})
		if !errors.Is(err, core.ErrUnauthenticated) {
			t.Errorf("%s: GetTask: %v, want unauthenticated", tc.name, err)
		}
		for _, err := range c.SendStreamingMessage(ctx, &core.SendMessageRequest{Message: text("hi")}) {
			if !errors.Is(err, core.ErrUnauthenticated) {
				t.Errorf("%s: SendStreamingMessage: %v, want unauthenticated", tc.name, err)
			}
			break
		}
		cancel()
	}
	if e.stored(t) != before {
		t.Error("an unauthenticated request stored a run")
	}
	c := e.client(t, "chat", "rest", a2aclient.WithCallInterceptors(bearer(token)))
	wantState(t, send(t, c, text("hi"), nil), core.TaskStateCompleted)

	// The Host check (superstep dev without a token): a page on another
	// DNS name cannot call the agent through the browser.
	h := newEnv(t, envConfig{hostCheck: true})
	for _, r := range [][2]string{{"POST", "/message:send"}, {"GET", "/tasks"}} {
		code, rerr, raw := restCall(t, r[0], h.agentURL("chat")+r[1], map[bool]string{true: msg}[r[0] == "POST"], "Host", "evil.example")
		if code != http.StatusForbidden || rerr == nil || rerr.Status != "PERMISSION_DENIED" || rerr.reason() != "UNAUTHORIZED" || !strings.Contains(rerr.Message, "Host") {
			t.Errorf("%s %s with Host evil.example: %d %s, want 403 with the error object, PERMISSION_DENIED", r[0], r[1], code, raw)
		}
	}
	// A browser page of another origin: the API's cross-origin check.
	if code, rerr, raw := restCall(t, "POST", h.agentURL("chat")+"/message:send", msg, "Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example"); code != http.StatusForbidden || rerr == nil || rerr.reason() != "UNAUTHORIZED" {
		t.Errorf("cross-origin: %d %s, want 403 with the error object", code, raw)
	}
	evil := &http.Client{Transport: hostRewriter{"evil.example"}}
	hc := h.client(t, "chat", "rest", a2aclient.WithRESTTransport(evil))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := hc.SendMessage(ctx, &core.SendMessageRequest{Message: text("hi")}); !errors.Is(err, core.ErrUnauthorized) {
		t.Errorf("a2a-go REST client with Host evil.example: %v, want permission denied", err)
	}
	if code, _, raw := restCall(t, "GET", h.agentURL("chat")+"/tasks", "", "Host", "localhost"); code != 200 {
		t.Errorf("Host localhost: %d %s", code, raw)
	}
}

// hostRewriter sends every request with another Host header.
type hostRewriter struct{ host string }

func (h hostRewriter) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Host = h.host
	return http.DefaultTransport.RoundTrip(r)
}

// bearer is a call interceptor that sends a bearer token.
type bearer string

func (b bearer) Before(ctx context.Context, req *a2aclient.Request) (context.Context, any, error) {
	req.ServiceParams.Append("Authorization", "Bearer "+string(b))
	return ctx, nil, nil
}

func (bearer) After(context.Context, *a2aclient.Response) error { return nil }

// TestGRPCGuards: the gRPC binding needs the token as the HTTP bindings
// do, says which agents there are for a wrong tenant, and refuses
// ill-formed messages without Go words.
func TestGRPCGuards(t *testing.T) {
	const token = "s3cret"
	e := newEnv(t, envConfig{token: token, grpc: true, events: true})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	before := e.stored(t)
	for _, tok := range []string{"", "wrong"} {
		var opts []a2aclient.FactoryOption
		if tok != "" {
			opts = append(opts, a2aclient.WithCallInterceptors(bearer(tok)))
		}
		c := e.client(t, "chat", "grpc", opts...)
		_, err := c.SendMessage(ctx, &core.SendMessageRequest{Message: text("hi")})
		if status.Code(err) != codes.Unauthenticated && !errors.Is(err, core.ErrUnauthenticated) {
			t.Errorf("token %q: %v, want Unauthenticated", tok, err)
		}
		for _, err := range c.SendStreamingMessage(ctx, &core.SendMessageRequest{Message: text("hi")}) {
			if status.Code(err) != codes.Unauthenticated && !errors.Is(err, core.ErrUnauthenticated) {
				t.Errorf("stream with token %q: %v, want Unauthenticated", tok, err)
			}
		}
	}
	if e.stored(t) != before {
		t.Error("an unauthenticated call stored a run")
	}
	c := e.client(t, "chat", "grpc", a2aclient.WithCallInterceptors(bearer(token)))
	task := send(t, c, text("hi"), nil)
	wantState(t, task, core.TaskStateCompleted)

	// A tenant that names no agent, and none.
	for tenant, want := range map[string]string{"nope": `tenant "nope" names no agent`, "": "the request names no agent"} {
		other, err := a2aclient.NewFromEndpoints(ctx, []*core.AgentInterface{{URL: e.grpcAddr, ProtocolBinding: core.TransportProtocolGRPC, ProtocolVersion: core.Version, Tenant: tenant}},
			a2agrpc.WithGRPCTransport(grpc.WithTransportCredentials(insecure.NewCredentials())), a2aclient.WithCallInterceptors(bearer(token)))
		if err != nil {
			t.Fatal(err)
		}
		_, err = other.GetTask(ctx, &core.GetTaskRequest{ID: task.ID})
		if !errors.Is(err, core.ErrInvalidParams) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "chat, sum") {
			t.Errorf("tenant %q: %v, want InvalidParams saying %q and naming the agents", tenant, err, want)
		}
		_ = other.Destroy()
	}
	// Unknown task; a message without an id.
	if _, err := c.GetTask(ctx, &core.GetTaskRequest{ID: "nope"}); !errors.Is(err, core.ErrTaskNotFound) {
		t.Errorf("unknown task: %v, want TaskNotFound", err)
	}
	bad := text("hi")
	bad.ID = ""
	_, err := c.SendMessage(ctx, &core.SendMessageRequest{Message: bad})
	if err == nil {
		t.Fatal("a message without messageId was accepted")
	}
	for _, w := range internals {
		if strings.Contains(err.Error(), w) {
			t.Errorf("error %q shows %q", err, w)
		}
	}
}
