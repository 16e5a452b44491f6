package pregel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
)

// Start and End are the virtual first and last nodes of every graph.
const (
	Start = "__start__"
	End   = "__end__"
)

// ErrInvalidGraph is wrapped by every error Compile returns.
var ErrInvalidGraph = errors.New("pregel: invalid graph")

// Builder assembles a graph over state S. S is a struct whose exported
// fields are the channels, named by their json tag; a field's `reduce` tag
// names its reducer ("append", "merge", "sum", "last" or one registered
// with [Builder.Reducer]); without one, a write replaces the value.
//
// Builder methods record mistakes and Compile reports them all at once.
type Builder[S any] struct {
	name        string
	description string
	schema      *schema[S]
	reducers    map[string]Reducer
	// appendReducers names the reducers registered with AppendReducer.
	appendReducers map[string]bool
	nodes          map[string]*builderNode[S]
	order          []string
	edges          [][2]string
	joins          []join
	routers        []*builderRouter[S]
	fanouts        []*builderFanOut[S]
	before         []func(context.Context, NodeInfo, S) Decision
	after          []func(context.Context, NodeReport, S)
	validate       func(S) error
	version        string
	nodeRenames    [][2]string
	channelRenames [][2]string
	migrations     []migration
	errs           []error
}

type builderNode[S any] struct {
	node Node[S]
	cfg  nodeConfig
}

type builderRouter[S any] struct {
	from    string
	targets []string
	fn      func(context.Context, S) ([]string, error)
}

type builderFanOut[S any] struct {
	from, to string
	fn       func(context.Context, S) ([]any, error)
	// emptyEnds: no items plan no task (the branch ends), rather than
	// one skipped task of to.
	emptyEnds bool
	// opts holds the options given, the completion policy among them
	// (fanpolicy.go).
	opts fanOutOptions
	// static holds the items of a fan-out over fixed items
	// (AddFanOutOver); nil otherwise.
	static []any
}

type join struct {
	To   string   `json:"to"`
	From []string `json:"from"`
}

// NewGraph starts a graph named name over state S.
func NewGraph[S any](name string) *Builder[S] {
	b := &Builder[S]{name: name, reducers: builtinReducers(), nodes: make(map[string]*builderNode[S])}
	sc, err := newSchema[S]()
	if err != nil {
		b.errs = append(b.errs, err)
	}
	b.schema = sc
	if name == "" || strings.ContainsAny(name, "/ \t\n") {
		b.errs = append(b.errs, fmt.Errorf("graph name %q must be non-empty, without spaces or slashes", name))
	}
	return b
}

// Describe sets the graph's description, shown in listings and agent cards.
func (b *Builder[S]) Describe(description string) *Builder[S] {
	b.description = description
	return b
}

// Reducer registers a custom reducer that fields can name in their
// `reduce` tag.
func (b *Builder[S]) Reducer(name string, r Reducer) *Builder[S] {
	if _, ok := b.reducers[name]; ok || r == nil {
		b.errs = append(b.errs, fmt.Errorf("reducer %q: already defined or nil", name))
		return b
	}
	b.reducers[name] = r
	return b
}

// AppendReducer registers, like [Builder.Reducer], a reducer whose values
// are JSON arrays that updates mostly extend at the end (the messages of a
// conversation, an event log). Stores keep the value of a channel with
// such a reducer in segments and write, at each step that changes it, only
// the segments from the first one the step changed: a step that appends k
// elements stores those k, whatever the array's length. The built-in
// "append" reducer is one. A reducer registered with Reducer has its
// channel stored whole at every step that changes it.
//
// Nothing is required of r for correctness: a step that rewrites the
// array from its start stores it whole. Values that are not arrays are
// stored whole.
func (b *Builder[S]) AppendReducer(name string, r Reducer) *Builder[S] {
	b.Reducer(name, r)
	if r != nil {
		if b.appendReducers == nil {
			b.appendReducers = map[string]bool{}
		}
		b.appendReducers[name] = true
	}
	return b
}

