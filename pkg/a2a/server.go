package a2a

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	core "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	agentpkg "github.com/superstep/superstep/pkg/agent"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// Pattern is the http.ServeMux pattern that routes every A2A request to a
// Server with the default path prefix:
//
//	apiHandler.Handle(a2a.Pattern, srv)
const Pattern = DefaultPathPrefix + "/"

// Defaults of the Server's options.
const (
	// DefaultPathPrefix is where the agents live: {prefix}/{graph}.
	DefaultPathPrefix = "/a2a"
	// DefaultMaxBodyBytes bounds a JSON-RPC request.
	DefaultMaxBodyBytes int64 = 1 << 20
	// DefaultBlockingTimeout bounds how long a blocking message/send
	// waits for its task to reach a terminal state or need input (or be
	// drained) before answering with the task as it stands (still
	// working): the server's request timeout for blocking calls. Behind a
	// proxy that cuts requests sooner, set WithBlockingTimeout under its
	// limit (APIGatewayBlockingTimeout).
	DefaultBlockingTimeout = 10 * time.Minute
	// APIGatewayBlockingTimeout is the blocking timeout under API
	// Gateway's 29-second integration limit; tasks that outlive it are
	// followed with GetTask, a stream or push notifications.
	APIGatewayBlockingTimeout = 25 * time.Second
	// DefaultCancelWait bounds how long tasks/cancel waits for a running
	// run to stop before answering with the task as it stands.
	DefaultCancelWait = 5 * time.Second
	// DefaultPollInterval is how often a run record is read while waiting
	// for a run without an event source.
	DefaultPollInterval = 500 * time.Millisecond
	// DefaultKeepAlive is the interval of SSE keep-alive comments.
	DefaultKeepAlive = 15 * time.Second
	// DefaultTextChannel is the channel that text parts of a message are
	// written to, when the graph has it and WithTextChannel does not say
	// otherwise.
	DefaultTextChannel = "message"
)

// safetyPoll is how often the record is re-read while an event source
// also reports the run's events, in case an event was missed (a full
// buffer, or the run continuing in another process).
const safetyPoll = 2 * time.Second

// Option configures a Server.
type Option func(*Server)

// WithEvents gives the Server the runs' event streams, used to stream
// progress and to notice at once when a run stops. The Server follows a
// run's stream with a runs.Cursor, as the HTTP API's streams, the CLI and
// the inspector do: live when src is runs.LiveEvents (the embedded
// embedded.Scheduler), polled every runs.DefaultCursorPoll otherwise (the
// DynamoDB table on the stream Lambda). Without it, or when a stream
// cannot be read, the Server reads the run record at intervals instead.
func WithEvents(src runs.EventReader) Option { return func(s *Server) { s.events = src } }

// WithStreaming says whether the transport serving the Server can stream
// Server-Sent Events. It is off by default: API Gateway HTTP APIs buffer
// Lambda responses, so the api Lambda leaves it off, and `superstep dev`
// turns it on. The agent card's streaming capability follows it, and with
// it off message/stream and tasks/resubscribe get "unsupported operation".
func WithStreaming(on bool) Option { return func(s *Server) { s.streaming = on } }

// WithBaseURL sets the public URL the server is reached at (scheme, host
// and any path before the prefix, e.g. "https://x.execute-api.../prod");
// New refuses one that ParseBaseURL refuses.
// Agent cards advertise {base}{prefix}/{graph}. Without it the URL is
// derived from each request: its Host and whether it came over TLS, and,
// under WithTrustForwardedHeaders, its X-Forwarded-Proto and
// X-Forwarded-Host headers.
func WithBaseURL(u string) Option {
	return func(s *Server) { s.baseURL = strings.TrimRight(u, "/") }
}

// ParseBaseURL checks a public URL given for WithBaseURL (a user's
// setting, such as `superstep dev --public-url`) and returns it without
// a trailing slash. It must be an absolute http or https URL with a
// host, and no user name or password, query or fragment; a path is kept
// (a proxy that serves the agents under it). The error says what to fix.
func ParseBaseURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "", fmt.Errorf("%q is not a URL; give the absolute URL clients reach this server at, such as https://agents.example.com", raw)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("%q must start with https:// or http://, such as https://agents.example.com", raw)
	case u.Opaque != "" || u.Host == "" || u.Hostname() == "":
		return "", fmt.Errorf("%q names no host; give the URL with its host, such as https://agents.example.com", raw)
	case u.User != nil:
		return "", errors.New("the URL must not hold a user name or password (it is shown to every client in the agent cards)")
	case u.RawQuery != "" || u.ForceQuery:
		return "", fmt.Errorf("%q must have no query (?...); agents are served at {URL}/a2a/{graph}", raw)
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return "", fmt.Errorf("%q must have no fragment (#...)", raw)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("%q has port %q; a port is 1 to 65535", raw, p)
		}
	}
	return strings.TrimRight(raw, "/"), nil
}

