// Property test of durable execution.
//
// Property: a random graph (chains, joins, loops, fan-outs, conditional
// routes, nodes skipped or cancelled by hooks or ShouldExecute) that is
// stopped any number of times, at random points, by a drain (from the
// caller or from a node), a cancellation (from the caller or from a node)
// or a simulated crash of its store (just before or just after a Commit or
// a RecordTask reaches it), and then resumed until it completes, ends in
// exactly the state of an uninterrupted run: same values, counters, step
// and history, and the same set of tasks executed. Moreover no task runs
// again once its result was recorded in the store or its step committed.
//
// Each case is derived from one seed; a failure prints it. To reproduce a
// case or explore more of them:
//
//	go test -race -run Property ./pkg/pregel/ -args -property.seed=N -property.cases=1
//	go test -run Property ./pkg/pregel/ -args -property.seed=$RANDOM -property.cases=5000
//
// Tasks of one step run concurrently, so which task is "the k-th" to finish
// can vary from one execution of a seed to the next; the graph and the
// kinds of disturbance do not.
package pregel_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
)

var (
	propertySeed  = flag.Uint64("property.seed", 1, "first seed of the durable-execution property test")
	propertyCases = flag.Int("property.cases", 300, "number of cases of the durable-execution property test (50 with -short)")
)

const (
	propRunID       = "prop"
	propRunsPerCase = 2  // disturbed runs per random graph
	propMaxAttempts = 60 // Run/Resume calls per disturbed run before giving up
	propCalmAfter   = 40 // attempts after which no more disturbances are injected
	propMaxFailures = 5  // failing cases reported before the test stops
)

func TestPropertyDisturbedRunsMatchUninterrupted(t *testing.T) {
	cases := *propertyCases
	if testing.Short() && cases > 50 {
		cases = 50
	}
	// Cases are independent: check them on every CPU.
	var (
		stats propStats
		errs  = make([]error, cases)
		next  atomic.Int64
		wg    sync.WaitGroup
	)
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			var local propStats
			for i := int(next.Add(1) - 1); i < cases; i = int(next.Add(1) - 1) {
				errs[i] = propCheckSeed(*propertySeed+uint64(i), &local)
			}
			stats.add(&local)
		})
	}
	wg.Wait()
	failures := 0
	for i, err := range errs {
		if err == nil {
			continue
		}
		seed := *propertySeed + uint64(i)
		t.Errorf("case seed %d: %v\nreproduce: go test -race -run Property ./pkg/pregel/ -args -property.seed=%d -property.cases=1", seed, err, seed)
		if failures++; failures == propMaxFailures {
			t.Fatalf("stopping after %d failing cases", failures)
		}
	}
	t.Logf("%d cases from seed %d: %s", cases, *propertySeed, stats.String())
}

// propState is the state of the random graphs.
type propState struct {
	Log    []string       `json:"log" reduce:"append"`
	Sum    int            `json:"sum" reduce:"sum"`
	Last   string         `json:"last"` // written by one node only
	Loops  int            `json:"loops" reduce:"sum"`
	Visits map[string]int `json:"visits" reduce:"merge"` // per node; loop bounds read it
}

// propKey is a deterministic function of the state that skip rules,
// routers and fan-outs depend on.
func propKey(st propState) int { return len(st.Log)*7 + st.Sum }

type propRuleKind int

const (
	propRun           propRuleKind = iota // always runs
	propShouldExecute                     // a Conditional node that may skip itself
	propHookSkip                          // the BeforeNode hook may skip it
	propHookCancel                        // the BeforeNode hook may cancel it
)

// propRule decides, from the state, whether a node is skipped or cancelled.
type propRule struct {
	kind     propRuleKind
	mod, rem int
}

func (r propRule) hit(st propState) bool { return r.kind != propRun && propKey(st)%r.mod == r.rem }

func (r propRule) String() string {
	name := [...]string{"runs", "ShouldExecute false", "hook skip", "hook cancel"}[r.kind]
	return fmt.Sprintf("%s when key%%%d==%d", name, r.mod, r.rem)
}

// propCondNode is a node implementing ShouldExecute.
type propCondNode struct {
	fn   func(context.Context, propState) (propState, error)
	rule propRule
}

