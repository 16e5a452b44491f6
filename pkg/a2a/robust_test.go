package a2a_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/superstep/superstep/pkg/a2a"
)

// rpcResponse is a raw JSON-RPC response.
type rpcResponse struct {
	status int
	raw    string
	body   struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result"`
		Error   *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
}

func (r *rpcResponse) code() int {
	if r.body.Error == nil {
		return 0
	}
	return r.body.Error.Code
}

// rpc posts body and decodes the JSON-RPC response (the first SSE event
// of a stream).
func rpc(t testing.TB, url, body string) *rpcResponse {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := &rpcResponse{status: resp.StatusCode, raw: string(raw)}
	data := raw
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for line := range strings.SplitSeq(string(raw), "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				data = []byte(d)
				break
			}
		}
	}
	if err := json.Unmarshal(data, &out.body); err != nil {
		t.Fatalf("response is not JSON-RPC (%d): %s", resp.StatusCode, raw)
	}
	return out
}

func TestMalformedRequests(t *testing.T) {
	e := newEnv(t, envConfig{events: true, opts: []a2a.Option{a2a.WithMaxBodyBytes(4096)}})
	url := e.agentURL("chat")
	send := func(params string) string {
		return `{"jsonrpc":"2.0","id":"r1","method":"SendMessage","params":` + params + `}`
	}
	send03 := func(params string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"message/send","params":` + params + `}`
	}
	cases := []struct {
		name string
		body string
		code int
	}{
		{"not JSON", `{"jsonrpc":`, -32700},
		{"empty body", ``, -32700},
		{"garbage", `hello`, -32700},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}]`, -32600},
		{"not an object", `42`, -32600},
		{"null", `null`, -32600},
		{"wrong version", `{"jsonrpc":"1.0","id":1,"method":"GetTask","params":{"id":"x"}}`, -32600},
		{"no version", `{"id":1,"method":"GetTask","params":{"id":"x"}}`, -32600},
		{"object id", `{"jsonrpc":"2.0","id":{},"method":"GetTask","params":{"id":"x"}}`, -32600},
		{"no method", `{"jsonrpc":"2.0","id":1,"params":{}}`, -32600},
		{"method not a string", `{"jsonrpc":"2.0","id":1,"method":5}`, -32600},
		{"unknown method", `{"jsonrpc":"2.0","id":1,"method":"tasks/explode","params":{}}`, -32601},
		{"unknown 1.0-style method", `{"jsonrpc":"2.0","id":1,"method":"DeleteEverything"}`, -32601},
		{"params missing", `{"jsonrpc":"2.0","id":1,"method":"SendMessage"}`, -32602},
		{"params null", send(`null`), -32602},
		{"params array", send(`[1,2]`), -32602},
		{"params string", send(`"hi"`), -32602},
		{"message missing", send(`{}`), -32602},
		{"message null", send(`{"message":null}`), -32602},
		{"message a string", send(`{"message":"hi"}`), -32602},
		{"parts missing", send(`{"message":{"messageId":"m","role":"ROLE_USER"}}`), -32602},
		{"messageId missing", send(`{"message":{"role":"ROLE_USER","parts":[{"data":{"message":"hi"}}]}}`), -32602},
		{"messageId empty", send(`{"message":{"messageId":"","role":"ROLE_USER","parts":[{"data":{"message":"hi"}}]}}`), -32602},
		{"role missing", send(`{"message":{"messageId":"m","parts":[{"data":{"message":"hi"}}]}}`), -32602},
		{"role unspecified", send(`{"message":{"messageId":"m","role":"ROLE_UNSPECIFIED","parts":[{"data":{"message":"hi"}}]}}`), -32602},
		{"0.3 messageId missing", send03(`{"message":{"kind":"message","role":"user","parts":[{"kind":"data","data":{"message":"hi"}}]}}`), -32602},
		{"0.3 role missing", send03(`{"message":{"kind":"message","messageId":"m","parts":[{"kind":"data","data":{"message":"hi"}}]}}`), -32602},
		{"parts null", send(`{"message":{"messageId":"m","role":"ROLE_USER","parts":null}}`), -32602},
		{"parts empty", send(`{"message":{"messageId":"m","role":"ROLE_USER","parts":[]}}`), -32602},
		{"part null", send(`{"message":{"messageId":"m","role":"ROLE_USER","parts":[null]}}`), -32602},
		{"part empty", send(`{"message":{"messageId":"m","role":"ROLE_USER","parts":[{}]}}`), -32602},
		{"part text not a string", send(`{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":5}]}}`), -32602},
		{"part with two contents", send(`{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"a","data":{}}]}}`), -32602},
		{"file part", send(`{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"url":"https://example.com/x.pdf"}]}}`), -32005},
		{"bad context id", send(`{"message":{"messageId":"m","role":"ROLE_USER","contextId":"a b","parts":[{"text":"hi"}]}}`), -32602},
		{"unknown task id", send(`{"message":{"messageId":"m","role":"ROLE_USER","taskId":"nope","parts":[{"text":"hi"}]}}`), -32001},
		{"push config", send(`{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]},"configuration":{"taskPushNotificationConfig":{"url":"https://example.com/hook"}}}`), -32003},
		{"negative history", send(`{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]},"configuration":{"historyLength":-1}}`), -32602},
		{"0.3 parts missing", send03(`{"message":{"kind":"message","messageId":"m","role":"user"}}`), -32602},
		{"0.3 part null", send03(`{"message":{"kind":"message","messageId":"m","role":"user","parts":[null]}}`), -32602},
		{"0.3 part kind unknown", send03(`{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"video"}]}}`), -32602},
		{"0.3 message null", send03(`{"message":null}`), -32602},
		{"0.3 unknown task", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"nope"}}`, -32001},
		{"0.3 cancel unknown", `{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","params":{"id":"nope"}}`, -32001},
		{"get unknown", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"nope"}}`, -32001},
		{"get empty id", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":""}}`, -32602},
		{"get no id", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{}}`, -32602},
		{"get id a number", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":5}}`, -32602},
		{"get odd id", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"../../etc/passwd"}}`, -32001},
		{"cancel unknown", `{"jsonrpc":"2.0","id":1,"method":"CancelTask","params":{"id":"nope"}}`, -32001},
		{"resubscribe unknown", `{"jsonrpc":"2.0","id":1,"method":"SubscribeToTask","params":{"id":"nope"}}`, -32001},
		{"list bad status", `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"status":"TASK_STATE_SLEEPY"}}`, -32602},
		{"list page size 0", `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"pageSize":0}}`, -32602},
		{"list bad token", `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"pageToken":"!!"}}`, -32602},
		{"push get", `{"jsonrpc":"2.0","id":1,"method":"GetTaskPushNotificationConfig","params":{"taskId":"x","id":"y"}}`, -32003},
		// Spec 1.0 §3.3.4: capabilities.extendedAgentCard absent, so
		// UnsupportedOperationError; 0.3 has its own code for it.
		{"extended card", `{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard"}`, -32004},
		{"0.3 extended card", `{"jsonrpc":"2.0","id":1,"method":"agent/getAuthenticatedExtendedCard"}`, -32007},
		{"oversized", send(`{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"` + strings.Repeat("x", 5000) + `"}]}}`), -32600},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := rpc(t, url, tc.body)
			if resp.status != http.StatusOK {
				t.Errorf("HTTP %d, want 200", resp.status)
			}
			if resp.code() != tc.code {
				t.Errorf("code %d, want %d: %s", resp.code(), tc.code, resp.raw)
			}
			if resp.body.JSONRPC != "2.0" || resp.body.Error == nil || resp.body.Error.Message == "" {
				t.Errorf("not a JSON-RPC error: %s", resp.raw)
			}
		})
	}
	// An A2A version the server does not speak.
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}`))
	req.Header.Set("A2A-Version", "2.0")
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		var body struct{ Error struct{ Code int } }
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if body.Error.Code != -32009 {
			t.Errorf("A2A-Version 2.0: code %d, want -32009", body.Error.Code)
		}
	}

	// The request id is echoed when it could be read.
	if resp := rpc(t, url, send(`null`)); string(resp.body.ID) != `"r1"` {
		t.Errorf("id %s, want \"r1\"", resp.body.ID)
	}
	if resp := rpc(t, url, send03(`{"message":null}`)); string(resp.body.ID) != `7` {
		t.Errorf("id %s, want 7", resp.body.ID)
	}

	// Not JSON-RPC at all: HTTP errors, never a 500.
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/a2a/chat", http.StatusOK}, // the agent card
		{"PUT", "/a2a/chat", http.StatusMethodNotAllowed},
		{"POST", "/a2a/nope", http.StatusNotFound},
		{"POST", "/a2a/", http.StatusNotFound},
	} {
		req, _ := http.NewRequest(tc.method, e.url+tc.path, strings.NewReader(`{}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, resp.StatusCode, tc.status)
		}
	}
}

