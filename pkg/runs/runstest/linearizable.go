package runstest

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// Linearizable records the operations of concurrent clients on threads
// (creates with each strategy, reads of the state, waits for a run's final
// status) with their invocation and response times, and checks each
// thread's history with porcupine against a sequential model of a thread:
// one active run at a time, each strategy's promise, every completed run's
// writes in the thread exactly once, every discarded run reported as
// discarded and its writes absent. Runs execute in the background (the
// model lets them step, complete, drain or be discarded between client
// operations, as the real runs do). threads threads get clients clients
// each, every client making ops operations.
func Linearizable(t *testing.T, threads, clients, ops int, newEnv func(t *testing.T) ThreadEnv) {
	t.Helper()
	e := newThreadEnv(t, newEnv)
	e.open()
	var (
		mu      sync.Mutex
		history []porcupine.Operation
	)
	prefix := uniq(t)
	var wg sync.WaitGroup
	for th := range threads {
		thread := fmt.Sprintf("%s-%d", prefix, th)
		if _, _, err := e.svc.CreateThread(t.Context(), runs.CreateThreadRequest{ThreadID: thread}); err != nil {
			t.Fatal(err)
		}
		for c := range clients {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(th), uint64(c)))
				var mine []string
				for i := range ops {
					var in linInput
					in.Thread = thread
					switch p := rng.IntN(10); {
					case p < 4 || len(mine) == 0:
						in.Op = "create"
						in.Run = fmt.Sprintf("r%d-%d-%d", th, c, i)
						in.Strategy = []runs.Strategy{runs.StrategyReject, runs.StrategyEnqueue, runs.StrategyInterrupt, runs.StrategyRollback}[rng.IntN(4)]
					case p < 7:
						in.Op = "read"
					default:
						in.Op = "wait"
						in.Run = mine[rng.IntN(len(mine))]
					}
					call := time.Now().UnixNano()
					out := e.linDo(t, in)
					ret := time.Now().UnixNano()
					if in.Op == "create" && out.Err == "" {
						mine = append(mine, in.Run)
					}
					mu.Lock()
					history = append(history, porcupine.Operation{ClientId: th*clients + c, Input: in, Call: call, Output: out, Return: ret})
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(threadModel.ToModel(), history, 5*time.Minute)
	t.Logf("linearizability: %d operations on %d threads, %d clients each: %s (checked in %v)", len(history), threads, clients, res, time.Since(start).Round(time.Millisecond))
	if res != porcupine.Ok {
		if res == porcupine.Illegal {
			if f := t.TempDir() + "/history.html"; porcupine.VisualizePath(threadModel.ToModel(), info, f) == nil {
				t.Logf("the history is drawn in %s", f)
			}
		}
		t.Errorf("thread histories are not linearizable: %s", res)
	}
}

// linInput is one client operation on a thread.
type linInput struct {
	Thread   string
	Op       string // create, read, wait
	Run      string
	Strategy runs.Strategy
}

// linOutput is what the client saw: Err "busy" for a refused create; the
// messages of a read; the final status of a waited run.
type linOutput struct {
	Err      string
	Messages []string
	Status   string // completed, kept (superseded, its steps kept), discarded
}

func (e *tenv) linDo(t *testing.T, in linInput) linOutput {
	ctx := t.Context()
	switch in.Op {
	case "create":
		_, _, err := e.svc.CreateOnThread(ctx, in.Thread, runs.ThreadRunRequest{Graph: "chat", RunID: in.Run, Input: json.RawMessage(fmt.Sprintf(`{"messages":[%q]}`, in.Run)), Strategy: in.Strategy})
		var busy *runs.BusyError
		switch {
		case errors.As(err, &busy):
			return linOutput{Err: "busy"}
		case err != nil:
			t.Errorf("create %s: %v", in.Run, err)
			return linOutput{Err: err.Error()}
		}
		return linOutput{}
	case "read":
		st, err := e.svc.State(ctx, in.Thread)
		if err != nil {
			t.Errorf("read %s: %v", in.Thread, err)
			return linOutput{Err: err.Error()}
		}
		var msgs []string
		if raw, ok := st.Values["messages"]; ok {
			_ = json.Unmarshal(raw, &msgs)
		}
		return linOutput{Messages: msgs}
	default:
		deadline := time.Now().Add(60 * time.Second)
		for {
			r, err := e.svc.Get(ctx, in.Run)
			if err != nil {
				t.Errorf("get %s: %v", in.Run, err)
				return linOutput{Err: err.Error()}
			}
			if r.Status.Terminal() {
				switch {
				case r.Status == pregel.RunCompleted && !r.Discarded:
					return linOutput{Status: "completed"}
				case r.Status == pregel.RunCancelled && r.Discarded && r.SupersededBy != "":
					return linOutput{Status: "discarded"}
				case r.Status == pregel.RunCancelled && r.SupersededBy != "":
					return linOutput{Status: "kept"}
				}
				return linOutput{Status: fmt.Sprintf("%s discarded=%v superseded_by=%q", r.Status, r.Discarded, r.SupersededBy)}
			}
			if time.Now().After(deadline) {
				t.Errorf("run %s still %s after a minute", in.Run, r.Status)
				return linOutput{Err: "hung"}
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// The sequential model of a thread. A run writes its message at step 0,
// then "re:"+message, then "done" (the suite's chat graph): Done counts
// the writes committed. The state is the writes of the runs in the
// thread's lineage, then those of the active run.
type mThread struct {
	Lineage []mWrite
	Active  string
	Done    int  // writes of the active run committed (0: not started)
	Drain   bool // the active run was asked to drain (interrupt)
	Discard bool // the active run was rolled back
	Queue   []string
	Final   map[string]string // run → completed, kept, discarded
	Gone    map[string]bool   // runs superseded before: a second supersede does nothing
}

type mWrite struct {
	Run string
	N   int
}

var chatWrites = func(run string) []string { return []string{run, "re:" + run, "done"} }

func (m mThread) clone() mThread {
	m.Lineage = slices.Clone(m.Lineage)
	m.Queue = slices.Clone(m.Queue)
	f := make(map[string]string, len(m.Final))
	for k, v := range m.Final {
		f[k] = v
	}
	m.Final = f
	g := make(map[string]bool, len(m.Gone))
	for k, v := range m.Gone {
		g[k] = v
	}
	m.Gone = g
	return m
}

func (m mThread) key() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v|%s|%d|%v|%v|%v|", m.Lineage, m.Active, m.Done, m.Drain, m.Discard, m.Queue)
	keys := make([]string, 0, len(m.Final))
	for k := range m.Final {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s,", k, m.Final[k])
	}
	gone := make([]string, 0, len(m.Gone))
	for k := range m.Gone {
		gone = append(gone, k)
	}
	slices.Sort(gone)
	fmt.Fprintf(&b, "|%v", gone)
	return b.String()
}

func (m mThread) messages() []string {
	var out []string
	for _, w := range m.Lineage {
		out = append(out, chatWrites(w.Run)[:w.N]...)
	}
	if m.Active != "" {
		out = append(out, chatWrites(m.Active)[:m.Done]...)
	}
	return out
}

// end takes the active run off the thread with its final status, and
// starts the next queued one.
func (m mThread) end(status string) mThread {
	m = m.clone()
	switch status {
	case "completed", "kept":
		if m.Done > 0 {
			m.Lineage = append(m.Lineage, mWrite{m.Active, m.Done})
		}
	}
	m.Final[m.Active] = status
	m.Active, m.Done, m.Drain, m.Discard = "", 0, false, false
	if len(m.Queue) > 0 {
		m.Active, m.Queue = m.Queue[0], m.Queue[1:]
	}
	return m
}

// internal lists the states one background event leads to: the active
// run commits a step, completes, drains or is discarded.
func (m mThread) internal() []mThread {
	if m.Active == "" {
		return nil
	}
	var out []mThread
	if m.Done < 3 {
		n := m.clone()
		n.Done++
		out = append(out, n)
	}
	switch {
	case m.Discard:
		out = append(out, m.end("discarded"))
	case m.Done == 3:
		out = append(out, m.end("completed"))
	case m.Drain && m.Done > 0:
		out = append(out, m.end("kept"))
	}
	return out
}

// closure is every state background events lead to from m.
func closure(m mThread) []mThread {
	seen := map[string]bool{m.key(): true}
	all := []mThread{m}
	for i := 0; i < len(all); i++ {
		for _, n := range all[i].internal() {
			if k := n.key(); !seen[k] {
				seen[k] = true
				all = append(all, n)
			}
		}
	}
	return all
}

func (m mThread) apply(in linInput, out linOutput) (mThread, bool) {
	switch in.Op {
	case "create":
		if m.Active == "" {
			if out.Err != "" {
				return m, false
			}
			n := m.clone()
			n.Active, n.Done = in.Run, 1 // claimed and started: step 0 is committed
			return n, true
		}
		if in.Strategy == runs.StrategyReject {
			return m, out.Err == "busy"
		}
		if out.Err != "" {
			return m, false
		}
		n := m.clone()
		n.Queue = append(n.Queue, in.Run)
		if (in.Strategy == runs.StrategyInterrupt || in.Strategy == runs.StrategyRollback) && !n.Gone[n.Active] {
			n.Gone[n.Active] = true
			if in.Strategy == runs.StrategyRollback {
				n.Discard = true
			} else {
				n.Drain = true
			}
		}
		return n, true
	case "read":
		return m, out.Err == "" && slices.Equal(m.messages(), out.Messages)
	default:
		f, ok := m.Final[in.Run]
		return m, ok && out.Status == f && out.Err == ""
	}
}

var threadModel = porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var order []string
		for _, op := range history {
			th := op.Input.(linInput).Thread
			if _, ok := by[th]; !ok {
				order = append(order, th)
			}
			by[th] = append(by[th], op)
		}
		out := make([][]porcupine.Operation, 0, len(order))
		for _, th := range order {
			out = append(out, by[th])
		}
		return out
	},
	Init: func() []any { return []any{mThread{Final: map[string]string{}, Gone: map[string]bool{}}} },
	Step: func(state, input, output any) []any {
		in, out := input.(linInput), output.(linOutput)
		var next []any
		seen := map[string]bool{}
		for _, s := range closure(state.(mThread)) {
			if n, ok := s.apply(in, out); ok {
				if k := n.key(); !seen[k] {
					seen[k] = true
					next = append(next, n)
				}
			}
		}
		return next
	},
	Equal: func(a, b any) bool { return a.(mThread).key() == b.(mThread).key() },
	DescribeOperation: func(input, output any) string {
		in, out := input.(linInput), output.(linOutput)
		switch in.Op {
		case "create":
			return fmt.Sprintf("create %s %s → %s", in.Run, in.Strategy, out.Err)
		case "read":
			return fmt.Sprintf("read → %v", out.Messages)
		}
		return fmt.Sprintf("wait %s → %s", in.Run, out.Status)
	},
	DescribeState: func(state any) string { return state.(mThread).key() },
}
