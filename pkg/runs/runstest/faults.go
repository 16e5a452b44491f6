package runstest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// The linearizability check with faults: the same clients and model as
// Linearizable, driving a thread API that can fail under them (a server
// killed and started again; queues that duplicate, delay and reorder
// messages). An operation whose answer was lost has an unknown outcome:
// it is kept in the history with no response (porcupine's answer to a
// timed-out call: its return at the end of time), and the model lets it
// take effect at any point after its call, or never.

// ThreadAPI is what the clients of CheckFaults call: a thread API behind
// a transport that can fail. Errors say what the client knows:
// ErrBusy (a create refused by strategy reject), runs.ErrInvalidState (a
// cancel or resume refused), ErrUnavailable (the request was certainly
// not taken: the client tries again later), ErrOutcomeUnknown (it may or
// may not have taken effect). Any other error fails the test.
type ThreadAPI interface {
	CreateThread(ctx context.Context, thread string) error
	// CreateRun creates run on thread with the chat graph of the model
	// and the input {"messages": [run]}.
	CreateRun(ctx context.Context, thread, run string, st runs.Strategy) error
	// Messages reads the thread's state's messages.
	Messages(ctx context.Context, thread string) ([]string, error)
	// Run reads a run.
	Run(ctx context.Context, id string) (RunView, error)
	Cancel(ctx context.Context, id string) error
	// Resume answers the run's interrupt.
	Resume(ctx context.Context, id string) error
	// Events reads a run's events, oldest first.
	Events(ctx context.Context, id string) ([]RunEvent, error)
}

// RunEvent is an event of a run's history (runs.Event): its type and
// detail.
type RunEvent struct {
	At     time.Time `json:"at"`
	Type   string    `json:"type"`
	Detail string    `json:"detail"`
}

// RunView is what the model needs of a run: its record, and its state's
// messages after its last committed step.
type RunView struct {
	Status          pregel.RunStatus
	Discarded       bool
	SupersededBy    string
	CancelRequested bool
	Messages        []string
}

// The errors a ThreadAPI answers with (see ThreadAPI).
var (
	ErrBusy           = errors.New("thread busy")
	ErrUnavailable    = errors.New("unavailable: the request was not taken")
	ErrOutcomeUnknown = errors.New("the request's outcome is unknown")
)

// errUnknown is the output of an operation whose outcome is unknown.
const errUnknown = "unknown"

// FaultConfig sizes a check with faults.
type FaultConfig struct {
	Threads, Clients, Ops int
	// Seed seeds the clients (default: SUPERSTEP_LINEARIZABLE_SEED, or
	// the clock); Disturb gets it too, so that its faults come in the
	// same order again.
	Seed uint64
	// Disturb injects faults until ctx is done (the clients stopped);
	// when it returns the API must answer again.
	Disturb func(ctx context.Context, rng *rand.Rand)
	// Timeout bounds the checker (default 5 minutes); Settle the wait
	// for the runs to end once every run the clients left has been asked
	// to cancel (default 60 s);
	// Unavailable how long a client keeps trying a request the API does
	// not take (default 60 s); Poll the pause between two reads of a
	// run's status while a client waits for it (default 2 ms).
	Timeout, Settle, Unavailable, Poll time.Duration
	// Strict fails the test on an unexpected error and on a run left
	// unfinished (see LinConfig.Strict).
	Strict bool
}

// FaultResult is what CheckFaults found.
type FaultResult struct {
	Verdict porcupine.CheckResult
	// Ops operations in the history, Unknown of them with an unknown
	// outcome; Lost creates, cancels and resumes whose first answer was
	// lost, Settled of them whose outcome the same request asked again
	// told (the others are unknown); Retried requests tried again because
	// the API was unavailable; Runs created (known or possibly).
	Ops, Unknown, Lost, Settled, Retried, Runs int
	Seed                                       uint64
	// Clients is how long the clients took, Settle the wait for the
	// runs to end, Check the checker.
	Clients, Settle, Check time.Duration
}

func (r FaultResult) String() string {
	return fmt.Sprintf("%s: %d operations (%d answers lost, %d of them told by asking again; %d with an unknown outcome), %d requests tried again, %d runs; clients %v, settling %v, checked in %v (seed %d)",
		r.Verdict, r.Ops, r.Lost, r.Settled, r.Unknown, r.Retried, r.Runs, r.Clients.Round(time.Millisecond), r.Settle.Round(time.Millisecond), r.Check.Round(time.Millisecond), r.Seed)
}

