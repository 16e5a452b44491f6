package a2a_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	core "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"

	"github.com/superstep/superstep/pkg/a2a"
	"github.com/superstep/superstep/pkg/runs"
)

// bearerTransport adds a bearer token to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func getCard(t *testing.T, url, version string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if version != "" {
		req.Header.Set("A2A-Version", version)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// TestPublicCardWithToken: with a token, the card is public and declares
// the bearer scheme in the format of the version asked for (0.3 when no
// A2A-Version is sent, spec 1.0 §3.6.2), and clients of both versions
// read it and then call the agent with the token.
func TestPublicCardWithToken(t *testing.T) {
	const token = "s3cret-token"
	e := newEnv(t, envConfig{token: token, opts: []a2a.Option{a2a.WithBearerAuth(true)}})
	cardURL := e.agentURL("chat") + "/.well-known/agent-card.json"

	for _, version := range []string{"", "0.3", "1.0"} {
		status, body := getCard(t, cardURL, version)
		if status != http.StatusOK {
			t.Fatalf("card without a token (A2A-Version %q): %d %s", version, status, body)
		}
		var raw struct {
			SecuritySchemes map[string]map[string]any `json:"securitySchemes"`
		}
		if err := json.Unmarshal(body, &raw); err != nil {
			t.Fatal(err)
		}
		bearer := raw.SecuritySchemes["bearer"]
		if version == "1.0" {
			if bearer["httpAuthSecurityScheme"] == nil || bearer["type"] != nil {
				t.Errorf("A2A-Version 1.0: securitySchemes %v, want the 1.0 format", raw.SecuritySchemes)
			}
		} else if bearer["type"] != "http" || bearer["scheme"] != "Bearer" {
			t.Errorf("A2A-Version %q: securitySchemes %v, want the 0.3 format", version, raw.SecuritySchemes)
		}
		// Both versions' parsers read every answer.
		for name, parse := range map[string]agentcard.Parser{"0.3": a2av0.NewAgentCardParser(), "1.0": agentcard.DefaultCardParser} {
			card, err := parse(body)
			if err != nil {
				t.Fatalf("A2A-Version %q: the %s parser: %v", version, name, err)
			}
			scheme, ok := card.SecuritySchemes["bearer"].(core.HTTPAuthSecurityScheme)
			if !ok || scheme.Scheme != "Bearer" || len(card.SecurityRequirements) != 1 {
				t.Errorf("A2A-Version %q, %s parser: schemes %+v, requirements %+v", version, name, card.SecuritySchemes, card.SecurityRequirements)
			}
		}
	}

	// The agent's URL, read with GET, is its card too.
	if status, body := getCard(t, e.agentURL("chat"), ""); status != http.StatusOK || !strings.Contains(string(body), `"securitySchemes"`) {
		t.Errorf("GET of the agent's URL without a token: %d %s", status, body)
	}
	// The methods still need the token.
	if resp := rpc(t, e.agentURL("chat"), `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}`); resp.status != http.StatusUnauthorized {
		t.Errorf("GetTask without a token: HTTP %d, want 401", resp.status)
	}

	// An a2a-go 0.3-only client: reads the card as 0.3, then sends with
	// the token.
	ctx := context.Background()
	status, body := getCard(t, cardURL, "")
	if status != http.StatusOK {
		t.Fatal(status)
	}
	card, err := a2av0.NewAgentCardParser()(body)
	if err != nil {
		t.Fatal(err)
	}
	var v03 []*core.AgentInterface
	for _, in := range card.SupportedInterfaces {
		if in.ProtocolVersion == a2av0.Version {
			v03 = append(v03, in)
		}
	}
	card.SupportedInterfaces = v03
	c, err := a2aclient.NewFromCard(ctx, card, a2av0.WithJSONRPCTransport(a2av0.JSONRPCTransportConfig{Client: &http.Client{Transport: bearerTransport{token}}}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Destroy() }()
	task := send(t, c, text("hi"), nil)
	wantState(t, task, core.TaskStateCompleted)
}

// TestWithBaseURLChecked: a base URL no client could use is refused by
// New, saying what to fix; a usable one loses its trailing slash.
func TestWithBaseURLChecked(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://agents.example.com/", "https://agents.example.com"},
		{"http://127.0.0.1:8080/edge", "http://127.0.0.1:8080/edge"},
		{"agents.example.com", "must start with https:// or http://"},
		{"https://?x", "names no host"},
		{"https://a.example/?x=1", "must have no query"},
		{"https://a.example/#x", "must have no fragment"},
		{"https://u:secret@a.example", "must not hold a user name or password"},
	} {
		got, err := a2a.ParseBaseURL(tc.in)
		switch {
		case err == nil && got != tc.want:
			t.Errorf("ParseBaseURL(%q) = %q, want %q", tc.in, got, tc.want)
		case err != nil && (!strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "secret")):
			t.Errorf("ParseBaseURL(%q): %v, want it to say %q", tc.in, err, tc.want)
		case err != nil:
			reg, rerr := runs.NewRegistry(sumGraph(t))
			if rerr != nil {
				t.Fatal(rerr)
			}
			svc := &runs.Service{Graphs: reg, Runs: runs.NewMemoryStore()}
			if _, nerr := a2a.New(svc, a2a.WithBaseURL(tc.in)); nerr == nil || !strings.Contains(nerr.Error(), tc.want) {
				t.Errorf("New(WithBaseURL(%q)): %v, want it refused saying %q", tc.in, nerr, tc.want)
			}
		}
	}
}
