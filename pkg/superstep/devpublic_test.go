//go:build !superstep.lambda

package superstep

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	core "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
)

// TestDevPublicURL: `dev --public-url` makes every agent card (1.0 and
// 0.3 forms, every interface) advertise the public URL rather than the
// address the request came to, and the Host check accepts the public
// host (a tunnel that passes it on) while still refusing others.
func TestDevPublicURL(t *testing.T) {
	base := startDev(t, "--token", "", "--public-url", "https://agents.example.com/edge/", "--a2a-grpc-addr", "127.0.0.1:0")
	const agent = "https://agents.example.com/edge/a2a/counter"
	get := func(host, version string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, base+"/a2a/counter/.well-known/agent-card.json", nil)
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		if version != "" {
			req.Header.Set("A2A-Version", version)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, tc := range []struct{ host, version string }{{"", ""}, {"", "1.0"}, {"agents.example.com", ""}, {"AGENTS.example.com:443", "1.0"}} {
		code, body := get(tc.host, tc.version)
		if code != http.StatusOK {
			t.Fatalf("card with Host %q: %d %s", tc.host, code, body)
		}
		var card struct {
			URL                  string `json:"url"`
			SupportedInterfaces  []struct{ URL, ProtocolBinding string }
			AdditionalInterfaces []struct{ URL, Transport string }
		}
		if err := json.Unmarshal([]byte(body), &card); err != nil {
			t.Fatal(err)
		}
		if card.URL != agent {
			t.Errorf("Host %q A2A-Version %q: 0.3 url %q, want %s", tc.host, tc.version, card.URL, agent)
		}
		if len(card.SupportedInterfaces) < 4 || len(card.AdditionalInterfaces) != 2 {
			t.Errorf("interfaces %+v / %+v: want JSON-RPC, HTTP+JSON (1.0 and 0.3) and gRPC", card.SupportedInterfaces, card.AdditionalInterfaces)
		}
		for _, in := range card.SupportedInterfaces {
			if in.ProtocolBinding != "GRPC" && in.URL != agent {
				t.Errorf("1.0 interface %s at %s, want %s", in.ProtocolBinding, in.URL, agent)
			}
		}
		for _, in := range card.AdditionalInterfaces {
			if in.URL != agent {
				t.Errorf("0.3 interface %s at %s, want %s", in.Transport, in.URL, agent)
			}
		}
		if strings.Contains(body, "127.0.0.1:") && !strings.Contains(body, `"GRPC"`) {
			t.Errorf("the card still shows the listen address: %s", body)
		}
	}
	if code, body := get("evil.example", ""); code != http.StatusForbidden || strings.Contains(body, "agents.example.com") {
		t.Errorf("Host evil.example: %d %s, want 403", code, body)
	}

	// An A2A client that reached dev through the public host works.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := &http.Client{Transport: hostTransport{"agents.example.com"}}
	c, err := a2aclient.NewFromEndpoints(ctx, []*core.AgentInterface{{URL: base + "/a2a/counter", ProtocolBinding: core.TransportProtocolHTTPJSON, ProtocolVersion: core.Version}}, a2aclient.WithRESTTransport(client))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy()
	res, err := c.SendMessage(ctx, &core.SendMessageRequest{Message: core.NewMessage(core.MessageRoleUser, core.NewDataPart(map[string]any{"limit": 2}))})
	if task, ok := res.(*core.Task); err != nil || !ok || task.Status.State != core.TaskStateCompleted {
		t.Fatalf("SendMessage with Host agents.example.com: %v %+v", err, res)
	}
}

// hostTransport sends every request with the Host header host.
type hostTransport struct{ host string }

func (h hostTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Host = h.host
	return http.DefaultTransport.RoundTrip(r)
}

// dev refuses a --public-url that no client could use, saying what to
// fix, before it serves.
func TestDevPublicURLRefused(t *testing.T) {
	for _, tc := range []struct {
		url, want string
	}{
		{"agents.example.com", "must start with https:// or http://"},
		{"ftp://agents.example.com", "must start with https:// or http://"},
		{"https://", "names no host"},
		{"https:agents", "names no host"},
		{"https://agents.example.com/?x=1", "must have no query"},
		{"https://agents.example.com/#top", "must have no fragment"},
		{"https://me:pw@agents.example.com", "must not hold a user name or password"},
		{"https://agents.example.com:99999", "a port is 1 to 65535"},
		{"http://bad host/", "is not a URL"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			h := newHarness(t)
			r := h.run("dev", "--addr", "127.0.0.1:0", "--dir", t.TempDir(), "--public-url", tc.url).want(t, ExitUsage)
			if !strings.Contains(r.stderr, "--public-url") || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("--public-url %q:\n%s\nwant it to say %q", tc.url, r.stderr, tc.want)
			}
			if strings.Contains(r.stderr, "pw") {
				t.Errorf("the error repeats the password: %s", r.stderr)
			}
		})
	}
	// The local serverless mode serves its agents through the api
	// function's handler, which takes no public URL from dev.
	h := newHarness(t)
	r := h.run("dev", "--aws", "--addr", "127.0.0.1:0", "--public-url", "https://agents.example.com").want(t, ExitUsage)
	if !strings.Contains(r.stderr, "--public-url applies to the local dev server, not to --aws") {
		t.Errorf("dev --aws --public-url:\n%s", r.stderr)
	}
}