func (n propCondNode) Execute(ctx context.Context, st propState) (propState, error) {
	return n.fn(ctx, st)
}

func (n propCondNode) ShouldExecute(_ context.Context, st propState) bool { return !n.rule.hit(st) }

// propCase is one random graph.
type propCase struct {
	graph  *pregel.Graph
	input  propState
	rules  map[string]propRule
	tails  map[string]bool // loop tails, which count loop iterations
	last   string          // the node that writes Last
	shape  []string        // description of the graph, for failure messages
	nodes  int
	rng    *rand.Rand
	b      *pregel.Builder[propState]
	others []string // regular nodes, candidates for writing Last
}

func propNewCase(rng *rand.Rand) (*propCase, error) {
	c := &propCase{
		rng:   rng,
		b:     pregel.NewGraph[propState]("prop"),
		rules: make(map[string]propRule),
		tails: make(map[string]bool),
		input: propState{Log: []string{"in"}, Sum: rng.IntN(5)},
	}
	if rng.IntN(3) == 0 { // channels without a value until a node writes them
		c.input.Log = nil
	}
	c.b.BeforeNode(func(ctx context.Context, info pregel.NodeInfo, st propState) pregel.Decision {
		propAttemptFrom(ctx).ledger.start(ctx)
		if r := c.rules[info.ID]; r.hit(st) {
			switch r.kind {
			case propHookSkip:
				return pregel.Decision{Action: pregel.Skip, Reason: "rule"}
			case propHookCancel:
				return pregel.Decision{Action: pregel.Cancel, Reason: "rule"}
			}
		}
		return pregel.Decision{}
	})
	end := c.seq(pregel.Start, 0, 1+rng.IntN(4))
	if len(c.others) == 0 { // only quiet nodes: add one that can write Last
		n := c.node()
		c.edge(end, n)
		end = n
	}
	c.edge(end, pregel.End)
	c.last = c.others[rng.IntN(len(c.others))]
	c.shape = append(c.shape, fmt.Sprintf("%s writes last", c.last))
	concurrency := 1 + rng.IntN(4)
	c.shape = append(c.shape, fmt.Sprintf("concurrency %d, input %+v", concurrency, c.input))
	g, err := c.b.Compile(pregel.MaxSteps(1000), pregel.Concurrency(concurrency))
	if err != nil {
		return nil, fmt.Errorf("generated graph does not compile: %w\n%s", err, c.describe())
	}
	c.graph, c.b = g, nil
	return c, nil
}

func (c *propCase) describe() string { return "  " + strings.Join(c.shape, "\n  ") }

func (c *propCase) edge(from, to string) {
	c.b.AddEdge(from, to)
	c.shape = append(c.shape, from+" -> "+to)
}

// seq appends n segments after prev and returns the last node.
func (c *propCase) seq(prev string, depth, n int) string {
	for range n {
		prev = c.segment(prev, depth)
	}
	return prev
}

