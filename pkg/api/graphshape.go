package api

import "github.com/superstep/superstep/pkg/pregel"

// GraphShape is the structure of a graph for drawing it, part of the body
// of GET /v1/graphs/{graph}: its edges (static, conditional, fan-out, join,
// on-error; from "__start__", to "__end__") and each node's retry, timeout
// and error-handler policy.
type GraphShape struct {
	Edges    []pregel.Edge                `json:"edges"`
	Policies map[string]pregel.NodePolicy `json:"policies"`
}

func graphShape(g *pregel.Graph) GraphShape {
	edges := g.Edges()
	if edges == nil {
		edges = []pregel.Edge{}
	}
	return GraphShape{Edges: edges, Policies: g.Policies()}
}
