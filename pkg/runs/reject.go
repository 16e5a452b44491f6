package runs

import (
	"bytes"
	"context"
	"fmt"

	"github.com/superstep/superstep/pkg/pregel"
)

// Reject stores the record of a run whose input was refused before it
// could start (by a protocol binding such as A2A, which must keep such a
// task retrievable): a failed run marked Rejected, with reason as its
// Error, no checkpoint, and nothing dispatched. Like Create, it is
// idempotent on req.RunID: the same id with the same graph and input
// returns the stored run.
func (s *Service) Reject(ctx context.Context, graph string, req CreateRequest, reason string) (Run, error) {
	if _, err := s.Graphs.lookup(graph); err != nil {
		return Run{}, err
	}
	if req.RunID == "" {
		req.RunID = pregel.NewRunID()
	} else if !ValidID(req.RunID) {
		return Run{}, fmt.Errorf("run_id %q must be 1 to 128 letters, digits, '.', '_', ':' or '-': %w", req.RunID, ErrInvalid)
	}
	if req.ContextID != "" && !ValidID(req.ContextID) {
		return Run{}, fmt.Errorf("context_id %q must be 1 to 128 letters, digits, '.', '_', ':' or '-': %w", req.ContextID, ErrInvalid)
	}
	input, err := compactJSON(req.Input)
	if err != nil {
		// The input itself may be what was refused; keep the record.
		input = nil
	}
	now := s.now()
	r, created, err := s.Runs.CreateRun(ctx, Run{
		ID: req.RunID, Graph: graph, Status: pregel.RunFailed, Input: input, ContextID: req.ContextID,
		CreatedAt: now, UpdatedAt: now, Error: reason, Rejected: true, Messages: appendMessage(nil, req.Message),
		Events: []Event{
			{At: now, Type: EventCreated, Status: pregel.RunPending},
			{At: now, Type: EventFailed, Status: pregel.RunFailed, Detail: reason},
		},
	})
	if err != nil {
		return Run{}, fmt.Errorf("store rejected run: %w", err)
	}
	if !created && (r.Graph != graph || !r.Rejected || !bytes.Equal(r.Input, input)) {
		return Run{}, fmt.Errorf("run %q already exists with a different graph or input; choose another run_id: %w", req.RunID, ErrConflict)
	}
	return r, nil
}