// segment adds a random piece of graph entered by an edge from prev and
// returns the node it ends with.
func (c *propCase) segment(prev string, depth int) string {
	kind := c.rng.IntN(11)
	if depth >= 3 || c.nodes > 24 {
		kind = 0
	}
	switch kind {
	case 3, 4: // parallel branches merged by a join
		exits := make([]string, 2+c.rng.IntN(2))
		for i := range exits {
			exits[i] = c.seq(prev, depth+1, 1+c.rng.IntN(2))
		}
		j := c.node()
		c.b.AddJoin(j, exits...)
		c.shape = append(c.shape, fmt.Sprintf("join %s <- %s", j, strings.Join(exits, ", ")))
		return j
	case 5, 6: // a loop back to its head until its tail has run bound times
		head := c.node()
		c.edge(prev, head)
		body := c.seq(head, depth+1, c.rng.IntN(2))
		tail := c.newNode("n", propRule{}, false)
		c.tails[tail] = true
		c.edge(body, tail)
		exit := c.node()
		bound := 1 + c.rng.IntN(3)
		c.b.AddConditionalEdges(tail, func(_ context.Context, st propState) ([]string, error) {
			if st.Visits[tail] < bound {
				return []string{head}, nil
			}
			return []string{exit}, nil
		}, head, exit)
		c.shape = append(c.shape, fmt.Sprintf("%s -> %s while visits[%s] < %d, else -> %s", tail, head, tail, bound, exit))
		return exit
	case 7: // fan-out to a worker, collected by an edge
		from := c.node()
		c.edge(prev, from)
		worker := c.worker()
		c.b.AddFanOut(from, worker, func(_ context.Context, st propState) ([]any, error) {
			items := make([]any, propKey(st)%3) // none at times: an empty fan-out
			for i := range items {
				items[i] = 10*i + len(st.Log)
			}
			return items, nil
		})
		collect := c.node()
		c.edge(worker, collect)
		c.shape = append(c.shape, fmt.Sprintf("%s fans out key%%3 items to %s", from, worker))
		return collect
	case 8, 9: // a router choosing one branch, both or End
		r, a, b, m := c.node(), c.node(), c.node(), c.node()
		c.edge(prev, r)
		c.b.AddConditionalEdges(r, func(_ context.Context, st propState) ([]string, error) {
			switch k := propKey(st) % 8; {
			case k == 0:
				return []string{pregel.End}, nil
			case k <= 3:
				return []string{a}, nil
			case k <= 6:
				return []string{b}, nil
			default:
				return []string{a, b}, nil
			}
		}, a, b, pregel.End)
		c.edge(a, m)
		c.edge(b, m)
		c.shape = append(c.shape, fmt.Sprintf("%s routes by key%%8: 0 End, 1-3 %s, 4-6 %s, 7 both", r, a, b))
		return m
	case 10: // a node that declares every reducer channel and writes them empty
		n := c.quiet()
		c.edge(prev, n)
		return n
	default: // chain
		n := c.node()
		c.edge(prev, n)
		return n
	}
}

func (c *propCase) randomRule() propRule {
	r := propRule{mod: 2 + c.rng.IntN(3)}
	switch p := c.rng.IntN(100); {
	case p < 15:
		r.kind = propShouldExecute
	case p < 30:
		r.kind = propHookSkip
	case p < 34:
		r.kind, r.mod = propHookCancel, 5
	}
	r.rem = c.rng.IntN(r.mod)
	return r
}

// node adds a regular node with a random skip rule.
func (c *propCase) node() string { return c.newNode("n", c.randomRule(), false) }

// quiet adds a node that declares its writes of every reducer channel and
// leaves them empty (nil, zero): the empty update of each reducer, which
// must leave a channel without a value as it was.
func (c *propCase) quiet() string {
	c.nodes++
	name := fmt.Sprintf("q%d", c.nodes)
	c.b.AddFunc(name, func(ctx context.Context, _ propState) (propState, error) {
		return propState{}, propAttemptFrom(ctx).executed(ctx)
	}, pregel.Writes("log", "sum", "loops", "visits"))
	c.shape = append(c.shape, name+" writes log, sum, loops and visits empty")
	return name
}

// worker adds a fan-out worker with a random skip rule.
func (c *propCase) worker() string { return c.newNode("w", c.randomRule(), true) }

func (c *propCase) newNode(prefix string, rule propRule, worker bool) string {
	c.nodes++
	name := fmt.Sprintf("%s%d", prefix, c.nodes)
	var fn func(context.Context, propState) (propState, error)
	if worker {
		fn = c.work(name)
	} else {
		fn = c.regular(name)
		c.others = append(c.others, name)
	}
	if rule.kind != propRun {
		c.rules[name] = rule
		c.shape = append(c.shape, fmt.Sprintf("%s %s", name, rule))
	}
	var opts []pregel.NodeOption
	if worker { // declared writes: an odd item writes log and visits empty
		opts = append(opts, pregel.Writes("log", "sum", "visits"))
	}
	if rule.kind == propShouldExecute {
		c.b.AddNode(name, propCondNode{fn: fn, rule: rule}, opts...)
	} else {
		c.b.AddFunc(name, fn, opts...)
	}
	return name
}