// ValidateInput sets a check of a run's input: a run whose input fails it
// is rejected before it starts, with an error wrapping ErrInvalidInput.
func (b *Builder[S]) ValidateInput(fn func(S) error) *Builder[S] {
	b.validate = fn
	return b
}

// AddNode adds a node.
func (b *Builder[S]) AddNode(name string, n Node[S], opts ...NodeOption) *Builder[S] {
	switch {
	case name == "" || name == Start || name == End:
		b.errs = append(b.errs, fmt.Errorf("node name %q is reserved or empty; choose another", name))
		return b
	case b.nodes[name] != nil:
		b.errs = append(b.errs, fmt.Errorf("node %q is added twice; node names must be unique", name))
		return b
	case n == nil:
		b.errs = append(b.errs, fmt.Errorf("node %q is nil", name))
		return b
	}
	cfg := nodeConfig{}
	if d, ok := n.(Describer); ok {
		cfg.info = d.Describe()
	}
	for _, o := range opts {
		o(&cfg)
	}
	cfg.info.ID = name
	b.nodes[name] = &builderNode[S]{node: n, cfg: cfg}
	b.order = append(b.order, name)
	return b
}

// AddFunc adds a plain function as a node.
func (b *Builder[S]) AddFunc(name string, fn func(ctx context.Context, state S) (S, error), opts ...NodeOption) *Builder[S] {
	if fn == nil {
		return b.AddNode(name, nil, opts...)
	}
	return b.AddNode(name, NodeFunc[S](fn), opts...)
}

// AddEdge makes to run in the superstep after from finishes (completed or
// skipped). from may be Start; to may be End.
func (b *Builder[S]) AddEdge(from, to string) *Builder[S] {
	b.edges = append(b.edges, [2]string{from, to})
	return b
}

// AddJoin makes to run once every node in from has finished (completed or
// skipped) since to last ran. A cancelled predecessor never finishes, so
// the join does not run.
func (b *Builder[S]) AddJoin(to string, from ...string) *Builder[S] {
	if len(from) == 0 {
		b.errs = append(b.errs, fmt.Errorf("join into %q has no predecessors", to))
		return b
	}
	b.joins = append(b.joins, join{To: to, From: slices.Clone(from)})
	return b
}

// AddConditionalEdges routes from a node: after from finishes, router
// returns the names of the nodes to run next (or End, or none). targets
// lists every name the router may return.
func (b *Builder[S]) AddConditionalEdges(from string, router func(ctx context.Context, state S) ([]string, error), targets ...string) *Builder[S] {
	if router == nil || len(targets) == 0 {
		b.errs = append(b.errs, fmt.Errorf("conditional edges from %q need a router and the targets it may return", from))
		return b
	}
	b.routers = append(b.routers, &builderRouter[S]{from: from, targets: slices.Clone(targets), fn: router})
	return b
}

// AddFanOut runs one task of node to per item that fn returns, all in the
// superstep after from finishes; each task reads its item with [Arg].
// Results reach the state through reducers, so the channels to writes
// need one (a join or edge after to collects them). When fn returns no
// items, one skipped task of to is planned, so that the edges, joins and
// routers after to still fire; [EmptyFanOutEnds] ends the branch instead.
func (b *Builder[S]) AddFanOut(from, to string, fn func(ctx context.Context, state S) ([]any, error), opts ...FanOutOption) *Builder[S] {
	if fn == nil {
		b.errs = append(b.errs, fmt.Errorf("fan-out from %q to %q needs a function", from, to))
		return b
	}
	f := &builderFanOut[S]{from: from, to: to, fn: fn}
	var o fanOutOptions
	for _, opt := range opts {
		opt(&o)
	}
	f.emptyEnds, f.opts = o.emptyEnds, o
	b.fanouts = append(b.fanouts, f)
	return b
}

// AddFanOutOver is AddFanOut over fixed items: one task of to per item,
// every run. Compile checks the options against the number of items (a
// MinSuccesses larger than it is refused).
func (b *Builder[S]) AddFanOutOver(from, to string, items []any, opts ...FanOutOption) *Builder[S] {
	fixed := slices.Clone(items)
	if fixed == nil {
		fixed = []any{}
	}
	b.AddFanOut(from, to, func(context.Context, S) ([]any, error) { return fixed, nil }, opts...)
	if n := len(b.fanouts); n > 0 && b.fanouts[n-1].from == from && b.fanouts[n-1].to == to {
		b.fanouts[n-1].static = fixed
	}
	return b
}

