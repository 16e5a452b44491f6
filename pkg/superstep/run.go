//go:build !superstep.lambda

package superstep

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// maxAnswers bounds how many times --answer resumes one run, in case a
// graph interrupts forever.
const maxAnswers = 100

// localFlags are the flags run and resume share.
type localFlags struct {
	store  string
	answer string
	// answered: --answer was given (possibly as "").
	answered bool
	json     bool
	quiet    bool
	noInput  bool
	grace    time.Duration
}

func (f *localFlags) register(c *cobra.Command, env Env) {
	fl := c.Flags()
	fl.StringVar(&f.store, "store", env.storePath(), "SQLite file holding checkpoints and runs (created if missing)")
	fl.StringVar(&f.answer, "answer", "", "answer every interrupt with `VALUE` (JSON, or plain text sent as a string) and resume")
	fl.BoolVar(&f.json, "json", false, "print one JSON result object on stdout instead of the table and state")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "do not print progress on stderr")
	fl.BoolVar(&f.noInput, "no-input", false, "never prompt for an answer, even on a terminal")
	fl.DurationVar(&f.grace, "grace", 10*time.Second, "on SIGINT/SIGTERM, wait this long for the run to drain before cancelling it")
	c.PreRun = func(c *cobra.Command, _ []string) { f.answered = c.Flags().Changed("answer") }
}

func newRunCmd(env Env) *cobra.Command {
	var (
		f     localFlags
		input string
		text  string
		runID string
	)
	c := &cobra.Command{
		Use:   "run GRAPH --input JSON|@FILE",
		Short: "Run a registered graph in this process, on a SQLite file",
		Long: `Run a registered graph in this process. Checkpoints go to a SQLite file
(--store), so a run that stops (interrupt, drain, signal, crash) can be
continued with "superstep resume RUN_ID".

Progress is printed on stderr as the run goes: each superstep, each node's
status as it finishes, and timings. At the end, stdout gets a table of the
node statuses (step, node, status, attempts, reason) and the final state,
or with --json one object: run_id, graph, status, step, values, counters,
interrupts, drain_reason, error, nodes.

When the run is interrupted (a node waits for an answer), --answer VALUE
resumes it with VALUE, again for every later interrupt; a node that
refuses VALUE (it asks again, saying why) stops the command with code 3
and the reason. Without --answer and on a terminal, you are prompted for
the answer; otherwise the command exits with code 3 and prints how to
resume.

On SIGINT or SIGTERM the run drains: it stops at the next superstep
boundary (reason "signal: interrupt" or "signal: terminated"). If it has
not stopped after --grace, or on a second signal, it is cancelled. Either
way it can be resumed.

` + exitCodesHelp,
		Example: `  superstep run counter --input '{"limit": 3}'
  superstep run assistant --text "Where is my order A-1002?"
  superstep run support-triage --input @examples/triage/input.json --answer approve
  superstep run support-triage --input @examples/triage/input.json --json > result.json`,
		Args: exactArgs("GRAPH"),
		RunE: func(c *cobra.Command, args []string) error {
			reg, err := env.registry()
			if err != nil {
				return err
			}
			g, err := lookupGraph(reg, args[0])
			if err != nil {
				return err
			}
			if c.Flags().Changed("input") && c.Flags().Changed("text") {
				return usageErr(c, fmt.Errorf("give --input or --text, not both"))
			}
			var raw json.RawMessage
			if c.Flags().Changed("input") {
				if raw, err = readJSONArg("input", input, env.Stdin); err != nil {
					return usageErr(c, err)
				}
			}
			if c.Flags().Changed("text") {
				raw, _ = json.Marshal(text)
			}
			// Plain text (--text, or a JSON string as --input): the graph's
			// text input, a user message for an agent.
			if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '"' {
				var s string
				if err := json.Unmarshal(t, &s); err != nil {
					return usageErr(c, fmt.Errorf("--input: %w", err))
				}
				if raw, err = g.InputFromText(s); err != nil {
					if errors.Is(err, pregel.ErrNoTextInput) {
						return usageErr(c, fmt.Errorf("graph %q takes no text input: give --input as a JSON object of channel values (channels: %s)", g.Name(), strings.Join(g.Channels(), ", ")))
					}
					return failed(err)
				}
			}
			if runID == "" {
				runID = pregel.NewRunID()
			} else if !runs.ValidID(runID) {
				return usageErr(c, fmt.Errorf("--run-id %q must be 1 to 128 letters, digits, '.', '_', ':' or '-'", runID))
			}
			if _, err := g.Start(c.Context(), runID, raw); err != nil {
				return badInput(fmt.Errorf("input of graph %q: %s", g.Name(), strings.TrimPrefix(err.Error(), "pregel: ")))
			}
			ls, err := openLocal(c.Context(), f.store)
			if err != nil {
				return err
			}
			defer ls.Close()
			s := newSession(env, &f, g, ls, runID)
			return s.drive(c.Context(), func(ctx context.Context, opts []pregel.RunOption) (*pregel.Result, error) {
				return g.Run(ctx, raw, append(opts, pregel.WithRunID(runID))...)
			})
		},
	}
	f.register(c, env)
	c.Flags().StringVarP(&input, "input", "i", "", "the run's input: `JSON` (an object of channel values, or a string: text), @FILE, or - for stdin")
	c.Flags().StringVar(&text, "text", "", "plain `TEXT` as the input (a user message for an agent)")
	c.Flags().StringVar(&runID, "run-id", "", "the run's id (default: a random one)")
	return c
}

