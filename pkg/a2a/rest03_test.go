package a2a_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	core "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"

	"github.com/superstep/superstep/pkg/a2a"
)

// rest03Send posts a 0.3 message:send body and returns the task it
// answers with (nil on an error answer).
func rest03Send(t *testing.T, url, body string, headers ...string) (int, map[string]any, string) {
	t.Helper()
	code, rerr, raw := restCall(t, "POST", url+"/v1/message:send", body, headers...)
	if rerr != nil {
		return code, nil, raw
	}
	var res struct {
		Task map[string]any `json:"task"`
	}
	if err := json.Unmarshal([]byte(raw), &res); err != nil {
		t.Fatalf("message:send answered %d %s", code, raw)
	}
	return code, res.Task, raw
}

// TestREST03: the A2A 0.3 HTTP+JSON binding under {agent}/v1 takes
// bodies under the proto field names (message_id, as the TCK's REST
// client sends them) and the JSON names, and refuses bad requests with
// the binding's error object (application/json, what to fix, no
// internals), before anything is stored: the checks of the 1.0 binding.
func TestREST03(t *testing.T) {
	e := newEnv(t, envConfig{events: true, opts: []a2a.Option{a2a.WithMaxBodyBytes(4096)}})
	base := e.agentURL("chat")

	// A conversation under proto names: input-required, then answered.
	code, task, raw := rest03Send(t, base, `{"message": {"message_id": "m1", "context_id": "ctx-03", "role": "ROLE_USER", "content": [{"text": "ask"}]}, "configuration": {"blocking": true, "accepted_output_modes": ["application/json"]}}`)
	if code != 200 || task == nil || state03(task) != "TASK_STATE_INPUT_REQUIRED" || task["contextId"] != "ctx-03" {
		t.Fatalf("message:send (proto names): %d %s, want the task input-required in context ctx-03", code, raw)
	}
	id, _ := task["id"].(string)
	code, task, raw = rest03Send(t, base, `{"message": {"messageId": "m2", "taskId": "`+id+`", "role": "ROLE_USER", "content": [{"text": "bob"}]}, "configuration": {"blocking": true}}`)
	if code != 200 || task == nil || state03(task) != "TASK_STATE_COMPLETED" || task["id"] != id {
		t.Fatalf("answer (JSON names): %d %s, want task %s completed", code, raw, id)
	}
	if code, _, raw := restCall(t, "GET", base+"/v1/tasks/"+id+"?historyLength=1", ""); code != 200 || !strings.Contains(raw, `"TASK_STATE_COMPLETED"`) || !strings.Contains(raw, `hello bob`) {
		t.Errorf("GET tasks/{id}: %d %s", code, raw)
	}

	before := e.stored(t)
	long := `{"message": {"messageId": "m", "role": "ROLE_USER", "content": [{"text": "` + strings.Repeat("x", 5000) + `"}]}}`
	for _, tc := range []struct {
		name, method, path, body string
		headers                  []string
		code                     int
		status, reason, says     string
	}{
		{"both names", "POST", "/v1/message:send", `{"message": {"messageId": "a", "message_id": "b", "role": "ROLE_USER", "content": [{"text": "hi"}]}}`, nil, 400, "INVALID_ARGUMENT", "INVALID_REQUEST", `given twice`},
		{"ill-typed", "POST", "/v1/message:send", `{"message": {"messageId": 5, "role": "ROLE_USER", "content": [{"text": "hi"}]}}`, nil, 400, "INVALID_ARGUMENT", "INVALID_PARAMS", `must be a string`},
		{"no message id", "POST", "/v1/message:send", `{"message": {"role": "ROLE_USER", "content": [{"text": "hi"}]}}`, nil, 400, "INVALID_ARGUMENT", "INVALID_PARAMS", `messageId`},
		{"not JSON", "POST", "/v1/message:send", `{"message": `, nil, 400, "INVALID_ARGUMENT", "PARSE_ERROR", `JSON`},
		{"repeated key", "POST", "/v1/message:send", `{"message": {}, "message": {}}`, nil, 400, "INVALID_ARGUMENT", "INVALID_REQUEST", `message`},
		{"no body", "POST", "/v1/message:send", ``, nil, 400, "INVALID_ARGUMENT", "INVALID_PARAMS", `needs a JSON object`},
		{"too large", "POST", "/v1/message:send", long, nil, 413, "INVALID_ARGUMENT", "INVALID_REQUEST", `larger than 4096 bytes`},
		{"push without config", "POST", "/v1/tasks/" + id + "/pushNotificationConfigs", `{"parent": "tasks/` + id + `"}`, nil, 400, "INVALID_ARGUMENT", "INVALID_PARAMS", `"config"`},
		{"history length", "GET", "/v1/tasks/" + id + "?historyLength=-1", ``, nil, 400, "INVALID_ARGUMENT", "INVALID_PARAMS", `historyLength`},
		{"not found", "GET", "/v1/tasks/nope", ``, nil, 404, "NOT_FOUND", "TASK_NOT_FOUND", `nope`},
		{"unknown path", "POST", "/v1/nothing", `{}`, nil, 404, "UNIMPLEMENTED", "METHOD_NOT_FOUND", `/v1/message:send`},
		{"wrong method", "GET", "/v1/message:send", ``, nil, 405, "UNIMPLEMENTED", "METHOD_NOT_FOUND", `takes POST`},
		{"1.0 version", "POST", "/v1/message:send", `{}`, []string{"A2A-Version", "1.0"}, 400, "FAILED_PRECONDITION", "VERSION_NOT_SUPPORTED", `speak A2A 0.3`},
		{"extended card", "GET", "/v1/card", ``, nil, 400, "FAILED_PRECONDITION", "EXTENDED_AGENT_CARD_NOT_CONFIGURED", `no authenticated extended card`},
		{"1.0 path for the card", "GET", "/v1/extendedAgentCard", ``, nil, 404, "UNIMPLEMENTED", "METHOD_NOT_FOUND", `no A2A method`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, base+tc.path, strings.NewReader(tc.body))
			for i := 0; i+1 < len(tc.headers); i += 2 {
				req.Header.Set(tc.headers[i], tc.headers[i+1])
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type %q, want application/json (a2a-go's 0.3 client reads no other)", ct)
			}
			code, rerr, raw := restCall(t, tc.method, base+tc.path, tc.body, tc.headers...)
			if code != tc.code || rerr == nil || rerr.Code != tc.code || rerr.Status != tc.status || rerr.reason() != tc.reason || !strings.Contains(rerr.Message, tc.says) {
				t.Fatalf("%d %s\nwant %d %s reason %s saying %q", code, raw, tc.code, tc.status, tc.reason, tc.says)
			}
			for _, w := range internals {
				if strings.Contains(rerr.Message, w) {
					t.Errorf("error %q shows %q", rerr.Message, w)
				}
			}
		})
	}
	if e.stored(t) != before {
		t.Error("a refused request stored a run")
	}

	// Without streaming (the api Lambda), the streaming methods say what
	// to use instead.
	ns := newEnv(t, envConfig{})
	code, rerr, raw := restCall(t, "POST", ns.agentURL("chat")+"/v1/message:stream", `{"message": {"messageId": "m", "role": "ROLE_USER", "content": [{"text": "hi"}]}}`)
	if code != 400 || rerr == nil || rerr.reason() != "UNSUPPORTED_OPERATION" || !strings.Contains(rerr.Message, "/v1/message:send") {
		t.Errorf("message:stream without streaming: %d %s", code, raw)
	}
}