// FanOutOption configures AddFanOut: EmptyFanOutEnds, and the completion
// policies ToleratedFailures, ToleratedFailurePercent, MinSuccesses and
// FanOutOutcomes (see fanpolicy.go).
type FanOutOption func(*fanOutOptions)

type fanOutOptions struct {
	emptyEnds bool
	// Completion policy (fanpolicy.go).
	tolerate    int
	tolerateSet bool
	tolPct      float64
	tolPctSet   bool
	min         int
	minSet      bool
	outcomes    string
}

// EmptyFanOutEnds makes a fan-out that has no items plan nothing: the
// branch ends at its source, as at an edge to End, instead of running a
// skipped task of its target (which costs a superstep and fires what
// follows the target). Use it when the target's successors have nothing
// to do without items, e.g. an agent's tool node after a model turn
// without tool calls; not when a join waits for the target.
func EmptyFanOutEnds() FanOutOption { return func(o *fanOutOptions) { o.emptyEnds = true } }

// BeforeNode adds a graph hook called before every node: it may let the
// node run, skip it or cancel it, with a reason.
func (b *Builder[S]) BeforeNode(fn func(ctx context.Context, node NodeInfo, state S) Decision) *Builder[S] {
	b.before = append(b.before, fn)
	return b
}

// AfterNode adds a graph hook called after every node with its outcome and
// its writes.
func (b *Builder[S]) AfterNode(fn func(ctx context.Context, report NodeReport, update S)) *Builder[S] {
	b.after = append(b.after, fn)
	return b
}

// CompileOption configures Compile.
type CompileOption func(*Graph)

// MaxSteps bounds the supersteps of a run (default 100); a run that reaches
// it fails with ErrStepLimit.
func MaxSteps(n int) CompileOption { return func(g *Graph) { g.maxSteps = n } }

// Concurrency bounds the tasks of one superstep that run at once
// (default 16).
func Concurrency(n int) CompileOption { return func(g *Graph) { g.concurrency = n } }