func newResumeCmd(env Env) *cobra.Command {
	var f localFlags
	c := &cobra.Command{
		Use:   "resume RUN_ID [--answer VALUE]",
		Short: "Continue a run of the local store: interrupted, drained, cancelled or crashed",
		Long: `Continue a run from its last committed superstep in the SQLite file
(--store). Tasks whose results were recorded are not run again.

An interrupted run needs an answer: --answer VALUE (JSON, or plain text
sent as a string), or typed at the prompt on a terminal. The output and
signal handling are those of "superstep run".

` + exitCodesHelp,
		Example: `  superstep resume 5c1e0b9d2f1a --answer approve
  superstep resume 5c1e0b9d2f1a --answer '{"approved": false, "note": "wrong article"}'`,
		Args: exactArgs("RUN_ID"),
		RunE: func(c *cobra.Command, args []string) error {
			runID := args[0]
			reg, err := env.registry()
			if err != nil {
				return err
			}
			if _, err := os.Stat(f.store); err != nil {
				return badInput(fmt.Errorf("no store at %s (--store): %w", f.store, err))
			}
			ls, err := openLocal(c.Context(), f.store)
			if err != nil {
				return err
			}
			defer ls.Close()
			cp, err := ls.cp.Load(c.Context(), runID, pregel.Latest)
			if errors.Is(err, pregel.ErrNotFound) {
				return badInput(fmt.Errorf("run %q is not in %s; list runs with '%s runs list' on a dev server over this directory", runID, f.store, progName(env)))
			}
			if err != nil {
				return failed(fmt.Errorf("load run %q: %w", runID, err))
			}
			g, err := lookupGraph(reg, cp.Graph)
			if err != nil {
				return err
			}
			if err := ls.resumable(c.Context(), runID); err != nil {
				return err
			}
			s := newSession(env, &f, g, ls, runID)
			pending, err := ls.cp.PendingTasks(c.Context(), runID, cp.Step+1)
			if err != nil {
				return failed(fmt.Errorf("load run %q: %w", runID, err))
			}
			var waiting []pregel.InterruptInfo
			for _, p := range pending {
				if p.Status == pregel.NodeInterrupted {
					for _, in := range p.Interrupts {
						if _, ok := p.Resume[in.ID]; !ok {
							waiting = append(waiting, in)
						}
					}
				}
			}
			var first json.RawMessage
			if len(waiting) > 0 {
				var ok bool
				if first, ok = s.answerFor(c.Context(), runID, waiting); !ok {
					return badInput(fmt.Errorf("run %q waits for an answer to %s; resume it with --answer VALUE", runID, describeInterrupts(waiting)))
				}
			}
			return s.drive(c.Context(), func(ctx context.Context, opts []pregel.RunOption) (*pregel.Result, error) {
				if first != nil {
					opts = append(opts, pregel.WithResume(first))
				}
				return g.Resume(ctx, runID, opts...)
			})
		},
	}
	f.register(c, env)
	return c
}

// session drives one run in this process: progress, signals, answers and
// the final report.
type session struct {
	env   Env
	flags *localFlags
	graph *pregel.Graph
	store *localStore
	runID string
	ctl   *pregel.Control

	mu      sync.Mutex
	signal  string        // the first signal received, e.g. "interrupt"
	stopped chan struct{} // closed on the first signal

	// Used by the driving goroutine only.
	stdin    *bufio.Reader
	answered int
	// answeredIDs are the interrupts --answer has answered.
	answeredIDs map[string]bool
}

