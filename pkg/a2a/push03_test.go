package a2a_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	core "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/superstep/superstep/pkg/a2a"
)

// rawReceiver records the notifications it gets, as sent.
type rawReceiver struct {
	mu      sync.Mutex
	bodies  []map[string]any
	headers []http.Header
}

func (rc *rawReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var v map[string]any
	_ = json.Unmarshal(body, &v)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.bodies = append(rc.bodies, v)
	rc.headers = append(rc.headers, r.Header.Clone())
}

func (rc *rawReceiver) snapshot() ([]map[string]any, []http.Header) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.bodies), slices.Clone(rc.headers)
}

// TestPushVersions: a config set through the 0.3 method gets 0.3
// notifications (spec 0.3 §9.5: the Task object, the token in
// X-A2A-Notification-Token); a 1.0 config of the same task keeps the 1.0
// format (a StreamResponse, A2A-Notification-Token). Each store keeps
// the version with the config.
func TestPushVersions(t *testing.T) {
	for _, store := range []string{"memory", "sqlite", "dynamo"} {
		t.Run(store, func(t *testing.T) {
			e := newEnv(t, envConfig{events: true, sqlite: store == "sqlite", dynamo: store == "dynamo",
				opts: []a2a.Option{a2a.WithPushNotifications(a2a.PushOptions{AllowPrivateNetworks: true, Backoff: 10 * time.Millisecond})}})
			rc03, rc10 := &rawReceiver{}, &rawReceiver{}
			h03, h10 := httptest.NewServer(rc03), httptest.NewServer(rc10)
			defer h03.Close()
			defer h10.Close()
			url := e.agentURL("chat")

			resp := rpc(t, url, `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"text","text":"ask"}]}}}`)
			var task struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal(resp.body.Result, &task); err != nil || task.ID == "" {
				t.Fatalf("message/send: %s", resp.raw)
			}
			set := rpc(t, url, `{"jsonrpc":"2.0","id":2,"method":"tasks/pushNotificationConfig/set","params":{"taskId":"`+task.ID+`","pushNotificationConfig":{"id":"h03","url":"`+h03.URL+`","token":"t03","authentication":{"schemes":["Bearer"],"credentials":"c03"}}}}`)
			if set.body.Error != nil {
				t.Fatalf("0.3 set: %s", set.raw)
			}
			if _, err := e.client(t, "chat", "1.0").CreateTaskPushConfig(t.Context(), &core.PushConfig{TaskID: core.TaskID(task.ID), ID: "h10", URL: h10.URL, Token: "t10"}); err != nil {
				t.Fatal(err)
			}
			answer := rpc(t, url, `{"jsonrpc":"2.0","id":3,"method":"message/send","params":{"message":{"kind":"message","messageId":"m2","taskId":"`+task.ID+`","role":"user","parts":[{"kind":"text","text":"eve"}]}}}`)
			if answer.body.Error != nil {
				t.Fatalf("answer: %s", answer.raw)
			}

			deadline := time.Now().Add(10 * time.Second)
			for {
				b03, _ := rc03.snapshot()
				b10, _ := rc10.snapshot()
				if len(b03) > 0 && len(b10) > 0 && state03(b03[len(b03)-1]) == "completed" && state10(b10[len(b10)-1]) == "TASK_STATE_COMPLETED" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("notifications: 0.3 %v; 1.0 %v", b03, b10)
				}
				time.Sleep(20 * time.Millisecond)
			}
			b03, hd03 := rc03.snapshot()
			for i, b := range b03 {
				if b["kind"] != "task" || b["id"] != task.ID {
					t.Errorf("0.3 notification %d is not the task: %v", i, b)
				}
				if hd03[i].Get("X-A2A-Notification-Token") != "t03" || hd03[i].Get("A2A-Notification-Token") != "" || hd03[i].Get("Authorization") != "Bearer c03" {
					t.Errorf("0.3 notification %d headers %v", i, hd03[i])
				}
			}
			var states []string
			for _, b := range b03 {
				states = append(states, state03(b))
			}
			if want := []string{"working", "completed"}; len(states) < 2 || !slices.Equal(states[len(states)-2:], want) {
				t.Errorf("0.3 states %v, want them to end with %v", states, want)
			}
			b10, hd10 := rc10.snapshot()
			for i, b := range b10 {
				if _, ok := b["statusUpdate"]; !ok {
					t.Errorf("1.0 notification %d is not a status update: %v", i, b)
				}
				if hd10[i].Get("A2A-Notification-Token") != "t10" || hd10[i].Get("X-A2A-Notification-Token") != "" {
					t.Errorf("1.0 notification %d headers %v", i, hd10[i])
				}
			}
		})
	}
}

func state03(b map[string]any) string {
	st, _ := b["status"].(map[string]any)
	s, _ := st["state"].(string)
	return s
}

func state10(b map[string]any) string {
	su, _ := b["statusUpdate"].(map[string]any)
	st, _ := su["status"].(map[string]any)
	s, _ := st["state"].(string)
	return s
}
