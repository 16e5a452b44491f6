//go:build !superstep.lambda

package superstep

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/pregel"
)

func newRunsCmd(env Env) *cobra.Command {
	var f serverFlags
	c := &cobra.Command{
		Use:   "runs",
		Short: "List, inspect and steer the runs of a dev server",
		Long: `List, inspect and steer the runs of a running "superstep dev" server over
its HTTP API. The server is --server (default $` + ServerEnv + ` or ` + DefaultServer + `)
and its token --token (default $` + TokenEnv + `). Errors the server answers are
shown as their detail; 4xx answers exit with code 2, other failures with 1.`,
		Args: noArgs,
		RunE: groupRunE,
	}
	f.register(c, env, DefaultServer)
	c.AddCommand(
		newRunsListCmd(env, &f),
		newRunsShowCmd(env, &f),
		newRunsCreateCmd(env, &f),
		newRunsDrainCmd(env, &f),
		newRunsCancelCmd(env, &f),
		newRunsResumeCmd(env, &f),
		newRunsWatchCmd(env, &f),
	)
	return c
}

func newRunsListCmd(env Env, f *serverFlags) *cobra.Command {
	var (
		graph, status, version, pageToken string
		limit                             int
	)
	c := &cobra.Command{
		Use:   "list",
		Short: "List runs, newest first",
		Args:  noArgs,
		RunE: func(c *cobra.Command, args []string) error {
			q := listQuery(limit, "graph", graph, "status", status, "version", version, "page_token", pageToken)
			var page api.RunList
			raw, err := f.call(c.Context(), http.MethodGet, "/v1/runs", q, nil, &page)
			if err != nil {
				return err
			}
			return writeRunPage(env, f, raw, page)
		},
	}
	c.Flags().StringVar(&graph, "graph", "", "only runs of this graph")
	c.Flags().StringVar(&status, "status", "", "only runs with this status (pending, running, interrupted, drained, completed, failed, cancelled)")
	c.Flags().StringVar(&version, "version", "", "only runs whose graph version has this name or fingerprint (an unknown one lists nothing)")
	c.Flags().IntVar(&limit, "limit", 0, "at most this many runs (server default 50, at most 500)")
	c.Flags().StringVar(&pageToken, "page-token", "", "continue a previous listing")
	return c
}

// writeRunPage prints a page of runs: the server's answer with --json,
// else a table and how to list the next page.
func writeRunPage(env Env, f *serverFlags, raw []byte, page api.RunList) error {
	if f.json {
		return writeRaw(env.Stdout, raw)
	}
	if err := writeRunTable(env.Stdout, page.Runs); err != nil {
		return err
	}
	morePages(env, "runs", page.NextPageToken)
	return nil
}

// writeRunTable prints runs as a table.
func writeRunTable(w io.Writer, list []api.Run) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "RUN ID\tGRAPH\tVERSION\tSTATUS\tSTEP\tDONE/SKIP/CANC/FAIL\tCREATED\tNOTE")
	for _, r := range list {
		c := r.Counters
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d/%d/%d/%d\t%s\t%s\n", r.RunID, r.Graph, versionCell(r.GraphVersion), r.Status, r.Step,
			c.Completed, c.Skipped, c.Cancelled, c.Failed, fmtTime(r.CreatedAt), orDash(oneLine(runNote(r), 60)))
	}
	return tw.Flush()
}

// versionCell is a run's graph version in a table: the name its code
// gave it, or its fingerprint (what --version filters by, either way).
func versionCell(v *api.GraphVersion) string {
	switch {
	case v == nil:
		return "-"
	case v.Version != "":
		return v.Version
	}
	return v.Fingerprint
}

// runNote is the most useful fact about a run besides its status.
func runNote(r api.Run) string {
	switch {
	case r.Error != "":
		return r.Error
	case len(r.Interrupts) > 0:
		nodes := make([]string, len(r.Interrupts))
		for i, in := range r.Interrupts {
			nodes[i] = in.Node
		}
		return "waiting on " + strings.Join(nodes, ", ")
	case r.SupersededBy != "":
		return superseded(r)
	case r.CancelRequested:
		return "cancel requested"
	case r.DrainRequested:
		return "drain: " + r.DrainReason
	}
	return ""
}

