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

	"github.com/superstep/superstep/pkg/a2a"
	"github.com/superstep/superstep/pkg/runs"
)

// TestRESTProtoNames: the HTTP+JSON binding is the proto3 JSON mapping,
// whose parsers accept a field by its proto name (message_id) as by its
// JSON name (messageId), as the TCK's REST client sends them: a
// conversation sent with proto names (message_id, context_id, task_id,
// history_length, return_immediately, media_type) works as one sent with
// JSON names, the keys of metadata are the client's own and kept, and the
// query takes history_length, page_size, context_id.
func TestRESTProtoNames(t *testing.T) {
	e := newEnv(t, envConfig{events: true})
	base := e.agentURL("chat")
	type task struct {
		ID        string `json:"id"`
		ContextID string `json:"contextId"`
		Status    struct {
			State string `json:"state"`
		} `json:"status"`
		History []struct {
			MessageID string         `json:"messageId"`
			TaskID    string         `json:"taskId"`
			Metadata  map[string]any `json:"metadata"`
			Parts     []struct {
				Text     string         `json:"text"`
				Metadata map[string]any `json:"metadata"`
			} `json:"parts"`
		} `json:"history"`
	}
	sendRaw := func(body string) task {
		t.Helper()
		code, rerr, raw := restCall(t, "POST", base+"/message:send", body)
		var out struct {
			Task task `json:"task"`
		}
		if code != 200 || rerr != nil || json.Unmarshal([]byte(raw), &out) != nil || out.Task.ID == "" {
			t.Fatalf("message:send %s: %d %s", body, code, raw)
		}
		return out.Task
	}
	first := sendRaw(`{"message": {"message_id": "proto-1", "context_id": "ctx-proto", "role": "ROLE_USER",
		"parts": [{"text": "ask", "media_type": "text/plain", "metadata": {"part_key": 1}}],
		"metadata": {"trace_id": "t-1", "nested": {"snake_case": true}}, "reference_task_ids": []},
		"configuration": {"history_length": 10, "return_immediately": false, "accepted_output_modes": ["text/plain"]}}`)
	if first.Status.State != "TASK_STATE_INPUT_REQUIRED" || first.ContextID != "ctx-proto" {
		t.Fatalf("first message: %+v, want input-required in context ctx-proto", first)
	}
	answer := sendRaw(`{"message": {"message_id": "proto-2", "task_id": "` + first.ID + `", "context_id": "ctx-proto", "role": "ROLE_USER", "parts": [{"text": "eve"}]}}`)
	if answer.ID != first.ID || answer.Status.State != "TASK_STATE_COMPLETED" {
		t.Fatalf("answer with task_id: %+v, want task %s completed", answer, first.ID)
	}

	// GET with history_length (proto name): the newest message, the
	// client's own, its metadata keys as sent.
	code, _, raw := restCall(t, "GET", base+"/tasks/"+first.ID+"?history_length=2", "")
	var got task
	if code != 200 || json.Unmarshal([]byte(raw), &got) != nil || len(got.History) != 2 {
		t.Fatalf("GET tasks/%s?history_length=2: %d %s", first.ID, code, raw)
	}
	h := got.History[0]
	if h.MessageID != "proto-1" || h.Metadata["trace_id"] != "t-1" || h.Metadata["traceId"] != nil || !strings.Contains(raw, `"snake_case":true`) || len(h.Parts) != 1 || h.Parts[0].Metadata["part_key"] == nil {
		t.Errorf("history[0] = %+v; want the client's message proto-1 with its metadata keys as sent (%s)", h, raw)
	}
	if got.History[1].MessageID != "proto-2" || got.History[1].TaskID != first.ID {
		t.Errorf("history[1] = %+v, want proto-2", got.History[1])
	}
	code, _, raw = restCall(t, "GET", base+"/tasks?context_id=ctx-proto&page_size=1", "")
	if code != 200 || !strings.Contains(raw, first.ID) || !strings.Contains(raw, `"pageSize":1`) {
		t.Errorf("GET tasks?context_id=ctx-proto&page_size=1: %d %s", code, raw)
	}

	// Both spellings at once: refused, naming both, nothing stored.
	before := e.stored(t)
	for _, tc := range []struct {
		name, method, path, body, says string
	}{
		{"message_id and messageId", "POST", "/message:send", `{"message": {"message_id": "a", "messageId": "b", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}`, `"message.messageId" is given twice, as "messageId" and "message_id"`},
		{"nested part", "POST", "/message:send", `{"message": {"messageId": "a", "role": "ROLE_USER", "parts": [{"text": "hi", "media_type": "a/b", "mediaType": "c/d"}]}}`, `"message.parts[0].mediaType" is given twice`},
		{"configuration", "POST", "/message:send", `{"message": {"messageId": "a", "role": "ROLE_USER", "parts": [{"text": "hi"}]}, "configuration": {"history_length": 1, "historyLength": 2}}`, `"configuration.historyLength" is given twice`},
		{"case variant after renaming", "POST", "/message:send", `{"message": {"message_id": "a", "MessageId": "b", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}`, "MessageId"},
		{"ill-typed under its proto name", "POST", "/message:send", `{"message": {"message_id": 5, "role": "ROLE_USER", "parts": [{"text": "hi"}]}}`, "messageId"},
		{"query twice", "GET", "/tasks/x?history_length=1&historyLength=2", ``, `"historyLength" is given twice, as "history_length" and "historyLength"`},
		{"query bad value", "GET", "/tasks?page_size=0", ``, "pageSize"},
	} {
		code, rerr, raw := restCall(t, tc.method, base+tc.path, tc.body)
		if code != 400 || rerr == nil || !strings.Contains(rerr.Message, tc.says) {
			t.Errorf("%s: %d %s, want 400 saying %s", tc.name, code, raw, tc.says)
			continue
		}
		for _, w := range internals {
			if strings.Contains(rerr.Message, w) {
				t.Errorf("%s: error %q shows %q", tc.name, rerr.Message, w)
			}
		}
	}
	if after := e.stored(t); after != before {
		t.Errorf("a refused request changed the runs:\n%s\n%s", before, after)
	}
}

