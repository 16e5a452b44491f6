package runstest

import (
	"encoding/json"
	"errors"
	"fmt"
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

// Linearizable records the operations of concurrent clients on threads
// with their invocation and response times, and checks each thread's
// history with porcupine against a sequential model of a thread (see
// linmodel.go). The operations: creates with each strategy (some of them
// of runs that stop at an interrupt and wait for an answer), reads of the
// thread's state, reads of a run's status (waiting for it to end, for a
// while), cancels, and resumes of the runs waiting for an answer. The
// model: one active run at a time; each strategy's promise; a run's
// writes in the thread once it completed, or was superseded by interrupt
// or cancelled (the steps it committed), never once it was rolled back;
// each run's final status saying which. Runs execute in the background
// (the model lets them step, pause, end and pass the thread on between
// client operations, as the real runs do). threads threads get clients
// clients each, every client making ops operations. The test fails if a
// history is not linearizable, if the checker cannot decide in time, or
// if a run is still not finished a while after the clients cancelled
// what they left.
func Linearizable(t *testing.T, threads, clients, ops int, newEnv func(t *testing.T) ThreadEnv) {
	t.Helper()
	res := CheckLinearizable(t, LinConfig{Threads: threads, Clients: clients, Ops: ops, Strict: true}, newEnv)
	if res != porcupine.Ok {
		t.Errorf("thread histories are not linearizable: %s", res)
	}
}

// LinConfig sizes a linearizability check.
type LinConfig struct {
	Threads, Clients, Ops int
	// Strict fails the test on an operation's unexpected error and on a
	// run left unfinished; without it (a check of the checker, against
	// a store broken on purpose) such errors are only outputs the model
	// refuses.
	Strict bool
	// Timeout bounds the checker (default 5 minutes).
	Timeout time.Duration
	// Settle is how long the runs may take to end after the clients
	// stopped (default 30 s).
	Settle time.Duration
	// Parallel is how many threads' clients run at once (default
	// SUPERSTEP_LINEARIZABLE_PARALLEL, or 8):
	// more, and the runs the embedded scheduler executes fall behind
	// the clients, queues grow long, and runs are still unfinished when
	// their facts are read (the model then cannot prune its state).
	Parallel int
	// Poll is the pause between two reads of a run's status while a
	// client waits for it (default SUPERSTEP_LINEARIZABLE_POLL, or 1 ms):
	// on moto, clients polling every millisecond starve the runs.
	Poll time.Duration
}

// CheckLinearizable runs the clients of Linearizable on the stores
// newEnv makes and returns porcupine's verdict on their histories: Ok,
// Illegal (the history is drawn as HTML under SUPERSTEP_LINEARIZABLE_HTML,
// or the test's temp dir) or Unknown (not decided within the timeout).
func CheckLinearizable(t *testing.T, cfg LinConfig, newEnv func(t *testing.T) ThreadEnv) porcupine.CheckResult {
	t.Helper()
	e := newThreadEnv(t, newEnv)
	e.open()
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("SUPERSTEP_LINEARIZABLE_SEED"), 10, 64); err == nil {
		seed = v
	}
	var (
		mu      sync.Mutex
		history []porcupine.Operation
		created []string
	)
	prefix := uniq(t)
	begin := time.Now()
	if cfg.Parallel <= 0 {
		cfg.Parallel, _ = strconv.Atoi(os.Getenv("SUPERSTEP_LINEARIZABLE_PARALLEL"))
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = 8
	}
	if cfg.Poll <= 0 {
		cfg.Poll, _ = time.ParseDuration(os.Getenv("SUPERSTEP_LINEARIZABLE_POLL"))
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Millisecond
	}
	slots := make(chan struct{}, cfg.Parallel)
	var wg sync.WaitGroup
	for th := range cfg.Threads {
		slots <- struct{}{}
		var tw sync.WaitGroup
		thread := fmt.Sprintf("%s-%d", prefix, th)
		if _, _, err := e.svc.CreateThread(t.Context(), runs.CreateThreadRequest{ThreadID: thread}); err != nil {
			t.Fatal(err)
		}
		for c := range cfg.Clients {
			cl := &linClient{e: e, strict: cfg.Strict, poll: cfg.Poll, thread: thread, rng: rand.New(rand.NewPCG(seed, uint64(th*cfg.Clients+c))), name: fmt.Sprintf("%d-%d", th, c)}
			tw.Go(func() {
				for i := range cfg.Ops {
					in := cl.next(i)
					call := time.Now().UnixNano()
					out, call2 := cl.do(t, in)
					ret := time.Now().UnixNano()
					if call2 != 0 {
						call = call2 // a status read: only its last poll counts
					}
					cl.saw(in, out)
					mu.Lock()
					history = append(history, porcupine.Operation{ClientId: th*cfg.Clients + c, Input: in, Call: call, Output: out, Return: ret})
					mu.Unlock()
				}
				mu.Lock()
				created = append(created, cl.mine...)
				mu.Unlock()
			})
		}
		wg.Go(func() {
			tw.Wait()
			<-slots
		})
	}
	wg.Wait()
	clients := time.Since(begin)
	if cfg.Settle == 0 {
		cfg.Settle = 30 * time.Second
	}
	e.finish(t, created, cfg.Strict, cfg.Settle, max(cfg.Poll, 2*time.Millisecond))
	facts := e.facts(t, created)
	if dir := os.Getenv("SUPERSTEP_LINEARIZABLE_DUMP"); dir != "" {
		if err := dumpHistory(filepath.Join(dir, fmt.Sprintf("history-%d.json", time.Now().UnixNano())), history, facts); err != nil {
			t.Log(err)
		}
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Minute
	}
	start := time.Now()
	model := newLinModel(history, facts).model()
	res, info := porcupine.CheckOperationsVerbose(model, history, cfg.Timeout)
	t.Logf("linearizability: %d operations on %d threads, %d clients each, %d threads at a time (seed %d): %s (clients %v, checked in %v)", len(history), cfg.Threads, cfg.Clients, min(cfg.Parallel, cfg.Threads), seed, res, clients.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	if res == porcupine.Illegal {
		dir := os.Getenv("SUPERSTEP_LINEARIZABLE_HTML")
		if dir == "" {
			dir = t.TempDir()
		}
		if f := filepath.Join(dir, fmt.Sprintf("history-%d.html", time.Now().UnixNano())); porcupine.VisualizePath(model, info, f) == nil {
			t.Logf("the history is drawn in %s", f)
		}
	}
	return res
}

// finish cancels the runs the clients left (unrecorded: the history is
// complete), and checks that every run ends. It first asks every
// unfinished run to cancel, then waits settle for all of them: with one
// deadline for asking and waiting run by run, a slow store (moto under
// load) used it up before the later runs were even asked, and a run
// never asked looked stuck (issue 22: askr2-2-32 on DynamoDB).
func (e *tenv) finish(t *testing.T, created []string, strict bool, settle, poll time.Duration) {
	t.Helper()
	ctx := t.Context()
	cancel := func(id string) {
		if _, err := e.svc.Cancel(ctx, id); err != nil && !errors.Is(err, runs.ErrInvalidState) {
			t.Logf("cancel %s after the clients stopped: %v", id, err)
		}
	}
	for _, id := range created {
		if r, err := e.svc.Get(ctx, id); err == nil && !r.Status.Terminal() && !r.CancelRequested {
			cancel(id)
		}
	}
	deadline := time.Now().Add(settle)
	left := slices.Clone(created)
	for len(left) > 0 {
		next := left[:0]
		for _, id := range left {
			r, err := e.svc.Get(ctx, id)
			if err != nil || r.Status.Terminal() {
				continue
			}
			next = append(next, id)
			if !r.CancelRequested {
				cancel(id)
			}
		}
		left = next
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(poll)
	}
	if !strict {
		return
	}
	for _, id := range left {
		r, err := e.svc.Get(ctx, id)
		if err != nil {
			continue
		}
		where := "on no thread"
		if th, err := e.svc.Threads.GetThread(ctx, r.ThreadID); err == nil {
			switch {
			case th.Active == id:
				where = "active on its thread"
			case slices.Contains(th.Queue, id):
				where = fmt.Sprintf("queued on its thread (active %q)", th.Active)
			}
		}
		t.Errorf("run %s still %s %v after its cancel was asked (cancel requested %v, superseded by %q, %s)", id, r.Status, settle, r.CancelRequested, r.SupersededBy, where)
	}
}

// facts reads how each run ended (runFact), once all have.
func (e *tenv) facts(t *testing.T, created []string) map[string]runFact {
	t.Helper()
	facts := make(map[string]runFact, len(created))
	claims, order := e.order.orders()
	for _, id := range created {
		r, err := e.svc.Get(t.Context(), id)
		if err != nil || !r.Status.Terminal() {
			continue
		}
		f := runFact{Status: finalStatus(r), Order: order[id], Claim: claims[id]}
		cp, err := e.svc.Checkpoints.Load(t.Context(), id, pregel.Latest)
		if err == nil {
			var msgs []string
			if raw, ok := cp.Values["messages"]; ok && json.Unmarshal(raw, &msgs) == nil {
				if i := slices.Index(msgs, id); i >= 0 {
					f.Writes = len(msgs) - i
				}
			}
		}
		facts[id] = f
	}
	return facts
}

// linClient is one client of a thread.
type linClient struct {
	e      *tenv
	strict bool
	poll   time.Duration
	thread string
	name   string
	rng    *rand.Rand
	mine   []string // the runs it created
	asking []string // its runs that will wait for an answer, not yet answered
}

// next chooses operation i.
func (c *linClient) next(i int) linInput {
	in := linInput{Thread: c.thread}
	p := c.rng.IntN(100)
	switch {
	case len(c.asking) > 0 && p < 30:
		in.Run = c.asking[c.rng.IntN(len(c.asking))]
		in.Op = "resume"
		if c.rng.IntN(4) == 0 {
			in.Op = "cancel"
		}
	case len(c.mine) == 0 || p < 60:
		in.Op = "create"
		in.Run = fmt.Sprintf("r%s-%d", c.name, i)
		if c.rng.IntN(4) == 0 {
			in.Run = "ask" + in.Run
		}
		in.Strategy = []runs.Strategy{runs.StrategyReject, runs.StrategyEnqueue, runs.StrategyInterrupt, runs.StrategyRollback}[c.rng.IntN(4)]
	case p < 75:
		in.Op = "read"
	case p < 92:
		in.Op = "wait"
		in.Run = c.mine[c.rng.IntN(len(c.mine))]
	default:
		in.Op = "cancel"
		in.Run = c.mine[c.rng.IntN(len(c.mine))]
	}
	return in
}

// saw keeps what the client learnt from an operation.
func (c *linClient) saw(in linInput, out linOutput) {
	switch {
	case in.Op == "create" && out.Err == "":
		c.mine = append(c.mine, in.Run)
		if asks(in.Run) {
			c.asking = append(c.asking, in.Run)
		}
	case (in.Op == "resume" || in.Op == "cancel") && out.Err == "",
		in.Op == "wait" && out.Status != "waiting" && out.Status != "interrupted",
		out.Err == "invalid":
		c.asking = slices.DeleteFunc(c.asking, func(r string) bool { return r == in.Run })
	}
}

// linInput is one client operation on a thread.
// linInput is one client operation on a thread.
type linInput struct {
	Thread   string
	Op       string // create, read, wait (a run's status), cancel, resume
	Run      string
	Strategy runs.Strategy
	// Last marks the last operation asking about Run (set before the
	// check): the model forgets the run's final status after it.
	Last bool
}

// linOutput is what the client saw: Err "busy" for a refused create,
// "invalid" for a refused cancel or resume; the messages of a read; the
// status of a run (waiting, interrupted, or how it ended: see
// finalStatus).
type linOutput struct {
	Err      string
	Messages []string
	Status   string
}

// hash is the rolling hash of the messages read.
func (o linOutput) hash() uint64 {
	var h uint64
	for _, m := range o.Messages {
		h = extend(h, m)
	}
	return h
}

// do carries out one operation. For a read of a run's status it returns
// the time its last poll began, 0 otherwise.
func (c *linClient) do(t *testing.T, in linInput) (linOutput, int64) {
	ctx := t.Context()
	fail := func(what string, err error) linOutput {
		if c.strict {
			t.Errorf("%s %s: %v", what, in.Run, err)
		} else {
			t.Logf("%s %s: %v", what, in.Run, err)
		}
		return linOutput{Err: err.Error()}
	}
	switch in.Op {
	case "create":
		_, _, err := c.e.svc.CreateOnThread(ctx, in.Thread, runs.ThreadRunRequest{Graph: "chat", RunID: in.Run, Input: json.RawMessage(fmt.Sprintf(`{"messages":[%q]}`, in.Run)), Strategy: in.Strategy})
		var busy *runs.BusyError
		switch {
		case errors.As(err, &busy):
			return linOutput{Err: "busy"}, 0
		case err != nil:
			return fail("create", err), 0
		}
		return linOutput{}, 0
	case "read":
		st, err := c.e.svc.State(ctx, in.Thread)
		if err != nil {
			return fail("read", err), 0
		}
		var msgs []string
		if raw, ok := st.Values["messages"]; ok {
			if err := json.Unmarshal(raw, &msgs); err != nil {
				return fail("read", err), 0
			}
		}
		return linOutput{Messages: msgs}, 0
	case "cancel", "resume":
		var err error
		if in.Op == "cancel" {
			_, err = c.e.svc.Cancel(ctx, in.Run)
		} else {
			_, err = c.e.svc.Resume(ctx, in.Run, runs.ResumeRequest{Value: json.RawMessage(`"yes"`)})
		}
		switch {
		case errors.Is(err, runs.ErrInvalidState):
			return linOutput{Err: "invalid"}, 0
		case err != nil:
			return fail(in.Op, err), 0
		}
		return linOutput{}, 0
	}
	// A run's status, waited for a while: the operation is the last
	// read of it.
	deadline := time.Now().Add(time.Second)
	for {
		call := time.Now().UnixNano()
		r, err := c.e.svc.Get(ctx, in.Run)
		if err != nil {
			return fail("status", err), call
		}
		switch {
		case r.Status.Terminal():
			return linOutput{Status: finalStatus(r)}, call
		case r.Status == pregel.RunInterrupted:
			return linOutput{Status: "interrupted"}, call
		case time.Now().After(deadline):
			return linOutput{Status: "waiting"}, call
		}
		time.Sleep(c.poll)
	}
}

// finalStatus says how a run ended, as the model knows it: completed,
// cancelled (by a client), kept (superseded by interrupt: its steps stay)
// or discarded (rolled back).
func finalStatus(r runs.Run) string {
	switch {
	case r.Status == pregel.RunCompleted && !r.Discarded && r.SupersededBy == "":
		return "completed"
	case r.Status == pregel.RunCompleted && !r.Discarded:
		return "completed" // an interrupt came as its last step was done
	case r.Status == pregel.RunCancelled && r.Discarded && r.SupersededBy != "":
		return "discarded"
	case r.Status == pregel.RunCancelled && !r.Discarded && r.SupersededBy != "":
		return "kept"
	case r.Status == pregel.RunCancelled && !r.Discarded:
		return "cancelled"
	}
	return fmt.Sprintf("%s discarded=%v superseded_by=%q", r.Status, r.Discarded, r.SupersededBy)
}

// dumped is a history as SUPERSTEP_LINEARIZABLE_DUMP writes it, for
// checking it again (CheckDumpedHistory).
type dumped struct {
	Ops   []dumpedOp
	Facts map[string]runFact
}

type dumpedOp struct {
	Client       int
	Call, Return int64
	In           linInput
	Out          linOutput
}

func dumpHistory(path string, history []porcupine.Operation, facts map[string]runFact) error {
	d := dumped{Ops: make([]dumpedOp, len(history)), Facts: facts}
	for i, op := range history {
		d.Ops[i] = dumpedOp{Client: op.ClientId, Call: op.Call, Return: op.Return, In: op.Input.(linInput), Out: op.Output.(linOutput)}
	}
	data, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// CheckDumpedHistory checks again a history SUPERSTEP_LINEARIZABLE_DUMP
// wrote, and returns the verdict and how long the check took.
func CheckDumpedHistory(path string, timeout time.Duration) (porcupine.CheckResult, time.Duration, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", 0, err
	}
	var d dumped
	if err := json.Unmarshal(data, &d); err != nil {
		return "", 0, err
	}
	history := make([]porcupine.Operation, len(d.Ops))
	for i, op := range d.Ops {
		history[i] = porcupine.Operation{ClientId: op.Client, Call: op.Call, Return: op.Return, Input: op.In, Output: op.Out}
	}
	start := time.Now()
	res := porcupine.CheckOperationsTimeout(newLinModel(history, d.Facts).model(), history, timeout)
	return res, time.Since(start), nil
}