// Compile checks the graph and returns its runnable form. Every error
// wraps ErrInvalidGraph and says what to fix.
func (b *Builder[S]) Compile(opts ...CompileOption) (*Graph, error) {
	errs := slices.Clone(b.errs)
	if b.schema == nil {
		return nil, fmt.Errorf("%w %q: %w", ErrInvalidGraph, b.name, errors.Join(errs...))
	}
	g := &Graph{
		name:        b.name,
		description: b.description,
		channels:    b.schema.names(),
		stateType:   reflect.TypeFor[S](),
		reducers:    make(map[string]Reducer),
		nodes:       make(map[string]*node, len(b.nodes)),
		order:       slices.Clone(b.order),
		edges:       make(map[string][]string),
		joinsOf:     make(map[string][]int),
		joins:       slices.Clone(b.joins),
		maxSteps:    100,
		concurrency: 16,
	}
	for _, o := range opts {
		o(g)
	}
	g.maxSteps = max(g.maxSteps, 1)
	g.concurrency = max(g.concurrency, 1)
	g.lastValue = make(map[string]bool)
	for _, c := range b.schema.channels {
		r, ok := b.reducers[c.reducer]
		switch {
		case c.reducer == "":
		case !ok:
			errs = append(errs, fmt.Errorf("channel %q names reducer %q, which is not defined; use append, merge, sum, last or register it with Builder.Reducer", c.name, c.reducer))
		default:
			g.reducers[c.name] = r
			if c.reducer == ReduceAppend || b.appendReducers[c.reducer] {
				if g.segmented == nil {
					g.segmented = map[string]bool{}
				}
				g.segmented[c.name] = true
			}
		}
		g.lastValue[c.name] = g.reducers[c.name] == nil
	}
	known := func(n string, ctx string, allowStart, allowEnd bool) bool {
		if (allowStart && n == Start) || (allowEnd && n == End) || b.nodes[n] != nil {
			return true
		}
		errs = append(errs, fmt.Errorf("%s: no node named %q; nodes are %s", ctx, n, strings.Join(b.order, ", ")))
		return false
	}
	for _, name := range b.order {
		bn := b.nodes[name]
		g.nodes[name] = &node{info: bn.cfg.info, retry: bn.cfg.retry, timeout: bn.cfg.timeout, onError: bn.cfg.onError}
		for _, ch := range slices.Concat(bn.cfg.info.Reads, bn.cfg.info.Writes) {
			if _, ok := b.schema.byName[ch]; !ok {
				errs = append(errs, fmt.Errorf("node %q declares channel %q, which the state does not have; channels are %s", name, ch, strings.Join(g.channels, ", ")))
			}
		}
		if h := bn.cfg.onError; h != "" {
			known(h, fmt.Sprintf("error handler of node %q", name), false, false)
		}
	}
	for _, e := range b.edges {
		ctx := fmt.Sprintf("edge %s -> %s", e[0], e[1])
		if known(e[0], ctx, true, false) && known(e[1], ctx, false, true) && e[1] != End {
			if !slices.Contains(g.edges[e[0]], e[1]) {
				g.edges[e[0]] = append(g.edges[e[0]], e[1])
			}
		}
		if e[1] == End {
			g.ends = append(g.ends, e[0])
		}
	}
	for i, j := range b.joins {
		ctx := fmt.Sprintf("join into %s", j.To)
		known(j.To, ctx, false, false)
		for _, f := range j.From {
			if known(f, ctx, false, false) {
				g.joinsOf[f] = append(g.joinsOf[f], i)
			}
		}
	}
	g.routes = make(map[string][]displayRoute)
	for _, r := range b.routers {
		ctx := fmt.Sprintf("conditional edges from %s", r.from)
		known(r.from, ctx, true, false)
		for _, t := range r.targets {
			known(t, ctx, false, true)
			g.routes[r.from] = append(g.routes[r.from], displayRoute{"route", t})
		}
	}
	for _, f := range b.fanouts {
		ctx := fmt.Sprintf("fan-out %s -> %s", f.from, f.to)
		known(f.from, ctx, true, false)
		known(f.to, ctx, false, false)
		g.routes[f.from] = append(g.routes[f.from], displayRoute{"fan-out", f.to})
		if f.emptyEnds {
			g.routes[f.from] = append(g.routes[f.from], displayRoute{"route", End})
		}
		if p := f.policy(); p != nil {
			errs = append(errs, p.check(g.lastValue)...)
			if g.fanPolicies == nil {
				g.fanPolicies = map[string]*fanPolicy{}
			}
			if _, dup := g.fanPolicies[fanKey(f.from, f.to)]; dup {
				errs = append(errs, fmt.Errorf("%s: two fan-outs from %q to %q with completion policies; give one fan-out the policy", ctx, f.from, f.to))
			}
			g.fanPolicies[fanKey(f.from, f.to)] = p
		}
	}
	errs = append(errs, g.decl.check(g)...)
	if len(errs) == 0 {
		errs = append(errs, b.checkShape(g)...)
	}
	if len(errs) == 0 {
		errs = append(errs, b.checkWrites(g)...)
	}
	if len(errs) == 0 {
		errs = append(errs, b.compileVersion(g)...)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w %q: %w", ErrInvalidGraph, b.name, errors.Join(errs...))
	}
	b.bind(g)
	return g, nil
}

// successors lists every node n may trigger, End included.
func (b *Builder[S]) successors(g *Graph, n string) []string {
	out := slices.Clone(g.edges[n])
	if slices.Contains(g.ends, n) {
		out = append(out, End)
	}
	for _, r := range b.routers {
		if r.from == n {
			out = append(out, r.targets...)
		}
	}
	for _, f := range b.fanouts {
		if f.from == n {
			out = append(out, f.to)
			if f.emptyEnds {
				out = append(out, End)
			}
		}
	}
	for _, i := range g.joinsOf[n] {
		out = append(out, g.joins[i].To)
	}
	if bn := b.nodes[n]; bn != nil && bn.cfg.onError != "" {
		out = append(out, bn.cfg.onError)
	}
	return out
}

