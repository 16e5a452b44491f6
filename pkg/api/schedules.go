package api

import (
	"net/http"
	"net/url"

	"github.com/superstep/superstep/pkg/schedule"
)

// The schedule endpoints: graphs run on a clock (pkg/schedule).

func (h *Handler) scheduleRoutes() []route {
	return []route{
		{"POST", "/v1/schedules", h.createSchedule},
		{"GET", "/v1/schedules", h.listSchedules},
		{"GET", "/v1/schedules/{name}", h.getSchedule},
		{"PATCH", "/v1/schedules/{name}", h.updateSchedule},
		{"DELETE", "/v1/schedules/{name}", h.deleteSchedule},
		{"POST", "/v1/schedules/{name}/pause", h.pauseSchedule},
		{"POST", "/v1/schedules/{name}/resume", h.resumeSchedule},
	}
}

// ScheduleList is the body of GET /v1/schedules: every schedule, by name.
type ScheduleList struct {
	Schedules []schedule.Schedule `json:"schedules"`
}

// errNoSchedules answers the schedule endpoints of a server without
// schedules.
var errNoSchedules = &problem{Status: http.StatusNotImplemented, Type: typeNotImplemented, Title: "Not implemented",
	Detail: "this server keeps no schedules; run `superstep dev`, or deploy with the template's scheduler settings"}

func (h *Handler) createSchedule(w http.ResponseWriter, r *http.Request) error {
	if h.schedules == nil {
		return errNoSchedules
	}
	var req schedule.CreateRequest
	if err := h.decode(w, r, &req, false); err != nil {
		return err
	}
	sc, err := h.schedules.Create(r.Context(), req)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/schedules/"+url.PathEscape(sc.Name))
	return h.writeJSON(w, r, http.StatusCreated, sc)
}

func (h *Handler) listSchedules(w http.ResponseWriter, r *http.Request) error {
	if h.schedules == nil {
		return errNoSchedules
	}
	if err := allowedQuery(r); err != nil {
		return err
	}
	all, err := h.schedules.List(r.Context())
	if err != nil {
		return err
	}
	if all == nil {
		all = []schedule.Schedule{}
	}
	return h.writeJSON(w, r, http.StatusOK, ScheduleList{Schedules: all})
}

func (h *Handler) getSchedule(w http.ResponseWriter, r *http.Request) error {
	if h.schedules == nil {
		return errNoSchedules
	}
	if err := allowedQuery(r); err != nil {
		return err
	}
	sc, err := h.schedules.Get(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	return h.writeJSON(w, r, http.StatusOK, sc)
}

func (h *Handler) updateSchedule(w http.ResponseWriter, r *http.Request) error {
	if h.schedules == nil {
		return errNoSchedules
	}
	var req schedule.UpdateRequest
	if err := h.decode(w, r, &req, false); err != nil {
		return err
	}
	return h.update(w, r, req)
}

func (h *Handler) update(w http.ResponseWriter, r *http.Request, req schedule.UpdateRequest) error {
	sc, err := h.schedules.Update(r.Context(), r.PathValue("name"), req)
	if err != nil {
		return err
	}
	return h.writeJSON(w, r, http.StatusOK, sc)
}

func (h *Handler) pauseSchedule(w http.ResponseWriter, r *http.Request) error {
	return h.setPaused(w, r, true)
}

func (h *Handler) resumeSchedule(w http.ResponseWriter, r *http.Request) error {
	return h.setPaused(w, r, false)
}

func (h *Handler) setPaused(w http.ResponseWriter, r *http.Request, paused bool) error {
	if h.schedules == nil {
		return errNoSchedules
	}
	if err := allowedQuery(r); err != nil {
		return err
	}
	var empty struct{}
	if err := h.decode(w, r, &empty, true); err != nil {
		return err
	}
	return h.update(w, r, schedule.UpdateRequest{Paused: &paused})
}

func (h *Handler) deleteSchedule(w http.ResponseWriter, r *http.Request) error {
	if h.schedules == nil {
		return errNoSchedules
	}
	if err := allowedQuery(r); err != nil {
		return err
	}
	if err := h.schedules.Delete(r.Context(), r.PathValue("name")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
