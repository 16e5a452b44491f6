package serverless_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/serverless"
	"github.com/superstep/superstep/pkg/tick"
)

func sample(t *testing.T, name string) json.RawMessage {
	t.Helper()
	b, err := os.ReadFile("../../events/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sqsSample(t *testing.T, name string) events.SQSEvent {
	t.Helper()
	var ev events.SQSEvent
	if err := json.Unmarshal(sample(t, name), &ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

// The sample events in events/ (for `sam local invoke -e`) work with the
// handlers, one after the other: create a run through the HTTP API,
// execute its first tick, execute a task of its second step as a node
// task; start runs from EventBridge and from the start queue.
func TestSampleEvents(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{noPollers: true})
	ctx := t.Context()
	app := s.app

	out, err := app.HandleAPI(ctx, sample(t, "api-create-run.json"))
	if err != nil {
		t.Fatal(err)
	}
	resp, ok := out.(events.APIGatewayV2HTTPResponse)
	if !ok {
		t.Fatalf("HandleAPI answered an HTTP event with %T", out)
	}
	var run api.Run
	if err := json.Unmarshal([]byte(resp.Body), &run); err != nil || resp.StatusCode != http.StatusAccepted || run.RunID != "sample-counter" {
		t.Fatalf("create: %d %s (%v)", resp.StatusCode, resp.Body, err)
	}
	if resp.Headers["Location"] != "/v1/runs/sample-counter" || !strings.HasPrefix(resp.Headers["Content-Type"], "application/json") {
		t.Errorf("create response headers %v", resp.Headers)
	}

	before := s.meter.Snapshot()
	if r, err := app.HandleTick(ctx, sqsSample(t, "sqs-tick.json")); err != nil || len(r.BatchItemFailures) > 0 {
		t.Fatalf("sqs-tick.json: %+v %v", r, err)
	}
	used := s.meter.Snapshot().Sub(before)
	t.Logf("AWS requests of one tick (a superstep with one inline task): %d (%s)", used.Total().Requests, opsSummary(used.Names(), func(n string) int64 { return used.Op(n).Requests }))
	cp, err := app.Store.Load(ctx, "sample-counter", pregel.Latest)
	if err != nil || cp.Step != 1 {
		t.Fatalf("after the sample tick: step %v, %v; want step 1", cp, err)
	}

	// The node sample names the task of step 2, which the plan derives
	// from the run id, the step and the node. The counter's node is not
	// remote: the tick handler executes it, so the node function refuses
	// the task, says why, and reports it failed (for the dead-letter
	// queue) without executing or recording anything.
	g, _ := app.Service.Graphs.Get("counter")
	tasks := g.Plan(cp)
	nodeEv := sqsSample(t, "sqs-node.json")
	var nt tick.NodeTask
	if err := json.Unmarshal([]byte(nodeEv.Records[0].Body), &nt); err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 1 || nt.TaskID != tasks[0].ID || nt.Step != 2 {
		t.Fatalf("events/sqs-node.json names task %s of step %d; step 2 of sample-counter plans %+v", nt.TaskID, nt.Step, tasks)
	}
	r, err := app.HandleNode(ctx, nodeEv)
	if err != nil || len(r.BatchItemFailures) != 1 || r.BatchItemFailures[0].ItemIdentifier != nodeEv.Records[0].MessageId {
		t.Fatalf("sqs-node.json: %+v %v, want its record reported failed", r, err)
	}
	if logs := s.logs.String(); !strings.Contains(logs, `is of node \"count\", which is not remote`) || !strings.Contains(logs, "bad message: it can never be processed") {
		t.Errorf("no error log line says the task's node is not remote:\n%s", logs)
	}
	pending, err := app.Store.PendingTasks(ctx, "sample-counter", 2)
	if err != nil || len(pending) != 0 {
		t.Fatalf("after the refused node task: results %+v, %v; want none", pending, err)
	}
	if after, _ := app.Store.Load(ctx, "sample-counter", pregel.Latest); after == nil || after.Step != 1 {
		t.Fatalf("after the refused node task the run is at %+v, want step 1", after)
	}

	if out, err := app.HandleAPI(ctx, sample(t, "eventbridge-start-run.json")); err != nil || out != nil {
		t.Fatalf("eventbridge-start-run.json: %v %v", out, err)
	}
	eb, err := app.Service.Get(ctx, "eb-6a7e8feb-b491-4cf7-a9f1-bf3703467718")
	if err != nil || eb.Graph != "support-triage" || eb.ContextID != "T-1042" {
		t.Fatalf("run of the EventBridge event: %+v %v", eb, err)
	}

	startEv := sample(t, "sqs-start-run.json")
	for range 2 { // a redelivery starts no second run
		out, err := app.HandleAPI(ctx, startEv)
		if r, ok := out.(events.SQSEventResponse); err != nil || !ok || len(r.BatchItemFailures) > 0 {
			t.Fatalf("sqs-start-run.json: %+v %v", out, err)
		}
	}
	sq, err := app.Service.Get(ctx, "sqs-2e1424d4-f796-459a-8184-9c92662be6da")
	if err != nil || sq.Graph != "counter" || sq.ContextID != "nightly-batch" || sq.Version != 1 {
		t.Fatalf("run of the start message: %+v %v", sq, err)
	}
}

func httpEvent(method, path, body string) events.APIGatewayV2HTTPRequest {
	var ev events.APIGatewayV2HTTPRequest
	ev.Version = "2.0"
	ev.RawPath = path
	ev.RequestContext.HTTP.Method = method
	ev.RequestContext.HTTP.Path = path
	ev.RequestContext.Stage = "$default"
	ev.RequestContext.DomainName = "example.execute-api.us-east-1.amazonaws.com"
	ev.Headers = map[string]string{"content-type": "application/json"}
	ev.Body = body
	return ev
}

func raw(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Events that cannot be handled are refused the way their source expects
// (HTTP: a 4xx problem; EventBridge: an error; SQS: a batch item
// failure), with the reason logged.
func TestBadEvents(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{noPollers: true})
	ctx := t.Context()
	app := s.app

	for name, ev := range map[string]string{
		"not an object":    `[1, 2]`,
		"unknown shape":    `{"hello": "world"}`,
		"payload 1.0":      `{"version": "1.0", "httpMethod": "GET", "path": "/v1/graphs", "requestContext": {"httpMethod": "GET"}}`,
		"kinesis records":  `{"Records": [{"eventSource": "aws:kinesis"}]}`,
		"other eventbus":   `{"version": "0", "id": "1", "detail-type": "Object Created", "source": "aws.s3", "detail": {}}`,
		"unknown graph":    `{"version": "0", "id": "2", "detail-type": "superstep.StartRun", "detail": {"graph": "nope"}}`,
		"rejected input":   `{"version": "0", "id": "3", "detail-type": "superstep.StartRun", "detail": {"graph": "counter", "input": {"limit": 0}}}`,
		"unknown field":    `{"version": "0", "id": "4", "detail-type": "superstep.StartRun", "detail": {"graph": "counter", "inputs": {"limit": 2}}}`,
		"detail not a doc": `{"version": "0", "id": "5", "detail-type": "superstep.StartRun", "detail": "counter"}`,
		"deep input":       `{"version": "0", "id": "6", "detail-type": "superstep.StartRun", "detail": {"graph": "counter", "run_id": "deep", "input": {"limit": 1, "x": ` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}}}`,
		"repeated key":     `{"version": "0", "id": "7", "detail-type": "superstep.StartRun", "detail": {"graph": "counter", "run_id": "dup", "input": {"limit": 1}, "Input": {"limit": 2}}}`,
	} {
		out, err := app.HandleAPI(ctx, json.RawMessage(ev))
		if !errors.Is(err, serverless.ErrBadEvent) || out != nil {
			t.Errorf("%s: HandleAPI = %v, %v; want an error wrapping ErrBadEvent", name, out, err)
		}
	}
	for _, id := range []string{"deep", "dup"} {
		if _, err := app.Service.Get(ctx, id); !errors.Is(err, runs.ErrNotFound) {
			t.Errorf("run %q of a refused start event: %v; want none stored", id, err)
		}
	}
	if !strings.Contains(s.logs.String(), `limit must be between 1 and 1000, got 0`) {
		t.Errorf("the rejected input's reason is not logged:\n%s", s.logs.String())
	}

	// HTTP: problems, and the stage prefix of a named stage.
	check := func(name string, ev events.APIGatewayV2HTTPRequest, status int, contentType string) events.APIGatewayV2HTTPResponse {
		t.Helper()
		out, err := app.HandleAPI(ctx, raw(t, ev))
		resp, ok := out.(events.APIGatewayV2HTTPResponse)
		if err != nil || !ok || resp.StatusCode != status || resp.Headers["Content-Type"] != contentType {
			t.Errorf("%s: %+v %v; want %d %s", name, out, err, status, contentType)
		}
		return resp
	}
	bad64 := httpEvent("POST", "/v1/graphs/counter/runs", "%%%")
	bad64.IsBase64Encoded = true
	check("bad base64", bad64, http.StatusBadRequest, "application/problem+json")
	check("bad JSON body", httpEvent("POST", "/v1/graphs/counter/runs", `{"input": `), http.StatusBadRequest, "application/problem+json")
	check("unknown graph", httpEvent("POST", "/v1/graphs/nope/runs", `{}`), http.StatusNotFound, "application/problem+json")
	staged := httpEvent("GET", "/prod/v1/graphs", "")
	staged.RequestContext.Stage = "prod"
	resp := check("named stage", staged, http.StatusOK, "application/json")
	if !strings.Contains(resp.Body, `"counter"`) {
		t.Errorf("graph list: %s", resp.Body)
	}
	b64 := httpEvent("POST", "/v1/graphs/counter/runs", base64.StdEncoding.EncodeToString([]byte(`{"input": {"limit": 1}, "run_id": "b64"}`)))
	b64.IsBase64Encoded = true
	check("base64 body", b64, http.StatusAccepted, "application/json")

	// SQS: only the bad records fail; on a FIFO queue, the ones after a
	// failure fail with it, to keep their order.
	rec := func(id, body, arn string) events.SQSMessage {
		return events.SQSMessage{MessageId: id, Body: body, EventSource: "aws:sqs", EventSourceARN: arn}
	}
	std := "arn:aws:sqs:us-east-1:123456789012:superstep-starts"
	out, err := app.HandleAPI(ctx, raw(t, events.SQSEvent{Records: []events.SQSMessage{
		rec("m1", `{"graph": "counter", "input": {"limit": 1}, "run_id": "ok-1"}`, std),
		rec("m2", `not json`, std),
		rec("m3", `{"graph": "counter", "input": {"limit": 1}, "run_id": "ok-2"}`, std),
	}}))
	if r, ok := out.(events.SQSEventResponse); err != nil || !ok || len(r.BatchItemFailures) != 1 || r.BatchItemFailures[0].ItemIdentifier != "m2" {
		t.Errorf("start batch: %+v %v; want m2 failed", out, err)
	}
	fifo := "arn:aws:sqs:us-east-1:123456789012:superstep-ticks.fifo"
	r, err := app.HandleTick(ctx, events.SQSEvent{Records: []events.SQSMessage{
		rec("t1", `[]`, fifo),
		rec("t2", `{"run_id": "ok-1", "step": 1}`, fifo),
	}})
	if err != nil || len(r.BatchItemFailures) != 2 {
		t.Errorf("FIFO tick batch with a bad first record: %+v %v; want both failed", r, err)
	}
	if !strings.Contains(s.logs.String(), `the body is not a JSON object: \"[]\"`) {
		t.Errorf("the bad tick's reason is not logged:\n%s", s.logs.String())
	}
}
