//go:build !superstep.lambda

package superstep

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/spf13/cobra"

	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/runs"
)

// The threads commands: conversations on a dev server (/v1/threads).

func newThreadsCmd(env Env) *cobra.Command {
	var f serverFlags
	c := &cobra.Command{
		Use:   "threads",
		Short: "Create, inspect, fork and run the threads (conversations) of a dev server",
		Long: `A thread is a conversation: each run on it starts from the state the one
before it left, its input applied through the channels' reducers (a
messages channel grows). At most one run of a thread is active (pending,
running, interrupted or drained); a new one on a busy thread follows its
--strategy: reject (the default: refused, naming the active run), enqueue
(waits its turn), interrupt (the active run drains at its next superstep,
then the new one starts from there) or rollback (the active run is
cancelled and its steps discarded). An A2A contextId is a thread id.

The commands talk to a running "superstep dev" server over its HTTP API,
like "superstep runs": --server (default $` + ServerEnv + ` or ` + DefaultServer + `)
and --token (default $` + TokenEnv + `). 4xx answers exit with code 2, other
failures with 1.`,
		Example: `  superstep threads create --id chat-1
  superstep threads run chat-1 assistant --text "Where is my order A-1002?" --wait
  superstep threads run chat-1 assistant --text "And A-1001?" --strategy enqueue --wait
  superstep threads show chat-1
  superstep threads history chat-1
  superstep threads fork chat-1 --run RUN_ID --step 1 --id chat-1-retry`,
		Args: noArgs,
		RunE: groupRunE,
	}
	f.register(c, env, DefaultServer)
	c.AddCommand(
		newThreadsListCmd(env, &f),
		newThreadsCreateCmd(env, &f),
		newThreadsShowCmd(env, &f),
		newThreadsHistoryCmd(env, &f),
		newThreadsRunsCmd(env, &f),
		newThreadsForkCmd(env, &f),
		newThreadsUpdateStateCmd(env, &f),
		newThreadsDeleteCmd(env, &f),
		newThreadsRunCmd(env, &f),
	)
	return c
}

// threadPath is the API path of a thread, and of what is under it.
func threadPath(id string, under ...string) string {
	p := "/v1/threads/" + url.PathEscape(id)
	for _, u := range under {
		p += "/" + u
	}
	return p
}

// readMetadata reads --metadata: a JSON object, @FILE or -.
func readMetadata(c *cobra.Command, value string, stdin io.Reader) (json.RawMessage, error) {
	if !c.Flags().Changed("metadata") {
		return nil, nil
	}
	raw, err := readJSONArg("metadata", value, stdin)
	if err != nil {
		return nil, usageErr(c, err)
	}
	if raw[0] != '{' {
		return nil, usageErr(c, fmt.Errorf("--metadata must be a JSON object such as '{\"user\": \"ana\"}'"))
	}
	return raw, nil
}

