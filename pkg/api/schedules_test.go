package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/embedded"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/schedule"
)

// newScheduleEnv serves the API with threads and schedules in memory, the
// clock fixed at 2026-01-05 08:00 UTC.
func newScheduleEnv(t *testing.T, opts ...envOption) (*env, *schedule.Runner) {
	t.Helper()
	reg, err := runs.NewRegistry(echoGraph(t))
	if err != nil {
		t.Fatal(err)
	}
	now := func() time.Time { return time.Date(2026, 1, 5, 8, 0, 0, 0, time.UTC) }
	store, cps := runs.NewMemoryStore(), pregel.NewMemoryStore()
	svc := &runs.Service{Graphs: reg, Runs: store, Checkpoints: cps, Threads: store, Logger: testLogger(t)}
	sched := embedded.NewScheduler(embedded.SchedulerConfig{Graphs: reg, Runs: store, Checkpoints: cps, Logger: testLogger(t), OnStop: svc.RunStopped, StartThreadRun: svc.StartThreadRun})
	svc.Dispatcher = sched
	if err := sched.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := sched.Shutdown(ctx, 100*time.Millisecond); err != nil {
			t.Error(err)
		}
	})
	ss := &schedule.Service{Runs: svc, Backend: schedule.NewMemoryStore(), Now: now}
	runner := schedule.NewRunner(ss, schedule.RunnerConfig{Now: now, Logger: testLogger(t)})
	opts = append(opts, func(c *api.Config) { c.Schedules = ss })
	return startEnv(t, svc, cps, opts...), runner
}

// TestSchedulesAPI: create, list, get, pause, resume, update and delete a
// schedule; a firing starts its run.
func TestSchedulesAPI(t *testing.T) {
	e, runner := newScheduleEnv(t)
	var sc schedule.Schedule
	resp := e.do("POST", "/v1/schedules", map[string]any{"name": "nightly", "graph": "echo", "schedule": "0 2 * * *", "timezone": "Europe/Paris", "input": map[string]string{"text": "hi"}})
	resp.ok(t, http.StatusCreated, &sc)
	if resp.header.Get("Location") != "/v1/schedules/nightly" || sc.Name != "nightly" || sc.Timezone != "Europe/Paris" || sc.Paused ||
		sc.NextFireAt == nil || !sc.NextFireAt.Equal(time.Date(2026, 1, 6, 1, 0, 0, 0, time.UTC)) {
		t.Fatalf("created %+v (Location %q); want the next firing at 02:00 Paris on the 6th", sc, resp.header.Get("Location"))
	}
	var list api.ScheduleList
	e.do("GET", "/v1/schedules", nil).ok(t, http.StatusOK, &list)
	if len(list.Schedules) != 1 || list.Schedules[0].Name != "nightly" {
		t.Fatalf("list %+v", list)
	}
	sc = schedule.Schedule{} // a field the response leaves out must read as absent
	e.do("POST", "/v1/schedules/nightly/pause", nil).ok(t, http.StatusOK, &sc)
	if !sc.Paused || sc.NextFireAt != nil {
		t.Errorf("paused: %+v, want paused with no next firing", sc)
	}
	sc = schedule.Schedule{}
	e.do("POST", "/v1/schedules/nightly/resume", nil).ok(t, http.StatusOK, &sc)
	if sc.Paused || sc.NextFireAt == nil {
		t.Errorf("resumed: %+v", sc)
	}
	e.do("PATCH", "/v1/schedules/nightly", map[string]any{"schedule": "rate(5 minutes)"}).ok(t, http.StatusOK, &sc)
	if sc.Expression != "rate(5 minutes)" || !sc.NextFireAt.Equal(time.Date(2026, 1, 5, 8, 0, 0, 0, time.UTC)) {
		t.Errorf("updated: %+v, want a rate firing now", sc)
	}
	if _, err := runner.Tick(t.Context(), time.Date(2026, 1, 5, 8, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	e.do("GET", "/v1/schedules/nightly", nil).ok(t, http.StatusOK, &sc)
	want := schedule.FiringRunID("nightly", time.Date(2026, 1, 5, 8, 0, 0, 0, time.UTC))
	if sc.LastRunID != want || sc.LastFireAt == nil {
		t.Fatalf("after a firing: %+v, want last run %s", sc, want)
	}
	var run api.RunDetail
	e.do("GET", "/v1/runs/"+want, nil).ok(t, http.StatusOK, &run)
	if run.Graph != "echo" {
		t.Errorf("the firing's run: %+v", run)
	}
	if resp := e.do("DELETE", "/v1/schedules/nightly", nil); resp.status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", resp.status, resp.body)
	}
	e.do("GET", "/v1/schedules/nightly", nil).problem(t, http.StatusNotFound, `there is no schedule "nightly"`)
}

// TestSchedulesBadInput: what a caller gets wrong is a 4xx saying what to
// fix.
func TestSchedulesBadInput(t *testing.T) {
	e, _ := newScheduleEnv(t)
	for _, tc := range []struct {
		body   any
		status int
		want   string
	}{
		{map[string]any{"name": "a", "graph": "echo", "schedule": "0 9 * * MONDAY"}, 400, "is not a valid cron expression"},
		{map[string]any{"name": "a", "graph": "echo", "schedule": "0 9 * * *", "timezone": "Europe/Pariss"}, 400, "not an IANA time zone name"},
		{map[string]any{"name": "a", "graph": "nope", "schedule": "0 9 * * *"}, 400, `graph "nope" is not registered; graphs are echo`},
		{map[string]any{"name": "a", "graph": "echo", "schedule": "0 9 * * *", "thread_id": "ghost"}, 400, `thread "ghost" does not exist`},
		{map[string]any{"name": "a", "graph": "echo", "schedule": "0 9 * * *", "cron": "x"}, 400, "cron"},
		{map[string]any{"name": "a b", "graph": "echo", "schedule": "0 9 * * *"}, 400, "1 to 64 letters"},
	} {
		e.do("POST", "/v1/schedules", tc.body).problem(t, tc.status, tc.want)
	}
	e.do("POST", "/v1/schedules", map[string]any{"name": "a", "graph": "echo", "schedule": "0 9 * * *"}).ok(t, http.StatusCreated, nil)
	e.do("POST", "/v1/schedules", map[string]any{"name": "a", "graph": "echo", "schedule": "0 9 * * *"}).problem(t, http.StatusConflict, `schedule "a" exists`)
	e.do("PATCH", "/v1/schedules/a", map[string]any{"timezone": "Nowhere/City"}).problem(t, http.StatusBadRequest, "not an IANA time zone name")
	e.do("PATCH", "/v1/schedules/missing", map[string]any{"paused": true}).problem(t, http.StatusNotFound, `there is no schedule "missing"`)
	e.do("GET", "/v1/schedules?graph=echo", nil).problem(t, http.StatusBadRequest, "unknown query parameter")
}

// TestSchedulesAuth: the schedule endpoints take the API's token; a server
// without schedules answers 501.
func TestSchedulesAuth(t *testing.T) {
	e, _ := newScheduleEnv(t, withToken("s3cret"))
	e.token = ""
	e.do("GET", "/v1/schedules", nil).problem(t, http.StatusUnauthorized, "bearer token")
	e.token = "s3cret"
	e.do("GET", "/v1/schedules", nil).ok(t, http.StatusOK, nil)
	plain := newEnv(t)
	plain.do("GET", "/v1/schedules", nil).problem(t, http.StatusNotImplemented, "keeps no schedules")
}
