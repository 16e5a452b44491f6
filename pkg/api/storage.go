package api

import (
	"net/http"

	"github.com/superstep/superstep/pkg/runs"
)

// Storage is the body of GET /v1/runs/{run_id}/storage and
// GET /v1/threads/{thread_id}/storage: what a run, or a thread with all
// its runs, stores, in bytes (see runs.Storage). It is a resource of its
// own, not a field of the run and thread views, because measuring reads
// every row or item of the run (one bounded query per run; a Query of
// the run's partition on DynamoDB, costing its size in read units),
// which the views, read on every poll of a watcher, must not pay.
type Storage = runs.Storage

// getRunStorage serves GET /v1/runs/{run_id}/storage.
func (h *Handler) getRunStorage(w http.ResponseWriter, r *http.Request) error {
	if err := allowedQuery(r); err != nil {
		return err
	}
	id := r.PathValue("run_id")
	st, err := h.svc.RunStorage(r.Context(), id)
	if err != nil {
		return runErr(id, err)
	}
	return h.writeJSON(w, r, http.StatusOK, st)
}

// getThreadStorage serves GET /v1/threads/{thread_id}/storage.
func (h *Handler) getThreadStorage(w http.ResponseWriter, r *http.Request) error {
	if err := allowedQuery(r); err != nil {
		return err
	}
	st, err := h.svc.ThreadStorage(r.Context(), r.PathValue("thread_id"))
	if err != nil {
		return err
	}
	return h.writeJSON(w, r, http.StatusOK, st)
}