func newThreadsListCmd(env Env, f *serverFlags) *cobra.Command {
	var (
		limit     int
		pageToken string
	)
	c := &cobra.Command{
		Use:   "list",
		Short: "List threads, newest first",
		Args:  noArgs,
		RunE: func(c *cobra.Command, args []string) error {
			var page api.ThreadList
			raw, err := f.call(c.Context(), http.MethodGet, "/v1/threads", listQuery(limit, "page_token", pageToken), nil, &page)
			if err != nil {
				return err
			}
			if f.json {
				return writeRaw(env.Stdout, raw)
			}
			tw := newTable(env.Stdout)
			fmt.Fprintln(tw, "THREAD ID\tSTATUS\tACTIVE RUN\tQUEUED\tAT\tCREATED")
			for _, t := range page.Threads {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", t.ThreadID, t.Status, orDash(t.ActiveRunID), len(t.QueuedRunIDs), stepRef(t.Head), fmtTime(t.CreatedAt))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			morePages(env, "threads", page.NextPageToken)
			return nil
		},
	}
	c.Flags().IntVar(&limit, "limit", 0, "at most this many threads (server default 50, at most 500)")
	c.Flags().StringVar(&pageToken, "page-token", "", "continue a previous listing")
	return c
}

// stepRef shows a step of a run: "RUN@STEP", or "-".
func stepRef(r *runs.StepRef) string {
	if r == nil {
		return "-"
	}
	return fmt.Sprintf("%s@%d", r.RunID, r.Step)
}

func newThreadsCreateCmd(env Env, f *serverFlags) *cobra.Command {
	var id, metadata string
	c := &cobra.Command{
		Use:   "create [--id ID] [--metadata JSON|@FILE]",
		Short: "Create a thread",
		Long: `Create a thread, with a new id or --id. Creating a thread that exists with
the same metadata is harmless; with other metadata it is refused.`,
		Args: noArgs,
		RunE: func(c *cobra.Command, args []string) error {
			meta, err := readMetadata(c, metadata, env.Stdin)
			if err != nil {
				return err
			}
			var t api.Thread
			raw, err := f.call(c.Context(), http.MethodPost, "/v1/threads", nil, api.CreateThreadRequest{ThreadID: id, Metadata: meta}, &t)
			if err != nil {
				return err
			}
			if f.json {
				return writeRaw(env.Stdout, raw)
			}
			fmt.Fprintf(env.Stdout, "thread %s created\n", t.ThreadID)
			return nil
		},
	}
	c.Flags().StringVar(&id, "id", "", "the thread's `ID` (letters, digits, '.', '_', ':' or '-'); default: a new one")
	c.Flags().StringVar(&metadata, "metadata", "", "a JSON object kept with the thread: `JSON`, @FILE or -")
	return c
}

// threadDetail is the --json answer of threads show.
type threadDetail struct {
	api.Thread
	State   runs.ThreadState `json:"state"`
	Storage *api.Storage     `json:"storage,omitempty"`
}

func newThreadsShowCmd(env Env, f *serverFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "show THREAD_ID",
		Short: "Show a thread: its record and its state now",
		Long: `Show a thread: whether a run holds it and which wait, its metadata, and its
state now (the latest committed step of its active or last run), and
what it stores with all its runs (checkpoints, segments, events, records,
in bytes). With --json, the thread's record with its "state" and
"storage".`,
		Args: exactArgs("THREAD_ID"),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := f.client()
			if err != nil {
				return err
			}
			var d threadDetail
			if _, err := cl.do(c.Context(), http.MethodGet, threadPath(args[0]), nil, nil, &d.Thread); err != nil {
				return err
			}
			if _, err := cl.do(c.Context(), http.MethodGet, threadPath(args[0], "state"), nil, nil, &d.State); err != nil {
				return err
			}
			if d.Storage, err = getStorage(c.Context(), cl, threadPath(args[0])); err != nil {
				return err
			}
			if f.json {
				return writeJSON(env.Stdout, d)
			}
			tw := newTable(env.Stdout)
			fmt.Fprintf(tw, "Thread:\t%s\n", d.ThreadID)
			fmt.Fprintf(tw, "Status:\t%s\n", d.Status)
			if d.ActiveRunID != "" {
				fmt.Fprintf(tw, "Active run:\t%s\n", d.ActiveRunID)
			}
			if len(d.QueuedRunIDs) > 0 {
				fmt.Fprintf(tw, "Queued runs:\t%s\n", strings.Join(d.QueuedRunIDs, ", "))
			}
			fmt.Fprintf(tw, "Created:\t%s\n", fmtTime(d.CreatedAt))
			fmt.Fprintf(tw, "Updated:\t%s\n", fmtTime(d.UpdatedAt))
			if len(d.Metadata) > 0 {
				fmt.Fprintf(tw, "Metadata:\t%s\n", oneLine(string(d.Metadata), 200))
			}
			if d.State.RunID == "" {
				fmt.Fprintf(tw, "At:\tno step yet (empty state)\n")
			} else {
				fmt.Fprintf(tw, "At:\tstep %d of run %s\n", d.State.Step, d.State.RunID)
			}
			if len(d.State.Next) > 0 {
				fmt.Fprintf(tw, "Next:\t%s\n", strings.Join(d.State.Next, ", "))
			}
			if d.Storage != nil {
				fmt.Fprintf(tw, "Stored:\t%s\n", fmtStorage(d.Storage))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			raw, err := marshal(d.State.Values)
			if err != nil {
				return failed(fmt.Errorf("encode state: %w", err))
			}
			fmt.Fprintf(env.Stdout, "\nState:\n%s\n", indentJSON(raw, ""))
			return nil
		},
	}
}

