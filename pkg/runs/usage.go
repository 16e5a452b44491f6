package runs

import (
	"context"

	"github.com/superstep/superstep/pkg/pregel"
)

// AddUsage sets r.Usage from cp, a checkpoint of r, when r's graph
// declares a usage channel (pregel.UsageChannel). Get does it for the
// pending and running runs whose checkpoint it loads anyway; a caller
// that loads a finished run's latest checkpoint (GET /v1/runs/{id} does)
// adds it the same way. A value that is not token usage is logged and
// left out: the run record is still worth showing.
func (s *Service) AddUsage(ctx context.Context, r *Run, cp *pregel.Checkpoint) {
	g, ok := s.Graphs.Get(r.Graph)
	if !ok || cp == nil || cp.RunID != r.ID || g.UsageChannel() == "" {
		return
	}
	u, err := g.Usage(cp.Values)
	if err != nil {
		s.logger().WarnContext(ctx, "runs: read token usage", "run_id", r.ID, "err", err)
		return
	}
	r.Usage = u
}
