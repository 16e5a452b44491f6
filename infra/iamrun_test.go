package infra

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/examples/triage"
	"github.com/superstep/superstep/internal/mototest"
	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/serverless"
)

// PipeState is the state of twoRemoteGraph.
type PipeState struct {
	Log  []string `json:"log" reduce:"append"`
	Blob string   `json:"blob"`
}

// twoRemoteGraph has two consecutive steps whose tasks are all remote:
// the node function that commits the first sends the second's task (to
// the node queue); the one that commits the second sends a tick for the
// inline step after it. The first writes a value too large for a step
// item (its chunks are written with BatchWriteItem, read with
// BatchGetItem).
func twoRemoteGraph(t *testing.T) *pregel.Graph {
	t.Helper()
	g := pregel.NewGraph[PipeState]("two-remote")
	g.AddFunc("first", func(context.Context, PipeState) (PipeState, error) {
		return PipeState{Log: []string{"first"}, Blob: strings.Repeat("x", 100_000)}, nil
	}, pregel.Remote())
	g.AddFunc("second", func(_ context.Context, s PipeState) (PipeState, error) {
		return PipeState{Log: []string{"second"}, Blob: s.Blob[:10]}, nil
	}, pregel.Remote())
	g.AddFunc("last", func(context.Context, PipeState) (PipeState, error) {
		return PipeState{Log: []string{"last"}}, nil
	})
	g.AddEdge(pregel.Start, "first").AddEdge("first", "second").AddEdge("second", "last").AddEdge("last", pregel.End)
	cg, err := g.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return cg
}

// roleExceptions are grants that no call of a function's code uses, with
// why they are kept: keyed by function ("*": every one), statement Sid
// and action ("*": every action of the statement).
var roleExceptions = map[[3]string]string{
	{"*", "Logs", "*"}: "Lambda writes the function's logs with its role (CloudWatch Logs), not the function's code",
	{"*", "ReceiveTicks", "sqs:GetQueueAttributes"}:         "the SQS event source mapping reads the queue's attributes with the role; the local pollers do not",
	{"*", "ReceiveTasks", "sqs:GetQueueAttributes"}:         "the SQS event source mapping reads the queue's attributes with the role",
	{"*", "ReceiveStartMessages", "sqs:GetQueueAttributes"}: "the SQS event source mapping reads the queue's attributes with the role",
	{"SweepFunction", "ReadTableStream", "*"}:               "the DynamoDB stream event source mapping reads the stream with the role; the handler gets its records",
	{"SweepFunction", "FailedBatches", "*"}:                 "the stream event source mapping sends a failed batch's description to its on-failure destination with the role",
	{"ApiFunction", "FailedStartRunEvents", "*"}:            "Lambda sends a failed asynchronous (EventBridge) invocation to the on-failure destination with the role",
	{"NodeFunction", "FailedTaskInvocations", "*"}:          "Lambda sends a node task's asynchronous invocation (NodeDispatch invoke) it gave up on to the on-failure destination with the role; TestPermissionsInvokeDispatch checks it",
	{"SchedulerRole", "FailedFirings", "*"}:                 "EventBridge Scheduler sends a firing it could not deliver after its retries to the dead-letter queue with the role; no code of ours does",
}

func roleException(fn, sid, action string) (string, bool) {
	for _, k := range [][3]string{{fn, sid, action}, {fn, sid, "*"}, {"*", sid, action}, {"*", sid, "*"}} {
		if why, ok := roleExceptions[k]; ok {
			return why, true
		}
	}
	return "", false
}