// checkShape reports nodes that cannot be reached from Start and nodes
// from which End cannot be reached.
func (b *Builder[S]) checkShape(g *Graph) []error {
	succ := map[string][]string{Start: b.successors(g, Start)}
	pred := map[string][]string{}
	for _, n := range b.order {
		succ[n] = b.successors(g, n)
	}
	for n, ss := range succ {
		for _, s := range ss {
			pred[s] = append(pred[s], n)
		}
	}
	walk := func(from string, next map[string][]string) map[string]bool {
		seen := map[string]bool{from: true}
		stack := []string{from}
		for len(stack) > 0 {
			n := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, m := range next[n] {
				if !seen[m] {
					seen[m] = true
					stack = append(stack, m)
				}
			}
		}
		return seen
	}
	var errs []error
	if len(succ[Start]) == 0 {
		return []error{fmt.Errorf("nothing starts the graph: add an edge from pregel.Start, e.g. AddEdge(pregel.Start, %q)", first(b.order))}
	}
	fromStart, toEnd := walk(Start, succ), walk(End, pred)
	for _, n := range b.order {
		if !fromStart[n] {
			errs = append(errs, fmt.Errorf("node %q cannot be reached from Start: add an edge into it or remove it", n))
		} else if !toEnd[n] {
			errs = append(errs, fmt.Errorf("node %q cannot reach End: add an edge from it (or from a node after it) to pregel.End", n))
		}
	}
	return errs
}

func first(s []string) string {
	if len(s) == 0 {
		return "node"
	}
	return s[0]
}

// checkWrites reports last-value channels that two nodes may write in the
// same superstep, judged from the nodes' declared Writes.
func (b *Builder[S]) checkWrites(g *Graph) []error {
	writes := func(n string) []string {
		var out []string
		if bn := b.nodes[n]; bn != nil {
			for _, ch := range bn.cfg.info.Writes {
				if g.lastValue[ch] {
					out = append(out, ch)
				}
			}
		}
		return out
	}
	var errs []error
	for _, f := range b.fanouts {
		for _, ch := range writes(f.to) {
			errs = append(errs, fmt.Errorf("channel %q has no reducer but node %q, which runs as parallel fan-out tasks, writes it; give %q a reducer (e.g. `reduce:\"append\"`)", ch, f.to, ch))
		}
	}
	reported := map[string]bool{}
	for _, frontier := range b.frontiers(g, 2000) {
		for i, x := range frontier {
			for _, y := range frontier[i+1:] {
				for _, ch := range writes(x) {
					key := ch + "\x00" + x + "\x00" + y
					if slices.Contains(writes(y), ch) && !reported[key] {
						reported[key] = true
						errs = append(errs, fmt.Errorf("channel %q has no reducer but nodes %q and %q may write it in the same superstep; give it a reducer (e.g. `reduce:\"append\"`) or let one node write it", ch, x, y))
					}
				}
			}
		}
	}
	return errs
}