// CheckFaults runs cfg.Clients clients on each of cfg.Threads new
// threads of api, cfg.Ops operations each (all threads at once), while
// cfg.Disturb injects faults; then, with the faults over, cancels what
// the clients left, waits for every run to end (strict: fails the test
// if one does not), reads how each ended, and checks each thread's
// history against the model of Linearizable. An Illegal history is drawn
// as HTML under SUPERSTEP_LINEARIZABLE_HTML (or the test's temp dir).
func CheckFaults(t *testing.T, cfg FaultConfig, api ThreadAPI) FaultResult {
	t.Helper()
	if cfg.Seed == 0 {
		cfg.Seed = uint64(time.Now().UnixNano())
		if v, err := strconv.ParseUint(os.Getenv("SUPERSTEP_LINEARIZABLE_SEED"), 10, 64); err == nil {
			cfg.Seed = v
		}
	}
	if cfg.Unavailable == 0 {
		cfg.Unavailable = 60 * time.Second
	}
	if cfg.Settle == 0 {
		cfg.Settle = 60 * time.Second
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Minute
	}
	if cfg.Poll == 0 {
		cfg.Poll = 2 * time.Millisecond
	}
	res := FaultResult{Seed: cfg.Seed}
	ctx := t.Context()
	begin := time.Now()
	prefix := uniq(t)
	var (
		mu      sync.Mutex
		history []porcupine.Operation
		created []string
		wg      sync.WaitGroup
	)
	for th := range cfg.Threads {
		thread := fmt.Sprintf("%s-%d", prefix, th)
		if err := retry(ctx, cfg.Unavailable, nil, func() error { return api.CreateThread(ctx, thread) }); err != nil {
			t.Fatalf("create thread %s: %v", thread, err)
		}
		for c := range cfg.Clients {
			id := th*cfg.Clients + c
			fc := &faultClient{api: api, cfg: cfg, lc: &linClient{thread: thread, rng: rand.New(rand.NewPCG(cfg.Seed, uint64(id))), name: fmt.Sprintf("%d-%d", th, c)}}
			wg.Go(func() {
				ops := fc.run(t, id)
				mu.Lock()
				history = append(history, ops...)
				created = append(created, fc.lc.mine...)
				created = append(created, fc.maybe...)
				res.Retried += fc.retried
				res.Lost += fc.lost
				res.Settled += fc.settled
				mu.Unlock()
			})
		}
	}
	if cfg.Disturb != nil {
		dctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			cfg.Disturb(dctx, rand.New(rand.NewPCG(cfg.Seed, math.MaxUint64)))
		}()
		wg.Wait()
		stop()
		<-done
	} else {
		wg.Wait()
	}
	slices.Sort(created)
	created = slices.Compact(created)
	res.Runs = len(created)
	res.Clients = time.Since(begin)
	settled := time.Now()
	facts := finishFaults(t, api, created, cfg)
	res.Settle = time.Since(settled)
	orderFacts(ctx, t, api, history, facts, cfg)
	for _, op := range history {
		if op.Output.(linOutput).Err == errUnknown {
			res.Unknown++
		}
	}
	res.Ops = len(history)
	if os.Getenv("SUPERSTEP_FAULTS_DEBUG") != "" {
		took := map[string][]time.Duration{}
		for _, op := range history {
			if op.Return != math.MaxInt64 {
				in := op.Input.(linInput)
				took[in.Op] = append(took[in.Op], time.Duration(op.Return-op.Call))
			}
		}
		for op, ds := range took {
			slices.Sort(ds)
			t.Logf("%s: %d, median %v, max %v", op, len(ds), ds[len(ds)/2], ds[len(ds)-1])
		}
	}
	if dir := os.Getenv("SUPERSTEP_LINEARIZABLE_DUMP"); dir != "" {
		if err := dumpHistory(filepath.Join(dir, fmt.Sprintf("faults-%d.json", time.Now().UnixNano())), history, facts); err != nil {
			t.Log(err)
		}
	}
	start := time.Now()
	model := faultModel(newLinModel(history, facts))
	verdict, info := porcupine.CheckOperationsVerbose(model, history, cfg.Timeout)
	res.Verdict, res.Check = verdict, time.Since(start)
	if verdict == porcupine.Illegal {
		dir := os.Getenv("SUPERSTEP_LINEARIZABLE_HTML")
		if dir == "" {
			dir = t.TempDir()
		}
		if f := filepath.Join(dir, fmt.Sprintf("faults-%d.html", time.Now().UnixNano())); porcupine.VisualizePath(model, info, f) == nil {
			t.Logf("the history is drawn in %s", f)
		}
	}
	return res
}

