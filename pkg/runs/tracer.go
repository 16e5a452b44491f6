package runs

import (
	"context"

	"github.com/superstep/superstep/pkg/pregel"
)

// Tracer traces runs; pkg/tracing implements it with OpenTelemetry. A
// Service and an embedded Scheduler without one trace nothing.
type Tracer interface {
	// StartRun starts the root span of a run about to be created, records
	// its trace context in r.Trace, and returns the context to create the
	// run with and the function that ends the span with the outcome.
	StartRun(ctx context.Context, r *Run) (context.Context, func(error))
	// RunOptions returns the engine options that trace one execution of
	// run r (Graph.Run or Graph.Resume) inside r's trace.
	RunOptions(ctx context.Context, r Run) []pregel.RunOption
	// LinkResume records in r.Trace the trace context of the request in
	// ctx that resumes r, so that the execution that continues it links
	// to the request.
	LinkResume(ctx context.Context, r *Run)
	// EndRun records how run r stopped (r.Status) when no execution of
	// it did: a paused run cancelled, a pending run cancelled before it
	// started.
	EndRun(ctx context.Context, r Run)
}