// TestREST03AuthAndHost: the 0.3 binding sits behind the API's bearer
// token and Host check like the others; a2a-go's 0.3 REST client reads
// the refusals as unauthenticated and permission denied.
func TestREST03AuthAndHost(t *testing.T) {
	const token = "s3cret"
	e := newEnv(t, envConfig{token: token})
	before := e.stored(t)
	msg := `{"message": {"messageId": "m", "role": "ROLE_USER", "content": [{"text": "hi"}]}}`
	for _, r := range [][2]string{{"POST", "/v1/message:send"}, {"GET", "/v1/tasks/x"}, {"POST", "/v1/tasks/x:cancel"}, {"GET", "/v1/card"}} {
		code, rerr, raw := restCall(t, r[0], e.agentURL("chat")+r[1], map[bool]string{true: msg}[r[0] == "POST"], "Authorization", "Bearer wrong")
		if code != http.StatusUnauthorized || rerr == nil || rerr.Status != "UNAUTHENTICATED" || !strings.Contains(rerr.Message, "token") {
			t.Errorf("%s %s with a wrong token: %d %s, want 401 UNAUTHENTICATED", r[0], r[1], code, raw)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := e.client(t, "chat", "rest0.3").SendMessage(ctx, &core.SendMessageRequest{Message: text("hi")}); !errors.Is(err, core.ErrUnauthenticated) {
		t.Errorf("a2a-go 0.3 REST client without the token: %v, want unauthenticated", err)
	}
	if e.stored(t) != before {
		t.Error("an unauthenticated request stored a run")
	}
	c := e.client(t, "chat", "rest0.3", a2aclient.WithCallInterceptors(bearer(token)))
	wantState(t, send(t, c, text("hi"), nil), core.TaskStateCompleted)

	h := newEnv(t, envConfig{hostCheck: true})
	if code, rerr, raw := restCall(t, "POST", h.agentURL("chat")+"/v1/message:send", msg, "Host", "evil.example"); code != http.StatusForbidden || rerr == nil || rerr.Status != "PERMISSION_DENIED" {
		t.Errorf("Host evil.example: %d %s, want 403 PERMISSION_DENIED", code, raw)
	}
	evil := &http.Client{Transport: hostRewriter{"evil.example"}}
	hc := h.client(t, "chat", "rest0.3", a2av0.WithRESTTransport(a2av0.RESTTransportConfig{Client: evil}))
	if _, err := hc.SendMessage(ctx, &core.SendMessageRequest{Message: text("hi")}); !errors.Is(err, core.ErrUnauthorized) {
		t.Errorf("a2a-go 0.3 REST client with Host evil.example: %v, want permission denied", err)
	}
}

// TestREST03Push: a push config set over the 0.3 binding (proto names)
// notifies in 0.3's format (the Task, X-A2A-Notification-Token), as one
// set with JSON-RPC 0.3; read back without its secrets; a loopback
// receiver is refused unless allowed, nothing stored.
func TestREST03Push(t *testing.T) {
	e := newEnv(t, envConfig{events: true, opts: []a2a.Option{a2a.WithPushNotifications(a2a.PushOptions{AllowPrivateNetworks: true, Backoff: 10 * time.Millisecond})}})
	rc := &rawReceiver{}
	hs := httptest.NewServer(rc)
	defer hs.Close()
	base := e.agentURL("chat")
	_, task, raw := rest03Send(t, base, `{"message": {"messageId": "m1", "role": "ROLE_USER", "content": [{"text": "ask"}]}, "configuration": {"blocking": true}}`)
	if task == nil {
		t.Fatalf("message:send: %s", raw)
	}
	id, _ := task["id"].(string)
	code, rerr, raw := restCall(t, "POST", base+"/v1/tasks/"+id+"/pushNotificationConfigs",
		`{"parent": "tasks/`+id+`", "config_id": "h03", "config": {"name": "tasks/`+id+`/pushNotificationConfigs/h03", "push_notification_config": {"url": "`+hs.URL+`", "token": "t03", "authentication": {"schemes": ["Bearer"], "credentials": "c03"}}}}`)
	if code != 200 || rerr != nil || strings.Contains(raw, "c03") {
		t.Fatalf("create push config: %d %s (want 200, credentials not echoed)", code, raw)
	}
	if code, _, raw := restCall(t, "GET", base+"/v1/tasks/"+id+"/pushNotificationConfigs/h03", ""); code != 200 || !strings.Contains(raw, hs.URL) || strings.Contains(raw, "c03") {
		t.Errorf("get push config: %d %s", code, raw)
	}
	// A proto3 client writes unset fields as empty values: an empty
	// authentication is none (the TCK's REST client sends this).
	if code, _, raw := restCall(t, "POST", base+"/v1/tasks/"+id+"/pushNotificationConfigs",
		`{"parent": "tasks/`+id+`", "config_id": "default", "config": {"name": "tasks/`+id+`/pushNotificationConfigs/default", "push_notification_config": {"id": "default", "url": "https://hooks.example.com/a2a", "token": "", "authentication": {}}}}`); code != 200 || !strings.Contains(raw, "https://hooks.example.com/a2a") {
		t.Errorf("config with an empty authentication: %d %s, want it set", code, raw)
	}
	if _, task, raw = rest03Send(t, base, `{"message": {"messageId": "m2", "taskId": "`+id+`", "role": "ROLE_USER", "content": [{"text": "eve"}]}, "configuration": {"blocking": true}}`); task == nil {
		t.Fatalf("answer: %s", raw)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := rc.snapshot()
		if len(b) > 0 && state03(b[len(b)-1]) == "completed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no 0.3 notification of the completed task: %v", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	bodies, headers := rc.snapshot()
	for i, b := range bodies {
		if b["kind"] != "task" || b["id"] != id || headers[i].Get("X-A2A-Notification-Token") != "t03" || headers[i].Get("Authorization") != "Bearer c03" {
			t.Errorf("notification %d: %v %v, want the 0.3 Task with X-A2A-Notification-Token t03", i, b, headers[i])
		}
	}

	strict := newEnv(t, envConfig{events: true, opts: []a2a.Option{a2a.WithPushNotifications(a2a.PushOptions{})}})
	_, task, raw = rest03Send(t, strict.agentURL("chat"), `{"message": {"messageId": "m1", "role": "ROLE_USER", "content": [{"text": "ask"}]}, "configuration": {"blocking": true}}`)
	if task == nil {
		t.Fatalf("message:send: %s", raw)
	}
	sid, _ := task["id"].(string)
	code, rerr, raw = restCall(t, "POST", strict.agentURL("chat")+"/v1/tasks/"+sid+"/pushNotificationConfigs", `{"config": {"pushNotificationConfig": {"url": "`+hs.URL+`"}}}`)
	if code != 400 || rerr == nil || rerr.reason() != "INVALID_PARAMS" {
		t.Errorf("loopback receiver: %d %s, want 400 INVALID_PARAMS", code, raw)
	}
	if code, _, raw := restCall(t, "GET", strict.agentURL("chat")+"/v1/tasks/"+sid+"/pushNotificationConfigs", ""); code != 200 || strings.Contains(raw, hs.URL) {
		t.Errorf("list after the refusal: %d %s, want no config", code, raw)
	}
}