// WithPathPrefix changes where the agents are served (default "/a2a").
// Mount the Server at prefix+"/".
func WithPathPrefix(p string) Option {
	return func(s *Server) { s.prefix = "/" + strings.Trim(p, "/") }
}

// WithMaxBodyBytes bounds JSON-RPC requests (default DefaultMaxBodyBytes).
func WithMaxBodyBytes(n int64) Option { return func(s *Server) { s.maxBody = n } }

// WithTrustForwardedHeaders makes the agent cards' URL (without
// WithBaseURL) follow the X-Forwarded-Proto and X-Forwarded-Host headers
// of requests. Turn it on only behind a proxy that sets them (API
// Gateway, a load balancer): any client can send them, and a card that
// follows them advertises the client's choice of host. Off by default.
func WithTrustForwardedHeaders(on bool) Option {
	return func(s *Server) { s.trustForwarded, s.trustProto = on, on }
}

// WithTrustForwardedProto makes the agent cards' scheme (without
// WithBaseURL) follow the X-Forwarded-Proto header only, not
// X-Forwarded-Host: right behind API Gateway, which terminates TLS and
// sets the protocol header, while the Host it passes on is its own domain
// and an X-Forwarded-Host would come from the client.
func WithTrustForwardedProto(on bool) Option { return func(s *Server) { s.trustProto = on } }

// WithBlockingTimeout bounds the wait of a blocking message/send
// (default DefaultBlockingTimeout).
func WithBlockingTimeout(d time.Duration) Option { return func(s *Server) { s.blockFor = d } }

// WithCancelWait bounds how long tasks/cancel waits for a running task to
// stop (default DefaultCancelWait; 0 keeps the default, a negative value
// answers at once).
func WithCancelWait(d time.Duration) Option { return func(s *Server) { s.cancelWait = d } }

// WithPollInterval sets how often run records are read while waiting
// without an event source (default DefaultPollInterval).
func WithPollInterval(d time.Duration) Option { return func(s *Server) { s.poll = d } }

// WithTextChannel names the channel that receives the text of a message
// sent to graph, overriding the default: the graph's "message" channel if
// it has one. An empty channel makes the graph refuse text.
func WithTextChannel(graph, channel string) Option {
	return func(s *Server) { s.textChannels[graph] = channel }
}

// WithThreads says whether a message with a context id and no task id
// continues the conversation of that context: its run starts on the
// thread named by the context id (created if missing) from the thread's
// latest state (see runs.Service.CreateOnThread), so a chat client gets
// memory across messages. It is on by default when the Service keeps
// threads (runs.Service.Threads is set) and has no effect otherwise; off,
// a context id only groups tasks, each starting from empty state.
func WithThreads(on bool) Option { return func(s *Server) { s.threadsOff = !on } }

// StrategyParallel, the default strategy of WithThreadStrategy, starts a
// message whose context's thread has a working task as a task of its own
// beside it: in the same context (listed with it) but on no thread, from
// the message alone, as with WithThreads(false). The thread goes on from
// the task that holds it. A message beside a task that waits for input
// (input-required, auth-required) is refused as with runs.StrategyReject:
// that task's conversation expects its answer.
const StrategyParallel runs.Strategy = "parallel"

// ParseStrategy returns the strategy named s (see WithThreadStrategy):
// StrategyParallel or one of runs.Strategy's; empty means StrategyParallel.
func ParseStrategy(s string) (runs.Strategy, error) {
	switch st := runs.Strategy(s); st {
	case "", StrategyParallel:
		return StrategyParallel, nil
	case runs.StrategyReject, runs.StrategyEnqueue, runs.StrategyInterrupt, runs.StrategyRollback:
		return st, nil
	}
	return "", fmt.Errorf("strategy %q is not one of reject, enqueue, interrupt, rollback, parallel: %w", s, runs.ErrInvalid)
}

// WithThreadStrategy sets what a message does when its context's thread
// has an active task (a run pending, running, input-required or drained):
// StrategyParallel (the default) starts it beside a working task;
// runs.StrategyReject refuses it with an UnsupportedOperationError
// (-32004) naming the active task; runs.StrategyEnqueue queues it;
// runs.StrategyInterrupt drains the active task at its next superstep
// boundary and then starts; runs.StrategyRollback cancels the active task,
// discards its steps and then starts. New returns an error on any other
// value (check a strategy that comes from users with ParseStrategy first).
func WithThreadStrategy(st runs.Strategy) Option { return func(s *Server) { s.strategy = st } }

