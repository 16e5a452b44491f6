package a2a

import (
	"context"
	"crypto/subtle"
	"fmt"
	"iter"
	"net"
	"net/url"
	"runtime/debug"
	"strings"

	core "github.com/a2aproject/a2a-go/v2/a2a"
	a2agrpc "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"
)

// WithGRPCAddress says that the A2A gRPC binding is served at addr
// (HOST:PORT, by a server from [Server.NewGRPCServer]): the agent cards
// then list a GRPC interface at that address, the agent's graph name as
// its tenant. A HOST that is empty or unspecified (":9090",
// "0.0.0.0:9090") is replaced in the cards by the host the card was
// asked from. gRPC needs a listener of its own (HTTP/2 with trailers),
// which API Gateway's HTTP APIs and Lambda function URLs do not give:
// only `superstep dev` serves it.
func WithGRPCAddress(addr string) Option { return func(s *Server) { s.grpcAddr = addr } }

// GRPCConfig configures the gRPC server of [Server.NewGRPCServer].
type GRPCConfig struct {
	// Token is the bearer token every call must carry in its
	// "authorization" metadata ("Bearer TOKEN"), as the HTTP API requires
	// it in its Authorization header; empty: none.
	Token string
}

// NewGRPCServer returns a gRPC server serving the A2A 1.0 gRPC binding
// (a2a-go's a2agrpc) for every agent of s: a call's tenant names the
// graph (the cards' GRPC interface gives it; a2a-go's client sends it).
// It applies the checks of the HTTP bindings: the bearer token, the
// request size limit (WithMaxBodyBytes), and panics become an internal
// error for the caller. Serve it on a listener of its own and list its
// address with WithGRPCAddress.
func (s *Server) NewGRPCServer(cfg GRPCConfig, opts ...grpc.ServerOption) *grpc.Server {
	auth := func(ctx context.Context) error {
		if cfg.Token == "" {
			return nil
		}
		md, _ := metadata.FromIncomingContext(ctx)
		for _, v := range md.Get("authorization") {
			tok, ok := strings.CutPrefix(v, "Bearer ")
			if ok && subtle.ConstantTimeCompare([]byte(tok), []byte(cfg.Token)) == 1 {
				return nil
			}
		}
		return grpcstatus.Error(codes.Unauthenticated, `this server needs a bearer token: send metadata "authorization: Bearer TOKEN"`)
	}
	recovered := func(method string, v any) error {
		s.log.Error("a2a: panic handling gRPC call", "method", method, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		return grpcstatus.Error(codes.Internal, "internal error")
	}
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (resp any, err error) {
		if err := auth(ctx); err != nil {
			return nil, err
		}
		if t, ok := req.(tenanted); ok {
			ctx = context.WithValue(ctx, tenantKey{}, &tenantOf{t.GetTenant()})
		}
		defer func() {
			if v := recover(); v != nil {
				resp, err = nil, recovered(info.FullMethod, v)
			}
		}()
		resp, err = next(ctx, req)
		return resp, publicStatus(err)
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, next grpc.StreamHandler) (err error) {
		if err := auth(ss.Context()); err != nil {
			return err
		}
		defer func() {
			if v := recover(); v != nil {
				err = recovered(info.FullMethod, v)
			}
		}()
		t := &tenantOf{}
		return publicStatus(next(srv, &tenantStream{ServerStream: ss, ctx: context.WithValue(ss.Context(), tenantKey{}, t), tenant: t}))
	}
	all := append([]grpc.ServerOption{
		grpc.MaxRecvMsgSize(int(s.maxBody)),
		grpc.ChainUnaryInterceptor(unary),
		grpc.ChainStreamInterceptor(stream),
	}, opts...)
	g := grpc.NewServer(all...)
	a2agrpc.NewHandler(&grpcRouter{s: s}).RegisterWith(g)
	return g
}

// publicStatus replaces the words of a request the SDK could not convert
// ("failed to convert request: …", which may name Go types) with what to
// fix, keeping the code.
func publicStatus(err error) error {
	st, ok := grpcstatus.FromError(err)
	if !ok || err == nil {
		return err
	}
	if st.Code() == codes.InvalidArgument && strings.HasPrefix(st.Message(), "failed to convert request") {
		return grpcstatus.Error(codes.InvalidArgument, "the request does not fit the A2A 1.0 proto (a message needs a messageId, a role and parts with content)")
	}
	return err
}

// grpcAddress is the address the cards list for the gRPC binding: the
// configured one, its host replaced by the card's own host when it is
// empty or unspecified.
func (s *Server) grpcAddress(endpoint string) string {
	host, port, err := net.SplitHostPort(s.grpcAddr)
	if err != nil {
		return s.grpcAddr
	}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		return s.grpcAddr
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Hostname() == "" {
		return s.grpcAddr
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// tenanted is a request of the gRPC binding: each names its tenant.
type tenantKey struct{}

type tenanted interface{ GetTenant() string }

// tenantOf holds the tenant of the call's request as received: a2a-go
// v2.4.0's gRPC handler leaves it out of the CancelTask and
// SubscribeToTask requests it hands on.
type tenantOf struct{ name string }

// tenantStream records the tenant of a streaming call's request.
type tenantStream struct {
	grpc.ServerStream
	ctx    context.Context
	tenant *tenantOf
}

func (s *tenantStream) Context() context.Context { return s.ctx }

func (s *tenantStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if t, ok := m.(tenanted); ok && err == nil {
		s.tenant.name = t.GetTenant()
	}
	return err
}

// grpcRouter serves the gRPC binding: one A2AService for every agent, the
// tenant of each request naming the graph.
type grpcRouter struct{ s *Server }

var _ a2asrv.RequestHandler = (*grpcRouter)(nil)

// agent returns the handler of the agent that tenant names (or, when
// the SDK left it out, the tenant of the call's request).
func (g *grpcRouter) agent(ctx context.Context, tenant string) (*handler, error) {
	if t, ok := ctx.Value(tenantKey{}).(*tenantOf); ok && tenant == "" {
		tenant = t.name
	}
	if a, ok := g.s.agents[tenant]; ok {
		return a.h, nil
	}
	if tenant == "" {
		return nil, core.NewError(core.ErrInvalidParams, fmt.Sprintf("the request names no agent: set its tenant to the graph (the agent card's GRPC interface gives it); agents are %s", strings.Join(g.s.names(), ", ")))
	}
	return nil, core.NewError(core.ErrInvalidParams, fmt.Sprintf("tenant %q names no agent; agents are %s", tenant, strings.Join(g.s.names(), ", ")))
}

func (g *grpcRouter) GetTask(ctx context.Context, req *core.GetTaskRequest) (*core.Task, error) {
	h, err := g.agent(ctx, req.Tenant)
	if err != nil {
		return nil, err
	}
	return h.GetTask(ctx, req)
}

func (g *grpcRouter) ListTasks(ctx context.Context, req *core.ListTasksRequest) (*core.ListTasksResponse, error) {
	h, err := g.agent(ctx, req.Tenant)
	if err != nil {
		return nil, err
	}
	return h.ListTasks(ctx, req)
}

func (g *grpcRouter) CancelTask(ctx context.Context, req *core.CancelTaskRequest) (*core.Task, error) {
	h, err := g.agent(ctx, req.Tenant)
	if err != nil {
		return nil, err
	}
	return h.CancelTask(ctx, req)
}

func (g *grpcRouter) SendMessage(ctx context.Context, req *core.SendMessageRequest) (core.SendMessageResult, error) {
	h, err := g.agent(ctx, req.Tenant)
	if err != nil {
		return nil, err
	}
	return h.SendMessage(ctx, req)
}

// streams checks that the server streams, before the SDK starts a stream.
func (g *grpcRouter) streams(method string) error {
	if g.s.streaming {
		return nil
	}
	return core.NewError(core.ErrUnsupportedOperation, method+" is not supported: this server does not stream (the agent card says streaming: false); use SendMessage, then GetTask")
}

func (g *grpcRouter) SubscribeToTask(ctx context.Context, req *core.SubscribeToTaskRequest) iter.Seq2[core.Event, error] {
	h, err := g.agent(ctx, req.Tenant)
	if err == nil {
		err = g.streams("SubscribeToTask")
	}
	if err != nil {
		return func(yield func(core.Event, error) bool) { yield(nil, err) }
	}
	return h.SubscribeToTask(ctx, req)
}

func (g *grpcRouter) SendStreamingMessage(ctx context.Context, req *core.SendMessageRequest) iter.Seq2[core.Event, error] {
	h, err := g.agent(ctx, req.Tenant)
	if err == nil {
		err = g.streams("SendStreamingMessage")
	}
	if err != nil {
		return func(yield func(core.Event, error) bool) { yield(nil, err) }
	}
	return h.SendStreamingMessage(ctx, req)
}

func (g *grpcRouter) GetTaskPushConfig(ctx context.Context, req *core.GetTaskPushConfigRequest) (*core.PushConfig, error) {
	h, err := g.agent(ctx, req.Tenant)
	if err != nil {
		return nil, err
	}
	return h.GetTaskPushConfig(ctx, req)
}

func (g *grpcRouter) ListTaskPushConfigs(ctx context.Context, req *core.ListTaskPushConfigRequest) (*core.ListTaskPushConfigResponse, error) {
	h, err := g.agent(ctx, req.Tenant)
	if err != nil {
		return nil, err
	}
	return h.ListTaskPushConfigs(ctx, req)
}

func (g *grpcRouter) CreateTaskPushConfig(ctx context.Context, req *core.PushConfig) (*core.PushConfig, error) {
	h, err := g.agent(ctx, req.Tenant)
	if err != nil {
		return nil, err
	}
	return h.CreateTaskPushConfig(ctx, req)
}

func (g *grpcRouter) DeleteTaskPushConfig(ctx context.Context, req *core.DeleteTaskPushConfigRequest) error {
	h, err := g.agent(ctx, req.Tenant)
	if err != nil {
		return err
	}
	return h.DeleteTaskPushConfig(ctx, req)
}

func (g *grpcRouter) GetExtendedAgentCard(ctx context.Context, req *core.GetExtendedAgentCardRequest) (*core.AgentCard, error) {
	h, err := g.agent(ctx, req.Tenant)
	if err != nil {
		return nil, err
	}
	return h.GetExtendedAgentCard(ctx, req)
}
