package pregel

import "slices"

// EdgeKind says how an edge of a graph's shape triggers its target.
type EdgeKind string

// Edge kinds.
const (
	// EdgeStatic: AddEdge; the target runs after the source finishes.
	EdgeStatic EdgeKind = "static"
	// EdgeConditional: one of the targets a router (AddConditionalEdges)
	// may choose.
	EdgeConditional EdgeKind = "conditional"
	// EdgeFanOut: AddFanOut; one task of the target per item.
	EdgeFanOut EdgeKind = "fan_out"
	// EdgeJoin: AddJoin; the target waits for all of its join's sources.
	EdgeJoin EdgeKind = "join"
	// EdgeOnError: OnError; the target handles the source's failure.
	EdgeOnError EdgeKind = "on_error"
)

// Edge is one edge of a graph's shape, for drawing it. From may be
// [Start]; To may be [End].
type Edge struct {
	From string   `json:"from"`
	To   string   `json:"to"`
	Kind EdgeKind `json:"kind"`
	// Join groups the edges of one join (its index among the graph's
	// joins), set when Kind is EdgeJoin.
	Join *int `json:"join,omitempty"`
}

// NodePolicy is how the engine runs a node: its retries, timeout and
// error handler.
type NodePolicy struct {
	// MaxAttempts counts the first attempt (1: no retry).
	MaxAttempts int `json:"max_attempts"`
	// TimeoutMS bounds each attempt, in milliseconds; zero means none.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// OnError names the node a failure is routed to, if any.
	OnError string `json:"on_error,omitempty"`
}

// Edges lists every edge of the graph: static edges (to End included),
// conditional targets, fan-outs, joins and error handlers, by source in
// the order the nodes were added (Start first).
func (g *Graph) Edges() []Edge {
	var out []Edge
	for _, from := range slices.Concat([]string{Start}, g.order) {
		for _, to := range g.edges[from] {
			out = append(out, Edge{From: from, To: to, Kind: EdgeStatic})
		}
		if slices.Contains(g.ends, from) {
			out = append(out, Edge{From: from, To: End, Kind: EdgeStatic})
		}
		for _, r := range g.routes[from] {
			kind := EdgeConditional
			if r.label == "fan-out" {
				kind = EdgeFanOut
			}
			out = append(out, Edge{From: from, To: r.to, Kind: kind})
		}
		if n := g.nodes[from]; n != nil && n.onError != "" {
			out = append(out, Edge{From: from, To: n.onError, Kind: EdgeOnError})
		}
	}
	for i, j := range g.joins {
		for _, from := range j.From {
			out = append(out, Edge{From: from, To: j.To, Kind: EdgeJoin, Join: &i})
		}
	}
	return out
}

// Policies gives each node's retry, timeout and error-handler settings,
// by node name.
func (g *Graph) Policies() map[string]NodePolicy {
	out := make(map[string]NodePolicy, len(g.nodes))
	for name, n := range g.nodes {
		out[name] = NodePolicy{MaxAttempts: n.retry.attempts(), TimeoutMS: n.timeout.Milliseconds(), OnError: n.onError}
	}
	return out
}
