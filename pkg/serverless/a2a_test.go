package serverless_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/superstep/superstep/examples/loop"
)

// The api function serves every graph as an A2A agent: a blocking send
// runs the graph through SQS, the tick function and DynamoDB, and the task
// comes back completed with the final state as an artifact.
func TestA2AOverTheServerlessPath(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})

	var card struct {
		Name         string `json:"name"`
		Capabilities struct {
			Streaming bool `json:"streaming"`
		} `json:"capabilities"`
	}
	if st := s.do("GET", "/a2a/"+loop.Name+"/.well-known/agent-card.json", nil, &card); st != http.StatusOK {
		t.Fatalf("agent card: status %d", st)
	}
	if card.Capabilities.Streaming {
		t.Error("the card says streaming, which API Gateway's HTTP API cannot do")
	}

	req := map[string]any{
		"jsonrpc": "2.0", "id": 1, "method": "message/send",
		"params": map[string]any{
			"message": map[string]any{
				"role": "user", "messageId": "m1", "kind": "message",
				"parts": []any{map[string]any{"kind": "data", "data": map[string]any{"limit": 2}}},
			},
			"configuration": map[string]any{"blocking": true},
		},
	}
	var resp struct {
		Result struct {
			ID     string `json:"id"`
			Status struct {
				State string `json:"state"`
			} `json:"status"`
			Artifacts []struct {
				Parts []struct {
					Data map[string]json.RawMessage `json:"data"`
				} `json:"parts"`
			} `json:"artifacts"`
		} `json:"result"`
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if st := s.do("POST", "/a2a/"+loop.Name, req, &resp); st != http.StatusOK || resp.Error != nil {
		t.Fatalf("message/send: status %d, error %+v", st, resp.Error)
	}
	if resp.Result.Status.State != "completed" {
		t.Fatalf("task %s is %q, want completed", resp.Result.ID, resp.Result.Status.State)
	}
	if len(resp.Result.Artifacts) == 0 || len(resp.Result.Artifacts[0].Parts) == 0 || string(resp.Result.Artifacts[0].Parts[0].Data["ticks"]) != "[1,2]" {
		t.Errorf("artifacts %+v, want the final state with ticks [1,2]", resp.Result.Artifacts)
	}
	if r := s.get(resp.Result.ID); r.Graph != loop.Name || r.Step != 2 {
		t.Errorf("the task is not the run: %+v", r.Run)
	}
}
