package runs

import (
	"context"

	"github.com/superstep/superstep/pkg/pregel"
)

// hasUsage reports whether r's graph declares a usage channel
// (pregel.UsageChannel).
func (s *Service) hasUsage(r Run) bool {
	g, ok := s.Graphs.Get(r.Graph)
	return ok && g.UsageChannel() != ""
}

// addUsage sets r.Usage from cp when r's graph declares a usage channel.
// A value that is not token usage is logged and left out: the run record
// is still worth showing.
func (s *Service) addUsage(ctx context.Context, r *Run, cp *pregel.Checkpoint) {
	g, ok := s.Graphs.Get(r.Graph)
	if !ok || cp == nil {
		return
	}
	u, err := g.Usage(cp.Values)
	if err != nil {
		s.logger().WarnContext(ctx, "runs: read token usage", "run_id", r.ID, "err", err)
		return
	}
	r.Usage = u
}
