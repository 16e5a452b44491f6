//go:build !superstep.lambda

package superstep

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	core "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	a2agrpc "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// TestDevA2ABindings: `superstep dev --a2a-grpc-addr` serves each agent
// over HTTP+JSON and gRPC beside JSON-RPC, the card lists both, and
// a2a-go's clients send, get and stream over each, with the token; without
// it they are refused.
func TestDevA2ABindings(t *testing.T) {
	base := startDev(t, "--a2a-grpc-addr", "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	card, err := agentcard.DefaultResolver.Resolve(ctx, base+"/a2a/counter")
	if err != nil {
		t.Fatal(err)
	}
	found := map[core.TransportProtocol]*core.AgentInterface{}
	for _, in := range card.SupportedInterfaces {
		if in.ProtocolVersion == core.Version {
			found[in.ProtocolBinding] = in
		}
	}
	if in := found[core.TransportProtocolHTTPJSON]; in == nil || in.URL != base+"/a2a/counter" {
		t.Fatalf("card lists HTTP+JSON at %+v, want %s/a2a/counter", in, base)
	}
	if in := found[core.TransportProtocolGRPC]; in == nil || !strings.HasPrefix(in.URL, "127.0.0.1:") || in.Tenant != "counter" {
		t.Fatalf("card lists gRPC at %+v, want 127.0.0.1:PORT, tenant counter", in)
	}
	for _, b := range []core.TransportProtocol{core.TransportProtocolHTTPJSON, core.TransportProtocolGRPC} {
		t.Run(string(b), func(t *testing.T) {
			c1 := *card
			c1.SupportedInterfaces = []*core.AgentInterface{found[b]}
			client := func(opts ...a2aclient.FactoryOption) *a2aclient.Client {
				opts = append(opts, a2agrpc.WithGRPCTransport(grpc.WithTransportCredentials(insecure.NewCredentials())))
				c, err := a2aclient.NewFromCard(ctx, &c1, opts...)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = c.Destroy() })
				return c
			}
			msg := func() *core.SendMessageRequest {
				return &core.SendMessageRequest{Message: core.NewMessage(core.MessageRoleUser, core.NewDataPart(map[string]any{"limit": 2}))}
			}
			_, err := client().SendMessage(ctx, msg())
			switch {
			case err == nil:
				t.Error("without the token: accepted")
			case b == core.TransportProtocolGRPC && status.Code(err) != codes.Unauthenticated && !errors.Is(err, core.ErrUnauthenticated):
				t.Errorf("without the token: %v, want Unauthenticated", err)
			case b == core.TransportProtocolHTTPJSON && !errors.Is(err, core.ErrUnauthenticated):
				// The API's 401 in the binding's error object, not a
				// problem document the client reads as a server error.
				t.Errorf("without the token: %v, want unauthenticated", err)
			}
			c := client(a2aclient.WithCallInterceptors(devToken("tok")))
			res, err := c.SendMessage(ctx, msg())
			task, ok := res.(*core.Task)
			if err != nil || !ok || task.Status.State != core.TaskStateCompleted {
				t.Fatalf("SendMessage: %v %+v", err, res)
			}
			got, err := c.GetTask(ctx, &core.GetTaskRequest{ID: task.ID})
			if err != nil || got.Status.State != core.TaskStateCompleted {
				t.Fatalf("GetTask: %v %+v", err, got)
			}
			var last core.Event
			for ev, err := range c.SendStreamingMessage(ctx, msg()) {
				if err != nil {
					t.Fatalf("stream: %v", err)
				}
				last = ev
			}
			if st, ok := last.(*core.TaskStatusUpdateEvent); !ok || st.Status.State != core.TaskStateCompleted {
				t.Errorf("stream ended with %#v, want completed", last)
			}
		})
	}
	// The REST routes are behind the token too (the API's 401, in the
	// binding's error object).
	resp, err := http.Get(base + "/a2a/counter/tasks")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Error struct {
			Status string `json:"status"`
		} `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != http.StatusUnauthorized || body.Error.Status != "UNAUTHENTICATED" || resp.Header.Get("WWW-Authenticate") == "" {
		t.Errorf("GET /a2a/counter/tasks without the token: %s %+v, want 401 UNAUTHENTICATED with WWW-Authenticate", resp.Status, body)
	}
}

// devToken is an a2a-go call interceptor sending a bearer token.
type devToken string

func (d devToken) Before(ctx context.Context, req *a2aclient.Request) (context.Context, any, error) {
	req.ServiceParams.Append("Authorization", "Bearer "+string(d))
	return ctx, nil, nil
}

func (devToken) After(context.Context, *a2aclient.Response) error { return nil }