func newSession(env Env, f *localFlags, g *pregel.Graph, ls *localStore, runID string) *session {
	return &session{env: env, flags: f, graph: g, store: ls, runID: runID, ctl: &pregel.Control{}, stopped: make(chan struct{})}
}

func (s *session) signalled() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.signal
}

// watchSignals drains the run on the first signal and cancels it after
// the grace period or on a second signal.
func (s *session) watchSignals(sigs <-chan os.Signal, done <-chan struct{}) {
	var sig os.Signal
	select {
	case sig = <-sigs:
	case <-done:
		return
	}
	name := signalName(sig)
	s.mu.Lock()
	s.signal = name
	close(s.stopped)
	s.mu.Unlock()
	reason := "signal: " + name
	s.ctl.RequestDrain(reason)
	fmt.Fprintf(s.env.Stderr, "\n%s: draining run %s at the next superstep boundary; cancelling it in %s (signal again to cancel now)\n", reason, s.runID, s.flags.grace)
	timer := time.NewTimer(s.flags.grace)
	defer timer.Stop()
	select {
	case <-timer.C:
		fmt.Fprintf(s.env.Stderr, "run %s did not drain within %s: cancelling it\n", s.runID, s.flags.grace)
	case sig = <-sigs:
		fmt.Fprintf(s.env.Stderr, "%s again: cancelling run %s\n", signalName(sig), s.runID)
	case <-done:
		return
	}
	s.ctl.Cancel()
}

// signalName names a signal the way the drain reason does: "interrupt",
// "terminated".
func signalName(sig os.Signal) string {
	if ss, ok := sig.(syscall.Signal); ok {
		return ss.String()
	}
	return sig.String()
}

func (s *session) options() []pregel.RunOption {
	opts := []pregel.RunOption{pregel.WithStore(s.store.cp), pregel.WithControl(s.ctl)}
	if !s.flags.quiet {
		opts = append(opts, pregel.WithObserver(newProgress(s.env.Stderr).observe))
	}
	return opts
}

// drive starts the run with first, answers its interrupts while it can,
// reports where it ended and returns the matching exit error.
func (s *session) drive(ctx context.Context, first func(context.Context, []pregel.RunOption) (*pregel.Result, error)) error {
	sigs, stop := s.env.signals()
	defer stop()
	done := make(chan struct{})
	defer close(done)
	go s.watchSignals(sigs, done)

	res, err := first(ctx, s.options())
	for err == nil && res.Status == pregel.RunInterrupted && s.signalled() == "" {
		answer, ok := s.answerFor(ctx, res.RunID, res.Interrupts)
		if !ok {
			break
		}
		res, err = s.graph.Resume(ctx, res.RunID, append(s.options(), pregel.WithResume(answer))...)
	}
	if errors.Is(err, pregel.ErrIncompatible) {
		// This code's graph cannot continue the run: it stops drained,
		// its checkpoints and recorded answers intact, resumable on
		// compatible code.
		res, err = s.incompatible(ctx, err)
	}
	if res == nil {
		switch {
		case err == nil:
			return failed(errors.New("the run returned no result"))
		case errors.Is(err, pregel.ErrInvalidInput), errors.Is(err, pregel.ErrInvalidResume), errors.Is(err, pregel.ErrStepConflict):
			return badInput(errors.New(strings.TrimPrefix(err.Error(), "pregel: ")))
		}
		var ee *ExitError
		if errors.As(err, &ee) {
			return err
		}
		return failed(err)
	}
	// The run record follows the result even when the command was
	// cancelled, so a context that outlives ctx.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if rerr := s.store.finished(fctx, res); rerr != nil {
		fmt.Fprintf(s.env.Stderr, "warning: update run record: %v\n", rerr)
	}
	if rerr := s.report(fctx, res); rerr != nil {
		return failed(rerr)
	}
	if code := ExitCode(res.Status); code != ExitOK {
		return &ExitError{Code: code, Silent: true}
	}
	return nil
}

