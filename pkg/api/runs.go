package api

import (
	"time"

	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// createRun serves POST /v1/graphs/{graph}/runs: 202 with a new run, 200
// with the existing one when run_id names a run with the same input.
func (h *Handler) createRun(w http.ResponseWriter, r *http.Request) error {
	var req CreateRunRequest
	if err := h.decode(w, r, &req, true); err != nil {
		return err
	}
	g, err := h.graph(r.PathValue("graph"))
	if err != nil {
		return err
	}
	input, err := textInput(g, req.Input) // plain text: textinput.go
	if err != nil {
		return err
	}
	modes, err := createStreamModes(req)
	if err != nil {
		return err
	}
	if req.Stream && h.events == nil {
		return errNoStreams
	}
	create := runs.CreateRequest{
		RunID:     req.RunID,
		Input:     input,
		ContextID: req.ContextID,
	}
	if m, ok := h.events.(watchMarker); ok && req.Stream {
		// The run is watched from its creation, not from the stream's
		// first read, which its first step can precede.
		create.WatchedUntil = m.WatchUntil(time.Now())
	}
	run, created, err := h.svc.Create(r.Context(), r.PathValue("graph"), create)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/runs/"+url.PathEscape(run.ID))
	if req.Stream {
		return h.stream(w, r, run.ID, modes, 0)
	}
	status := http.StatusOK
	if created {
		status = http.StatusAccepted
	}
	return h.writeJSON(w, r, status, runView(run, NewValueBudget()))
}

// watchMarker is an event source that keeps only watched runs' events
// (the serverless runtime's): WatchUntil is how long a stream opened at
// now marks its run watched.
type watchMarker interface {
	WatchUntil(now time.Time) time.Time
}

// listRuns serves GET /v1/runs.
func (h *Handler) listRuns(w http.ResponseWriter, r *http.Request) error {
	if err := allowedQuery(r, "graph", "status", "context_id", "version", "limit", "page_token"); err != nil {
		return err
	}
	q := r.URL.Query()
	f := runs.Filter{
		Version:   q.Get("version"),
		Graph:     q.Get("graph"),
		Status:    pregel.RunStatus(q.Get("status")),
		ContextID: q.Get("context_id"),
		PageToken: q.Get("page_token"),
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 500 {
			return invalidf("limit %q must be a whole number between 1 and 500", s)
		}
		f.Limit = n
	}
	page, err := h.svc.List(r.Context(), f)
	if err != nil {
		return err
	}
	out := RunList{Runs: make([]Run, 0, len(page.Runs)), NextPageToken: page.NextPageToken}
	budget := NewValueBudget() // one for the whole page
	for _, run := range page.Runs {
		out.Runs = append(out.Runs, runView(run, budget))
	}
	return h.writeJSON(w, r, http.StatusOK, out)
}

// RunViewSteps is the number of steps GET /v1/runs/{run_id} lists when
// the request names none (?steps=): the newest ones, as many as a page of
// /checkpoints holds by default.
const RunViewSteps = runs.HistoryPageSize

// getRun serves GET /v1/runs/{run_id}[?steps=N]: the record, its newest
// steps and its latest state.
func (h *Handler) getRun(w http.ResponseWriter, r *http.Request) error {
	if err := allowedQuery(r, "steps"); err != nil {
		return err
	}
	n := RunViewSteps
	if s := r.URL.Query().Get("steps"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 || v > runs.MaxHistoryPageSize {
			return invalidf("steps %q must be a whole number between 1 and %d; GET /v1/runs/{run_id}/checkpoints pages the rest", s, runs.MaxHistoryPageSize)
		}
		n = v
	}
	id := r.PathValue("run_id")
	run, err := h.svc.Get(r.Context(), id)
	if err != nil {
		return runErr(id, err)
	}
	budget := NewValueBudget()
	out := RunDetail{Run: runView(run, budget), Values: map[string]json.RawMessage{}}
	latest := -1
	cp, err := h.svc.Checkpoint(r.Context(), id, pregel.Latest)
	switch {
	case err == nil:
		latest = cp.Step
		h.svc.AddUsage(r.Context(), &run, cp)
		out.Usage = run.Usage
		if cp.Values != nil {
			out.Values, out.OmittedValues = budget.Fit(cp.Values, func(ch string) string { return ValueHref(id, strconv.Itoa(cp.Step), ch) })
		}
	case errors.Is(err, runs.ErrNotFound):
		// Created a moment ago: step 0 is not stored yet.
	default:
		return err
	}
	page, err := h.svc.HistoryPage(r.Context(), id, runs.HistoryFilter{Limit: n, NewestFirst: true})
	if err != nil {
		return runErr(id, err)
	}
	out.Steps = page.Steps
	slices.Reverse(out.Steps) // oldest first, as ever
	if k := len(out.Steps); k > 0 {
		latest = max(latest, out.Steps[k-1].Step)
	}
	out.StepCount = latest + 1
	out.StepsTruncated = page.NextPageToken != ""
	out.OlderStepsPageToken = page.NextPageToken
	return h.writeJSON(w, r, http.StatusOK, out)
}

// listCheckpoints serves GET /v1/runs/{run_id}/checkpoints: a page of
// the run's steps, oldest first or with order=desc newest first (limit 1
// to 500, default runs.HistoryPageSize), and next_page_token when more
// follow.
func (h *Handler) listCheckpoints(w http.ResponseWriter, r *http.Request) error {
	if err := allowedQuery(r, "limit", "page_token", "order"); err != nil {
		return err
	}
	id := r.PathValue("run_id")
	q := r.URL.Query()
	f := runs.HistoryFilter{PageToken: q.Get("page_token")}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > runs.MaxHistoryPageSize {
			return invalidf("limit %q must be a whole number between 1 and %d", s, runs.MaxHistoryPageSize)
		}
		f.Limit = n
	}
	switch o := q.Get("order"); o {
	case "", "asc":
	case "desc":
		f.NewestFirst = true
	default:
		return invalidf("order %q must be asc (oldest step first, the default) or desc (newest first)", o)
	}
	page, err := h.svc.HistoryPage(r.Context(), id, f)
	if errors.Is(err, runs.ErrTokenOrder) {
		if f.NewestFirst {
			return invalidf("page token %q pages the steps oldest first: ask without order=desc", f.PageToken)
		}
		return invalidf("page token %q pages the steps newest first (a run's older_steps_page_token is one): add order=desc", f.PageToken)
	}
	if err != nil {
		return runErr(id, err)
	}
	return h.writeJSON(w, r, http.StatusOK, CheckpointList{RunID: id, Checkpoints: page.Steps, NextPageToken: page.NextPageToken})
}