// regular is the behaviour of a regular node: a deterministic function of
// its input.
func (c *propCase) regular(name string) func(context.Context, propState) (propState, error) {
	return func(ctx context.Context, st propState) (propState, error) {
		if err := propAttemptFrom(ctx).executed(ctx); err != nil {
			return propState{}, err
		}
		v := st.Visits[name] + 1
		out := propState{
			Log:    []string{fmt.Sprintf("%s#%d@%d", name, v, len(st.Log))},
			Sum:    1 + propKey(st)%5,
			Visits: map[string]int{name: v},
		}
		if name == c.last {
			out.Last = fmt.Sprintf("%s#%d=%d", name, v, st.Sum)
		}
		if c.tails[name] {
			out.Loops = 1
		}
		return out, nil
	}
}

// work is the behaviour of a fan-out worker.
func (c *propCase) work(name string) func(context.Context, propState) (propState, error) {
	return func(ctx context.Context, st propState) (propState, error) {
		if err := propAttemptFrom(ctx).executed(ctx); err != nil {
			return propState{}, err
		}
		item, err := pregel.Arg[int](ctx)
		if err != nil {
			return propState{}, err
		}
		if item%2 == 1 {
			return propState{Sum: item}, nil
		}
		return propState{Log: []string{fmt.Sprintf("%s[%d]@%d", name, item, len(st.Log))}, Sum: item}, nil
	}
}

// propLedger follows the tasks of one run across all its attempts.
type propLedger struct {
	mu         sync.Mutex
	starts     map[string]int // BeforeNode calls: the task began to run
	execs      map[string]int // Execute calls
	names      map[string]string
	recorded   map[string]bool // a final result reached the store
	committed  map[string]bool // its step was committed
	violations []string
}

func newPropLedger() *propLedger {
	return &propLedger{
		starts: map[string]int{}, execs: map[string]int{}, names: map[string]string{},
		recorded: map[string]bool{}, committed: map[string]bool{},
	}
}

func (l *propLedger) start(ctx context.Context) {
	ti, ok := pregel.TaskFrom(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	if !ok {
		l.violations = append(l.violations, "a BeforeNode hook ran without a task in its context")
		return
	}
	l.starts[ti.TaskID]++
	l.names[ti.TaskID] = fmt.Sprintf("%s in step %d", ti.Node, ti.Step)
	switch {
	case l.committed[ti.TaskID]:
		l.violations = append(l.violations, fmt.Sprintf("task %s (%s) ran again after its step was committed", ti.TaskID, l.names[ti.TaskID]))
	case l.recorded[ti.TaskID]:
		l.violations = append(l.violations, fmt.Sprintf("task %s (%s) ran again after its result was recorded", ti.TaskID, l.names[ti.TaskID]))
	}
}

func (l *propLedger) execute(ctx context.Context) {
	ti, _ := pregel.TaskFrom(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.execs[ti.TaskID]++
}

func (l *propLedger) record(r pregel.TaskResult) {
	if !r.Final() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recorded[r.TaskID] = true
}

func (l *propLedger) commit(cp *pregel.Checkpoint) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ts := range cp.Tasks {
		l.committed[ts.TaskID] = true
	}
}

// reruns counts the executions beyond the first, which are allowed only
// for tasks whose result had not been recorded.
func (l *propLedger) reruns() int {
	n := 0
	for _, c := range l.starts {
		n += c - 1
	}
	return n
}

// propKind is a way to disturb one attempt.
type propKind int

const (
	propNone        propKind = iota
	propDrainEvent           // Control.RequestDrain from the observer at the k-th event
	propCancelEvent          // Control.Cancel from the observer at the k-th event
	propDrainNode            // pregel.RequestDrain from the k-th node execution
	propCancelNode           // Control.Cancel from the k-th node execution
	propCrashCommit          // the store crashes at the k-th Commit
	propCrashRecord          // the store crashes at the k-th RecordTask
	propKinds
)

var propKindNames = [...]string{"none", "drain@event", "cancel@event", "drain@node", "cancel@node", "crash@commit", "crash@record"}

// propDisturb is the disturbance of one attempt.
type propDisturb struct {
	kind propKind
	k    int
	// after: the crash happens after the write reached the store; the
	// node cancelling the run keeps going instead of returning ctx.Err().
	after bool
}

func (d propDisturb) String() string {
	switch d.kind {
	case propNone:
		return "none"
	case propCancelNode, propCrashCommit, propCrashRecord:
		return fmt.Sprintf("%s k=%d after=%t", propKindNames[d.kind], d.k, d.after)
	}
	return fmt.Sprintf("%s k=%d", propKindNames[d.kind], d.k)
}

// propAttempt is one call of Run or Resume; nodes find it in their context.
type propAttempt struct {
	ledger *propLedger
	ctl    *pregel.Control
	dist   propDisturb

	mu     sync.Mutex
	events int
	execs  int
}

type propAttemptKey struct{}

func propAttemptFrom(ctx context.Context) *propAttempt {
	return ctx.Value(propAttemptKey{}).(*propAttempt)
}

func (a *propAttempt) observe(pregel.Event) {
	a.mu.Lock()
	a.events++
	hit := a.events == a.dist.k
	a.mu.Unlock()
	switch {
	case hit && a.dist.kind == propDrainEvent:
		a.ctl.RequestDrain("property drain")
	case hit && a.dist.kind == propCancelEvent:
		a.ctl.Cancel()
	}
}

func (a *propAttempt) executed(ctx context.Context) error {
	a.ledger.execute(ctx)
	a.mu.Lock()
	a.execs++
	hit := a.execs == a.dist.k
	a.mu.Unlock()
	switch {
	case hit && a.dist.kind == propDrainNode:
		pregel.RequestDrain(ctx, "node drain")
	case hit && a.dist.kind == propCancelNode:
		a.ctl.Cancel()
		if !a.dist.after {
			return ctx.Err()
		}
	}
	return nil
}

var errPropCrash = errors.New("simulated crash")

// propStore wraps the run's MemoryStore for one attempt: it tells the
// ledger which writes reached the store and simulates a crash, after which
// every call fails.
type propStore struct {
	inner  *pregel.MemoryStore
	ledger *propLedger
	dist   propDisturb

	mu      sync.Mutex
	commits int
	records int
	dead    bool
}

// gate counts a write and says whether it reaches the store and whether
// the store crashes with it.
func (s *propStore) gate(kind propKind) (write, crash bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return false, true
	}
	n := &s.records
	if kind == propCrashCommit {
		n = &s.commits
	}
	*n++
	if s.dist.kind != kind || *n != s.dist.k {
		return true, false
	}
	s.dead = true
	return s.dist.after, true
}