// incompatible is the result of a run this code's graph cannot continue
// (cause wraps pregel.ErrIncompatible): drained at its last committed
// step, the reason naming what changed and both versions.
func (s *session) incompatible(ctx context.Context, cause error) (*pregel.Result, error) {
	cp, err := s.store.cp.Load(ctx, s.runID, pregel.Latest)
	if err != nil {
		return nil, fmt.Errorf("load run %q: %w", s.runID, err)
	}
	return &pregel.Result{RunID: cp.RunID, Graph: cp.Graph, Status: pregel.RunDrained, Step: cp.Step, Values: cp.Values,
		Counters: cp.Counters, DrainReason: strings.TrimPrefix(cause.Error(), "pregel: ")}, nil
}

// answerFor returns the answer to pending interrupts: --answer, or one
// typed at the prompt on a terminal. ok is false when there is none.
//
// Only the goroutine driving the run calls it: a prompt waits for a line
// without holding s.mu, so that a signal can end the wait.
func (s *session) answerFor(ctx context.Context, runID string, pending []pregel.InterruptInfo) (json.RawMessage, bool) {
	if s.answered >= maxAnswers {
		fmt.Fprintf(s.env.Stderr, "run %s was answered %d times and interrupts again; stopping\n", runID, s.answered)
		return nil, false
	}
	for _, in := range pending {
		if in.Error != "" {
			fmt.Fprintf(s.env.Stderr, "%s (%s) did not accept the last answer: %s\n", in.Node, in.ID, in.Error)
		}
	}
	if s.flags.answered {
		for _, in := range pending {
			if in.Error != "" && s.answeredIDs[in.ID] {
				// The same answer would be refused again.
				fmt.Fprintf(s.env.Stderr, "--answer does not answer %s (%s); resume the run with another answer\n", in.Node, in.ID)
				return nil, false
			}
		}
		if s.answeredIDs == nil {
			s.answeredIDs = make(map[string]bool)
		}
		for _, in := range pending {
			s.answeredIDs[in.ID] = true
		}
		s.answered++
		if !s.flags.quiet {
			fmt.Fprintf(s.env.Stderr, "answering %s with %s\n", describeInterrupts(pending), parseAnswer(s.flags.answer))
		}
		return parseAnswer(s.flags.answer), true
	}
	if s.flags.noInput || !s.env.interactive() {
		return nil, false
	}
	if s.stdin == nil {
		s.stdin = bufio.NewReader(s.env.Stdin)
	}
	w := s.env.Stderr
	fmt.Fprintf(w, "\nrun %s waits for an answer:\n", runID)
	for _, in := range pending {
		fmt.Fprintf(w, "  %s (interrupt %s):\n    %s\n", in.Node, in.ID, indentJSON(in.Value, "    "))
	}
	fmt.Fprint(w, "answer (JSON, or text sent as a string; empty to stop): ")
	line := make(chan string, 1)
	go func() {
		l, _ := s.stdin.ReadString('\n')
		line <- l
	}()
	var l string
	select {
	case l = <-line:
	case <-s.stopped:
		return nil, false
	case <-ctx.Done():
		return nil, false
	}
	if strings.TrimSpace(l) == "" {
		return nil, false
	}
	s.answered++
	return parseAnswer(strings.TrimRight(l, "\r\n")), true
}

func describeInterrupts(ins []pregel.InterruptInfo) string {
	parts := make([]string, len(ins))
	for i, in := range ins {
		parts[i] = fmt.Sprintf("%s (%s)", in.Node, in.ID)
	}
	return strings.Join(parts, ", ")
}

// nodeRow is one task in the table of node statuses.
type nodeRow struct {
	Step     int               `json:"step"`
	Node     string            `json:"node"`
	Status   pregel.NodeStatus `json:"status"`
	Attempts int               `json:"attempts"`
	Reason   string            `json:"reason,omitempty"`
}

// taskRows lists the tasks of a run's history, and of its uncommitted
// step, as table rows.
func taskRows(hist []pregel.StepInfo, pending []pregel.TaskResult) []nodeRow {
	var rows []nodeRow
	last := 0
	for _, st := range hist {
		last = max(last, st.Step)
		for _, t := range st.Tasks {
			rows = append(rows, nodeRow{Step: st.Step, Node: t.Node, Status: t.Status, Attempts: t.Attempts, Reason: cmpOr(t.Error, t.Reason)})
		}
	}
	for _, t := range pending {
		rows = append(rows, nodeRow{Step: last + 1, Node: t.Node, Status: t.Status, Attempts: t.Attempts, Reason: cmpOr(t.Error, t.Reason)})
	}
	return rows
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func writeNodeTable(w io.Writer, rows []nodeRow) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "STEP\tNODE\tSTATUS\tATTEMPTS\tREASON")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\n", r.Step, r.Node, r.Status, r.Attempts, orDash(oneLine(r.Reason, 100)))
	}
	return tw.Flush()
}