// superseded says which run took a run's thread, and what became of its
// steps.
func superseded(r api.Run) string {
	if r.Discarded {
		return "superseded by run " + r.SupersededBy + " (rolled back: its steps were discarded)"
	}
	return "superseded by run " + r.SupersededBy + " (its committed steps stay in the thread)"
}

func newRunsShowCmd(env Env, f *serverFlags) *cobra.Command {
	var (
		steps    int
		allSteps bool
	)
	c := &cobra.Command{
		Use:   "show RUN_ID",
		Short: "Show a run: its record, its steps with their node statuses, its state, its events",
		Long: `Show a run: its record, its newest steps with their node statuses, its
state and its history of events (changes of status, drain, cancel and
resume requests), and what it stores (checkpoints, segments, events and its
record, in bytes). With --json, the server's answer for the run with its
"events", "events_dropped" and "storage" added.

The server lists a run's newest 100 steps; a longer run says how many
older steps are not shown. --steps N shows the newest N, --all-steps every
one (read from the server a page of 500 at a time, newest first).`,
		Args: exactArgs("RUN_ID"),
		RunE: func(c *cobra.Command, args []string) error {
			if steps < 0 {
				return usageErr(c, fmt.Errorf("--steps %d: give a number of steps above 0", steps))
			}
			if allSteps && steps > 0 {
				return usageErr(c, errors.New("give --steps N or --all-steps, not both"))
			}
			cl, err := f.client()
			if err != nil {
				return err
			}
			path := "/v1/runs/" + url.PathEscape(args[0])
			var q url.Values
			want := steps // 0: the server's default
			if allSteps {
				want = -1
			}
			if want != 0 {
				n := maxStepsPage
				if want > 0 {
					n = min(want, maxStepsPage)
				}
				q = url.Values{"steps": {fmt.Sprint(n)}}
			}
			var d api.RunDetail
			raw, err := cl.do(c.Context(), http.MethodGet, path, q, nil, &d)
			if err != nil {
				return err
			}
			if want != 0 && d.StepsTruncated && (want < 0 || len(d.Steps) < want) {
				if err := olderSteps(c.Context(), cl, path, &d, want); err != nil {
					return err
				}
				if raw, err = withSteps(raw, d); err != nil {
					return failed(err)
				}
			}
			var evs api.EventList
			if _, err := cl.do(c.Context(), http.MethodGet, path+"/events", nil, nil, &evs); err != nil {
				return err
			}
			st, err := getStorage(c.Context(), cl, path)
			if err != nil {
				return err
			}
			if f.json {
				if raw, err = withEvents(raw, evs, st); err != nil {
					return failed(err)
				}
				return writeRaw(env.Stdout, raw)
			}
			return writeRunDetail(env.Stdout, progName(env), d, evs, st)
		},
	}
	c.Flags().IntVar(&steps, "steps", 0, "show the newest N steps (server default 100)")
	c.Flags().BoolVar(&allSteps, "all-steps", false, "show every step of the run")
	return c
}

// maxStepsPage is the most steps one answer of the server lists.
const maxStepsPage = 500

// olderSteps puts the run's steps before d.Steps in front of them, read
// newest first from /checkpoints with the view's token, until d holds
// want steps (want < 0: all of them).
func olderSteps(ctx context.Context, cl *client, path string, d *api.RunDetail, want int) error {
	tok := d.OlderStepsPageToken
	for tok != "" && (want < 0 || len(d.Steps) < want) {
		n := maxStepsPage
		if want > 0 {
			n = min(n, want-len(d.Steps))
		}
		var page api.CheckpointList
		q := url.Values{"order": {"desc"}, "limit": {fmt.Sprint(n)}, "page_token": {tok}}
		if _, err := cl.do(ctx, http.MethodGet, path+"/checkpoints", q, nil, &page); err != nil {
			return err
		}
		older := page.Checkpoints
		slices.Reverse(older)
		d.Steps = append(older, d.Steps...)
		tok = page.NextPageToken
	}
	d.OlderStepsPageToken = tok
	d.StepsTruncated = tok != ""
	return nil
}