// TestRESTPush: push configs over the HTTP+JSON binding, named with
// proto names (task_id, task_push_notification_config): one given with
// the message and one created for the task are stored; the created one
// is notified in the 1.0 format (a StreamResponse with statusUpdate,
// A2A-Notification-Token, Authorization from its authentication) beside
// a 0.3 config of the same task, which keeps the 0.3 format (issue 22
// item 9 on this binding). What the sender could not honour is refused
// when the config is set (item 10): a scheme other than Bearer or Basic,
// a scheme without credentials, a loopback receiver on a server that
// does not allow private networks.
func TestRESTPush(t *testing.T) {
	e := newEnv(t, envConfig{events: true, opts: []a2a.Option{a2a.WithPushNotifications(a2a.PushOptions{AllowPrivateNetworks: true, Backoff: 10 * time.Millisecond})}})
	base := e.agentURL("chat")
	rcMsg, rc10, rc03 := &rawReceiver{}, &rawReceiver{}, &rawReceiver{}
	hMsg, h10, h03 := httptest.NewServer(rcMsg), httptest.NewServer(rc10), httptest.NewServer(rc03)
	defer hMsg.Close()
	defer h10.Close()
	defer h03.Close()
	code, _, raw := restCall(t, "POST", base+"/message:send", `{"message": {"message_id": "p-1", "role": "ROLE_USER", "parts": [{"text": "ask"}]},
		"configuration": {"task_push_notification_config": {"id": "with-message", "url": "`+hMsg.URL+`", "token": "tok", "authentication": {"scheme": "Bearer", "credentials": "c"}}}}`)
	var sent struct {
		Task core.Task `json:"task"`
	}
	if code != 200 || json.Unmarshal([]byte(raw), &sent) != nil || sent.Task.Status.State != core.TaskStateInputRequired {
		t.Fatalf("message:send with a push config: %d %s", code, raw)
	}
	id := string(sent.Task.ID)
	code, _, raw = restCall(t, "POST", base+"/tasks/"+id+"/pushNotificationConfigs", `{"task_id": "`+id+`", "id": "h10", "url": "`+h10.URL+`", "token": "t10", "authentication": {"scheme": "Bearer", "credentials": "c10"}}`)
	if code != 200 || !strings.Contains(raw, `"h10"`) || strings.Contains(raw, "t10") || strings.Contains(raw, "c10") {
		t.Fatalf("create with proto names: %d %s, want the config without its secrets", code, raw)
	}
	if set := rpc(t, base, `{"jsonrpc":"2.0","id":2,"method":"tasks/pushNotificationConfig/set","params":{"taskId":"`+id+`","pushNotificationConfig":{"id":"h03","url":"`+h03.URL+`","token":"t03"}}}`); set.body.Error != nil {
		t.Fatalf("0.3 set: %s", set.raw)
	}
	code, _, raw = restCall(t, "GET", base+"/tasks/"+id+"/pushNotificationConfigs", "")
	if code != http.StatusOK || !strings.Contains(raw, `"with-message"`) || !strings.Contains(raw, `"h10"`) || !strings.Contains(raw, `"h03"`) {
		t.Errorf("list: %d %s, want the three configs", code, raw)
	}

	// Refused at config time, nothing stored.
	e2 := newEnv(t, envConfig{events: true, opts: []a2a.Option{a2a.WithPushNotifications(a2a.PushOptions{})}})
	code, _, raw = restCall(t, "POST", e2.agentURL("chat")+"/message:send", `{"message": {"messageId": "q-1", "role": "ROLE_USER", "parts": [{"text": "ask"}]}}`)
	var sent2 struct {
		Task core.Task `json:"task"`
	}
	if code != 200 || json.Unmarshal([]byte(raw), &sent2) != nil {
		t.Fatalf("message:send: %d %s", code, raw)
	}
	id2 := string(sent2.Task.ID)
	for _, tc := range []struct{ name, body, says string }{
		{"scheme", `{"url": "https://hooks.example.com/a", "authentication": {"scheme": "Digest", "credentials": "x"}}`, "Digest"},
		{"no credentials", `{"url": "https://hooks.example.com/a", "authentication": {"scheme": "Bearer"}}`, "credentials"},
		{"loopback", `{"url": "http://127.0.0.1:9/hook"}`, "127.0.0.1"},
	} {
		code, rerr, raw := restCall(t, "POST", e2.agentURL("chat")+"/tasks/"+id2+"/pushNotificationConfigs", tc.body)
		if code != 400 || rerr == nil || rerr.reason() != "INVALID_PARAMS" || !strings.Contains(rerr.Message, tc.says) {
			t.Errorf("%s: %d %s, want 400 INVALID_PARAMS naming %s", tc.name, code, raw, tc.says)
		}
	}
	if code, _, raw := restCall(t, "GET", e2.agentURL("chat")+"/tasks/"+id2+"/pushNotificationConfigs", ""); code != 200 || strings.Contains(raw, "hooks.example.com") || strings.Contains(raw, "127.0.0.1") {
		t.Errorf("refused configs were stored: %d %s", code, raw)
	}

	// The answer completes the task: h10 hears 1.0, h03 hears 0.3.
	if code, _, raw := restCall(t, "POST", base+"/message:send", `{"message": {"message_id": "p-2", "task_id": "`+id+`", "role": "ROLE_USER", "parts": [{"text": "eve"}]}}`); code != 200 || !strings.Contains(raw, "TASK_STATE_COMPLETED") {
		t.Fatalf("answer: %d %s", code, raw)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b10, _ := rc10.snapshot()
		b03, _ := rc03.snapshot()
		if len(b10) > 0 && state10(b10[len(b10)-1]) == "TASK_STATE_COMPLETED" && len(b03) > 0 && state03(b03[len(b03)-1]) == "completed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("notifications: 1.0 %v; 0.3 %v", b10, b03)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, r := range []struct {
		rc           *rawReceiver
		token, creds string
	}{{rc10, "t10", "c10"}, {rcMsg, "tok", "c"}} {
		b10, hd10 := r.rc.snapshot()
		if len(b10) == 0 {
			t.Errorf("the config with token %s heard nothing", r.token)
		}
		for i := range b10 {
			if _, ok := b10[i]["statusUpdate"]; !ok || hd10[i].Get("A2A-Notification-Token") != r.token || hd10[i].Get("Authorization") != "Bearer "+r.creds {
				t.Errorf("1.0 notification %d: %v %v", i, b10[i], hd10[i])
			}
		}
	}
	b03, hd03 := rc03.snapshot()
	for i := range b03 {
		if b03[i]["kind"] != "task" || hd03[i].Get("X-A2A-Notification-Token") != "t03" {
			t.Errorf("0.3 notification %d: %v %v", i, b03[i], hd03[i])
		}
	}
}

