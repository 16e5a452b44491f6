//go:build !superstep.lambda

package superstep

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"

	"github.com/spf13/cobra"
	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/pregel"
)

func newGraphCmd(env Env) *cobra.Command {
	c := &cobra.Command{
		Use:   "graph",
		Short: "List the registered graphs and show them as Mermaid diagrams",
		Args:  noArgs,
		RunE:  groupRunE,
	}
	c.AddCommand(newGraphListCmd(env), newGraphShowCmd(env))
	return c
}

// graphSummary is a graph in the --json output of graph list.
type graphSummary struct {
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Nodes       []string `json:"nodes"`
	Channels    []string `json:"channels"`
}

func newGraphListCmd(env Env) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "list",
		Short: "List the graphs this binary knows",
		Args:  noArgs,
		RunE: func(c *cobra.Command, args []string) error {
			reg, err := env.registry()
			if err != nil {
				return err
			}
			var out []graphSummary
			for _, g := range reg.List() {
				s := graphSummary{Name: g.Name(), Description: g.Description(), Channels: g.Channels()}
				for _, n := range g.Nodes() {
					s.Nodes = append(s.Nodes, n.ID)
				}
				out = append(out, s)
			}
			if asJSON {
				return writeJSON(env.Stdout, out)
			}
			tw := newTable(env.Stdout)
			fmt.Fprintln(tw, "GRAPH\tNODES\tDESCRIPTION")
			for _, s := range out {
				fmt.Fprintf(tw, "%s\t%d\t%s\n", s.Name, len(s.Nodes), orDash(oneLine(s.Description, 90)))
			}
			return tw.Flush()
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

func newGraphShowCmd(env Env) *cobra.Command {
	var (
		runID, store string
		f            serverFlags
	)
	c := &cobra.Command{
		Use:   "show GRAPH [--run RUN_ID]",
		Short: "Print a graph as a Mermaid flowchart, coloured by a run's node statuses",
		Long: `Print a graph as a Mermaid flowchart. With --run, nodes are coloured by
the latest status of each node in that run: from the dev server when
--server (or $` + ServerEnv + `) is set, otherwise from the local store (--store).`,
		Example: `  superstep graph show support-triage
  superstep graph show support-triage --run 5c1e0b9d2f1a > run.mmd`,
		Args: exactArgs("GRAPH"),
		RunE: func(c *cobra.Command, args []string) error {
			if f.server != "" {
				return showRemoteGraph(c.Context(), env, &f, args[0], runID)
			}
			reg, err := env.registry()
			if err != nil {
				return err
			}
			g, err := lookupGraph(reg, args[0])
			if err != nil {
				return err
			}
			var statuses map[string]pregel.NodeStatus
			if runID != "" {
				if statuses, err = localStatuses(c.Context(), store, g, runID); err != nil {
					return err
				}
			}
			if f.json {
				return writeJSON(env.Stdout, api.Graph{Name: g.Name(), Description: g.Description(), Nodes: g.Nodes(), Channels: g.Channels(), Mermaid: g.Mermaid(statuses), RunID: runID, NodeStatuses: statuses})
			}
			_, err = fmt.Fprint(env.Stdout, g.Mermaid(statuses))
			return err
		},
	}
	f.register(c, env, "")
	c.Flags().StringVar(&runID, "run", "", "colour the nodes by this run's node statuses")
	c.Flags().StringVar(&store, "store", env.storePath(), "SQLite file to read the run from when no --server is set")
	c.PersistentFlags().Lookup("json").Usage = "print the graph as JSON (nodes, channels, mermaid, node_statuses)"
	return c
}

func showRemoteGraph(ctx context.Context, env Env, f *serverFlags, graph, runID string) error {
	var out api.Graph
	raw, err := f.call(ctx, http.MethodGet, "/v1/graphs/"+url.PathEscape(graph), listQuery(0, "run", runID), nil, &out)
	if err != nil {
		return err
	}
	if f.json {
		return writeRaw(env.Stdout, raw)
	}
	_, err = fmt.Fprint(env.Stdout, out.Mermaid)
	return err
}

// localStatuses gives each node of g its latest status in a run of the
// local store: from the committed steps, then from the results recorded
// for the uncommitted step (interrupted, failed, or finished tasks of a
// step in progress).
func localStatuses(ctx context.Context, path string, g *pregel.Graph, runID string) (map[string]pregel.NodeStatus, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, badInput(fmt.Errorf("no store at %s (--store), and no --server to ask: %w", path, err))
	}
	ls, err := openLocal(ctx, path)
	if err != nil {
		return nil, err
	}
	defer ls.Close()
	cp, err := ls.cp.Load(ctx, runID, pregel.Latest)
	if errors.Is(err, pregel.ErrNotFound) {
		return nil, badInput(fmt.Errorf("run %q is not in %s; with a dev server, pass --server", runID, path))
	}
	if err != nil {
		return nil, failed(fmt.Errorf("load run %q: %w", runID, err))
	}
	if cp.Graph != g.Name() {
		return nil, badInput(fmt.Errorf("run %q is a run of graph %q, not %q", runID, cp.Graph, g.Name()))
	}
	hist, err := ls.cp.History(ctx, runID)
	if err != nil {
		return nil, failed(fmt.Errorf("load run %q: %w", runID, err))
	}
	pending, err := ls.cp.PendingTasks(ctx, runID, cp.Step+1)
	if err != nil {
		return nil, failed(fmt.Errorf("load run %q: %w", runID, err))
	}
	return nodeStatuses(g, hist, pending), nil
}

// statusRank orders the statuses of several tasks of one node in one
// step (fan-out): the most telling one wins.
func statusRank(s pregel.NodeStatus) int {
	return slices.Index([]pregel.NodeStatus{pregel.NodePending, pregel.NodeSkipped, pregel.NodeCompleted, pregel.NodeRunning,
		pregel.NodeCancelled, pregel.NodeInterrupted, pregel.NodeFailed}, s)
}

// nodeStatuses folds a run's steps, oldest first, and the results of its
// uncommitted step into the latest status of each node of g.
func nodeStatuses(g *pregel.Graph, hist []pregel.StepInfo, pending []pregel.TaskResult) map[string]pregel.NodeStatus {
	out := make(map[string]pregel.NodeStatus)
	fold := func(tasks []pregel.TaskStatus) {
		inStep := make(map[string]pregel.NodeStatus)
		for _, t := range tasks {
			if cur, ok := inStep[t.Node]; !ok || statusRank(t.Status) > statusRank(cur) {
				inStep[t.Node] = t.Status
			}
		}
		for n, s := range inStep {
			out[n] = s
		}
	}
	for _, st := range hist {
		fold(st.Tasks)
	}
	var open []pregel.TaskStatus
	for _, p := range pending {
		open = append(open, pregel.TaskStatus{TaskID: p.TaskID, Node: p.Node, Status: p.Status})
	}
	fold(open)
	known := make(map[string]bool)
	for _, n := range g.Nodes() {
		known[n.ID] = true
	}
	for n := range out {
		if !known[n] {
			delete(out, n)
		}
	}
	return out
}