func newThreadsHistoryCmd(env Env, f *serverFlags) *cobra.Command {
	var (
		limit     int
		pageToken string
	)
	c := &cobra.Command{
		Use:   "history THREAD_ID [--limit N] [--page-token T]",
		Short: "List a thread's committed steps, newest first",
		Long: `List every committed step of the thread's runs, newest first: the run, the
step, its graph and its nodes' statuses (steps a rollback discarded are
not in it). A run and step of it name a point to fork from. With --json,
each step with its state. A page holds the newest steps (20 unless
--limit); the command then says how to list the steps before them
(--page-token).`,
		Args: exactArgs("THREAD_ID"),
		RunE: func(c *cobra.Command, args []string) error {
			var h api.ThreadHistory
			raw, err := f.call(c.Context(), http.MethodGet, threadPath(args[0], "history"), listQuery(limit, "page_token", pageToken), nil, &h)
			if err != nil {
				return err
			}
			if f.json {
				return writeRaw(env.Stdout, raw)
			}
			tw := newTable(env.Stdout)
			fmt.Fprintln(tw, "RUN ID\tSTEP\tGRAPH\tNODES\tCHANGED")
			for _, s := range h.Steps {
				nodes := make([]string, 0, len(s.Tasks))
				for _, t := range s.Tasks {
					nodes = append(nodes, t.Node+":"+string(t.Status))
				}
				if len(nodes) == 0 {
					nodes = append(nodes, "(input)")
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", s.RunID, s.Step, s.Graph, oneLine(strings.Join(nodes, " "), 60), orDash(oneLine(strings.Join(s.Changed, ","), 40)))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			morePages(env, "steps (older)", h.NextPageToken)
			return nil
		},
	}
	c.Flags().IntVar(&limit, "limit", 0, fmt.Sprintf("at most this many steps (server default 20, at most %d)", runs.MaxHistory))
	c.Flags().StringVar(&pageToken, "page-token", "", "list the steps before a previous listing's")
	return c
}

func newThreadsRunsCmd(env Env, f *serverFlags) *cobra.Command {
	var (
		status, pageToken string
		limit             int
	)
	c := &cobra.Command{
		Use:   "runs THREAD_ID",
		Short: "List a thread's runs, newest first",
		Args:  exactArgs("THREAD_ID"),
		RunE: func(c *cobra.Command, args []string) error {
			q := listQuery(limit, "status", status, "page_token", pageToken)
			var page api.RunList
			raw, err := f.call(c.Context(), http.MethodGet, threadPath(args[0], "runs"), q, nil, &page)
			if err != nil {
				return err
			}
			return writeRunPage(env, f, raw, page)
		},
	}
	c.Flags().StringVar(&status, "status", "", "only runs with this status (pending, running, interrupted, drained, completed, failed, cancelled)")
	c.Flags().IntVar(&limit, "limit", 0, "at most this many runs (server default 50, at most 500)")
	c.Flags().StringVar(&pageToken, "page-token", "", "continue a previous listing")
	return c
}

func newThreadsForkCmd(env Env, f *serverFlags) *cobra.Command {
	var (
		run, id, metadata string
		step              int
	)
	c := &cobra.Command{
		Use:   "fork THREAD_ID [--run RUN_ID [--step N]] [--id NEW_ID]",
		Short: "Create a thread that starts at a step of another",
		Long: `Create a thread whose state is a step of THREAD_ID's history (see
'superstep threads history'): --run and --step name it; --run alone is
that run's last step; neither is the thread's state now. Runs on the new
thread continue from there; THREAD_ID is unchanged. Nothing is copied.`,
		Args: exactArgs("THREAD_ID"),
		RunE: func(c *cobra.Command, args []string) error {
			if c.Flags().Changed("step") && run == "" {
				return usageErr(c, fmt.Errorf("--step needs --run: a step belongs to a run ('%s threads history %s' lists both)", progName(env), args[0]))
			}
			meta, err := readMetadata(c, metadata, env.Stdin)
			if err != nil {
				return err
			}
			req := api.ForkRequest{RunID: run, ThreadID: id, Metadata: meta}
			if c.Flags().Changed("step") {
				req.Step = &step
			}
			var t api.Thread
			raw, err := f.call(c.Context(), http.MethodPost, threadPath(args[0], "fork"), nil, req, &t)
			if err != nil {
				return err
			}
			if f.json {
				return writeRaw(env.Stdout, raw)
			}
			fmt.Fprintf(env.Stdout, "thread %s forked from %s at %s\n", t.ThreadID, args[0], stepRef(t.Head))
			return nil
		},
	}
	c.Flags().StringVar(&run, "run", "", "the `RUN_ID` whose step the fork starts at")
	c.Flags().IntVar(&step, "step", 0, "the step of --run (default: its last)")
	c.Flags().StringVar(&id, "id", "", "the new thread's `ID` (default: a new one)")
	c.Flags().StringVar(&metadata, "metadata", "", "a JSON object kept with the new thread: `JSON`, @FILE or -")
	return c
}

func newThreadsUpdateStateCmd(env Env, f *serverFlags) *cobra.Command {
	var graph, asNode, values string
	c := &cobra.Command{
		Use:   "update-state THREAD_ID --as-node NODE --values JSON|@FILE [--graph GRAPH]",
		Short: "Write values to an idle thread's state as a node would",
		Long: `Write values to the thread's state through the channels' reducers, as node
--as-node of --graph would have written them. The update is a step of the
thread's history, and the next run starts from it. --graph defaults to
the graph of the thread's last run. A busy thread refuses it.`,
		Example: `  superstep threads update-state chat-1 --as-node model --values '{"messages": [{"role": "assistant", "content": [{"text": "Sorry, I meant A-1002."}]}]}'`,
		Args:    exactArgs("THREAD_ID"),
		RunE: func(c *cobra.Command, args []string) error {
			if asNode == "" {
				return usageErr(c, fmt.Errorf("--as-node is required: the node the update is written as"))
			}
			if !c.Flags().Changed("values") {
				return usageErr(c, fmt.Errorf("--values is required: a JSON object of channel values"))
			}
			vals, err := readJSONArg("values", values, env.Stdin)
			if err != nil {
				return usageErr(c, err)
			}
			cl, err := f.client()
			if err != nil {
				return err
			}
			if graph == "" {
				var st runs.ThreadState
				if _, err := cl.do(c.Context(), http.MethodGet, threadPath(args[0], "state"), nil, nil, &st); err != nil {
					return err
				}
				if st.RunID == "" {
					return usageErr(c, fmt.Errorf("thread %q has no run yet: give --graph", args[0]))
				}
				var r api.Run
				if _, err := cl.do(c.Context(), http.MethodGet, "/v1/runs/"+url.PathEscape(st.RunID), nil, nil, &r); err != nil {
					return err
				}
				graph = r.Graph
			}
			var st runs.ThreadState
			raw, err := cl.do(c.Context(), http.MethodPost, threadPath(args[0], "state"), nil, api.UpdateStateRequest{Graph: graph, AsNode: asNode, Values: vals}, &st)
			if err != nil {
				return err
			}
			if f.json {
				return writeRaw(env.Stdout, raw)
			}
			fmt.Fprintf(env.Stdout, "thread %s updated as %s of %s: step %d of run %s\n", args[0], asNode, graph, st.Step, st.RunID)
			return nil
		},
	}
	c.Flags().StringVar(&graph, "graph", "", "the `GRAPH` whose channels and node the update uses (default: the thread's last run's)")
	c.Flags().StringVar(&asNode, "as-node", "", "the `NODE` the update is recorded as")
	c.Flags().StringVar(&values, "values", "", "the channel values to write: `JSON`, @FILE or -")
	return c
}

func newThreadsDeleteCmd(env Env, f *serverFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "delete THREAD_ID",
		Short: "Delete a thread (refused while a run holds it or waits for it)",
		Args:  exactArgs("THREAD_ID"),
		RunE: func(c *cobra.Command, args []string) error {
			if _, err := f.call(c.Context(), http.MethodDelete, threadPath(args[0]), nil, nil, nil); err != nil {
				return err
			}
			if !f.json {
				fmt.Fprintf(env.Stdout, "thread %s deleted\n", args[0])
			}
			return nil
		},
	}
}

func newThreadsRunCmd(env Env, f *serverFlags) *cobra.Command {
	var (
		input, text, strategy, runID string
		wf                           waitFlags
	)
	c := &cobra.Command{
		Use:   "run THREAD_ID GRAPH [--input JSON|@FILE | --text TEXT] [--strategy S] [--wait]",
		Short: "Start a run of a graph on a thread, from the thread's state",
		Long: `Start a run of GRAPH on the thread: it starts from the thread's state with
the input applied through the channels' reducers. --text sends plain text,
which a graph with a text input (an agent: a user message) takes.
--strategy says what happens when a run holds the thread: reject (the
default: refused, exit code 2, naming the active run), enqueue, interrupt
or rollback. With --wait, the command waits for the run (a queued one
waits its turn) and exits with its code.`,
		Example: `  superstep threads run chat-1 assistant --text "Where is my order A-1002?" --wait
  superstep threads run chat-1 counter --input '{"limit": 3}' --strategy enqueue`,
		Args: exactArgs("THREAD_ID", "GRAPH"),
		RunE: func(c *cobra.Command, args []string) error {
			if c.Flags().Changed("input") && c.Flags().Changed("text") {
				return usageErr(c, fmt.Errorf("give --input or --text, not both"))
			}
			if _, err := runs.ParseStrategy(strategy); err != nil {
				return usageErr(c, fmt.Errorf("--strategy %q: want reject, enqueue, interrupt or rollback", strategy))
			}
			req := api.ThreadRunRequest{Graph: args[1], RunID: runID, Strategy: strategy}
			var err error
			switch {
			case c.Flags().Changed("input"):
				if req.Input, err = readJSONArg("input", input, env.Stdin); err != nil {
					return usageErr(c, err)
				}
			case c.Flags().Changed("text"):
				if req.Input, err = json.Marshal(text); err != nil {
					return failed(err)
				}
			}
			cl, err := f.client()
			if err != nil {
				return err
			}
			var r api.Run
			raw, err := cl.do(c.Context(), http.MethodPost, threadPath(args[0], "runs"), nil, req, &r)
			if err != nil {
				return err
			}
			return showRunResult(env, f, cl, c, r, raw, &wf, "created on thread "+args[0])
		},
	}
	c.Flags().StringVarP(&input, "input", "i", "", "the run's input, applied to the thread's state: `JSON`, @FILE, or - for stdin")
	c.Flags().StringVar(&text, "text", "", "plain `TEXT` as the input (a user message for an agent)")
	c.Flags().StringVar(&strategy, "strategy", string(runs.StrategyReject), "when a run holds the thread: reject, enqueue, interrupt or rollback")
	c.Flags().StringVar(&runID, "run-id", "", "the run's id; repeating a request with the same id and input is harmless")
	wf.register(c)
	return c
}