// TestRESTErrorDetails: an error's data reaches a2a-go's REST clients (1.0 and 0.3) as
// the error's details (issue 22 item 11 on this binding): a message in a
// busy context under the reject strategy names the context, the active
// task and its state.
func TestRESTErrorDetails(t *testing.T) {
	e := threadEnv(t, true, a2a.WithThreadStrategy(runs.StrategyReject))
	for _, binding := range []string{"rest", "rest0.3"} {
		t.Run(binding, func(t *testing.T) {
			ctxID := "busy-" + strings.ReplaceAll(binding, ".", "-")
			c := e.client(t, "memo", binding)
			first := send(t, c, inContext("wait", ctxID), &core.SendMessageConfig{ReturnImmediately: true})
			waitState(t, c, first.ID, core.TaskStateWorking)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err := c.SendMessage(ctx, &core.SendMessageRequest{Message: inContext("second", ctxID)})
			var aerr *core.Error
			if !errors.Is(err, core.ErrUnsupportedOperation) || !errors.As(err, &aerr) {
				t.Fatalf("second message on a busy context: %v, want UnsupportedOperation", err)
			}
			if aerr.Details["contextId"] != ctxID || aerr.Details["activeTaskId"] != string(first.ID) || aerr.Details["activeTaskState"] != "working" {
				t.Errorf("details %v, want contextId, activeTaskId %s, activeTaskState working", aerr.Details, first.ID)
			}
			waitState(t, c, first.ID, core.TaskStateCompleted)
		})
	}
}