func (s *propStore) alive() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return errPropCrash
	}
	return nil
}

func (s *propStore) Commit(ctx context.Context, cp *pregel.Checkpoint) error {
	write, crash := s.gate(propCrashCommit)
	if write {
		err := s.inner.Commit(ctx, cp)
		if err == nil {
			s.ledger.commit(cp)
		}
		if !crash {
			return err
		}
	}
	return errPropCrash
}

func (s *propStore) RecordTask(ctx context.Context, runID string, step int, r pregel.TaskResult) (pregel.TaskResult, error) {
	write, crash := s.gate(propCrashRecord)
	if write {
		stored, err := s.inner.RecordTask(ctx, runID, step, r)
		if err == nil {
			s.ledger.record(stored)
		}
		if !crash {
			return stored, err
		}
	}
	return pregel.TaskResult{}, errPropCrash
}

func (s *propStore) PendingTasks(ctx context.Context, runID string, step int) ([]pregel.TaskResult, error) {
	if err := s.alive(); err != nil {
		return nil, err
	}
	return s.inner.PendingTasks(ctx, runID, step)
}

func (s *propStore) Load(ctx context.Context, runID string, step int) (*pregel.Checkpoint, error) {
	if err := s.alive(); err != nil {
		return nil, err
	}
	return s.inner.Load(ctx, runID, step)
}

func (s *propStore) History(ctx context.Context, runID string) ([]pregel.StepInfo, error) {
	if err := s.alive(); err != nil {
		return nil, err
	}
	return s.inner.History(ctx, runID)
}

// propOutcome is where a run ended, with what it took to get there.
type propOutcome struct {
	res     *pregel.Result
	history []pregel.StepInfo
	ledger  *propLedger
	// Totals of the attempts, which bound the random disturbance points.
	events, execs, commits, records int
}

