package a2a_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/a2a"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// FreeState is the state of the "free" test graph: any JSON in Data, and
// a node that writes Size bytes to Blob.
type FreeState struct {
	Data any    `json:"data,omitempty"`
	Size int    `json:"size,omitempty"`
	Blob string `json:"blob,omitempty"`
}

func freeGraph(t testing.TB) *pregel.Graph {
	t.Helper()
	b := pregel.NewGraph[FreeState]("free")
	b.AddFunc("grow", func(ctx context.Context, s FreeState) (FreeState, error) {
		return FreeState{Blob: strings.Repeat("0123456789abcdef", s.Size/16)}, nil
	}, pregel.Writes("blob"))
	b.AddEdge(pregel.Start, "grow").AddEdge("grow", pregel.End)
	g, err := b.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// stored renders every run record, to show that a refused request
// changed nothing.
func (e *env) stored(t *testing.T) string {
	t.Helper()
	page, err := e.svc.Runs.ListRuns(context.Background(), runs.Filter{Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(page.Runs)
	return string(raw)
}

// post sends a raw JSON-RPC body and returns the status and body.
func post(t *testing.T, url, body string, headers ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

func nest(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

// TestHostileRPC: hostile bodies get a JSON-RPC error that says what is
// wrong (in the caller's terms, no Go types), and change nothing.
func TestHostileRPC(t *testing.T) {
	e := newEnv(t, envConfig{events: true, graphs: []*pregel.Graph{chatGraph(t), freeGraph(t)}})
	url := e.agentURL("free")
	send := func(data string) string {
		return `{"jsonrpc":"2.0","id":"r1","method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"data":` + data + `}]}}}`
	}
	for _, tc := range []struct {
		name, body string
		code       int
		msg        []string
	}{
		{"deep data", send(`{"data":` + nest(10000) + `}`), -32600, []string{"more than 64 levels deep"}},
		{"method and Method", `{"jsonrpc":"2.0","id":1,"method":"GetTask","Method":"SendMessage","params":{"id":"x","message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`, -32600, []string{`key "Method" repeats key "method"`}},
		{"repeated method", `{"jsonrpc":"2.0","id":1,"method":"GetTask","method":"SendMessage","params":{"id":"x"}}`, -32600, []string{`key "method" is repeated`}},
		{"repeated data key", send(`{"data":1,"data":2}`), -32600, []string{`key "data" is repeated`, "parts[0].data"}},
		{"case-variant params key", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x","ID":"y"}}`, -32600, []string{`key "ID" repeats key "id"`}},
		{"invalid UTF-8", send("{\"data\":\"\xff\xfe\"}"), -32700, []string{"not valid UTF-8"}},
		{"task id a number", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":5}}`, -32602, []string{`field "id" must be a string, not a number`}},
		{"0.3 task id a number", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":5}}`, -32602, []string{`field "id" must be a string, not a number`}},
		{"history length a string", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x","historyLength":"all"}}`, -32602, []string{`field "historyLength"`, "not a string"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.stored(t)
			resp := rpc(t, url, tc.body)
			if resp.status != http.StatusOK || resp.code() != tc.code {
				t.Fatalf("HTTP %d, code %d, want %d: %s", resp.status, resp.code(), tc.code, resp.raw)
			}
			for _, w := range tc.msg {
				if !strings.Contains(resp.body.Error.Message, w) {
					t.Errorf("message %q does not contain %q", resp.body.Error.Message, w)
				}
			}
			for _, leak := range []string{"Go value", "Go struct", "a2a.", "json: "} {
				if strings.Contains(resp.body.Error.Message, leak) {
					t.Errorf("message %q shows Go internals (%q)", resp.body.Error.Message, leak)
				}
			}
			if after := e.stored(t); after != before {
				t.Errorf("stored runs changed")
			}
		})
	}
}

// TestRejectedInputInCallersTerms: input the graph cannot take gives a
// rejected task whose message says what is wrong without Go type names.
func TestRejectedInputInCallersTerms(t *testing.T) {
	e := newEnv(t, envConfig{})
	resp := rpc(t, e.agentURL("sum"), `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"data":{"a":"one"}}]}}}`)
	if !strings.Contains(resp.raw, "TASK_STATE_REJECTED") || !strings.Contains(resp.raw, `must be a whole number, not a string`) || strings.Contains(resp.raw, "Go value") {
		t.Fatalf("rejected task: %s", resp.raw)
	}
}

// TestRPCIDs: ids come back exactly as sent, in answers, errors and
// stream events; notifications get no answer.
func TestRPCIDs(t *testing.T) {
	e := newEnv(t, envConfig{events: true})
	url := e.agentURL("chat")
	created := rpc(t, url, `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`)
	var res struct {
		Task struct{ ID string } `json:"task"`
	}
	if err := json.Unmarshal(created.body.Result, &res); err != nil || res.Task.ID == "" {
		t.Fatalf("SendMessage: %s", created.raw)
	}
	for _, id := range []string{`18446744073709551616`, `-9007199254740993`, `1.50`, `1e3`, `"x\u00e9"`, `"a\"b"`, `null`} {
		for _, body := range []string{
			`{"jsonrpc":"2.0","id":` + id + `,"method":"GetTask","params":{"id":"` + res.Task.ID + `"}}`,
			`{"jsonrpc":"2.0","id":` + id + `,"method":"tasks/get","params":{"id":"nope"}}`,
			`{"jsonrpc":"2.0","id":` + id + `,"method":"SubscribeToTask","params":{"id":"` + res.Task.ID + `"}}`,
			`{"jsonrpc":"2.0","id":` + id + `,"method":"GetTask","params":null}`,
		} {
			resp := rpc(t, url, body)
			if string(resp.body.ID) != id {
				t.Errorf("id %s came back as %s: %s", id, resp.body.ID, resp.raw)
			}
		}
	}

	before := e.stored(t)
	for _, body := range []string{
		`{"jsonrpc":"2.0","method":"GetTask","params":{"id":"` + res.Task.ID + `"}}`,
		`{"jsonrpc":"2.0","method":"GetTask","params":{"id":5}}`,
		`{"jsonrpc":"2.0","method":"NoSuchMethod"}`,
		`{"jsonrpc":"2.0","method":"SubscribeToTask","params":{"id":"` + res.Task.ID + `"}}`,
	} {
		status, raw := post(t, url, body)
		if status != http.StatusNoContent || raw != "" {
			t.Errorf("notification %s: HTTP %d %q, want 204 and no body", body, status, raw)
		}
	}
	if after := e.stored(t); after != before {
		t.Errorf("notifications that read changed stored runs")
	}
	// A notification that sends a message is carried out all the same,
	// without waiting for the run (a "slow" one runs until cancelled).
	start := time.Now()
	status, _ := post(t, url, `{"jsonrpc":"2.0","method":"SendMessage","params":{"message":{"messageId":"n","role":"ROLE_USER","parts":[{"text":"slow"}]}}}`)
	status03, _ := post(t, url, `{"jsonrpc":"2.0","method":"message/send","params":{"message":{"kind":"message","messageId":"n3","role":"user","parts":[{"kind":"text","text":"slow"}]},"configuration":{"blocking":true}}}`)
	page, _ := e.svc.Runs.ListRuns(context.Background(), runs.Filter{Limit: 10})
	if status != http.StatusNoContent || status03 != http.StatusNoContent || len(page.Runs) != 3 {
		t.Errorf("send notifications: HTTP %d and %d, %d runs, want 204, 204 and 3", status, status03, len(page.Runs))
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("send notifications took %v: they waited for their runs", d)
	}
	for _, r := range page.Runs {
		if r.Status == pregel.RunPending || r.Status == pregel.RunRunning {
			_, _ = e.svc.Cancel(context.Background(), r.ID)
		}
	}
	// Malformed requests without an id are answered (id null).
	if resp := rpc(t, url, `{"jsonrpc":"1.0","method":"GetTask"}`); resp.code() != -32600 || string(resp.body.ID) != "null" {
		t.Errorf("malformed notification: %s", resp.raw)
	}
}

func TestCardForwardedHeaders(t *testing.T) {
	for _, tc := range []struct {
		opt  a2a.Option
		want string
	}{
		{a2a.WithTrustForwardedHeaders(false), "http://127.0.0.1"},
		{a2a.WithTrustForwardedProto(true), "https://127.0.0.1"},
		{a2a.WithTrustForwardedHeaders(true), "https://agents.example.com/a2a/chat"},
	} {
		e := newEnv(t, envConfig{opts: []a2a.Option{tc.opt}})
		req, _ := http.NewRequest(http.MethodGet, e.agentURL("chat")+"/.well-known/agent-card.json", nil)
		req.Header.Set("X-Forwarded-Host", "agents.example.com")
		req.Header.Set("X-Forwarded-Proto", "https")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var card struct {
			URL string `json:"url"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&card)
		resp.Body.Close()
		if !strings.HasPrefix(card.URL, tc.want) {
			t.Errorf("card url %q, want it to start with %q", card.URL, tc.want)
		}
	}
}

// TestStoredValuesSurvive: what the store holds — input nested deeper than
// the door allows (stored before the limit, or through another path) and a
// 7 MB value — never breaks an answer about the task, and every answer
// stays under Lambda's 6 MB limit.
func TestStoredValuesSurvive(t *testing.T) {
	e := newEnv(t, envConfig{events: true, graphs: []*pregel.Graph{freeGraph(t)}})
	url := e.agentURL("free")
	ctx := context.Background()
	// Past the door: straight into the service.
	if _, _, err := e.svc.Create(ctx, "free", runs.CreateRequest{RunID: "deep1", Input: json.RawMessage(`{"data":` + nest(5000) + `}`)}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.svc.Create(ctx, "free", runs.CreateRequest{RunID: "big1", Input: json.RawMessage(fmt.Sprintf(`{"size":%d}`, 7<<20))}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"deep1", "big1"} {
		rpc(t, url, `{"jsonrpc":"2.0","id":0,"method":"SubscribeToTask","params":{"id":"`+id+`"}}`) // waits for the end
	}
	for _, tc := range []struct {
		name, body, want string
	}{
		{"GetTask deep", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"deep1"}}`, `"omitted_input":["data"]`},
		{"tasks/get deep", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"deep1"}}`, `nested deeper than 64 levels`},
		{"tasks/cancel deep", `{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","params":{"id":"deep1"}}`, `cannot be canceled`},
		{"CancelTask deep", `{"jsonrpc":"2.0","id":1,"method":"CancelTask","params":{"id":"deep1"}}`, `cannot be canceled`},
		{"ListTasks with history", `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"historyLength":1,"includeArtifacts":true}}`, `"omitted_values":["blob"]`},
		{"SubscribeToTask deep", `{"jsonrpc":"2.0","id":1,"method":"SubscribeToTask","params":{"id":"deep1"}}`, `is completed: it has no more updates to stream`},
		{"GetTask big", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"big1"}}`, `"href":"/v1/runs/big1/checkpoints/1/values/blob"`},
		{"tasks/get big", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"big1"}}`, `"omitted_values":["blob"]`},
		{"SubscribeToTask big", `{"jsonrpc":"2.0","id":1,"method":"SubscribeToTask","params":{"id":"big1"}}`, `is completed: it has no more updates to stream`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := rpc(t, url, tc.body)
			if len(resp.raw) >= 6_000_000 {
				t.Fatalf("%d bytes: over Lambda's limit", len(resp.raw))
			}
			if strings.Contains(resp.raw, "internal") || !strings.Contains(resp.raw, tc.want) {
				t.Fatalf("answer does not contain %q: %.600s", tc.want, resp.raw)
			}
		})
	}
	// The value left out is retrievable whole through the HTTP API.
	res, err := http.Get(e.url + "/v1/runs/big1/checkpoints/1/values/blob")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest { // too large for one response: by Range (pkg/api tests the parts)
		t.Errorf("values endpoint: %d", res.StatusCode)
	}
}