// retry calls fn until it does not answer ErrUnavailable, for at most
// limit; it counts the retries in n (if not nil).
func retry(ctx context.Context, limit time.Duration, n *int, fn func() error) error {
	deadline := time.Now().Add(limit)
	for {
		err := fn()
		if !errors.Is(err, ErrUnavailable) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still unavailable after %v: %w", limit, err)
		}
		if n != nil {
			*n++
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// faultClient is one client of a thread, through a ThreadAPI.
type faultClient struct {
	api     ThreadAPI
	cfg     FaultConfig
	lc      *linClient
	maybe   []string // runs whose create's first answer was lost
	retried int
	// lost operations had their answer lost, settled of them became
	// known when asked again (settle).
	lost, settled int
}

// run makes the client's operations and returns its history.
func (c *faultClient) run(t *testing.T, clientID int) []porcupine.Operation {
	var ops []porcupine.Operation
	for i := range c.cfg.Ops {
		in := c.lc.next(i)
		var (
			out       linOutput
			call, ret int64
		)
		err := retry(t.Context(), c.cfg.Unavailable, &c.retried, func() error {
			call = time.Now().UnixNano()
			var err error
			var last int64
			out, last, err = c.do(t, in)
			ret = time.Now().UnixNano()
			if last != 0 {
				call = last // a status read: only its last poll counts
			}
			return err
		})
		if errors.Is(err, ErrOutcomeUnknown) && in.Op != "read" && in.Op != "wait" {
			// What a client of a durable service does: ask again, the
			// same request (a create with the same run id), until an
			// answer comes. The operation took effect between its first
			// call and the answer that tells.
			c.lost++
			if in.Op == "create" {
				c.maybe = append(c.maybe, in.Run)
			}
			var known bool
			out, ret, known = c.settle(t, in, call)
			if known {
				c.settled++
				err = nil
			}
		}
		switch {
		case errors.Is(err, ErrOutcomeUnknown):
			if in.Op == "read" || in.Op == "wait" {
				continue // a read whose answer was lost changed nothing
			}
			out, ret = linOutput{Err: errUnknown}, math.MaxInt64
		case err != nil:
			if c.cfg.Strict {
				t.Errorf("%s %s on %s: %v", in.Op, in.Run, in.Thread, err)
			} else {
				t.Logf("%s %s on %s: %v", in.Op, in.Run, in.Thread, err)
			}
			out = linOutput{Err: err.Error()}
		}
		c.lc.saw(in, out)
		ops = append(ops, porcupine.Operation{ClientId: clientID, Input: in, Call: call, Output: out, Return: ret})
	}
	return ops
}

// settle asks again for an operation whose answer was lost (a create
// with the same run id; a cancel or resume of the same run), until it
// gets an answer, for at most cfg.Unavailable: known reports whether it
// did, ret is when. A create is idempotent: the answer is the outcome of
// the first request or, if it never took effect, of this one. A cancel
// or resume refused now may have been refused because the lost one took
// effect: the run's events tell (only this client cancels or resumes its
// runs during the check), read after the refusal.
func (c *faultClient) settle(t *testing.T, in linInput, call int64) (out linOutput, ret int64, known bool) {
	ctx := t.Context()
	deadline := time.Now().Add(c.cfg.Unavailable)
	for time.Now().Before(deadline) {
		err := retry(ctx, time.Until(deadline), &c.retried, func() error {
			var err error
			out, _, err = c.do(t, in)
			ret = time.Now().UnixNano()
			return err
		})
		switch {
		case errors.Is(err, ErrOutcomeUnknown):
			continue // cut again
		case err != nil:
			return linOutput{}, 0, false
		}
		if out.Err != "invalid" {
			return out, ret, true
		}
		// Refused: did the lost request take effect?
		var (
			evs []RunEvent
			r   RunView
		)
		err = retry(ctx, time.Until(deadline), &c.retried, func() error {
			var err error
			if evs, err = c.api.Events(ctx, in.Run); err != nil {
				return err
			}
			r, err = c.api.Run(ctx, in.Run)
			return err
		})
		if err != nil {
			if errors.Is(err, ErrOutcomeUnknown) {
				continue
			}
			return linOutput{}, 0, false
		}
		ret = time.Now().UnixNano()
		if applied(in.Op, evs, r, time.Unix(0, call)) {
			return linOutput{}, ret, true
		}
		return out, ret, true
	}
	return linOutput{}, 0, false
}

// applied reports whether a run's events (oldest first) and record show
// a client's cancel or resume (op) called at since that took effect: an
// event from since on (the server shares the test's clock; an earlier
// one is an earlier request's), a resume_requested event; a
// cancel_requested event without a detail (a rollback's says so), or a
// cancelled event of a run nothing superseded (a cancel of a queued or
// paused run ends it at once).
func applied(op string, events []RunEvent, r RunView, since time.Time) bool {
	for _, ev := range events {
		switch {
		case ev.At.Before(since):
		case op == "resume" && ev.Type == string(runs.EventResumeRequested),
			op == "cancel" && ev.Type == string(runs.EventCancelRequested) && ev.Detail == "",
			op == "cancel" && ev.Type == string(runs.EventCancelled) && r.SupersededBy == "":
			return true
		}
	}
	return false
}

// do carries out one operation. For a read of a run's status it returns
// the time its last poll began, 0 otherwise. Its error is one of the
// ThreadAPI's kinds the model does not take as an output.
func (c *faultClient) do(t *testing.T, in linInput) (linOutput, int64, error) {
	ctx := t.Context()
	switch in.Op {
	case "create":
		err := c.api.CreateRun(ctx, in.Thread, in.Run, in.Strategy)
		if errors.Is(err, ErrBusy) {
			return linOutput{Err: "busy"}, 0, nil
		}
		return linOutput{}, 0, err
	case "read":
		msgs, err := c.api.Messages(ctx, in.Thread)
		return linOutput{Messages: msgs}, 0, err
	case "cancel", "resume":
		var err error
		if in.Op == "cancel" {
			err = c.api.Cancel(ctx, in.Run)
		} else {
			err = c.api.Resume(ctx, in.Run)
		}
		if errors.Is(err, runs.ErrInvalidState) {
			return linOutput{Err: "invalid"}, 0, nil
		}
		return linOutput{}, 0, err
	}
	// A run's status, waited for a while.
	deadline := time.Now().Add(time.Second)
	for {
		call := time.Now().UnixNano()
		r, err := c.api.Run(ctx, in.Run)
		switch {
		case err != nil:
			return linOutput{}, call, err
		case r.Status.Terminal():
			return linOutput{Status: r.final()}, call, nil
		case r.Status == pregel.RunInterrupted:
			return linOutput{Status: "interrupted"}, call, nil
		case time.Now().After(deadline):
			return linOutput{Status: "waiting"}, call, nil
		}
		time.Sleep(c.cfg.Poll)
	}
}

// final is the run's final status as the model knows it (finalStatus).
func (r RunView) final() string {
	return finalStatus(runs.Run{Status: r.Status, Discarded: r.Discarded, SupersededBy: r.SupersededBy})
}

// finishFaults cancels the runs the clients left (unrecorded), waits for
// every run to end, and reads how each ended (its runFact). A run whose
// create had an unknown outcome and that does not exist has no fact.
// cfg.Settle counts from the end of the first pass, when every run has
// been read and every unfinished one asked to cancel: a first pass over
// many runs on a slow store (moto) can take longer than Settle, and runs
// it had not reached yet were failed without ever being asked.
func finishFaults(t *testing.T, api ThreadAPI, created []string, cfg FaultConfig) map[string]runFact {
	t.Helper()
	ctx := t.Context()
	var deadline time.Time // set after the first pass
	facts := make(map[string]runFact, len(created))
	left := slices.Clone(created)
	for len(left) > 0 {
		var still []string
		for _, id := range left {
			var r RunView
			err := retry(ctx, cfg.Unavailable, nil, func() error {
				var err error
				r, err = api.Run(ctx, id)
				return err
			})
			switch {
			case errors.Is(err, runs.ErrNotFound):
				continue
			case err != nil:
				t.Errorf("run %s: %v", id, err)
				continue
			case r.Status.Terminal():
				f := runFact{Status: r.final()}
				if i := slices.Index(r.Messages, id); i >= 0 {
					f.Writes = len(r.Messages) - i
				}
				facts[id] = f
				continue
			case !deadline.IsZero() && time.Now().After(deadline):
				if cfg.Strict {
					t.Errorf("run %s still %s %v after every run left was asked to cancel (cancel asked %v, superseded by %q)", id, r.Status, cfg.Settle, r.CancelRequested, r.SupersededBy)
				}
				continue
			case !r.CancelRequested:
				_ = retry(ctx, cfg.Unavailable, nil, func() error { return api.Cancel(ctx, id) })
			}
			still = append(still, id)
		}
		left = still
		if deadline.IsZero() {
			deadline = time.Now().Add(cfg.Settle)
		}
		if len(left) > 0 {
			time.Sleep(cfg.Poll)
		}
	}
	return facts
}

// faultModel is the model of Linearizable, with operations of unknown
// outcome: such an operation leads from each configuration both to the
// one its success leads to and to the same configuration (it never took
// effect, or was refused). It forgets no final status (Last is ignored):
// it may be linearized after any later operation.
func faultModel(lm *linModel) porcupine.Model {
	m := lm.model()
	step := func(ctx context.Context, state, input, output any) (bool, any) {
		if output.(linOutput).Err != errUnknown {
			return lm.step(ctx, state, input, output)
		}
		in := input.(linInput)
		in.Last = false
		var next []*cfg
		for _, c := range lm.closure(ctx, state.(*cset)) {
			next = append(next, c)
			if n := lm.apply(c, in, linOutput{}); n != nil {
				next = append(next, n)
			}
		}
		if len(next) == 0 || ctx.Err() != nil {
			return false, nil
		}
		return true, newCset(next)
	}
	m.Step = func(state, input, output any) (bool, any) { return step(context.Background(), state, input, output) }
	m.StepContext = step
	describe := m.DescribeOperation
	m.DescribeOperation = func(input, output any) string {
		if output.(linOutput).Err == errUnknown {
			in := input.(linInput)
			return fmt.Sprintf("%s %s %s → unknown (answer lost)", in.Op, in.Run, in.Strategy)
		}
		return describe(input, output)
	}
	return m
}

// executed reports whether an event of type typ shows its run executing:
// a status only a run that holds its thread and ran a step reaches.
// cancelled does not: a queued run is cancelled without running.
func executed(typ string) bool {
	switch pregel.RunStatus(typ) {
	case pregel.RunRunning, pregel.RunInterrupted, pregel.RunDrained, pregel.RunCompleted, pregel.RunFailed:
		return true
	}
	return false
}

// orderFacts sets each run's Order (runFact) from its history: the runs
// of one thread ran one at a time, so the order of their first events
// that show them executing is the order in which they took the thread.
// That is `running`, or, when a run stopped in the step that started
// it, `interrupted`, `drained`, `completed` or `failed`: the serverless
// tick writes a run that interrupts in its first step from pending to
// interrupted, with no `running` between (the embedded scheduler writes
// `running` first). A run that never ran keeps Order 0 (not known).
// Without it the model must try every order of the runs queued at once,
// and a long history is not checked in time.
func orderFacts(ctx context.Context, t *testing.T, api ThreadAPI, history []porcupine.Operation, facts map[string]runFact, cfg FaultConfig) {
	t.Helper()
	type started struct {
		run string
		at  time.Time
	}
	by := map[string][]started{}
	seen := map[string]bool{}
	for _, op := range history {
		in := op.Input.(linInput)
		if in.Op != "create" || seen[in.Run] {
			continue
		}
		seen[in.Run] = true
		if _, ok := facts[in.Run]; !ok {
			continue
		}
		var evs []RunEvent
		if err := retry(ctx, cfg.Unavailable, nil, func() error {
			var err error
			evs, err = api.Events(ctx, in.Run)
			return err
		}); err != nil {
			t.Logf("events of %s: %v (its order is not known)", in.Run, err)
			continue
		}
		for _, ev := range evs {
			if executed(ev.Type) {
				by[in.Thread] = append(by[in.Thread], started{in.Run, ev.At})
				break
			}
		}
	}
	known := 0
	for _, rs := range by {
		known += len(rs)
	}
	t.Logf("order facts: the order on its thread of %d of %d runs (from the first event of each that shows it executing)", known, len(facts))
	for _, rs := range by {
		slices.SortFunc(rs, func(a, b started) int { return a.at.Compare(b.at) })
		for i, r := range rs {
			f := facts[r.run]
			f.Order = i + 1
			facts[r.run] = f
		}
	}
}
