package pregel

import (
	"fmt"
	"slices"
	"strings"
)

// Mermaid renders the graph as a Mermaid flowchart. When status is given,
// nodes are coloured by it (node name -> status).
func (g *Graph) Mermaid(status map[string]NodeStatus) string {
	var b strings.Builder
	id := func(n string) string { return n }
	b.WriteString("flowchart TD\n  __start__([start])\n  __end__([end])\n")
	for _, n := range g.order {
		label := g.nodes[n].info.Name
		if label == "" {
			label = n
		}
		fmt.Fprintf(&b, "  %s[%q]\n", n, label)
	}
	for _, from := range slices.Concat([]string{Start}, g.order) {
		for _, to := range g.edges[from] {
			fmt.Fprintf(&b, "  %s --> %s\n", id(from), id(to))
		}
		if slices.Contains(g.ends, from) {
			fmt.Fprintf(&b, "  %s --> %s\n", id(from), id(End))
		}
		for _, r := range g.routes[from] {
			fmt.Fprintf(&b, "  %s -.->|%s| %s\n", id(from), r.label, id(r.to))
		}
		if n := g.nodes[from]; n != nil && n.onError != "" {
			fmt.Fprintf(&b, "  %s -.->|on error| %s\n", id(from), id(n.onError))
		}
	}
	for _, j := range g.joins {
		fmt.Fprintf(&b, "  %s -->|join| %s\n", strings.Join(j.From, " & "), id(j.To))
	}
	if len(status) > 0 {
		b.WriteString("  classDef completed fill:#c8e6c9,stroke:#2e7d32\n")
		b.WriteString("  classDef skipped fill:#eeeeee,stroke:#9e9e9e,stroke-dasharray:4\n")
		b.WriteString("  classDef cancelled fill:#ffe0b2,stroke:#ef6c00\n")
		b.WriteString("  classDef failed fill:#ffcdd2,stroke:#c62828\n")
		b.WriteString("  classDef interrupted fill:#bbdefb,stroke:#1565c0\n")
		b.WriteString("  classDef running fill:#fff9c4,stroke:#f9a825\n")
		for _, n := range g.order {
			if s, ok := status[n]; ok && s != NodePending {
				fmt.Fprintf(&b, "  class %s %s\n", n, s)
			}
		}
	}
	return b.String()
}
