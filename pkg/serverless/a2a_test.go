package serverless_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

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

// With an API token, the agent cards stay public (so that clients learn
// which auth they need) and declare the bearer scheme; the methods need
// the token. Both the HTTP handler and the Lambda's HTTP API handler.
func TestA2ACardPublicWithToken(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{token: "s3cret", noPollers: true})
	var card struct {
		SecuritySchemes map[string]struct {
			Type   string `json:"type"`
			Scheme string `json:"scheme"`
		} `json:"securitySchemes"`
	}
	if st := s.do("GET", "/a2a/"+loop.Name+"/.well-known/agent-card.json", nil, &card); st != http.StatusOK {
		t.Fatalf("agent card without the token: status %d", st)
	}
	if b := card.SecuritySchemes["bearer"]; b.Type != "http" || b.Scheme != "Bearer" {
		t.Errorf("securitySchemes %+v, want the bearer scheme (0.3 format without A2A-Version)", card.SecuritySchemes)
	}
	if st := s.do("POST", "/a2a/"+loop.Name, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": map[string]any{"id": "x"}}, nil); st != http.StatusUnauthorized {
		t.Errorf("tasks/get without the token: status %d, want 401", st)
	}
	resp := s.app.HandleHTTP(t.Context(), events.APIGatewayV2HTTPRequest{
		RawPath: "/a2a/" + loop.Name + "/.well-known/agent-card.json",
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET", Path: "/a2a/" + loop.Name + "/.well-known/agent-card.json"},
		},
		Headers: map[string]string{"host": "api.example.com"},
	})
	if resp.StatusCode != http.StatusOK {
		t.Errorf("agent card through HandleHTTP without the token: %d %s", resp.StatusCode, resp.Body)
	}
}

// The agent cards' URL names the host the event's request context names
// (API Gateway's or the function URL's domainName), never a Host or
// X-Forwarded-Host header the client chose: both handlers ignore them.
func TestA2ACardURLIgnoresForgedHost(t *testing.T) {
	t.Parallel()
	const domain = "abc123defg.execute-api.us-east-1.amazonaws.com"
	path := "/a2a/" + loop.Name + "/.well-known/agent-card.json"
	forged := map[string]string{"host": "evil.example", "x-forwarded-host": "evil2.example", "x-forwarded-proto": "https"}
	s := newStack(t, stackOptions{noPollers: true})

	check := func(t *testing.T, status int, body string) {
		t.Helper()
		if status != http.StatusOK {
			t.Fatalf("agent card: %d %s", status, body)
		}
		var card struct {
			URL string `json:"url"`
		}
		if err := json.Unmarshal([]byte(body), &card); err != nil {
			t.Fatalf("agent card: %v in %s", err, body)
		}
		if want := "https://" + domain + "/a2a/" + loop.Name; card.URL != want {
			t.Errorf("card url %q; want %q", card.URL, want)
		}
		if strings.Contains(body, "evil") {
			t.Errorf("the card echoes a forged host: %s", body)
		}
	}
	t.Run("HandleHTTP", func(t *testing.T) {
		resp := s.app.HandleHTTP(t.Context(), events.APIGatewayV2HTTPRequest{
			RawPath: path,
			Headers: forged,
			RequestContext: events.APIGatewayV2HTTPRequestContext{
				DomainName: domain,
				HTTP:       events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET", Path: path},
			},
		})
		check(t, resp.StatusCode, resp.Body)
	})
	t.Run("HandleFunctionURL", func(t *testing.T) {
		resp, err := s.app.HandleFunctionURL(t.Context(), &events.LambdaFunctionURLRequest{
			RawPath: path,
			Headers: forged,
			RequestContext: events.LambdaFunctionURLRequestContext{
				DomainName: domain,
				HTTP:       events.LambdaFunctionURLRequestContextHTTPDescription{Method: "GET", Path: path},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		check(t, resp.StatusCode, string(body))
	})
}