// withSteps sets the steps of the server's answer for a run to d's (and
// whether older ones remain).
func withSteps(detail []byte, d api.RunDetail) ([]byte, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(detail, &obj); err != nil {
		return nil, fmt.Errorf("the server's answer for the run is not a JSON object: %w", err)
	}
	set := func(k string, v any, keep bool) error {
		if !keep {
			delete(obj, k)
			return nil
		}
		raw, err := json.Marshal(v)
		obj[k] = raw
		return err
	}
	if err := errors.Join(set("steps", d.Steps, true), set("steps_truncated", true, d.StepsTruncated),
		set("older_steps_page_token", d.OlderStepsPageToken, d.OlderStepsPageToken != "")); err != nil {
		return nil, fmt.Errorf("encode steps: %w", err)
	}
	return json.Marshal(obj)
}

// withEvents adds a run's events to the JSON object the server answered
// for the run, after its other fields.
func withEvents(detail []byte, evs api.EventList, st *api.Storage) ([]byte, error) {
	obj := bytes.TrimSpace(detail)
	if len(obj) < 2 || obj[0] != '{' || obj[len(obj)-1] != '}' {
		return nil, fmt.Errorf("the server's answer for the run is not a JSON object: %.80q", detail)
	}
	if evs.Events == nil {
		evs.Events = []api.Event{}
	}
	tail, err := marshal(struct {
		Events        []api.Event  `json:"events"`
		EventsDropped int          `json:"events_dropped"`
		Storage       *api.Storage `json:"storage,omitempty"`
	}{evs.Events, evs.EventsDropped, st})
	if err != nil {
		return nil, fmt.Errorf("encode events: %w", err)
	}
	if len(bytes.TrimSpace(obj[1:len(obj)-1])) == 0 {
		return tail, nil
	}
	out := append(slices.Clone(obj[:len(obj)-1]), ',')
	return append(out, tail[1:]...), nil
}

// writeRunDetail prints a run and its events for people.
// An agent's run shows its answer and tool calls rather than its whole
// state (--json has the state).
func writeRunDetail(w io.Writer, prog string, d api.RunDetail, evs api.EventList, st *api.Storage) error {
	tw := newTable(w)
	c := d.Counters
	fmt.Fprintf(tw, "Run:\t%s\n", d.RunID)
	fmt.Fprintf(tw, "Graph:\t%s\n", d.Graph)
	fmt.Fprintf(tw, "Status:\t%s\n", d.Status)
	if v := d.GraphVersion; v != nil {
		label := v.Fingerprint
		if v.Version != "" {
			label = v.Version + " (" + v.Fingerprint + ")"
		}
		fmt.Fprintf(tw, "Version:\t%s\n", label)
	}
	fmt.Fprintf(tw, "Step:\t%d\n", d.Step)
	fmt.Fprintf(tw, "Nodes:\t%d completed, %d skipped, %d cancelled, %d failed\n", c.Completed, c.Skipped, c.Cancelled, c.Failed)
	fmt.Fprintf(tw, "Created:\t%s\n", fmtTime(d.CreatedAt))
	fmt.Fprintf(tw, "Updated:\t%s\n", fmtTime(d.UpdatedAt))
	if d.ContextID != "" {
		fmt.Fprintf(tw, "Context:\t%s\n", d.ContextID)
	}
	if st != nil {
		fmt.Fprintf(tw, "Stored:\t%s\n", fmtStorage(st))
	}
	if d.SupersededBy != "" {
		fmt.Fprintf(tw, "Superseded:\t%s\n", superseded(d.Run))
	}
	if d.DrainRequested {
		fmt.Fprintf(tw, "Drain:\t%s\n", orDash(d.DrainReason))
	}
	if d.CancelRequested {
		fmt.Fprintf(tw, "Cancel:\trequested\n")
	}
	if d.Error != "" {
		fmt.Fprintf(tw, "Error:\t%s\n", d.Error)
	}
	if d.FailedNode != "" {
		fmt.Fprintf(tw, "Failed node:\t%s\n", d.FailedNode)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if err := writeNodeTable(w, taskRows(d.Steps, nil)); err != nil {
		return err
	}
	if d.StepsTruncated && len(d.Steps) > 0 {
		older := d.Steps[0].Step
		fmt.Fprintf(w, "(%d older step%s not shown, of %d: %s runs show %s --steps N or --all-steps)\n", older, plural(older, "", "s"), d.StepCount, prog, d.RunID)
	}
	if err := writeUsage(w, d.Usage); err != nil {
		return err
	}
	if len(d.Interrupts) > 0 {
		writeWaiting(w, prog, d.RunID, d.Interrupts)
	}
	if !writeAnswer(w, d.Values) {
		raw, err := marshal(d.Values)
		if err != nil {
			return fmt.Errorf("encode state: %w", err)
		}
		fmt.Fprintf(w, "\nState:\n%s\n", indentJSON(raw, ""))
	}
	fmt.Fprintln(w, "\nEvents:")
	return writeEventTable(w, evs)
}

// writeWaiting prints the questions a run waits on, why their last
// answers were refused, and how to answer.
func writeWaiting(w io.Writer, prog, runID string, ins []pregel.InterruptInfo) {
	fmt.Fprintf(w, "\nWaiting for an answer (%s runs resume %s --answer VALUE):\n", prog, runID)
	for _, in := range ins {
		if call, ok := approvalCall(in.Value); ok {
			fmt.Fprintf(w, "  %s (interrupt %s) asks to approve the call:\n    %s\n    answer approve, reject, a reason to reject, or {\"decision\": \"edit\", \"input\": {the arguments}}\n", in.Node, in.ID, callText(call))
		} else {
			fmt.Fprintf(w, "  %s (interrupt %s):\n    %s\n", in.Node, in.ID, indentJSON(in.Value, "    "))
		}
		if in.Error != "" {
			fmt.Fprintf(w, "    The last answer was refused: %s\n", oneLine(in.Error, 300))
		}
	}
}

// writeEventTable prints a run's history as a table; dropped events are
// noted where they were, after the first.
func writeEventTable(w io.Writer, evs api.EventList) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "TIME\tTYPE\tSTATUS\tSTEP\tDETAIL")
	for i, ev := range evs.Events {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", fmtTime(ev.At), ev.Type, ev.Status, ev.Step, orDash(oneLine(ev.Detail, 60)))
		if i == 0 && evs.EventsDropped > 0 {
			fmt.Fprintf(tw, "...\t...\t...\t...\t(%d events dropped)\n", evs.EventsDropped)
		}
	}
	return tw.Flush()
}