// WithBearerAuth declares in the agent cards that requests need an HTTP
// bearer token (as api.Config.Token enforces). It only describes the
// requirement; enforcing it is the job of the handler in front.
func WithBearerAuth(on bool) Option { return func(s *Server) { s.bearer = on } }

// WithAgentVersion sets the version the agent cards show (default
// "1.0.0").
func WithAgentVersion(v string) Option { return func(s *Server) { s.version = v } }

// WithProvider sets the provider the agent cards show.
func WithProvider(org, url string) Option {
	return func(s *Server) { s.provider = &core.AgentProvider{Org: org, URL: url} }
}

// WithLogger sets where internal errors are logged (default
// slog.Default()). Callers get a generic "internal error" instead.
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// Server serves the graphs of a runs.Service as A2A agents. Create it with
// [New]; it is safe for concurrent use.
type Server struct {
	svc       *runs.Service
	events    runs.EventReader
	streaming bool
	baseURL   string
	// trustForwarded, trustProto: cards follow X-Forwarded-Host, and
	// X-Forwarded-Proto.
	trustForwarded, trustProto bool
	prefix                     string
	maxBody                    int64
	blockFor                   time.Duration
	cancelWait                 time.Duration
	poll                       time.Duration
	textChannels               map[string]string
	threadsOff                 bool
	strategy                   runs.Strategy
	push                       *pusher // nil: no push notifications
	bearer                     bool
	grpcAddr                   string // WithGRPCAddress; "" when gRPC is not served
	version                    string
	provider                   *core.AgentProvider
	log                        *slog.Logger

	agents map[string]*agent
	mux    *http.ServeMux
}

// agent is one graph served as an agent.
type agent struct {
	graph *pregel.Graph
	text  string // channel receiving text parts; "" if none
	// declared: text parts become the input the graph declares for
	// text (pregel.TextInput: a user message in an agent's messages
	// channel) rather than a string in channel text.
	declared bool
	// messages is the graph's channel of agent messages
	// (agent.MessagesChannel), shown as the history of tasks on a
	// thread; "" if the graph has none.
	messages string
	h        *handler
	v1       http.Handler
	v03      http.Handler
	rest     http.Handler // the HTTP+JSON binding (A2A 1.0)
	rest03   http.Handler // the HTTP+JSON binding of A2A 0.3 (under /v1)
}

