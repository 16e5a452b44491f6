package superstep

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/superstep/superstep/pkg/lambdafn"
	"github.com/superstep/superstep/pkg/longterm"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// DefaultStore is where run and resume keep their state, and the file
// dev serves from its --dir.
const DefaultStore = ".superstep/superstep.db"

// WithInitCommand adds `init DIR`, which scaffolds a project of the
// user's own (package scaffold). The superstep command has it; a
// project's own binary usually does not need it.
func WithInitCommand() Option { return func(s *settings) { s.initCmd = true } }

// An Option configures the program [Main] and [Run] start: the graphs it
// serves and what a deployment customises. Options apply in order; a
// later one of the same kind replaces an earlier one, except [WithGraphs],
// [WithCompiledGraphs], [WithMiddleware] and [WithRoute], which add.
type Option func(*settings)

// settings is what the options chose.
type settings struct {
	builders    []func() (*pregel.Graph, error)
	logger      *slog.Logger
	storePath   string
	token       string
	middleware  []func(http.Handler) http.Handler
	routes      []lambdafn.Route
	function    string
	lambdaStart func(handler any) // tests replace lambda.Start
	initCmd     bool
	name        string // the program's name in help and hints
	longTerm    []longterm.Option

	reg *runs.Registry // built by Run from builders
}

// WithName sets the program's name as its help and hints show it
// ("resume it with: NAME resume …"). [Main] sets it to the base name of
// the executable (os.Args[0]); [Run] defaults to "superstep".
func WithName(name string) Option { return func(s *settings) { s.name = name } }

// WithGraphs adds the graphs the program serves, each given by the
// function that compiles it, such as
//
//	func Graph() (*pregel.Graph, error) { return pregel.NewGraph[State]("orders")....Compile() }
//
// Every graph needs a name of its own: two graphs with one name stop the
// program with exit code 2 before it does anything.
func WithGraphs(graphs ...func() (*pregel.Graph, error)) Option {
	return func(s *settings) { s.builders = append(s.builders, graphs...) }
}

// WithCompiledGraphs adds graphs already compiled.
func WithCompiledGraphs(graphs ...*pregel.Graph) Option {
	return func(s *settings) {
		for _, g := range graphs {
			s.builders = append(s.builders, func() (*pregel.Graph, error) { return g, nil })
		}
	}
}

// WithLogger sets the logger of the servers (dev, dev --aws, the Lambda
// functions). Default: text on stderr at dev's --log-level; JSON on
// stdout at LOG_LEVEL in Lambda (CloudWatch Logs).
func WithLogger(l *slog.Logger) Option { return func(s *settings) { s.logger = l } }

// WithStorePath sets the default SQLite file of run, resume and graph
// (their --store) and of dev (the file of that name in its --dir, which
// defaults to the file's directory). Default: [DefaultStore].
func WithStorePath(path string) Option { return func(s *settings) { s.storePath = path } }

// WithToken sets the bearer token the HTTP API requires when neither the
// --token flag nor the environment ([TokenEnv] for dev, API_TOKEN in
// Lambda) gives one, and the token the runs commands present. Default:
// none.
func WithToken(token string) Option { return func(s *settings) { s.token = token } }

// WithMiddleware wraps the HTTP API of dev, dev --aws and the api
// function, e.g. to log requests or check a session. Middlewares given
// first run outermost.
func WithMiddleware(mw func(http.Handler) http.Handler) Option {
	return func(s *settings) { s.middleware = append(s.middleware, mw) }
}

// WithRoute serves h at pattern (an [http.ServeMux] pattern such as
// "GET /healthz") beside the API routes, in dev, dev --aws and the api
// function. A pattern that collides with an API route stops the program
// with exit code 2.
func WithRoute(pattern string, h http.Handler) Option {
	return func(s *settings) { s.routes = append(s.routes, lambdafn.Route{Pattern: pattern, Handler: h}) }
}

// WithFunction fixes the Lambda function the program serves when Lambda
// starts it (api, tick, node, sweep or stream), for a binary built for one
// function. Without it the function comes from the [FunctionEnv]
// environment variable, which the template sets; if both are given they
// must agree.
func WithFunction(name string) Option { return func(s *settings) { s.function = name } }

// WithEmbedder enables semantic search in the long-term store
// (pkg/longterm) of every runtime: items put are embedded by e (their
// fields named, or whole), and /v1/store/items/search, `store search` and
// the memory tools' recall rank by similarity. pkg/agent/bedrock's
// NewEmbedder is Titan Text Embeddings V2 on Amazon Bedrock (its callers
// need bedrock:InvokeModel on the model).
func WithEmbedder(e longterm.Embedder, fields ...string) Option {
	return func(s *settings) { s.longTerm = append(s.longTerm, longterm.WithEmbedder(e, fields...)) }
}

// newSettings applies opts and compiles the graphs.
func newSettings(opts []Option) (*settings, error) {
	s := &settings{storePath: DefaultStore}
	for _, o := range opts {
		if o != nil {
			o(s)
		}
	}
	if s.storePath == "" {
		return nil, errors.New("WithStorePath: the path is empty")
	}
	if len(s.builders) == 0 {
		return nil, errors.New("no graphs: pass them with superstep.WithGraphs(yourpkg.Graph, ...)")
	}
	reg, err := lambdafn.Compile(s.builders...)
	if err != nil {
		return nil, err
	}
	s.reg = reg
	return s, nil
}

// wrap applies the middlewares to h, the first given outermost.
func (s *settings) wrap(h http.Handler) http.Handler {
	for i := len(s.middleware) - 1; i >= 0; i-- {
		h = s.middleware[i](h)
	}
	return h
}

// mount adds the extra routes to mux, reporting a pattern the mux
// refuses as an error.
func (s *settings) mount(mux interface{ Handle(string, http.Handler) }) error {
	return lambdafn.Mount(mux, s.routes)
}