// listEvents serves GET /v1/runs/{run_id}/events: the run's history.
func (h *Handler) listEvents(w http.ResponseWriter, r *http.Request) error {
	if err := allowedQuery(r); err != nil {
		return err
	}
	id := r.PathValue("run_id")
	evs, dropped, err := h.svc.Events(r.Context(), id)
	if err != nil {
		return runErr(id, err)
	}
	return h.writeJSON(w, r, http.StatusOK, eventList(id, evs, dropped))
}

// getCheckpoint serves GET /v1/runs/{run_id}/checkpoints/{step}, where
// step is a step number or "latest".
func (h *Handler) getCheckpoint(w http.ResponseWriter, r *http.Request) error {
	if err := allowedQuery(r); err != nil {
		return err
	}
	id := r.PathValue("run_id")
	step, err := parseStep(r.PathValue("step"))
	if err != nil {
		return err
	}
	if _, err := h.svc.Get(r.Context(), id); err != nil {
		return runErr(id, err)
	}
	cp, err := h.svc.Checkpoint(r.Context(), id, step)
	if err != nil {
		return err
	}
	out := Checkpoint{Checkpoint: *cp}
	out.Values, out.OmittedValues = NewValueBudget().Fit(cp.Values, func(ch string) string { return ValueHref(id, strconv.Itoa(cp.Step), ch) })
	return h.writeJSON(w, r, http.StatusOK, out)
}

// drainRun serves POST /v1/runs/{run_id}/drain.
func (h *Handler) drainRun(w http.ResponseWriter, r *http.Request) error {
	var req DrainRequest
	if err := h.decode(w, r, &req, true); err != nil {
		return err
	}
	id := r.PathValue("run_id")
	run, err := h.svc.Drain(r.Context(), id, req.Reason)
	if err != nil {
		return runErr(id, err)
	}
	return h.writeJSON(w, r, http.StatusAccepted, runView(run, NewValueBudget()))
}

// drainFleet serves POST /v1/runs/drain: 202 with the runs asked to drain.
func (h *Handler) drainFleet(w http.ResponseWriter, r *http.Request) error {
	var req FleetDrainRequest
	if err := h.decode(w, r, &req, false); err != nil {
		return err
	}
	res, err := h.svc.DrainAll(r.Context(), runs.FleetFilter{Graph: req.Graph, Version: req.Version}, req.Reason)
	if err != nil {
		return err
	}
	return h.writeJSON(w, r, http.StatusAccepted, FleetResult(res))
}

// resumeFleet serves POST /v1/runs/resume: 202 with the runs resumed.
func (h *Handler) resumeFleet(w http.ResponseWriter, r *http.Request) error {
	var req FleetResumeRequest
	if err := h.decode(w, r, &req, false); err != nil {
		return err
	}
	res, err := h.svc.ResumeAll(r.Context(), runs.FleetFilter{Graph: req.Graph, Version: req.Version}, req.Status)
	if err != nil {
		return err
	}
	return h.writeJSON(w, r, http.StatusAccepted, FleetResult(res))
}

// cancelRun serves POST /v1/runs/{run_id}/cancel: 200 when the run is
// cancelled at once, 202 when its executor has yet to stop it.
func (h *Handler) cancelRun(w http.ResponseWriter, r *http.Request) error {
	var req struct{}
	if err := h.decode(w, r, &req, true); err != nil {
		return err
	}
	id := r.PathValue("run_id")
	run, err := h.svc.Cancel(r.Context(), id)
	if err != nil {
		return runErr(id, err)
	}
	status := http.StatusAccepted
	if run.Status == pregel.RunCancelled {
		status = http.StatusOK
	}
	return h.writeJSON(w, r, status, runView(run, NewValueBudget()))
}

// resumeRun serves POST /v1/runs/{run_id}/resume.
func (h *Handler) resumeRun(w http.ResponseWriter, r *http.Request) error {
	var req ResumeRequest
	if err := h.decode(w, r, &req, true); err != nil {
		return err
	}
	if req.Resume != nil && req.ResumeByID != nil {
		return invalidf("send either \"resume\" (one value for every interrupt) or \"resume_by_id\" (a value per interrupt id), not both")
	}
	id := r.PathValue("run_id")
	run, err := h.svc.Resume(r.Context(), id, runs.ResumeRequest{Value: req.Resume, Values: req.ResumeByID})
	if err != nil {
		return runErr(id, err)
	}
	return h.writeJSON(w, r, http.StatusAccepted, runView(run, NewValueBudget()))
}
