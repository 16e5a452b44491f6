package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// The thread endpoints: conversations whose runs continue one another.

func (h *Handler) threadRoutes() []route {
	return []route{
		{"POST", "/v1/threads", h.createThread},
		{"GET", "/v1/threads", h.listThreads},
		{"GET", "/v1/threads/{thread_id}", h.getThread},
		{"DELETE", "/v1/threads/{thread_id}", h.deleteThread},
		{"GET", "/v1/threads/{thread_id}/state", h.getThreadState},
		{"POST", "/v1/threads/{thread_id}/state", h.updateThreadState},
		{"GET", "/v1/threads/{thread_id}/history", h.threadHistory},
		{"GET", "/v1/threads/{thread_id}/runs", h.listThreadRuns},
		{"GET", "/v1/threads/{thread_id}/storage", h.getThreadStorage},
		{"POST", "/v1/threads/{thread_id}/runs", h.createThreadRun},
		{"POST", "/v1/threads/{thread_id}/fork", h.forkThread},
	}
}

// CreateThreadRequest is the body of POST /v1/threads; an empty body
// creates a thread with a new id.
type CreateThreadRequest struct {
	// ThreadID makes creation idempotent.
	ThreadID string `json:"thread_id,omitempty"`
	// Metadata is a JSON object kept with the thread.
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// Thread is the body of the thread endpoints' responses.
type Thread struct {
	ThreadID  string          `json:"thread_id"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
	// Status is "busy" while a run is active, "idle" otherwise.
	Status string `json:"status"`
	// ActiveRunID is the run that holds the thread; QueuedRunIDs wait for
	// it, in arrival order.
	ActiveRunID  string   `json:"active_run_id,omitempty"`
	QueuedRunIDs []string `json:"queued_run_ids,omitempty"`
	// Head is the step the next run starts from when none is active.
	Head *runs.StepRef `json:"head,omitempty"`
	// ForkedFrom is the thread this one was forked from; Forks are the
	// threads forked from this one (it cannot be deleted before them).
	ForkedFrom string   `json:"forked_from,omitempty"`
	Forks      []string `json:"forks,omitempty"`
	// Deleting says a deletion began and was cut short: DELETE again.
	Deleting bool `json:"deleting,omitempty"`
}

func threadView(t runs.Thread) Thread {
	status := "idle"
	if t.Active != "" {
		status = "busy"
	}
	return Thread{ThreadID: t.ID, Metadata: t.Metadata, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt,
		Status: status, ActiveRunID: t.Active, QueuedRunIDs: t.Queue, Head: t.Head,
		ForkedFrom: t.ForkedFrom, Forks: t.Forks, Deleting: t.Deleting}
}

// ThreadList is the body of GET /v1/threads: newest thread first.
type ThreadList struct {
	Threads       []Thread `json:"threads"`
	NextPageToken string   `json:"next_page_token,omitempty"`
}

// ThreadRunRequest is the body of POST /v1/threads/{thread_id}/runs.
type ThreadRunRequest struct {
	// Graph names the graph to run.
	Graph string `json:"graph"`
	// Input is a JSON object of channel values, applied to the thread's
	// state through the channels' reducers.
	Input json.RawMessage `json:"input,omitempty"`
	// RunID makes creation idempotent.
	RunID string `json:"run_id,omitempty"`
	// Strategy says what to do if the thread has an active run: reject
	// (default), enqueue, interrupt or rollback.
	Strategy string `json:"strategy,omitempty"`
}

// ThreadHistory is the body of GET /v1/threads/{thread_id}/history.
type ThreadHistory struct {
	ThreadID string `json:"thread_id"`
	// Steps are newest first.
	Steps []runs.ThreadStep `json:"steps"`
	// NextPageToken, when set, fetches the steps before as ?page_token=.
	NextPageToken string `json:"next_page_token,omitempty"`
}

// ForkRequest is the body of POST /v1/threads/{thread_id}/fork.
type ForkRequest struct {
	// RunID and Step name a step of the thread's history; without them
	// the fork starts at the thread's current state.
	RunID string `json:"run_id,omitempty"`
	Step  *int   `json:"step,omitempty"`
	// ThreadID names the new thread; Metadata is kept with it.
	ThreadID string          `json:"thread_id,omitempty"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// UpdateStateRequest is the body of POST /v1/threads/{thread_id}/state.
type UpdateStateRequest struct {
	// Graph gives the channels and reducers; AsNode names the node the
	// update is recorded as.
	Graph  string          `json:"graph"`
	AsNode string          `json:"as_node"`
	Values json.RawMessage `json:"values"`
}

// BusyProblem is the 409 problem of a run refused because its thread has
// an active run (strategy reject): it names that run.
type BusyProblem struct {
	Problem
	ActiveRunID string `json:"active_run_id"`
}

// createThread serves POST /v1/threads: 201 with a new thread, 200 with
// the existing one when thread_id names a thread with the same metadata.
func (h *Handler) createThread(w http.ResponseWriter, r *http.Request) error {
	var req CreateThreadRequest
	if err := h.decode(w, r, &req, true); err != nil {
		return err
	}
	t, created, err := h.svc.CreateThread(r.Context(), runs.CreateThreadRequest{ThreadID: req.ThreadID, Metadata: req.Metadata})
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/threads/"+url.PathEscape(t.ID))
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return h.writeJSON(w, r, status, threadView(t))
}

// listThreads serves GET /v1/threads.
func (h *Handler) listThreads(w http.ResponseWriter, r *http.Request) error {
	if err := allowedQuery(r, "limit", "page_token"); err != nil {
		return err
	}
	limit, err := limitParam(r, 500)
	if err != nil {
		return err
	}
	page, err := h.svc.ListThreads(r.Context(), runs.ThreadFilter{Limit: limit, PageToken: r.URL.Query().Get("page_token")})
	if err != nil {
		return err
	}
	out := ThreadList{Threads: make([]Thread, 0, len(page.Threads)), NextPageToken: page.NextPageToken}
	for _, t := range page.Threads {
		out.Threads = append(out.Threads, threadView(t))
	}
	return h.writeJSON(w, r, http.StatusOK, out)
}

func limitParam(r *http.Request, most int) (int, error) {
	s := r.URL.Query().Get("limit")
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > most {
		return 0, invalidf("limit %q must be a whole number between 1 and %d", s, most)
	}
	return n, nil
}

// getThread serves GET /v1/threads/{thread_id}.
func (h *Handler) getThread(w http.ResponseWriter, r *http.Request) error {
	if err := allowedQuery(r); err != nil {
		return err
	}
	id := r.PathValue("thread_id")
	t, err := h.svc.GetThread(r.Context(), id)
	if err != nil {
		return err
	}
	return h.writeJSON(w, r, http.StatusOK, threadView(t))
}

// deleteThread serves DELETE /v1/threads/{thread_id}: 204.
func (h *Handler) deleteThread(w http.ResponseWriter, r *http.Request) error {
	if err := allowedQuery(r); err != nil {
		return err
	}
	id := r.PathValue("thread_id")
	if err := h.svc.DeleteThread(r.Context(), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// getThreadState serves GET /v1/threads/{thread_id}/state.
func (h *Handler) getThreadState(w http.ResponseWriter, r *http.Request) error {
	if err := allowedQuery(r); err != nil {
		return err
	}
	id := r.PathValue("thread_id")
	st, err := h.svc.State(r.Context(), id)
	if err != nil {
		return err
	}
	return h.writeJSON(w, r, http.StatusOK, st)
}

// updateThreadState serves POST /v1/threads/{thread_id}/state.
func (h *Handler) updateThreadState(w http.ResponseWriter, r *http.Request) error {
	var req UpdateStateRequest
	if err := h.decode(w, r, &req, false); err != nil {
		return err
	}
	id := r.PathValue("thread_id")
	st, err := h.svc.UpdateState(r.Context(), id, runs.UpdateStateRequest{Graph: req.Graph, AsNode: req.AsNode, Values: req.Values})
	if err != nil {
		return h.busyOr(w, r, err)
	}
	return h.writeJSON(w, r, http.StatusOK, st)
}

// threadHistory serves GET /v1/threads/{thread_id}/history?limit=&page_token=.
func (h *Handler) threadHistory(w http.ResponseWriter, r *http.Request) error {
	if err := allowedQuery(r, "limit", "page_token"); err != nil {
		return err
	}
	limit, err := limitParam(r, runs.MaxHistory)
	if err != nil {
		return err
	}
	id := r.PathValue("thread_id")
	page, err := h.svc.ThreadHistoryPage(r.Context(), id, runs.ThreadHistoryFilter{Limit: limit, PageToken: r.URL.Query().Get("page_token")})
	if err != nil {
		return err
	}
	return h.writeJSON(w, r, http.StatusOK, ThreadHistory{ThreadID: id, Steps: page.Steps, NextPageToken: page.NextPageToken})
}

// listThreadRuns serves GET /v1/threads/{thread_id}/runs.
func (h *Handler) listThreadRuns(w http.ResponseWriter, r *http.Request) error {
	if err := allowedQuery(r, "status", "limit", "page_token"); err != nil {
		return err
	}
	limit, err := limitParam(r, 500)
	if err != nil {
		return err
	}
	id := r.PathValue("thread_id")
	q := r.URL.Query()
	page, err := h.svc.ThreadRuns(r.Context(), id, runs.Filter{Status: pregel.RunStatus(q.Get("status")), Limit: limit, PageToken: q.Get("page_token")})
	if err != nil {
		return err
	}
	out := RunList{Runs: make([]Run, 0, len(page.Runs)), NextPageToken: page.NextPageToken}
	budget := NewValueBudget()
	for _, run := range page.Runs {
		out.Runs = append(out.Runs, runView(run, budget))
	}
	return h.writeJSON(w, r, http.StatusOK, out)
}

// createThreadRun serves POST /v1/threads/{thread_id}/runs: 202 with a
// new run (pending while it waits for the thread), 200 with the existing
// one when run_id names it, 409 with the active run's id when the thread
// is busy and the strategy is reject.
func (h *Handler) createThreadRun(w http.ResponseWriter, r *http.Request) error {
	var req ThreadRunRequest
	if err := h.decode(w, r, &req, false); err != nil {
		return err
	}
	id := r.PathValue("thread_id")
	input := req.Input
	if g, ok := h.svc.Graphs.Get(req.Graph); ok { // an unknown graph is the service's to refuse
		var err error
		if input, err = textInput(g, req.Input); err != nil { // plain text: textinput.go
			return err
		}
	}
	run, created, err := h.svc.CreateOnThread(r.Context(), id, runs.ThreadRunRequest{
		Graph: req.Graph, RunID: req.RunID, Input: input, Strategy: runs.Strategy(req.Strategy),
	})
	if err != nil {
		return h.busyOr(w, r, err)
	}
	w.Header().Set("Location", "/v1/runs/"+url.PathEscape(run.ID))
	status := http.StatusOK
	if created {
		status = http.StatusAccepted
	}
	return h.writeJSON(w, r, status, runView(run, NewValueBudget()))
}

// busyOr answers a BusyError with a BusyProblem, and returns other errors.
func (h *Handler) busyOr(w http.ResponseWriter, r *http.Request, err error) error {
	var busy *runs.BusyError
	if !errors.As(err, &busy) {
		return err
	}
	body, merr := marshal(BusyProblem{
		Problem:     Problem{Type: typeConflict, Title: "Thread busy", Status: http.StatusConflict, Detail: busy.Error(), Instance: r.URL.Path},
		ActiveRunID: busy.ActiveRun,
	})
	if merr != nil {
		return merr
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(http.StatusConflict)
	_, _ = w.Write(body)
	return nil
}

// forkThread serves POST /v1/threads/{thread_id}/fork: 201 with the new
// thread.
func (h *Handler) forkThread(w http.ResponseWriter, r *http.Request) error {
	var req ForkRequest
	if err := h.decode(w, r, &req, true); err != nil {
		return err
	}
	id := r.PathValue("thread_id")
	t, err := h.svc.Fork(r.Context(), id, runs.ForkRequest{RunID: req.RunID, Step: req.Step, ThreadID: req.ThreadID, Metadata: req.Metadata})
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/threads/"+url.PathEscape(t.ID))
	return h.writeJSON(w, r, http.StatusCreated, threadView(t))
}
