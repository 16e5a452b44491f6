package serverless_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/superstep/superstep/examples/loop"
)

// The api function serves the A2A HTTP+JSON binding beside JSON-RPC, as
// API Gateway hands it the requests (the template's /{proxy+} route takes
// every path, the binding's "message:send" and "tasks/{id}:cancel"
// included): a blocking message:send runs the graph through SQS, the tick
// function and DynamoDB; GET tasks/{id} reads it; message:stream is
// refused with what to use, since API Gateway buffers responses; the card
// lists the binding at the gateway's URL. The A2A 0.3 binding under
// {agent}/v1 too (proto names, a data part as 0.3 writes it).
func TestA2ARESTThroughAPIGateway(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	const domain = "abc123defg.execute-api.us-east-1.amazonaws.com"
	call := func(method, path, body string) (int, string) {
		t.Helper()
		resp := s.app.HandleHTTP(t.Context(), events.APIGatewayV2HTTPRequest{
			RawPath: path,
			Body:    body,
			Headers: map[string]string{"content-type": "application/json", "host": domain, "x-forwarded-proto": "https"},
			RequestContext: events.APIGatewayV2HTTPRequestContext{
				DomainName: domain,
				HTTP:       events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path},
			},
		})
		return resp.StatusCode, resp.Body
	}
	agent := "/a2a/" + loop.Name

	st, body := call("GET", agent+"/.well-known/agent-card.json", "")
	if st != http.StatusOK || !strings.Contains(body, `"protocolBinding": "HTTP+JSON"`) || !strings.Contains(body, "https://"+domain+agent) {
		t.Fatalf("card: %d %s, want an HTTP+JSON interface at https://%s%s", st, body, domain, agent)
	}
	if strings.Contains(body, `"GRPC"`) {
		t.Error("the card lists gRPC, which API Gateway cannot carry")
	}

	st, body = call("POST", agent+"/message:send", `{"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"data": {"limit": 2}}]}}`)
	var sent struct {
		Task struct {
			ID     string `json:"id"`
			Status struct {
				State string `json:"state"`
			} `json:"status"`
		} `json:"task"`
	}
	if st != http.StatusOK || json.Unmarshal([]byte(body), &sent) != nil || sent.Task.Status.State != "TASK_STATE_COMPLETED" {
		t.Fatalf("message:send: %d %s, want a completed task", st, body)
	}
	st, body = call("GET", agent+"/tasks/"+sent.Task.ID, "")
	if st != http.StatusOK || !strings.Contains(body, `"TASK_STATE_COMPLETED"`) || !strings.Contains(body, `"ticks":[1,2]`) {
		t.Errorf("GET tasks/%s: %d %s", sent.Task.ID, st, body)
	}
	st, body = call("POST", agent+"/tasks/"+sent.Task.ID+":cancel", "")
	if st != http.StatusBadRequest || !strings.Contains(body, "TASK_NOT_CANCELABLE") {
		t.Errorf("cancel a completed task: %d %s, want 400 TASK_NOT_CANCELABLE", st, body)
	}
	st, body = call("POST", agent+"/message:stream", `{"message": {"messageId": "m2", "role": "ROLE_USER", "parts": [{"data": {"limit": 2}}]}}`)
	if st != http.StatusBadRequest || !strings.Contains(body, "UNSUPPORTED_OPERATION") || !strings.Contains(body, "does not stream") {
		t.Errorf("message:stream behind API Gateway: %d %s, want 400 UNSUPPORTED_OPERATION", st, body)
	}
	st, body = call("GET", agent+"/tasks/nope", "")
	if st != http.StatusNotFound || !strings.Contains(body, "TASK_NOT_FOUND") || strings.Contains(body, "dynamo") {
		t.Errorf("unknown task: %d %s", st, body)
	}

	// The A2A 0.3 HTTP+JSON binding, under {agent}/v1, listed in the
	// card's 0.3 form.
	_, body = call("GET", agent+"/.well-known/agent-card.json", "")
	var card struct {
		AdditionalInterfaces []struct{ URL, Transport string } `json:"additionalInterfaces"`
	}
	if json.Unmarshal([]byte(body), &card) != nil || !slices.Contains(card.AdditionalInterfaces, struct{ URL, Transport string }{"https://" + domain + agent, "HTTP+JSON"}) {
		t.Errorf("0.3 additionalInterfaces %+v, want HTTP+JSON at https://%s%s", card.AdditionalInterfaces, domain, agent)
	}
	st, body = call("POST", agent+"/v1/message:send", `{"message": {"message_id": "m3", "role": "ROLE_USER", "content": [{"data": {"data": {"limit": 2}}}]}, "configuration": {"blocking": true}}`)
	if st != http.StatusOK || json.Unmarshal([]byte(body), &sent) != nil || sent.Task.Status.State != "TASK_STATE_COMPLETED" {
		t.Fatalf("0.3 message:send: %d %s, want a completed task", st, body)
	}
	if st, body = call("GET", agent+"/v1/tasks/"+sent.Task.ID, ""); st != http.StatusOK || !strings.Contains(body, `"TASK_STATE_COMPLETED"`) {
		t.Errorf("0.3 GET tasks/%s: %d %s", sent.Task.ID, st, body)
	}
	if st, body = call("POST", agent+"/v1/message:stream", `{"message": {"messageId": "m4", "role": "ROLE_USER", "content": [{"data": {"data": {"limit": 2}}}]}}`); st != http.StatusBadRequest || !strings.Contains(body, "UNSUPPORTED_OPERATION") {
		t.Errorf("0.3 message:stream behind API Gateway: %d %s, want 400 UNSUPPORTED_OPERATION", st, body)
	}
	if st, body = call("GET", agent+"/v1/tasks/nope", ""); st != http.StatusNotFound || !strings.Contains(body, "TASK_NOT_FOUND") || strings.Contains(body, "dynamo") {
		t.Errorf("0.3 unknown task: %d %s", st, body)
	}
}