// attempt calls Run, or Resume once the run exists, under disturbance d.
func (c *propCase) attempt(mem *pregel.MemoryStore, led *propLedger, d propDisturb, out *propOutcome) (*pregel.Result, error) {
	a := &propAttempt{ledger: led, ctl: &pregel.Control{}, dist: d}
	store := &propStore{inner: mem, ledger: led, dist: d}
	ctx := context.WithValue(context.Background(), propAttemptKey{}, a)
	opts := []pregel.RunOption{pregel.WithStore(store), pregel.WithRunID(propRunID), pregel.WithControl(a.ctl), pregel.WithObserver(a.observe)}
	var (
		res *pregel.Result
		err error
	)
	if _, lerr := mem.Load(ctx, propRunID, pregel.Latest); errors.Is(lerr, pregel.ErrNotFound) {
		res, err = c.graph.Run(ctx, c.input, opts...)
	} else {
		res, err = c.graph.Resume(ctx, propRunID, opts...)
	}
	a.mu.Lock()
	out.events += a.events
	out.execs += a.execs
	a.mu.Unlock()
	store.mu.Lock()
	out.commits += store.commits
	out.records += store.records
	store.mu.Unlock()
	return res, err
}

func (c *propCase) reference() (*propOutcome, error) {
	mem, led := pregel.NewMemoryStore(), newPropLedger()
	out := &propOutcome{ledger: led}
	res, err := c.attempt(mem, led, propDisturb{}, out)
	if err != nil || res.Status != pregel.RunCompleted {
		return nil, fmt.Errorf("uninterrupted run did not complete: %v (%v)", propStatus(res), err)
	}
	if len(led.violations) > 0 {
		return nil, fmt.Errorf("uninterrupted run: %s", strings.Join(led.violations, "; "))
	}
	for id, n := range led.starts {
		if n != 1 || led.execs[id] > 1 {
			return nil, fmt.Errorf("uninterrupted run: task %s (%s) started %d times, executed %d times", id, led.names[id], n, led.execs[id])
		}
	}
	out.res = res
	out.history, err = mem.History(context.Background(), propRunID)
	if err == nil {
		err = propTimes(out.history)
	}
	return out, err
}

// propTimes checks that every task of a history has the times it ran, and
// clears them: runs are compared by what they did, not when.
func propTimes(history []pregel.StepInfo) error {
	for i := range history {
		history[i].Tasks = slices.Clone(history[i].Tasks) // the store's own
		for j := range history[i].Tasks {
			ts := &history[i].Tasks[j]
			if ts.Started.IsZero() || ts.Finished.Before(ts.Started) {
				return fmt.Errorf("step %d task %s (%s) ran from %v to %v", history[i].Step, ts.TaskID, ts.Node, ts.Started, ts.Finished)
			}
			ts.Started, ts.Finished = time.Time{}, time.Time{}
		}
	}
	return nil
}

func (c *propCase) randomDisturb(ref *propOutcome) propDisturb {
	d := propDisturb{kind: propKind(1 + c.rng.IntN(int(propKinds)-1)), after: c.rng.IntN(2) == 0}
	bound := map[propKind]int{
		propDrainEvent: ref.events, propCancelEvent: ref.events,
		propDrainNode: ref.execs, propCancelNode: ref.execs,
		propCrashCommit: ref.commits, propCrashRecord: ref.records,
	}[d.kind]
	if bound == 0 {
		return propDisturb{}
	}
	d.k = 1 + c.rng.IntN(bound)
	return d
}

// disturbed runs the case under random disturbances until it completes.
func (c *propCase) disturbed(ref *propOutcome, stats *propStats) (*propOutcome, []string, error) {
	mem, led := pregel.NewMemoryStore(), newPropLedger()
	out := &propOutcome{ledger: led}
	var trace []string
	for i := 0; ; i++ {
		if i == propMaxAttempts {
			return nil, trace, fmt.Errorf("run did not complete after %d attempts", i)
		}
		d := propDisturb{}
		if i < propCalmAfter {
			d = c.randomDisturb(ref)
		}
		res, err := c.attempt(mem, led, d, out)
		status := propStatus(res)
		trace = append(trace, fmt.Sprintf("attempt %d (%s): %s, err %v", i, d, status, err))
		stats.attempts[d.kind]++
		if status == pregel.RunCompleted && err == nil {
			out.res = res
			break
		}
		stats.stopped[d.kind]++
		if !propExpected(d.kind, status, err) {
			return nil, trace, fmt.Errorf("attempt %d (%s) ended %s with error %v", i, d, status, err)
		}
	}
	var err error
	out.history, err = mem.History(context.Background(), propRunID)
	if err == nil {
		err = propTimes(out.history)
	}
	return out, trace, err
}