// runResult is the --json output of run and resume.
type runResult struct {
	RunID       string                     `json:"run_id"`
	Graph       string                     `json:"graph"`
	Status      pregel.RunStatus           `json:"status"`
	Step        int                        `json:"step"`
	Values      map[string]json.RawMessage `json:"values"`
	Counters    pregel.Counters            `json:"counters"`
	Interrupts  []pregel.InterruptInfo     `json:"interrupts,omitempty"`
	DrainReason string                     `json:"drain_reason,omitempty"`
	Error       string                     `json:"error,omitempty"`
	Nodes       []nodeRow                  `json:"nodes"`
	Usage       *pregel.UsageTotals        `json:"usage,omitempty"`
}

// report prints where the run ended: the JSON object, or the node table,
// pending interrupts, final state and a summary; and on stderr how to
// continue a run that can be resumed.
func (s *session) report(ctx context.Context, res *pregel.Result) error {
	hist, err := s.store.cp.History(ctx, res.RunID)
	if err != nil {
		return fmt.Errorf("read history of run %q: %w", res.RunID, err)
	}
	pending, err := s.store.cp.PendingTasks(ctx, res.RunID, res.Step+1)
	if err != nil {
		return fmt.Errorf("read history of run %q: %w", res.RunID, err)
	}
	rows := taskRows(hist, pending)
	out := runResult{RunID: res.RunID, Graph: res.Graph, Status: res.Status, Step: res.Step, Values: res.Values, Counters: res.Counters, Interrupts: res.Interrupts, DrainReason: res.DrainReason, Nodes: rows}
	if out.Values == nil {
		out.Values = map[string]json.RawMessage{}
	}
	if out.Nodes == nil {
		out.Nodes = []nodeRow{}
	}
	if res.Err != nil {
		out.Error = res.Err.Error()
	}
	if out.Usage, err = s.graph.Usage(res.Values); err != nil {
		fmt.Fprintf(s.env.Stderr, "warning: %v\n", err)
	}
	w := s.env.Stdout
	if s.flags.json {
		if err := writeJSON(w, out); err != nil {
			return err
		}
	} else {
		if err := writeNodeTable(w, rows); err != nil {
			return err
		}
		if err := writeUsage(w, out.Usage); err != nil {
			return err
		}
		if len(res.Interrupts) > 0 {
			fmt.Fprintln(w, "\nWaiting for an answer:")
			for _, in := range res.Interrupts {
				fmt.Fprintf(w, "  %s (interrupt %s):\n    %s\n", in.Node, in.ID, indentJSON(in.Value, "    "))
			}
		}
		raw, err := marshal(out.Values)
		if err != nil {
			return fmt.Errorf("encode state: %w", err)
		}
		fmt.Fprintf(w, "\nState:\n%s\n\n", indentJSON(raw, ""))
		c := res.Counters
		fmt.Fprintf(w, "Run %s of %s: %s at step %d (%d completed, %d skipped, %d cancelled, %d failed)\n",
			res.RunID, res.Graph, res.Status, res.Step, c.Completed, c.Skipped, c.Cancelled, c.Failed)
		if res.Err != nil {
			fmt.Fprintf(w, "Error: %v\n", res.Err)
		}
	}
	store := ""
	if s.flags.store != s.env.storePath() {
		store = " --store " + shellQuote(s.flags.store)
	}
	switch res.Status {
	case pregel.RunInterrupted:
		fmt.Fprintf(s.env.Stderr, "run %s is interrupted; answer and resume it with:\n  %s resume %s%s --answer VALUE\n", res.RunID, progName(s.env), res.RunID, store)
	case pregel.RunDrained:
		fmt.Fprintf(s.env.Stderr, "run %s drained (%s); resume it with:\n  %s resume %s%s\n", res.RunID, res.DrainReason, progName(s.env), res.RunID, store)
	case pregel.RunCancelled:
		fmt.Fprintf(s.env.Stderr, "run %s was cancelled after step %d; resume it with:\n  %s resume %s%s\n", res.RunID, res.Step, progName(s.env), res.RunID, store)
	}
	return nil
}

// shellQuote quotes s for a shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:@=+,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