// TestRawProtocols checks the wire format of both protocol versions with
// hand-written requests, as a third-party client would send them.
func TestRawProtocols(t *testing.T) {
	e := newEnv(t, envConfig{events: true})
	url := e.agentURL("sum")
	resp := rpc(t, url, `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"data":{"a":1,"b":2}}]}}}`)
	var v1 struct {
		Task struct {
			ID     string `json:"id"`
			Status struct {
				State string `json:"state"`
			} `json:"status"`
			Artifacts []struct {
				ArtifactID string           `json:"artifactId"`
				Parts      []map[string]any `json:"parts"`
			} `json:"artifacts"`
		} `json:"task"`
	}
	if err := json.Unmarshal(resp.body.Result, &v1); err != nil || v1.Task.Status.State != "TASK_STATE_COMPLETED" {
		t.Fatalf("1.0 result %s (%v)", resp.raw, err)
	}
	if d, _ := v1.Task.Artifacts[0].Parts[0]["data"].(map[string]any); d["sum"] != float64(3) {
		t.Errorf("1.0 artifact %v", v1.Task.Artifacts)
	}

	resp = rpc(t, url, `{"jsonrpc":"2.0","id":2,"method":"message/send","params":{"message":{"kind":"message","messageId":"m2","role":"user","parts":[{"kind":"data","data":{"a":5,"b":5}}]}}}`)
	var v03 struct {
		Kind   string `json:"kind"`
		ID     string `json:"id"`
		Status struct {
			State string `json:"state"`
		} `json:"status"`
		Artifacts []struct {
			Parts []map[string]any `json:"parts"`
		} `json:"artifacts"`
	}
	if err := json.Unmarshal(resp.body.Result, &v03); err != nil || v03.Kind != "task" || v03.Status.State != "completed" {
		t.Fatalf("0.3 result %s (%v)", resp.raw, err)
	}
	if d, _ := v03.Artifacts[0].Parts[0]["data"].(map[string]any); d["sum"] != float64(10) || v03.Artifacts[0].Parts[0]["kind"] != "data" {
		t.Errorf("0.3 artifact %v", v03.Artifacts)
	}
	// A task made through one version is visible through the other.
	resp = rpc(t, url, `{"jsonrpc":"2.0","id":3,"method":"GetTask","params":{"id":"`+v03.ID+`"}}`)
	if resp.code() != 0 || !strings.Contains(resp.raw, "TASK_STATE_COMPLETED") {
		t.Errorf("GetTask of a 0.3 task: %s", resp.raw)
	}
}

// TestErrorsWithoutInternals checks, on SQLite stores, that errors name
// what to fix and not the store.
func TestErrorsWithoutInternals(t *testing.T) {
	e := newEnv(t, envConfig{sqlite: true})
	url := e.agentURL("chat")
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"pageToken":"!!"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"pageToken":"eyJhZnRlciI6MX0"}}`,
	} {
		resp := rpc(t, url, body)
		if resp.code() != -32602 {
			t.Errorf("%s: code %d, want -32602: %s", body, resp.code(), resp.raw)
		}
		for _, leak := range []string{"sqlite", "dynamo", "pregel:", "runs."} {
			if strings.Contains(resp.raw, leak) {
				t.Errorf("%s: the error names %q: %s", body, leak, resp.raw)
			}
		}
		if !strings.Contains(resp.raw, "list again without it") {
			t.Errorf("%s: the error does not say what to do: %s", body, resp.raw)
		}
	}
}