// waitFlags let create and resume wait for the run to stop.
type waitFlags struct {
	wait    bool
	timeout time.Duration
}

func (wf *waitFlags) register(c *cobra.Command) {
	c.Flags().BoolVar(&wf.wait, "wait", false, "wait until the run stops (following its event stream); exit with its code (0 completed, 1 failed, 3 interrupted, 4 drained, 5 cancelled)")
	c.Flags().DurationVar(&wf.timeout, "wait-timeout", 0, "with --wait, give up after this long (0: no limit)")
}

// waitRun polls a run until it is no longer pending or running (for
// servers that do not stream runs; see waitStream).
func waitRun(ctx context.Context, cl *client, id string, timeout time.Duration) (api.Run, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	delay := 50 * time.Millisecond
	for {
		var r api.Run
		if _, err := cl.do(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(id), nil, nil, &r); err != nil {
			return r, err
		}
		if r.Status != pregel.RunPending && r.Status != pregel.RunRunning {
			return r, nil
		}
		select {
		case <-ctx.Done():
			return r, failed(fmt.Errorf("run %q is still %s: %w", id, r.Status, ctx.Err()))
		case <-time.After(delay):
		}
		delay = min(delay*2, time.Second)
	}
}

// showRunResult prints a run record answered by a request (or found by
// --wait) and returns the exit error of its status when waited for.
func showRunResult(env Env, f *serverFlags, cl *client, c *cobra.Command, r api.Run, raw []byte, wf *waitFlags, verb string) error {
	if wf != nil && wf.wait {
		var err error
		if r, err = waitStream(c.Context(), cl, r.RunID, wf.timeout); err != nil {
			return err
		}
		if raw, err = json.Marshal(r); err != nil {
			return failed(err)
		}
	}
	if f.json {
		if err := writeRaw(env.Stdout, raw); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(env.Stdout, "run %s of %s %s: %s at step %d\n", r.RunID, r.Graph, verb, r.Status, r.Step)
		if note := runNote(r); note != "" {
			fmt.Fprintf(env.Stdout, "  %s\n", note)
		}
		if wf != nil && wf.wait && (r.Status == pregel.RunCompleted || r.Status == pregel.RunInterrupted) {
			// What the run stopped with: an agent's answer, the
			// questions it waits on.
			var d api.RunDetail
			if _, err := cl.do(c.Context(), http.MethodGet, "/v1/runs/"+url.PathEscape(r.RunID), nil, nil, &d); err != nil {
				return err
			}
			writeAnswer(env.Stdout, d.Values)
			if len(d.Interrupts) > 0 {
				writeWaiting(env.Stdout, progName(env), d.RunID, d.Interrupts)
			}
		}
	}
	if wf != nil && wf.wait {
		if code := ExitCode(r.Status); code != ExitOK {
			return &ExitError{Code: code, Silent: true}
		}
	}
	return nil
}