// TestRPCProtoNames: JSON-RPC 1.0 params are the proto3 JSON mapping too:
// a conversation whose params name fields by their proto names works,
// GetTask and ListTasks take history_length and context_id, 0.3 methods
// are not renamed (their schema is JSON), and a field given under both
// names is -32600 naming both.
func TestRPCProtoNames(t *testing.T) {
	e := newEnv(t, envConfig{events: true})
	url := e.agentURL("chat")
	first := rpc(t, url, `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"message_id": "rp-1", "context_id": "ctx-rpc", "role": "ROLE_USER", "parts": [{"text": "ask"}], "metadata": {"trace_id": "t"}}, "configuration": {"history_length": 5}}}`)
	var sent struct {
		Task struct {
			ID     string `json:"id"`
			Status struct {
				State string `json:"state"`
			} `json:"status"`
		} `json:"task"`
	}
	if first.body.Error != nil || json.Unmarshal(first.body.Result, &sent) != nil || sent.Task.Status.State != "TASK_STATE_INPUT_REQUIRED" {
		t.Fatalf("SendMessage with proto names: %s", first.raw)
	}
	answer := rpc(t, url, `{"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": {"message": {"message_id": "rp-2", "task_id": "`+sent.Task.ID+`", "role": "ROLE_USER", "parts": [{"text": "eve"}]}}}`)
	if answer.body.Error != nil || !strings.Contains(answer.raw, "TASK_STATE_COMPLETED") {
		t.Fatalf("answer with task_id: %s", answer.raw)
	}
	got := rpc(t, url, `{"jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": {"id": "`+sent.Task.ID+`", "history_length": 1}}`)
	if got.body.Error != nil || !strings.Contains(got.raw, `"rp-2"`) || strings.Contains(got.raw, `"rp-1"`) {
		t.Errorf("GetTask with history_length 1: %s, want only the newest message", got.raw)
	}
	list := rpc(t, url, `{"jsonrpc": "2.0", "id": 4, "method": "ListTasks", "params": {"context_id": "ctx-rpc", "page_size": 5}}`)
	if list.body.Error != nil || !strings.Contains(list.raw, sent.Task.ID) || !strings.Contains(list.raw, `"pageSize":5`) {
		t.Errorf("ListTasks with context_id: %s", list.raw)
	}
	before := e.stored(t)
	twice := rpc(t, url, `{"jsonrpc": "2.0", "id": 5, "method": "SendMessage", "params": {"message": {"message_id": "a", "messageId": "b", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}}`)
	if twice.body.Error == nil || twice.body.Error.Code != -32600 || !strings.Contains(twice.body.Error.Message, `"message.messageId" is given twice`) {
		t.Errorf("both names: %s, want -32600 naming both", twice.raw)
	}
	legacy := rpc(t, url, `{"jsonrpc": "2.0", "id": 6, "method": "message/send", "params": {"message": {"kind": "message", "message_id": "x", "role": "user", "parts": [{"kind": "text", "text": "hi"}]}}}`)
	if legacy.body.Error == nil || legacy.body.Error.Code != -32602 {
		t.Errorf("0.3 message/send with message_id: %s, want -32602 (the 0.3 schema names messageId)", legacy.raw)
	}
	if after := e.stored(t); after != before {
		t.Errorf("a refused request changed the runs:\n%s\n%s", before, after)
	}
}
