package a2a_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	core "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/superstep/superstep/pkg/a2a"
)

// receiver is a push notification endpoint that records what it gets
// and, with flaky set, fails every other request: the first delivery of
// each notification (they are sent one at a time).
type receiver struct {
	flaky    bool
	mu       sync.Mutex
	attempts int
	states   []string // delivered (accepted) task states, in order
	headers  []http.Header
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var ev struct {
		StatusUpdate struct {
			Status struct {
				State string `json:"state"`
			} `json:"status"`
		} `json:"statusUpdate"`
	}
	_ = json.Unmarshal(body, &ev)
	state := ev.StatusUpdate.Status.State
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.attempts++
	rc.headers = append(rc.headers, r.Header.Clone())
	if rc.flaky && rc.attempts%2 == 1 {
		http.Error(w, "try again", http.StatusServiceUnavailable)
		return
	}
	rc.states = append(rc.states, state)
}

func (rc *receiver) snapshot() (states []string, attempts int, headers []http.Header) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.states), rc.attempts, slices.Clone(rc.headers)
}

// TestPushNotifications: a task with a push config has each change of
// its state POSTed once to the receiver (retried after a failure), with
// the config's token and credentials; the config methods work; a
// loopback receiver is refused unless private networks are allowed.
func TestPushNotifications(t *testing.T) {
	rc := &receiver{flaky: true}
	hook := httptest.NewServer(rc)
	defer hook.Close()
	e := newEnv(t, envConfig{events: true, opts: []a2a.Option{a2a.WithPushNotifications(a2a.PushOptions{AllowPrivateNetworks: true, Backoff: 10 * time.Millisecond})}})
	c := e.client(t, "chat", "1.0")
	ctx := context.Background()

	cfg := &core.PushConfig{ID: "hook1", URL: hook.URL, Token: "notify-token", Auth: &core.PushAuthInfo{Scheme: "Bearer", Credentials: "hook-secret"}}
	task := send(t, c, text("ask"), &core.SendMessageConfig{PushConfig: cfg})
	wantState(t, task, core.TaskStateInputRequired)

	// The config methods.
	got, err := c.GetTaskPushConfig(ctx, &core.GetTaskPushConfigRequest{TaskID: task.ID, ID: "hook1"})
	if err != nil || got.URL != hook.URL || got.TaskID != task.ID {
		t.Fatalf("GetTaskPushConfig: %+v, %v", got, err)
	}
	// Secrets stay with the server: the scheme is shown, not the
	// credentials, nor the token.
	if got.Token != "" || got.Auth == nil || got.Auth.Scheme != "Bearer" || got.Auth.Credentials != "" {
		t.Errorf("GetTaskPushConfig shows %+v (auth %+v); want no token and no credentials", got, got.Auth)
	}
	// A second receiver: a new config hears of the state the task is in
	// at once, which must not count as the first receiver's.
	other := httptest.NewServer(&receiver{})
	defer other.Close()
	extra, err := c.CreateTaskPushConfig(ctx, &core.PushConfig{TaskID: task.ID, ID: "hook2", URL: other.URL})
	if err != nil || extra.ID != "hook2" {
		t.Fatalf("CreateTaskPushConfig: %+v, %v", extra, err)
	}
	list, err := c.ListTaskPushConfigs(ctx, &core.ListTaskPushConfigRequest{TaskID: task.ID})
	if err != nil || len(list) != 2 {
		t.Fatalf("ListTaskPushConfigs: %+v, %v; want 2", list, err)
	}
	if err := c.DeleteTaskPushConfig(ctx, &core.DeleteTaskPushConfigRequest{TaskID: task.ID, ID: "hook2"}); err != nil {
		t.Fatalf("DeleteTaskPushConfig: %v", err)
	}
	if _, err := c.GetTaskPushConfig(ctx, &core.GetTaskPushConfigRequest{TaskID: task.ID, ID: "hook2"}); err == nil {
		t.Error("a deleted config is still there")
	}
	if _, err := c.CreateTaskPushConfig(ctx, &core.PushConfig{TaskID: "nope", URL: hook.URL}); !errors.Is(err, core.ErrTaskNotFound) {
		t.Errorf("config for an unknown task: %v", err)
	}
	for name, bad := range map[string]*core.PushConfig{
		"an ftp URL":     {TaskID: task.ID, URL: "ftp://example.com/x"},
		"a 300-byte id":  {TaskID: task.ID, ID: strings.Repeat("i", 300), URL: hook.URL},
		"a 20 KB token":  {TaskID: task.ID, URL: hook.URL, Token: strings.Repeat("t", 20<<10)},
		"a relative URL": {TaskID: task.ID, URL: "/hook"},
		"no URL":         {TaskID: task.ID},
		// Only Bearer and Basic credentials are sent: any other scheme,
		// or none, would go out without them.
		"an API key scheme":            {TaskID: task.ID, URL: hook.URL, Auth: &core.PushAuthInfo{Scheme: "ApiKey", Credentials: "k"}},
		"credentials without scheme":   {TaskID: task.ID, URL: hook.URL, Auth: &core.PushAuthInfo{Credentials: "k"}},
		"a scheme without credentials": {TaskID: task.ID, URL: hook.URL, Auth: &core.PushAuthInfo{Scheme: "Bearer"}},
	} {
		if _, err := c.CreateTaskPushConfig(ctx, bad); !errors.Is(err, core.ErrInvalidParams) {
			t.Errorf("config with %s: %v, want invalid params", name, err)
		}
	}

	done := send(t, c, core.NewMessageForTask(core.MessageRoleUser, task, core.NewTextPart("eve")), nil)
	wantState(t, done, core.TaskStateCompleted)
	deadline := time.Now().Add(10 * time.Second)
	var states []string
	var attempts int
	var headers []http.Header
	for time.Now().Before(deadline) {
		if states, attempts, headers = rc.snapshot(); len(states) > 0 && states[len(states)-1] == string(core.TaskStateCompleted) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Every change, even one shorter than a delivery: ... input-required,
	// working (the answer), completed.
	want := []string{string(core.TaskStateInputRequired), string(core.TaskStateWorking), string(core.TaskStateCompleted)}
	if len(states) < 3 || !slices.Equal(states[len(states)-3:], want) {
		t.Fatalf("delivered states %v; want them to end with %v", states, want)
	}
	for i := 1; i < len(states); i++ {
		if states[i] == states[i-1] {
			t.Errorf("state %s delivered twice in a row: %v", states[i], states)
		}
	}
	if attempts != 2*len(states) {
		t.Errorf("%d attempts for %d notifications, each failed once: want %d", attempts, len(states), 2*len(states))
	}
	for _, h := range headers {
		if h.Get("A2A-Notification-Token") != "notify-token" || h.Get("Authorization") != "Bearer hook-secret" {
			t.Fatalf("notification headers %v: want the config's token and credentials", h)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if again, _, _ := rc.snapshot(); len(again) != len(states) {
		t.Errorf("notifications after completion: %v", again)
	}

	// Without AllowPrivateNetworks the loopback receiver is refused.
	rc2 := &receiver{}
	hook2 := httptest.NewServer(rc2)
	defer hook2.Close()
	guarded := newEnv(t, envConfig{events: true, opts: []a2a.Option{a2a.WithPushNotifications(a2a.PushOptions{Attempts: 2, Backoff: 10 * time.Millisecond})}})
	gc := guarded.client(t, "chat", "1.0")
	// It is refused when the config is given, with a clear error, not
	// in the log after the attempts.
	_, err = gc.SendMessage(ctx, &core.SendMessageRequest{Message: text("hi"), Config: &core.SendMessageConfig{PushConfig: &core.PushConfig{URL: hook2.URL}}})
	if !errors.Is(err, core.ErrInvalidParams) || !strings.Contains(err.Error(), "does not call its own network") {
		t.Errorf("a message with a loopback receiver: %v, want invalid params saying why", err)
	}
	gtask := send(t, gc, text("ask"), nil)
	for _, u := range []string{hook2.URL, "http://localhost:9/x", "http://10.1.2.3/x", "http://[::1]/x", "http://169.254.169.254/latest"} {
		if _, err := gc.CreateTaskPushConfig(ctx, &core.PushConfig{TaskID: gtask.ID, URL: u}); !errors.Is(err, core.ErrInvalidParams) {
			t.Errorf("config with private URL %s: %v, want invalid params", u, err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if _, n, _ := rc2.snapshot(); n != 0 {
		t.Errorf("a loopback receiver got %d requests without AllowPrivateNetworks", n)
	}

	// Without WithPushNotifications: not supported, and the card says so.
	plain := newEnv(t, envConfig{events: true})
	if _, err := plain.client(t, "chat", "1.0").CreateTaskPushConfig(ctx, &core.PushConfig{TaskID: task.ID, URL: hook.URL}); !errors.Is(err, core.ErrPushNotificationNotSupported) {
		t.Errorf("push config without push notifications: %v", err)
	}
}

// TestPushConfig03: the 0.3 method names set, get, list and delete.
func TestPushConfig03(t *testing.T) {
	e := newEnv(t, envConfig{events: true, opts: []a2a.Option{a2a.WithPushNotifications(a2a.PushOptions{})}})
	task := send(t, e.client(t, "chat", "0.3"), text("ask"), nil)
	url := e.agentURL("chat")
	id := string(task.ID)
	for _, tc := range []struct{ body, want string }{
		{`{"jsonrpc":"2.0","id":1,"method":"tasks/pushNotificationConfig/set","params":{"taskId":"` + id + `","pushNotificationConfig":{"id":"h1","url":"https://hooks.example.com/a2a","token":"tok"}}}`, `"url":"https://hooks.example.com/a2a"`},
		{`{"jsonrpc":"2.0","id":2,"method":"tasks/pushNotificationConfig/get","params":{"id":"` + id + `","pushNotificationConfigId":"h1"}}`, `"url":"https://hooks.example.com/a2a"`},
		{`{"jsonrpc":"2.0","id":3,"method":"tasks/pushNotificationConfig/list","params":{"id":"` + id + `"}}`, `"h1"`},
		{`{"jsonrpc":"2.0","id":4,"method":"tasks/pushNotificationConfig/delete","params":{"id":"` + id + `","pushNotificationConfigId":"h1"}}`, `"result":null`},
		// The result of list is an array (0.3 schema: TaskPushNotificationConfig[]), empty too.
		{`{"jsonrpc":"2.0","id":5,"method":"tasks/pushNotificationConfig/list","params":{"id":"` + id + `"}}`, `"result":[]`},
		// A config set without an id is the task's default one: get
		// without pushNotificationConfigId, or with "default", finds it.
		{`{"jsonrpc":"2.0","id":6,"method":"tasks/pushNotificationConfig/set","params":{"taskId":"` + id + `","pushNotificationConfig":{"url":"https://hooks.example.com/b"}}}`, `"id":"default"`},
		{`{"jsonrpc":"2.0","id":7,"method":"tasks/pushNotificationConfig/get","params":{"id":"` + id + `"}}`, `"url":"https://hooks.example.com/b"`},
		{`{"jsonrpc":"2.0","id":8,"method":"tasks/pushNotificationConfig/get","params":{"id":"` + id + `","pushNotificationConfigId":"default"}}`, `"url":"https://hooks.example.com/b"`},
		// 0.3 authentication: the first of "schemes" is sent; no
		// schemes, or another scheme, would send no credentials: refused.
		{`{"jsonrpc":"2.0","id":9,"method":"tasks/pushNotificationConfig/set","params":{"taskId":"` + id + `","pushNotificationConfig":{"url":"https://hooks.example.com/c","authentication":{"schemes":[],"credentials":"s3"}}}}`, "!names no scheme"},
		{`{"jsonrpc":"2.0","id":10,"method":"tasks/pushNotificationConfig/set","params":{"taskId":"` + id + `","pushNotificationConfig":{"url":"https://hooks.example.com/c","authentication":{"schemes":["OAuth2"],"credentials":"s3"}}}}`, `!OAuth2\" is not one this server can send`},
		{`{"jsonrpc":"2.0","id":11,"method":"tasks/pushNotificationConfig/set","params":{"taskId":"` + id + `","pushNotificationConfig":{"url":"https://hooks.example.com/c","authentication":{"schemes":["Basic"],"credentials":"dTpw"}}}}`, `"schemes":["Basic"]`},
	} {
		if refusal, ok := strings.CutPrefix(tc.want, "!"); ok {
			resp := rpc(t, url, tc.body)
			if resp.code() != -32602 || !strings.Contains(resp.raw, refusal) {
				t.Errorf("%s\n  answered %s; want invalid params saying %s", tc.body, resp.raw, tc.want)
			}
			continue
		}
		resp := rpc(t, url, tc.body)
		if resp.body.Error != nil || !strings.Contains(resp.raw, tc.want) {
			t.Errorf("%s\n  answered %s; want %s", tc.body, resp.raw, tc.want)
		}
		if strings.Contains(resp.raw, "tok") {
			t.Errorf("%s\n  answered %s: the config's token is a secret for the receiver", tc.body, resp.raw)
		}
	}
}