// propExpected reports whether an attempt that did not complete stopped as
// its disturbance should make it stop.
func propExpected(kind propKind, status pregel.RunStatus, err error) bool {
	switch kind {
	case propDrainEvent, propDrainNode:
		return status == pregel.RunDrained && err == nil
	case propCancelEvent, propCancelNode:
		return status == pregel.RunCancelled && err == nil
	case propCrashCommit, propCrashRecord:
		// Run returns no result when step 0 cannot be stored.
		return (status == pregel.RunFailed || status == "no result") && errors.Is(err, errPropCrash)
	}
	return false
}

func propStatus(res *pregel.Result) pregel.RunStatus {
	if res == nil {
		return "no result"
	}
	return res.Status
}

func propJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return string(b)
}

// compare checks the property on a disturbed run against the reference.
func (got *propOutcome) compare(ref *propOutcome) []string {
	var diffs []string
	check := func(what string, want, have any) {
		if w, h := propJSON(want), propJSON(have); w != h {
			diffs = append(diffs, fmt.Sprintf("%s differ:\n    want %s\n    got  %s", what, w, h))
		}
	}
	check("values", ref.res.Values, got.res.Values)
	check("counters", ref.res.Counters, got.res.Counters)
	check("last step", ref.res.Step, got.res.Step)
	check("history", ref.history, got.history)
	check("tasks run", slices.Sorted(maps.Keys(ref.ledger.starts)), slices.Sorted(maps.Keys(got.ledger.starts)))
	check("tasks executed", slices.Sorted(maps.Keys(ref.ledger.execs)), slices.Sorted(maps.Keys(got.ledger.execs)))
	got.ledger.mu.Lock()
	defer got.ledger.mu.Unlock()
	diffs = append(diffs, got.ledger.violations...)
	return diffs
}

// propStats summarises what the cases exercised.
type propStats struct {
	mu                sync.Mutex
	attempts, stopped [propKinds]int
	runs, reruns      int
	steps, tasks      int
}

func (s *propStats) add(o *propStats) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range propKinds {
		s.attempts[k] += o.attempts[k]
		s.stopped[k] += o.stopped[k]
	}
	s.runs += o.runs
	s.reruns += o.reruns
	s.steps += o.steps
	s.tasks += o.tasks
}

func (s *propStats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d disturbed runs, reference runs of %d steps and %d tasks in all, %d re-executions of unrecorded tasks; attempts (stopped/all):",
		s.runs, s.steps, s.tasks, s.reruns)
	for k := range propKinds {
		fmt.Fprintf(&b, " %s %d/%d", propKindNames[k], s.stopped[k], s.attempts[k])
	}
	return b.String()
}

// propCheckSeed builds the case of seed, runs it undisturbed and then
// disturbed several times, and checks the property.
func propCheckSeed(seed uint64, stats *propStats) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	c, err := propNewCase(rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)))
	if err != nil {
		return err
	}
	ref, err := c.reference()
	if err != nil {
		return fmt.Errorf("%w\ngraph:\n%s", err, c.describe())
	}
	stats.steps += ref.res.Step
	stats.tasks += len(ref.ledger.starts)
	for run := range propRunsPerCase {
		got, trace, err := c.disturbed(ref, stats)
		stats.runs++
		var diffs []string
		if err == nil {
			diffs = got.compare(ref)
			stats.reruns += got.ledger.reruns()
		} else {
			diffs = []string{err.Error()}
		}
		if len(diffs) > 0 {
			return fmt.Errorf("disturbed run %d:\n  %s\nattempts:\n  %s\ngraph:\n%s",
				run, strings.Join(diffs, "\n  "), strings.Join(trace, "\n  "), c.describe())
		}
	}
	return nil
}