// New returns the A2A server for the graphs of svc. It returns an error,
// saying what to fix, if svc or its registry is nil or if the options are
// invalid (WithThreadStrategy naming no strategy). Mount it behind the
// HTTP API:
//
//	h, err := api.New(api.Config{Service: svc})
//	if err != nil {
//		return err
//	}
//	srv, err := a2a.New(svc, a2a.WithEvents(sched), a2a.WithStreaming(true))
//	if err != nil {
//		return err
//	}
//	h.Handle(a2a.Pattern, srv)
func New(svc *runs.Service, opts ...Option) (*Server, error) {
	if svc == nil || svc.Graphs == nil {
		return nil, errors.New("a2a: New needs a runs.Service with a registry (Service.Graphs)")
	}
	s := &Server{
		svc:          svc,
		prefix:       DefaultPathPrefix,
		textChannels: make(map[string]string),
		version:      "1.0.0",
	}
	for _, o := range opts {
		o(s)
	}
	st, err := ParseStrategy(string(s.strategy))
	if err != nil {
		return nil, fmt.Errorf("a2a: WithThreadStrategy: %w", err)
	}
	s.strategy = st
	if s.baseURL != "" {
		if _, err := ParseBaseURL(s.baseURL); err != nil {
			return nil, fmt.Errorf("a2a: WithBaseURL: %w", err)
		}
	}
	if s.maxBody <= 0 {
		s.maxBody = DefaultMaxBodyBytes
	}
	if s.blockFor <= 0 {
		s.blockFor = DefaultBlockingTimeout
	}
	switch {
	case s.cancelWait == 0:
		s.cancelWait = DefaultCancelWait
	case s.cancelWait < 0:
		s.cancelWait = 0
	}
	if s.poll <= 0 {
		s.poll = DefaultPollInterval
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.prefix == "/" {
		s.prefix = ""
	}
	transportOpts := []a2asrv.TransportOption{
		a2asrv.WithTransportKeepAlive(DefaultKeepAlive),
		a2asrv.WithTransportPanicHandler(s.panicked),
	}
	s.agents = make(map[string]*agent)
	for _, g := range svc.Graphs.List() {
		a := &agent{graph: g, text: s.textChannel(g)}
		a.declared = a.text != "" && a.text == g.TextChannel()
		if slices.Contains(g.Channels(), agentpkg.MessagesChannel) {
			a.messages = agentpkg.MessagesChannel
		}
		h := &handler{s: s, a: a}
		a.h = h
		a.v1 = a2asrv.NewJSONRPCHandler(h, transportOpts...)
		a.v03 = a2av0.NewJSONRPCHandler(h, transportOpts...)
		a.rest = a2asrv.NewRESTHandler(h, transportOpts...)
		a.rest03 = a2av0.NewRESTHandler(h, transportOpts...)
		s.agents[g.Name()] = a
	}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc(s.prefix+"/{graph}", s.serveRPC)
	s.mux.HandleFunc(s.prefix+"/{graph}"+a2asrv.WellKnownAgentCardPath, s.serveCard)
	s.mux.HandleFunc(s.prefix+"/{graph}/{rest...}", s.serveREST)
	s.mux.HandleFunc(s.prefix+"/", s.serveIndex)
	return s, nil
}

// threads reports whether messages with a context id continue its
// thread (WithThreads).
func (s *Server) threads() bool { return !s.threadsOff && s.svc.Threads != nil }

// Pattern is the http.ServeMux pattern to mount the Server at: its path
// prefix and everything under it (Pattern, with the default prefix).
func (s *Server) Pattern() string { return s.prefix + "/" }

// textChannel picks the channel receiving a graph's text parts: the one
// WithTextChannel names, else the one the graph declares with
// pregel.TextInput, else DefaultTextChannel if the graph has it.
func (s *Server) textChannel(g *pregel.Graph) string {
	ch, ok := s.textChannels[g.Name()]
	if !ok {
		ch = DefaultTextChannel
		if d := g.TextChannel(); d != "" {
			ch = d
		}
	}
	for _, c := range g.Channels() {
		if c == ch {
			return ch
		}
	}
	if ok && ch != "" {
		s.log.Warn("a2a: text channel is not a channel of the graph; the agent refuses text", "graph", g.Name(), "channel", ch)
	}
	return ""
}

// ServeHTTP implements [http.Handler].
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	started := false
	rec := &startedWriter{ResponseWriter: w, started: &started}
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.ErrorContext(r.Context(), "a2a: panic serving request", "path", r.URL.Path, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			switch {
			case started:
			case s.isREST(r.URL.Path):
				writeRESTError(w, http.StatusInternalServerError, core.NewError(core.ErrInternalError, "internal error"))
			default:
				writeRPCError(w, nil, codeInternal, "internal error")
			}
		}
	}()
	s.mux.ServeHTTP(rec, r)
}

// isREST reports whether path is one of the HTTP+JSON binding's: under
// an agent's URL, not its card.
func (s *Server) isREST(path string) bool {
	rest, ok := strings.CutPrefix(path, s.prefix+"/")
	_, sub, nested := strings.Cut(rest, "/")
	return ok && nested && sub != strings.TrimPrefix(a2asrv.WellKnownAgentCardPath, "/")
}

// panicked turns a panic in the SDK's transport or our handler into an
// internal error for the caller.
func (s *Server) panicked(v any) error {
	s.log.Error("a2a: panic handling JSON-RPC call", "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	return core.ErrInternalError
}

// startedWriter records whether the response has started.
type startedWriter struct {
	http.ResponseWriter
	started *bool
}

func (w *startedWriter) WriteHeader(code int) {
	*w.started = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *startedWriter) Write(p []byte) (int, error) {
	*w.started = true
	return w.ResponseWriter.Write(p)
}

// Flush lets the SDK stream Server-Sent Events.
func (w *startedWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		*w.started = true
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the underlying writer.
func (w *startedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// lookup returns the agent named by the request path, or writes a 404.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request) (*agent, bool) {
	name := r.PathValue("graph")
	a, ok := s.agents[name]
	if !ok {
		writeProblem(w, r, http.StatusNotFound, fmt.Sprintf("there is no agent %q; agents are %s", name, strings.Join(s.names(), ", ")))
		return nil, false
	}
	return a, true
}

func (s *Server) names() []string {
	out := make([]string, 0, len(s.agents))
	for _, g := range s.svc.Graphs.List() {
		out = append(out, g.Name())
	}
	return out
}

// serveIndex answers paths under the prefix that name no agent resource.
func (s *Server) serveIndex(w http.ResponseWriter, r *http.Request) {
	writeProblem(w, r, http.StatusNotFound, fmt.Sprintf("there is nothing at %s; each agent has its card at %s/{graph}%s, its JSON-RPC endpoint at POST %s/{graph} and its HTTP+JSON binding under %s/{graph}/ (POST message:send, GET tasks/{id}, ...)",
		r.URL.Path, s.prefix, a2asrv.WellKnownAgentCardPath, s.prefix, s.prefix))
}