// frontiers explores, up to limit, the sets of nodes that may run in one
// superstep. A router is taken to choose one of its targets or none; a
// join fires whenever one of its predecessors runs (an over-estimate).
func (b *Builder[S]) frontiers(g *Graph, limit int) [][]string {
	type choice [][]string // alternatives for one contribution
	step := func(front []string) [][]string {
		var parts []choice
		for _, n := range front {
			fixed := slices.Clone(g.edges[n])
			for _, i := range g.joinsOf[n] {
				fixed = append(fixed, g.joins[i].To)
			}
			for _, f := range b.fanouts {
				if f.from == n {
					parts = append(parts, choice{{f.to}, nil})
				}
			}
			if bn := b.nodes[n]; bn != nil && bn.cfg.onError != "" {
				parts = append(parts, choice{{bn.cfg.onError}, nil})
			}
			parts = append(parts, choice{fixed})
			for _, r := range b.routers {
				if r.from == n {
					c := choice{nil}
					for _, t := range r.targets {
						if t != End {
							c = append(c, []string{t})
						}
					}
					parts = append(parts, c)
				}
			}
		}
		out := [][]string{nil}
		for _, p := range parts {
			var next [][]string
			for _, prefix := range out {
				for _, alt := range p {
					next = append(next, append(slices.Clone(prefix), alt...))
				}
			}
			out = next
			if len(out) > limit {
				return nil
			}
		}
		for i := range out {
			slices.Sort(out[i])
			out[i] = slices.Compact(out[i])
		}
		return out
	}
	seen := map[string]bool{}
	var all [][]string
	queue := step([]string{Start})
	for len(queue) > 0 && len(all) < limit {
		f := queue[0]
		queue = queue[1:]
		key := strings.Join(f, "\x00")
		if len(f) == 0 || seen[key] {
			continue
		}
		seen[key] = true
		all = append(all, f)
		queue = append(queue, step(f)...)
	}
	return all
}

// Graph is a compiled graph: it plans, executes and applies supersteps and
// runs them in-process with [Graph.Run]. It is safe for concurrent use.
type Graph struct {
	name        string
	description string
	channels    []string
	reducers    map[string]Reducer // channel -> reducer; absent: last value
	segmented   map[string]bool    // channels stored in segments (segments.go)
	lastValue   map[string]bool
	nodes       map[string]*node
	order       []string
	edges       map[string][]string
	ends        []string
	joins       []join
	joinsOf     map[string][]int
	maxSteps    int
	concurrency int
	decl        declarations // UsageChannel, TextInput (declare.go)
	stateType   reflect.Type // the state struct S of NewGraph[S]

	// Bound by the typed builder.
	startRoutes func(ctx context.Context, values map[string]json.RawMessage) ([]Trigger, error)
	checkInput  func(values map[string]json.RawMessage) error
	encodeInput func(input any) (json.RawMessage, bool, error)
	routes      map[string][]displayRoute // routers and fan-outs, for display
	// fanPolicies holds the completion policies of fan-outs, by
	// fanKey(from, to) (fanpolicy.go); nil when none has one.
	fanPolicies map[string]*fanPolicy

	// Versions (version.go).
	version      string
	fingerprint  string
	reducerNames map[string]string // channel -> reducer name, when not last value
	// stamp is Stamp(), shared by every checkpoint this graph writes.
	stamp          *Stamp
	channelTypes   map[string]string // channel -> Go type
	successors     map[string][]string
	nodeRenames    map[string]string // old name -> name now
	channelRenames [][2]string
	migrations     map[string]MigrateFunc // by the version they migrate from
	checkChannel   func(name string, raw json.RawMessage) error
}

type displayRoute struct{ label, to string }

type node struct {
	info    NodeInfo
	retry   RetryPolicy
	timeout time.Duration
	onError string
	run     func(ctx context.Context, tc *taskContext, values map[string]json.RawMessage) TaskResult
}

// Name returns the graph's name.
func (g *Graph) Name() string { return g.name }

// Description returns the graph's description.
func (g *Graph) Description() string { return g.description }

// StateType returns the state struct type the graph was built with
// (S of [NewGraph]), for deriving its input schema.
func (g *Graph) StateType() reflect.Type { return g.stateType }

// Channels returns the names of the state's channels.
func (g *Graph) Channels() []string { return slices.Clone(g.channels) }

// Nodes describes the graph's nodes in the order they were added.
func (g *Graph) Nodes() []NodeInfo {
	out := make([]NodeInfo, 0, len(g.order))
	for _, n := range g.order {
		out = append(out, g.nodes[n].info)
	}
	return out
}

// MaxSteps returns the superstep limit of a run of this graph.
func (g *Graph) MaxSteps() int { return g.maxSteps }

// Node describes the named node.
func (g *Graph) Node(name string) (NodeInfo, bool) {
	n, ok := g.nodes[name]
	if !ok {
		return NodeInfo{}, false
	}
	return n.info, true
}