// TestPermissionsPerFunction runs the five functions' handlers, each with
// its own AWS clients, against moto through a recorder that notes every
// call each one makes (action and resource), and evaluates each call
// against that function's own role in the template, expanded for the
// test's table and queues. Any call its role would deny fails, and so
// does any grant of a role that no call of its function uses (but the
// documented roleExceptions: what Lambda itself does with the role). A
// statement of TableDataPolicy, shared by api, stream, tick and node,
// must be used by one of them.
func TestPermissionsPerFunction(t *testing.T) {
	srv := mototest.Start(t)
	tp := loadTemplate(t)
	// SchedulerRole: EventBridge Scheduler sending a firing, which the
	// test does with the role's identity (moto does not fire schedules).
	rec := newCallRecorder(t, srv.URL, append(slices.Clone(functions), "SchedulerRole"))
	recURL := startRecorder(t, rec)
	const prefix = "iam"
	cfg, err := serverless.Provision(t.Context(), srv.Config, serverless.Resources{Prefix: prefix, VisibilityTimeout: 10 * time.Second, Schedules: true})
	if err != nil {
		t.Fatal(err)
	}
	cfg.PushAllowPrivateNetworks = true
	all, err := examples.All()
	if err != nil {
		t.Fatal(err)
	}
	reg, err := runs.NewRegistry(append(all, twoRemoteGraph(t))...)
	if err != nil {
		t.Fatal(err)
	}
	apps := map[string]*serverless.App{}
	for _, fn := range functions {
		app, err := serverless.New(serverless.Options{Config: cfg, AWS: functionConfig(srv.Config, recURL, fn), Graphs: reg, Streaming: fn == "StreamFunction",
			Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))})
		if err != nil {
			t.Fatal(err)
		}
		apps[fn] = app
	}
	// The event source mappings: each function's poller, with its role.
	po := serverless.PollOptions{TickConcurrency: 2, NodeConcurrency: 2, IdleDelay: 50 * time.Millisecond, Timeout: 30 * time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	pollDone := make(chan struct{}, 3)
	for _, p := range []interface{ Run(context.Context) error }{apps["TickFunction"].Pollers(po).Tick, apps["NodeFunction"].Pollers(po).Node, apps["ApiFunction"].Pollers(po).Start} {
		go func() {
			if err := p.Run(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("poller: %v", err)
			}
			pollDone <- struct{}{}
		}()
	}
	t.Cleanup(func() {
		cancel()
		for range 3 {
			<-pollDone
		}
	})
	apiURL, streamURL := serve(t, apps["ApiFunction"]), serve(t, apps["StreamFunction"])

	// api: runs with two consecutive all-remote steps, listed by graph
	// and by status; a thread made and deleted; a start message and a
	// StartRun event.
	for _, id := range []string{"pipe-1", "pipe-2"} {
		call(t, apiURL, "POST", "/v1/graphs/two-remote/runs", map[string]any{"run_id": id}, http.StatusAccepted)
	}
	for _, id := range []string{"pipe-1", "pipe-2"} {
		r := waitRun(t, apiURL, id, pregel.RunCompleted)
		var log []string
		if err := json.Unmarshal(r.Values["log"], &log); err != nil || strings.Join(log, ",") != "first,second,last" {
			t.Errorf("run %s: log %s (%v), want first,second,last", id, r.Values["log"], err)
		}
	}
	for _, base := range []string{apiURL, streamURL} {
		call(t, base, "GET", "/v1/runs?graph=two-remote", nil, http.StatusOK)
		call(t, base, "GET", "/v1/runs?status=completed", nil, http.StatusOK)
	}
	testSQS := sqs.NewFromConfig(srv.Config)
	if _, err := testSQS.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(cfg.StartQueueURL), MessageBody: aws.String(`{"graph":"counter","run_id":"from-queue","input":{"limit":2}}`)}); err != nil {
		t.Fatal(err)
	}
	ev, err := os.ReadFile("../events/eventbridge-start-run.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := apps["ApiFunction"].HandleAPI(t.Context(), ev); err != nil {
		t.Fatalf("StartRun event: %v", err)
	}
	waitRun(t, apiURL, "from-queue", pregel.RunCompleted)

	// Schedules: made, listed, read, paused and deleted through the api
	// function; a firing sent by EventBridge Scheduler with its role (the
	// test stands in for it) starts a run.
	call(t, apiURL, "POST", "/v1/schedules", map[string]any{"name": "nightly", "graph": "counter", "schedule": "0 2 * * *", "timezone": "Europe/Paris", "input": map[string]int{"limit": 2}}, http.StatusCreated)
	call(t, apiURL, "GET", "/v1/schedules", nil, http.StatusOK)
	call(t, apiURL, "POST", "/v1/schedules/nightly/pause", nil, http.StatusOK)
	sch, err := scheduler.NewFromConfig(srv.Config).GetSchedule(t.Context(), &scheduler.GetScheduleInput{Name: aws.String("nightly"), GroupName: aws.String(cfg.ScheduleGroup)})
	if err != nil {
		t.Fatal(err)
	}
	firing := strings.ReplaceAll(aws.ToString(sch.Target.Input), "<aws.scheduler.scheduled-time>", "2026-01-06T01:00:00Z")
	asScheduler := sqs.NewFromConfig(functionConfig(srv.Config, recURL, "SchedulerRole"))
	if _, err := asScheduler.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(cfg.StartQueueURL), MessageBody: aws.String(firing)}); err != nil {
		t.Fatal(err)
	}
	waitRun(t, apiURL, "sched.nightly.20260106T010000Z", pregel.RunCompleted)
	call(t, apiURL, "DELETE", "/v1/schedules/nightly", nil, http.StatusNoContent)

	// Threads, on both functions that serve the API; the stream function
	// also starts a run and streams one.
	for i, base := range []string{apiURL, streamURL} {
		th := []string{"th-api", "th-stream"}[i]
		call(t, base, "POST", "/v1/threads", api.CreateThreadRequest{ThreadID: th}, http.StatusCreated)
		call(t, base, "POST", "/v1/threads/"+th+"/runs", api.ThreadRunRequest{Graph: "two-remote", RunID: th + "-run"}, http.StatusAccepted)
		waitRun(t, apiURL, th+"-run", pregel.RunCompleted)
		call(t, base, "DELETE", "/v1/threads/"+th, nil, http.StatusNoContent)
	}
	call(t, streamURL, "POST", "/v1/graphs/two-remote/runs", map[string]any{"run_id": "pipe-3"}, http.StatusAccepted)
	waitRun(t, apiURL, "pipe-3", pregel.RunCompleted)
	if body := call(t, streamURL, "GET", "/v1/runs/pipe-3/stream", nil, http.StatusOK); !strings.Contains(body, "completed") {
		t.Errorf("stream of pipe-3: %q, want it to end completed", body)
	}

	// An A2A task with a push config (the api function), interrupted;
	// the sweep delivers its notification.
	var got atomic.Int32
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(receiver.Close)
	raw := call(t, apiURL, "POST", "/a2a/"+triage.Name, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": map[string]any{
		"message":       map[string]any{"messageId": "m1", "role": "ROLE_USER", "parts": []any{map[string]any{"text": "I was charged twice for my order"}}},
		"configuration": map[string]any{"taskPushNotificationConfig": map[string]any{"id": "hook", "url": receiver.URL, "token": "tok"}},
	}}, http.StatusOK)
	var sent struct {
		Result struct {
			Task struct {
				ID string `json:"id"`
			} `json:"task"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(raw), &sent); err != nil || sent.Result.Task.ID == "" {
		t.Fatalf("SendMessage answered %s", raw)
	}
	task := sent.Result.Task.ID
	waitRun(t, apiURL, task, pregel.RunInterrupted)
	sweep := apps["SweepFunction"]
	keys := func(pk, sk string) map[string]events.DynamoDBAttributeValue {
		return map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute(pk), "sk": events.NewStringAttribute(sk)}
	}
	stream := func(recs ...events.DynamoDBEventRecord) {
		t.Helper()
		for i := range recs {
			recs[i].EventID, recs[i].Change.SequenceNumber = "ev", "1000"
		}
		resp, err := sweep.HandleStream(t.Context(), events.DynamoDBEvent{Records: recs})
		if err != nil || len(resp.BatchItemFailures) > 0 {
			t.Fatalf("HandleStream: %+v, %v", resp, err)
		}
	}
	stream(events.DynamoDBEventRecord{EventName: "MODIFY", Change: events.DynamoDBStreamRecord{Keys: keys("RUN#"+task, "~RUN"),
		NewImage: map[string]events.DynamoDBAttributeValue{"run_status": events.NewStringAttribute("interrupted")},
		OldImage: map[string]events.DynamoDBAttributeValue{"run_status": events.NewStringAttribute("running")}}})
	if got.Load() == 0 {
		t.Errorf("the sweep delivered no push notification for task %s", task)
	}

	// The sweep purges an expired run and an expired thread (TTL deletes
	// their records; the test's own client stands in for it).
	testDDB := dynamodb.NewFromConfig(srv.Config)
	call(t, apiURL, "POST", "/v1/threads", api.CreateThreadRequest{ThreadID: "th-old"}, http.StatusCreated)
	call(t, apiURL, "POST", "/v1/threads/th-old/runs", api.ThreadRunRequest{Graph: "two-remote", RunID: "th-old-run"}, http.StatusAccepted)
	waitRun(t, apiURL, "th-old-run", pregel.RunCompleted)
	ttl := func(pk, sk string) events.DynamoDBEventRecord {
		if _, err := testDDB.DeleteItem(t.Context(), &dynamodb.DeleteItemInput{TableName: aws.String(cfg.Table), Key: map[string]ddbtypes.AttributeValue{
			"pk": &ddbtypes.AttributeValueMemberS{Value: pk}, "sk": &ddbtypes.AttributeValueMemberS{Value: sk}}}); err != nil {
			t.Fatal(err)
		}
		return events.DynamoDBEventRecord{EventName: "REMOVE", Change: events.DynamoDBStreamRecord{Keys: keys(pk, sk)},
			UserIdentity: &events.DynamoDBUserIdentity{Type: "Service", PrincipalID: "dynamodb.amazonaws.com"}}
	}
	stream(ttl("RUN#pipe-1", "~RUN"))
	stream(ttl("THREAD#th-old", "~THREAD"))
	cancel()

	// Every call, against its function's own role.
	calls := rec.snapshot()
	rec.mu.Lock()
	bad := rec.bad
	rec.mu.Unlock()
	for _, b := range bad {
		t.Errorf("a request the recorder could not read: %s", b)
	}
	d := newDeployment(t, tp, prefix, srv.URL)
	grants := map[string][]grant{}
	for _, fn := range functions {
		grants[fn] = roleGrantsOf(t, tp, d, fn)
	}
	grants["SchedulerRole"] = grantsOfRole(t, tp, d, "SchedulerRole")
	byFn := map[string]int{}
	for _, c := range calls {
		byFn[c.Function]++
		if !allowed(grants[c.Function], c.Action, c.Resource) {
			t.Errorf("%s calls %s on %s, which its role does not allow", c.Function, c.Action, c.Resource)
		}
	}
	for _, fn := range append(slices.Clone(functions), "SchedulerRole") {
		if byFn[fn] == 0 {
			t.Errorf("%s made no AWS call: the check ran nothing of it", fn)
		}
	}
	// Every grant, used: per function for its own statements; for a
	// shared managed policy, by one of the functions it is attached to.
	type use struct{ policy, sid, action, resource string }
	used, users := map[use]bool{}, map[use][]string{}
	for _, fn := range append(slices.Clone(functions), "SchedulerRole") {
		for _, g := range grants[fn] {
			shared := !strings.Contains(g.Policy, "/")
			for _, a := range g.Actions {
				for _, r := range g.Resources {
					owner := fn
					if shared {
						owner = ""
					}
					u := use{g.Policy + "@" + owner, g.Sid, a, r}
					users[u] = append(users[u], fn)
					for _, c := range calls {
						if c.Function == fn && wildcardMatch(a, c.Action, true) && wildcardMatch(r, c.Resource, false) {
							used[u] = true
						}
					}
				}
			}
		}
	}
	for u, fns := range users {
		if used[u] {
			continue
		}
		if why, ok := roleException(fns[0], u.sid, u.action); ok && len(fns) == 1 {
			t.Logf("kept unused by the code: %s %s %s on %s: %s", fns[0], u.sid, u.action, u.resource, why)
			continue
		}
		t.Errorf("%v: statement %s (%s) grants %s on %s, which no call of theirs uses: remove it, or add it to roleExceptions with the reason", fns, u.sid, u.policy, u.action, u.resource)
	}
	if t.Failed() {
		for _, c := range calls {
			t.Logf("recorded: %s %s %s", c.Function, c.Action, c.Resource)
		}
	}
}

// serve serves app's HTTP API on a local listener.
func serve(t *testing.T, app *serverless.App) string {
	t.Helper()
	s := httptest.NewServer(app)
	t.Cleanup(s.Close)
	return s.URL
}

// call sends a JSON request and returns the body; a status other than
// want fails the test.
func call(t *testing.T, base, method, path string, body any, want int) string {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, resp.StatusCode, want, raw)
	}
	return string(raw)
}

// waitRun polls a run until it has status st (a final other status fails).
func waitRun(t *testing.T, base, id string, st pregel.RunStatus) api.RunDetail {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var r api.RunDetail
		req, _ := http.NewRequestWithContext(t.Context(), "GET", base+"/v1/runs/"+id, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			if err := json.Unmarshal(raw, &r); err != nil {
				t.Fatal(err)
			}
			if r.Status == st {
				return r
			}
			if r.Status != st && (r.Status == pregel.RunFailed || r.Status == pregel.RunCompleted || r.Status == pregel.RunCancelled) {
				t.Fatalf("run %s is %s (%s), want %s", id, r.Status, r.Error, st)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s: not %s after 60s (last %d %s)", id, st, resp.StatusCode, raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