func newRunsCreateCmd(env Env, f *serverFlags) *cobra.Command {
	var (
		input, text, runID, contextID string
		wf                            waitFlags
	)
	c := &cobra.Command{
		Use:   "create GRAPH [--input JSON|@FILE | --text TEXT]",
		Short: "Start a run of a graph on the server",
		Example: `  superstep runs create counter --input '{"limit": 3}' --wait
  superstep runs create support-triage --input @examples/triage/input.json
  superstep runs create assistant --text "Where is my order A-1002?" --wait`,
		Args: exactArgs("GRAPH"),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := f.client()
			if err != nil {
				return err
			}
			req := api.CreateRunRequest{RunID: runID, ContextID: contextID}
			if c.Flags().Changed("input") && c.Flags().Changed("text") {
				return usageErr(c, fmt.Errorf("give --input or --text, not both"))
			}
			if c.Flags().Changed("text") {
				req.Input, _ = json.Marshal(text) // the server makes it the graph's text input
			}
			if c.Flags().Changed("input") {
				if req.Input, err = readJSONArg("input", input, env.Stdin); err != nil {
					return usageErr(c, err)
				}
			}
			var r api.Run
			raw, err := cl.do(c.Context(), http.MethodPost, "/v1/graphs/"+url.PathEscape(args[0])+"/runs", nil, req, &r)
			if err != nil {
				return err
			}
			return showRunResult(env, f, cl, c, r, raw, &wf, "created")
		},
	}
	c.Flags().StringVarP(&input, "input", "i", "", "the run's input: `JSON`, @FILE, or - for stdin")
	c.Flags().StringVar(&runID, "run-id", "", "the run's id; repeating a request with the same id and input is harmless")
	c.Flags().StringVar(&text, "text", "", "plain `TEXT` as the input (a user message for an agent)")
	c.Flags().StringVar(&contextID, "context-id", "", "group the run with others of the same conversation")
	wf.register(c)
	return c
}

func newRunsDrainCmd(env Env, f *serverFlags) *cobra.Command {
	var (
		reason string
		wf     waitFlags
		fleet  fleetFlags
	)
	c := &cobra.Command{
		Use:   "drain RUN_ID [--reason TEXT] | drain --all [--graph G] [--version V] --reason TEXT",
		Short: "Ask a run, or every running run, to stop at its next superstep boundary (resumable)",
		Long: `Ask a run to stop at its next superstep boundary; it can be resumed later.
With --all, every pending or running run (of --graph, of --version, or all)
is asked to drain with --reason, as before a deploy; resume them after it
with "runs resume --all --status drained".`,
		Args: fleet.args("RUN_ID"),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := f.client()
			if err != nil {
				return err
			}
			if fleet.all {
				if !c.Flags().Changed("reason") {
					return usageErr(c, fmt.Errorf("--all needs --reason (e.g. --reason deploy)"))
				}
				return fleet.run(c, env, f, cl, "/v1/runs/drain", api.FleetDrainRequest{Reason: reason, Graph: fleet.graph, Version: fleet.version}, "drain requested")
			}
			var r api.Run
			raw, err := cl.do(c.Context(), http.MethodPost, "/v1/runs/"+url.PathEscape(args[0])+"/drain", nil, api.DrainRequest{Reason: reason}, &r)
			if err != nil {
				return err
			}
			return showRunResult(env, f, cl, c, r, raw, &wf, "drain requested")
		},
	}
	c.Flags().StringVar(&reason, "reason", "requested from the CLI", "why the run drains (kept on the run)")
	wf.register(c)
	fleet.register(c, false)
	return c
}

// fleetFlags are the flags of drain --all and resume --all.
type fleetFlags struct {
	all                    bool
	graph, version, status string
}

