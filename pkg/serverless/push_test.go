package serverless_test

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/superstep/superstep/examples/triage"
	"github.com/superstep/superstep/pkg/a2a"
	"github.com/superstep/superstep/pkg/serverless"
)

// hook is a push notification receiver. Each notification fails
// failFirst times (503) before it is accepted.
type hook struct {
	failFirst int
	mu        sync.Mutex
	attempts  int
	tries     int // of the notification in progress
	states    []string
	headers   []http.Header
}

func (h *hook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var ev struct {
		StatusUpdate struct {
			TaskID string `json:"taskId"`
			Status struct {
				State string `json:"state"`
			} `json:"status"`
		} `json:"statusUpdate"`
	}
	_ = json.NewDecoder(r.Body).Decode(&ev)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.attempts++
	h.headers = append(h.headers, r.Header.Clone())
	if h.tries < h.failFirst {
		h.tries++
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	h.tries = 0
	h.states = append(h.states, ev.StatusUpdate.Status.State)
}

func (h *hook) snapshot() (states []string, attempts int, headers []http.Header) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.states), h.attempts, slices.Clone(h.headers)
}

func (h *hook) waitFor(t *testing.T, last string) []string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		states, _, _ := h.snapshot()
		if len(states) > 0 && states[len(states)-1] == last {
			return states
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 30s for a %s notification; the receiver has %v", last, states)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// streamStandIn plays the table's stream and the push event source
// mapping: it reads the table every few milliseconds and hands the sweep
// handler (of the App current returns) a record for every insertion or
// change of a run record that the template's filter passes (a status
// other than running before or after), and for every new push config.
// Like the stream, it never skips a change the filter passes; unlike it,
// it may see two quick changes as one (the handler reads the run's
// history, so that loses nothing). It stops with the test.
func streamStandIn(t *testing.T, s *stack, current func() *serverless.App) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		type seen struct {
			status  string
			version string
		}
		prev := map[string]seen{}
		seq := 0
		for ctx.Err() == nil {
			out, err := s.ddb.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(s.cfg.Table), ProjectionExpression: aws.String("pk, sk, run_status, version")})
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("scan: %v", err)
				}
				return
			}
			var batch []events.DynamoDBEventRecord
			for _, it := range out.Items {
				pk := it["pk"].(*types.AttributeValueMemberS).Value
				sk := it["sk"].(*types.AttributeValueMemberS).Value
				var cur seen
				if v, ok := it["run_status"].(*types.AttributeValueMemberS); ok {
					cur.status = v.Value
				}
				if v, ok := it["version"].(*types.AttributeValueMemberN); ok {
					cur.version = v.Value
				}
				k := pk + "|" + sk
				old, known := prev[k]
				prev[k] = cur
				keys := map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute(pk), "sk": events.NewStringAttribute(sk)}
				rec := events.DynamoDBEventRecord{EventName: "MODIFY", Change: events.DynamoDBStreamRecord{Keys: keys, StreamViewType: "NEW_AND_OLD_IMAGES"}}
				switch {
				case sk == "~RUN" && !known:
					rec.EventName = "INSERT"
					rec.Change.NewImage = map[string]events.DynamoDBAttributeValue{"run_status": events.NewStringAttribute(cur.status)}
				case sk == "~RUN" && old.version != cur.version && (old.status != "running" || cur.status != "running"):
					rec.Change.NewImage = map[string]events.DynamoDBAttributeValue{"run_status": events.NewStringAttribute(cur.status)}
					rec.Change.OldImage = map[string]events.DynamoDBAttributeValue{"run_status": events.NewStringAttribute(old.status)}
				case strings.HasPrefix(sk, "PUSH#") && !known:
					rec.EventName = "INSERT"
				default:
					continue
				}
				seq++
				rec.EventID = "ev" + strconv.Itoa(seq)
				rec.Change.SequenceNumber = strconv.Itoa(100000 + seq)
				batch = append(batch, rec)
			}
			if len(batch) > 0 {
				resp, err := current().HandleStream(ctx, events.DynamoDBEvent{Records: batch})
				if ctx.Err() == nil && (err != nil || len(resp.BatchItemFailures) > 0) {
					t.Errorf("HandleStream: %+v, %v", resp, err)
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(30 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// a2aCall posts a JSON-RPC request to an agent of handler h and returns
// the result.
func a2aCall(t *testing.T, h http.Handler, graph, method string, params any) json.RawMessage {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	s := &stack{t: t, url: srv.URL}
	var resp struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	req := map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
	if st := s.do("POST", "/a2a/"+graph, req, &resp); st != http.StatusOK || resp.Error != nil {
		t.Fatalf("%s: status %d, error %+v", method, st, resp.Error)
	}
	return resp.Result
}

func textMessage(id, taskID, text string) map[string]any {
	m := map[string]any{"messageId": id, "role": "ROLE_USER", "parts": []any{map[string]any{"text": text}}}
	if taskID != "" {
		m["taskId"] = taskID
	}
	return m
}

// TestPushNotificationsServerless: through the api handler, the tick and
// node handlers (pollers) and the sweep handler fed by the table's
// changes, against moto. A task with an interrupt and a resume notifies
// its receiver of each state once, in order; each notification failing
// twice is retried until accepted; the token and the credentials are
// sent as configured; the config is kept in the table, so an App made
// afresh (a new Lambda container) lists it without its secrets and goes
// on delivering where the first left off.
func TestPushNotificationsServerless(t *testing.T) {
	t.Parallel()
	rc := &hook{failFirst: 2}
	receiver := httptest.NewServer(rc)
	defer receiver.Close()
	s := newStack(t, stackOptions{pushPrivate: true, push: a2a.PushOptions{Backoff: 10 * time.Millisecond}})
	var app atomic.Pointer[serverless.App]
	app.Store(s.app)
	streamStandIn(t, s, app.Load)

	var card struct {
		Capabilities struct {
			PushNotifications bool `json:"pushNotifications"`
		} `json:"capabilities"`
	}
	if st := s.do("GET", "/a2a/"+triage.Name+"/.well-known/agent-card.json", nil, &card); st != http.StatusOK || !card.Capabilities.PushNotifications {
		t.Errorf("agent card: status %d, pushNotifications %v; want true", st, card.Capabilities.PushNotifications)
	}

	cfg := map[string]any{"id": "hook", "url": receiver.URL + "/notify", "token": "tok-1", "authentication": map[string]any{"scheme": "Bearer", "credentials": "cred-1"}}
	var task struct {
		ID     string `json:"id"`
		Status struct {
			State string `json:"state"`
		} `json:"status"`
	}
	raw := a2aCall(t, s.app, triage.Name, "SendMessage", map[string]any{
		"message":       textMessage("m1", "", "I was charged twice for my order"),
		"configuration": map[string]any{"taskPushNotificationConfig": cfg},
	})
	var sent struct {
		Task json.RawMessage `json:"task"`
	}
	if err := json.Unmarshal(raw, &sent); err != nil || json.Unmarshal(sent.Task, &task) != nil || task.ID == "" {
		t.Fatalf("SendMessage answered %s", raw)
	}
	if task.Status.State != "TASK_STATE_INPUT_REQUIRED" {
		t.Fatalf("task is %s, want input-required", task.Status.State)
	}
	before := rc.waitFor(t, "TASK_STATE_INPUT_REQUIRED")

	// A new container: a new App on the same table lists the config,
	// without its secrets, and delivers from now on.
	fresh, err := serverless.New(s.opts)
	if err != nil {
		t.Fatal(err)
	}
	app.Store(fresh)
	listed := string(a2aCall(t, fresh, triage.Name, "ListTaskPushNotificationConfigs", map[string]any{"taskId": task.ID}))
	if !strings.Contains(listed, `"hook"`) || !strings.Contains(listed, "/notify") {
		t.Errorf("ListTaskPushNotificationConfigs on a new App: %s; want the config", listed)
	}
	got := string(a2aCall(t, fresh, triage.Name, "GetTaskPushNotificationConfig", map[string]any{"taskId": task.ID, "id": "hook"}))
	for _, secret := range []string{"tok-1", "cred-1"} {
		if strings.Contains(listed, secret) || strings.Contains(got, secret) {
			t.Errorf("config answers show the secret %q: %s / %s", secret, listed, got)
		}
	}

	a2aCall(t, fresh, triage.Name, "SendMessage", map[string]any{"message": textMessage("m2", task.ID, "approve")})
	rc.waitFor(t, "TASK_STATE_COMPLETED")
	time.Sleep(300 * time.Millisecond) // nothing more comes
	states, attempts, headers := rc.snapshot()

	if !slices.Equal(states[:len(before)], before) {
		t.Errorf("states %v do not start with those before the new App, %v", states, before)
	}
	want := []string{"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_INPUT_REQUIRED", "TASK_STATE_WORKING", "TASK_STATE_COMPLETED"}
	if !slices.Equal(states, want) {
		t.Errorf("delivered %v; want each change once: %v", states, want)
	}
	if attempts != 3*len(states) {
		t.Errorf("%d attempts for %d notifications failing twice each; want %d", attempts, len(states), 3*len(states))
	}
	for _, h := range headers {
		if h.Get("A2A-Notification-Token") != "tok-1" || h.Get("Authorization") != "Bearer cred-1" {
			t.Fatalf("notification headers %v: want the config's token and credentials", h)
		}
	}
	if strings.Contains(s.logs.String(), "cred-1") || strings.Contains(s.logs.String(), "tok-1") {
		t.Error("the logs show a config's secret")
	}
}

// TestPushPrivateAddressRefusedServerless: without
// PUSH_ALLOW_PRIVATE_NETWORKS, a config naming a receiver on a loopback
// address is refused when it is given (SSRF), with an error that says
// why; the receiver gets nothing and nothing logs the config's secrets.
func TestPushPrivateAddressRefusedServerless(t *testing.T) {
	t.Parallel()
	rc := &hook{}
	receiver := httptest.NewServer(rc)
	defer receiver.Close()
	s := newStack(t, stackOptions{push: a2a.PushOptions{Attempts: 2, Backoff: 10 * time.Millisecond}})
	streamStandIn(t, s, func() *serverless.App { return s.app })
	cfg := map[string]any{"url": receiver.URL + "/notify?key=url-secret", "token": "tok-2"}
	srv := httptest.NewServer(s.app)
	defer srv.Close()
	st := &stack{t: t, url: srv.URL}
	var resp struct {
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	req := map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": map[string]any{
		"message":       textMessage("m1", "", "I was charged twice for my order"),
		"configuration": map[string]any{"taskPushNotificationConfig": cfg},
	}}
	if code := st.do("POST", "/a2a/"+triage.Name, req, &resp); code != http.StatusOK || resp.Error == nil || resp.Error.Code != -32602 || !strings.Contains(resp.Error.Message, "does not call its own network") {
		t.Fatalf("a config with a loopback receiver: status %d, error %+v; want -32602 saying why", code, resp.Error)
	}
	time.Sleep(200 * time.Millisecond)
	if _, n, _ := rc.snapshot(); n != 0 {
		t.Errorf("a loopback receiver got %d requests without PUSH_ALLOW_PRIVATE_NETWORKS", n)
	}
	for _, secret := range []string{"tok-2", "url-secret"} {
		if strings.Contains(s.logs.String(), secret) || strings.Contains(resp.Error.Message, secret) {
			t.Errorf("the logs or the error show the secret %q", secret)
		}
	}
}

// PUSH_ALLOW_PRIVATE_NETWORKS is read as a boolean; a bad value is named.
func TestConfigPushAllowPrivateNetworks(t *testing.T) {
	for _, tc := range []struct {
		val  string
		want bool
		err  bool
	}{{"", false, false}, {"true", true, false}, {"false", false, false}, {"1", true, false}, {"maybe", false, true}} {
		env := map[string]string{
			serverless.EnvTable: "t", serverless.EnvTickQueue: "https://sqs/q/ticks.fifo", serverless.EnvNodeQueue: "https://sqs/q/nodes",
			serverless.EnvPushAllowPrivateNetworks: tc.val,
		}
		cfg, err := serverless.ConfigFromEnv(func(k string) string { return env[k] })
		if tc.err {
			if err == nil || !strings.Contains(err.Error(), serverless.EnvPushAllowPrivateNetworks) {
				t.Errorf("%q: err %v, want one naming %s", tc.val, err, serverless.EnvPushAllowPrivateNetworks)
			}
			continue
		}
		if err != nil || cfg.PushAllowPrivateNetworks != tc.want {
			t.Errorf("%q: %v, %v; want %v", tc.val, cfg.PushAllowPrivateNetworks, err, tc.want)
		}
	}
}

// TestPushDeliveryRequests: what the sweep's push path costs in DynamoDB
// requests. A run without push configs (most runs): one Query, nothing
// read. A run with a config already caught up: that Query and a GetItem
// of the run. Each notification adds one UpdateItem (the cursor).
func TestPushDeliveryRequests(t *testing.T) {
	t.Parallel()
	rc := &hook{}
	receiver := httptest.NewServer(rc)
	defer receiver.Close()
	s := newStack(t, stackOptions{noPollers: true, pushPrivate: true})
	ctx := t.Context()
	s.create("counter", "plain", map[string]any{"limit": 1})
	s.create("counter", "pushed", map[string]any{"limit": 1})
	a2aCall(t, s.app, "counter", "CreateTaskPushNotificationConfig", map[string]any{"taskId": "pushed", "id": "h", "url": receiver.URL})

	change := func(run string) events.DynamoDBEvent {
		return events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{{
			EventID: "e-" + run, EventName: "MODIFY",
			Change: events.DynamoDBStreamRecord{SequenceNumber: "1", Keys: map[string]events.DynamoDBAttributeValue{
				"pk": events.NewStringAttribute("RUN#" + run), "sk": events.NewStringAttribute("~RUN"),
			}},
		}}}
	}
	for _, tc := range []struct {
		name string
		run  string
		want map[string]int64
	}{
		{"no configs", "plain", map[string]int64{"Query": 1}},
		{"a config, one state to send", "pushed", map[string]int64{"Query": 1, "GetItem": 1, "UpdateItem": 1}},
		{"a config caught up", "pushed", map[string]int64{"Query": 1, "GetItem": 1}},
	} {
		before := s.meter.Snapshot()
		if resp, err := s.app.HandleStream(ctx, change(tc.run)); err != nil || len(resp.BatchItemFailures) > 0 {
			t.Fatalf("%s: HandleStream: %+v, %v", tc.name, resp, err)
		}
		used := s.meter.Snapshot().Sub(before)
		got := map[string]int64{}
		for _, n := range used.Names() {
			if r := used.Op(n).Requests; r > 0 {
				got[n] = r
			}
		}
		t.Logf("%s: %d DynamoDB requests %v", tc.name, used.Total().Requests, got)
		if !maps.Equal(got, tc.want) {
			t.Errorf("%s: requests %v, want %v", tc.name, got, tc.want)
		}
	}
	if states, _, _ := rc.snapshot(); !slices.Equal(states, []string{"TASK_STATE_SUBMITTED"}) {
		t.Errorf("delivered %v, want the pending run's submitted state once", states)
	}
}
