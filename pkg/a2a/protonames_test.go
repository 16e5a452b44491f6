package a2a_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	core "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/superstep/superstep/pkg/a2a"
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

// TestRESTProtoNamesPush: a push config created with proto names
// (task_id, the authentication's fields) and one given with a message
// (configuration.task_push_notification_config) are stored as with JSON
// names.
func TestRESTProtoNamesPush(t *testing.T) {
	e := newEnv(t, envConfig{events: true, opts: []a2a.Option{a2a.WithPushNotifications(a2a.PushOptions{AllowPrivateNetworks: true})}})
	base := e.agentURL("chat")
	hook := "http://127.0.0.1:9/hook" // never reached: the task waits for input
	code, _, raw := restCall(t, "POST", base+"/message:send", `{"message": {"message_id": "p-1", "role": "ROLE_USER", "parts": [{"text": "ask"}]},
		"configuration": {"task_push_notification_config": {"id": "with-message", "url": "`+hook+`", "token": "tok", "authentication": {"scheme": "Bearer", "credentials": "c"}}}}`)
	var sent struct {
		Task core.Task `json:"task"`
	}
	if code != 200 || json.Unmarshal([]byte(raw), &sent) != nil || sent.Task.Status.State != core.TaskStateInputRequired {
		t.Fatalf("message:send with a push config: %d %s", code, raw)
	}
	id := string(sent.Task.ID)
	code, _, raw = restCall(t, "POST", base+"/tasks/"+id+"/pushNotificationConfigs", `{"task_id": "`+id+`", "id": "created", "url": "`+hook+`", "authentication": {"scheme": "Basic", "credentials": "dTpw"}}`)
	if code != 200 || !strings.Contains(raw, `"created"`) || !strings.Contains(raw, `"Basic"`) {
		t.Fatalf("create with proto names: %d %s", code, raw)
	}
	code, _, raw = restCall(t, "GET", base+"/tasks/"+id+"/pushNotificationConfigs", "")
	if code != http.StatusOK || !strings.Contains(raw, `"with-message"`) || !strings.Contains(raw, `"created"`) || !strings.Contains(raw, `"Bearer"`) {
		t.Errorf("list: %d %s, want both configs with their schemes", code, raw)
	}
}