func (ff *fleetFlags) register(c *cobra.Command, status bool) {
	c.Flags().BoolVar(&ff.all, "all", false, "every run the filters select, not one")
	c.Flags().StringVar(&ff.graph, "graph", "", "with --all: only runs of this graph")
	c.Flags().StringVar(&ff.version, "version", "", "with --all: only runs whose graph version has this name or fingerprint")
	if status {
		c.Flags().StringVar(&ff.status, "status", "", "with --all: the status of the runs to resume (drained)")
	}
}

// args takes one RUN_ID, or none with --all.
func (ff *fleetFlags) args(name string) cobra.PositionalArgs {
	one := exactArgs(name)
	return func(c *cobra.Command, args []string) error {
		if !ff.all {
			if ff.graph != "" || ff.version != "" || ff.status != "" {
				return usageErr(c, fmt.Errorf("--graph, --version and --status go with --all"))
			}
			return one(c, args)
		}
		if len(args) > 0 {
			return usageErr(c, fmt.Errorf("--all takes no %s; got %q", name, args))
		}
		return nil
	}
}

// run posts a fleet request and prints the runs it changed.
func (ff *fleetFlags) run(c *cobra.Command, env Env, f *serverFlags, cl *client, path string, req any, verb string) error {
	var res api.FleetResult
	raw, err := cl.do(c.Context(), http.MethodPost, path, nil, req, &res)
	if err != nil {
		return err
	}
	if f.json {
		return writeRaw(env.Stdout, raw)
	}
	for _, id := range res.Runs {
		fmt.Fprintf(env.Stdout, "%s: %s\n", id, verb)
	}
	for _, id := range slices.Sorted(maps.Keys(res.Skipped)) {
		fmt.Fprintf(env.Stderr, "%s: skipped: %s\n", id, res.Skipped[id])
	}
	fmt.Fprintf(env.Stdout, "%d run(s) %s, %d skipped\n", len(res.Runs), verb, len(res.Skipped))
	return nil
}

func newRunsCancelCmd(env Env, f *serverFlags) *cobra.Command {
	var wf waitFlags
	c := &cobra.Command{
		Use:   "cancel RUN_ID",
		Short: "Cancel a run for good",
		Args:  exactArgs("RUN_ID"),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := f.client()
			if err != nil {
				return err
			}
			var r api.Run
			raw, err := cl.do(c.Context(), http.MethodPost, "/v1/runs/"+url.PathEscape(args[0])+"/cancel", nil, struct{}{}, &r)
			if err != nil {
				return err
			}
			return showRunResult(env, f, cl, c, r, raw, &wf, "cancel requested")
		},
	}
	wf.register(c)
	return c
}

func newRunsResumeCmd(env Env, f *serverFlags) *cobra.Command {
	var (
		answer string
		wf     waitFlags
		fleet  fleetFlags
	)
	c := &cobra.Command{
		Use:   "resume RUN_ID [--answer VALUE] | resume --all --status drained [--graph G] [--version V]",
		Short: "Resume a drained run, or answer an interrupted one",
		Long: `Resume a drained run, or an interrupted one with --answer VALUE: JSON
(true, {"approved": true}, "quoted text") or plain text, sent as a string.
With --all --status drained, every drained run (of --graph, of --version,
or all) is resumed, as after a deploy.`,
		Args: fleet.args("RUN_ID"),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := f.client()
			if err != nil {
				return err
			}
			if fleet.all {
				if fleet.status == "" {
					return usageErr(c, fmt.Errorf("--all needs --status drained"))
				}
				return fleet.run(c, env, f, cl, "/v1/runs/resume", api.FleetResumeRequest{Status: pregel.RunStatus(fleet.status), Graph: fleet.graph, Version: fleet.version}, "resumed")
			}
			var req api.ResumeRequest
			if c.Flags().Changed("answer") {
				req.Resume = parseAnswer(answer)
			}
			var r api.Run
			raw, err := cl.do(c.Context(), http.MethodPost, "/v1/runs/"+url.PathEscape(args[0])+"/resume", nil, req, &r)
			if err != nil {
				return err
			}
			return showRunResult(env, f, cl, c, r, raw, &wf, "resumed")
		},
	}
	c.Flags().StringVar(&answer, "answer", "", "answer every pending interrupt with `VALUE`")
	wf.register(c)
	fleet.register(c, true)
	return c
}

// writeRaw prints a JSON answer indented.
func writeRaw(w io.Writer, raw []byte) error {
	_, err := fmt.Fprintln(w, indentJSON(raw, ""))
	return err
}
