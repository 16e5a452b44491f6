package api

import (
	"errors"
	"net/http"
	"strings"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// listGraphs serves GET /v1/graphs.
func (h *Handler) listGraphs(w http.ResponseWriter, r *http.Request) error {
	if err := allowedQuery(r); err != nil {
		return err
	}
	out := GraphList{Graphs: []GraphSummary{}}
	for _, g := range h.svc.Graphs.List() {
		out.Graphs = append(out.Graphs, GraphSummary{
			Name:        g.Name(),
			Description: g.Description(),
			NodeCount:   len(g.Nodes()),
			Channels:    g.Channels(),
			TextChannel: g.TextChannel(),
		})
	}
	return h.writeJSON(w, r, http.StatusOK, out)
}

// getGraph serves GET /v1/graphs/{graph}[?run=ID].
func (h *Handler) getGraph(w http.ResponseWriter, r *http.Request) error {
	if err := allowedQuery(r, "run"); err != nil {
		return err
	}
	g, err := h.graph(r.PathValue("graph"))
	if err != nil {
		return err
	}
	out := Graph{
		Name:        g.Name(),
		Description: g.Description(),
		Nodes:       g.Nodes(),
		Channels:    g.Channels(),
		TextChannel: g.TextChannel(),
		GraphShape:  graphShape(g),
		InputSchema: inputSchema(g, h.log),
	}
	var statuses map[string]pregel.NodeStatus
	if id := r.URL.Query().Get("run"); id != "" {
		run, err := h.svc.Get(r.Context(), id)
		if err != nil {
			return runErr(id, err)
		}
		if run.Graph != g.Name() {
			return invalidf("run %q is a run of graph %q, not %q; ask for its diagram at /v1/graphs/%s?run=%s", id, run.Graph, g.Name(), run.Graph, id)
		}
		statuses, err = h.nodeStatuses(r, g, run)
		if err != nil {
			return runErr(id, err)
		}
		out.RunID, out.NodeStatuses = id, statuses
	}
	out.Mermaid = g.Mermaid(statuses)
	return h.writeJSON(w, r, http.StatusOK, out)
}

// graph looks up a registered graph.
func (h *Handler) graph(name string) (*pregel.Graph, error) {
	if g, ok := h.svc.Graphs.Get(name); ok {
		return g, nil
	}
	var names []string
	for _, g := range h.svc.Graphs.List() {
		names = append(names, g.Name())
	}
	if len(names) == 0 {
		return nil, notFoundf("graph %q is not registered; this server has no graphs", name)
	}
	return nil, notFoundf("graph %q is not registered; graphs are %s", name, strings.Join(names, ", "))
}

// statusRank orders the statuses of several tasks of one node in one step
// (fan-out): the most telling one wins.
func statusRank(s pregel.NodeStatus) int {
	switch s {
	case pregel.NodeSkipped:
		return 1
	case pregel.NodeCompleted:
		return 2
	case pregel.NodeRunning:
		return 3
	case pregel.NodeCancelled:
		return 4
	case pregel.NodeInterrupted:
		return 5
	case pregel.NodeFailed:
		return 6
	}
	return 0
}

// nodeStatuses gives each node of g the status of its latest execution in
// the run: from the committed steps, then the uncommitted step as the run
// record tells it (running, interrupted, or the node that failed). It
// reads the steps newest first, a page at a time, and stops once every
// node has a status: a long run whose nodes all ran lately costs one page.
func (h *Handler) nodeStatuses(r *http.Request, g *pregel.Graph, run runs.Run) (map[string]pregel.NodeStatus, error) {
	known := make(map[string]bool)
	for _, n := range g.Nodes() {
		known[n.ID] = true
	}
	out := make(map[string]pregel.NodeStatus)
	var newest *pregel.StepInfo
	f := runs.HistoryFilter{Limit: runs.MaxHistoryPageSize, NewestFirst: true}
	for {
		page, err := h.svc.HistoryPage(r.Context(), run.ID, f)
		if err != nil {
			return nil, err
		}
		for i := range page.Steps {
			s := &page.Steps[i]
			if newest == nil {
				newest = s
			}
			inStep := make(map[string]pregel.NodeStatus)
			for _, t := range s.Tasks {
				if cur, ok := inStep[t.Node]; !ok || statusRank(t.Status) > statusRank(cur) {
					inStep[t.Node] = t.Status
				}
			}
			for n, st := range inStep {
				if _, done := out[n]; !done && known[n] {
					out[n] = st // the newest execution wins
				}
			}
		}
		if len(out) == len(known) || page.NextPageToken == "" {
			break
		}
		f.PageToken = page.NextPageToken
	}
	switch run.Status {
	case pregel.RunRunning:
		if newest != nil {
			for _, n := range newest.Next {
				out[n] = pregel.NodeRunning
			}
		}
	case pregel.RunInterrupted:
		for _, in := range run.Interrupts {
			out[in.Node] = pregel.NodeInterrupted
		}
	case pregel.RunFailed:
		if run.FailedNode != "" {
			out[run.FailedNode] = pregel.NodeFailed
		}
	}
	for n := range out {
		if !known[n] {
			delete(out, n)
		}
	}
	return out, nil
}

// runErr replaces the store's not-found error for a run with a message
// that says what to do.
func runErr(id string, err error) error {
	if errors.Is(err, runs.ErrNotFound) {
		return notFoundf("run %q does not exist; GET /v1/runs lists the runs", id)
	}
	return err
}
