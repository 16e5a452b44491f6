package schedule_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/schedule"
	"github.com/superstep/superstep/pkg/schedule/sqlitesched"
)

type counterState struct {
	N    int    `json:"n"`
	Note string `json:"note"`
}

func counterGraph(t *testing.T) *pregel.Graph {
	t.Helper()
	g := pregel.NewGraph[counterState]("counter")
	g.AddFunc("inc", func(_ context.Context, s counterState) (counterState, error) { return counterState{N: s.N + 1}, nil })
	g.AddEdge(pregel.Start, "inc").AddEdge("inc", pregel.End)
	cg, err := g.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return cg
}

// recorder is a Dispatcher that records the runs dispatched (runs stay
// pending: the test is about which runs are started).
type recorder struct {
	mu  sync.Mutex
	ids []string
}

func (d *recorder) Dispatch(_ context.Context, r runs.Run) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ids = append(d.ids, r.ID)
	return nil
}
func (d *recorder) Signal(context.Context, runs.Run) {}

// clock is a fake clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(s string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = mustTime(s)
	return c.t
}

func mustTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

type env struct {
	svc    *schedule.Service
	runs   *runs.Service
	store  *runs.MemoryStore
	clock  *clock
	runner *schedule.Runner
}

func newEnv(t *testing.T, backend schedule.Backend) *env {
	t.Helper()
	reg, err := runs.NewRegistry(counterGraph(t))
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{}
	c.Set("2026-01-05T08:00:00Z")
	store := runs.NewMemoryStore()
	rs := &runs.Service{Graphs: reg, Runs: store, Checkpoints: pregel.NewMemoryStore(), Threads: store, Dispatcher: &recorder{}, Now: c.Now,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))}
	svc := &schedule.Service{Runs: rs, Backend: backend, Now: c.Now}
	r := schedule.NewRunner(svc, schedule.RunnerConfig{Now: c.Now, Logger: rs.Logger})
	return &env{svc: svc, runs: rs, store: store, clock: c, runner: r}
}

// tick runs the runner at the clock's time.
func (e *env) tick(t *testing.T) {
	t.Helper()
	if _, err := e.runner.Tick(t.Context(), e.clock.Now()); err != nil {
		t.Fatal(err)
	}
}

func (e *env) runIDs(t *testing.T) []string {
	t.Helper()
	page, err := e.runs.List(t.Context(), runs.Filter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range page.Runs {
		ids = append(ids, r.ID)
	}
	return ids
}

func (e *env) get(t *testing.T, name string) schedule.Schedule {
	t.Helper()
	sc, err := e.svc.Get(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func backends(t *testing.T) map[string]func(t *testing.T) schedule.Backend {
	return map[string]func(t *testing.T) schedule.Backend{
		"memory": func(*testing.T) schedule.Backend { return schedule.NewMemoryStore() },
		"sqlite": func(t *testing.T) schedule.Backend {
			s, err := sqlitesched.Open(t.Context(), filepath.Join(t.TempDir(), "superstep.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
	}
}

// TestFirings: a weekday 09:00 Paris schedule fires at its times, once
// per firing however often the runner looks, with its input; pausing
// stops it, resuming goes on from now without making up the pause.
func TestFirings(t *testing.T) {
	for name, nb := range backends(t) {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, nb(t))
			sc, err := e.svc.Create(t.Context(), schedule.CreateRequest{Name: "morning", Graph: "counter", Schedule: "0 9 * * 1-5", Timezone: "Europe/Paris", Input: json.RawMessage(`{"n": 40}`)})
			if err != nil {
				t.Fatal(err)
			}
			// Created at 09:00 Paris on Monday the 5th: the next firing is
			// strictly later, Tuesday's.
			if sc.NextFireAt == nil || !sc.NextFireAt.Equal(mustTime("2026-01-06T08:00:00Z")) {
				t.Fatalf("next firing %v, want 2026-01-06T08:00:00Z", sc.NextFireAt)
			}
			e.clock.Set("2026-01-06T07:59:59Z")
			e.tick(t)
			if ids := e.runIDs(t); len(ids) != 0 {
				t.Fatalf("runs before the firing: %v", ids)
			}
			e.clock.Set("2026-01-06T08:00:00Z")
			e.tick(t)
			e.tick(t) // looking again starts nothing more
			want := schedule.FiringRunID("morning", mustTime("2026-01-06T08:00:00Z"))
			if ids := e.runIDs(t); len(ids) != 1 || ids[0] != want {
				t.Fatalf("runs %v, want [%s]", ids, want)
			}
			r, err := e.runs.Get(t.Context(), want)
			if err != nil || string(r.Input) != `{"n":40}` || r.Graph != "counter" {
				t.Errorf("run %+v %v, want counter with input {\"n\":40}", r, err)
			}
			sc = e.get(t, "morning")
			if sc.LastRunID != want || !sc.LastFireAt.Equal(mustTime("2026-01-06T08:00:00Z")) || !sc.NextFireAt.Equal(mustTime("2026-01-07T08:00:00Z")) {
				t.Errorf("after firing: last %v %s, next %v", sc.LastFireAt, sc.LastRunID, sc.NextFireAt)
			}
			// Paused on the 7th before 09:00, resumed on the 9th at 10:00:
			// the 7th, 8th and 9th are not made up.
			e.clock.Set("2026-01-07T07:00:00Z")
			paused := true
			if sc, err = e.svc.Update(t.Context(), "morning", schedule.UpdateRequest{Paused: &paused}); err != nil || sc.NextFireAt != nil || !sc.Paused {
				t.Fatalf("pause: %+v %v", sc, err)
			}
			e.clock.Set("2026-01-09T09:00:00Z")
			e.tick(t)
			if ids := e.runIDs(t); len(ids) != 1 {
				t.Fatalf("a paused schedule fired: %v", ids)
			}
			paused = false
			if sc, err = e.svc.Update(t.Context(), "morning", schedule.UpdateRequest{Paused: &paused}); err != nil || !sc.NextFireAt.Equal(mustTime("2026-01-12T08:00:00Z")) {
				t.Fatalf("resume: next %v %v, want Monday the 12th 09:00 Paris", sc.NextFireAt, err)
			}
			e.tick(t)
			if ids := e.runIDs(t); len(ids) != 1 {
				t.Fatalf("resuming made up paused firings: %v", ids)
			}
		})
	}
}

// TestCatchUp: firings missed while the process was stopped are made up
// once, for the most recent missed time, when the runner starts; a new
// rate schedule fires at once, as on EventBridge Scheduler.
func TestCatchUp(t *testing.T) {
	for name, nb := range backends(t) {
		t.Run(name, func(t *testing.T) {
			backend := nb(t)
			e := newEnv(t, backend)
			if _, err := e.svc.Create(t.Context(), schedule.CreateRequest{Name: "hourly", Graph: "counter", Schedule: "0 * * * *"}); err != nil {
				t.Fatal(err)
			}
			sc, err := e.svc.Create(t.Context(), schedule.CreateRequest{Name: "every-10", Graph: "counter", Schedule: "rate(10 minutes)"})
			if err != nil || !sc.NextFireAt.Equal(mustTime("2026-01-05T08:00:00Z")) {
				t.Fatalf("rate created: next %v %v, want its creation time", sc.NextFireAt, err)
			}
			e.tick(t)
			if ids := e.runIDs(t); len(ids) != 1 || ids[0] != schedule.FiringRunID("every-10", mustTime("2026-01-05T08:00:00Z")) {
				t.Fatalf("runs %v, want the rate's first firing", ids)
			}
			// Stopped from 08:00 to 11:35: a new runner (a restart) on the
			// same backend makes up each schedule once.
			e.clock.Set("2026-01-05T11:35:00Z")
			restarted := schedule.NewRunner(e.svc, schedule.RunnerConfig{Now: e.clock.Now, Logger: e.runs.Logger})
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- restarted.Run(ctx) }()
			deadline := time.Now().Add(5 * time.Second)
			// Until both catch-ups are recorded (a firing is recorded after
			// its run starts).
			for time.Now().Before(deadline) {
				if h, r := e.get(t, "hourly"), e.get(t, "every-10"); h.LastRunID != "" && h.LastFireAt.Hour() == 11 && r.LastFireAt.Hour() == 11 {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			ids := strings.Join(e.runIDs(t), " ")
			for _, want := range []string{schedule.FiringRunID("hourly", mustTime("2026-01-05T11:00:00Z")), schedule.FiringRunID("every-10", mustTime("2026-01-05T11:30:00Z"))} {
				if !strings.Contains(ids, want) {
					t.Errorf("runs after the restart: %s; want %s (the latest missed firing)", ids, want)
				}
			}
			if n := len(e.runIDs(t)); n != 3 {
				t.Errorf("%d runs after the restart (%s), want 3: one catch-up per schedule", n, ids)
			}
			h, r := e.get(t, "hourly"), e.get(t, "every-10")
			if h.Missed != 2 || r.Missed != 20 {
				t.Errorf("missed: hourly %d (want 2: 09:00, 10:00), rate %d (want 20)", h.Missed, r.Missed)
			}
			if !h.NextFireAt.Equal(mustTime("2026-01-05T12:00:00Z")) || !r.NextFireAt.Equal(mustTime("2026-01-05T11:40:00Z")) {
				t.Errorf("next: hourly %v, rate %v", h.NextFireAt, r.NextFireAt)
			}
			// A firing done but not recorded (a crash between the two) is
			// fired again at the next start: the same run, not a second.
			if _, created, err := e.svc.Fire(t.Context(), h, mustTime("2026-01-05T11:00:00Z")); err != nil || created {
				t.Fatal(err)
			}
			if n := len(e.runIDs(t)); n != 3 {
				t.Errorf("firing again for the same time made %d runs, want 3", n)
			}
		})
	}
}

// TestDaylightSavingFirings: a 02:30 New York schedule does not fire on
// the day that has no 02:30; a 01:30 one fires once on the day 01:30
// comes twice.
func TestDaylightSavingFirings(t *testing.T) {
	e := newEnv(t, schedule.NewMemoryStore())
	e.clock.Set("2026-03-07T12:00:00Z")
	for _, r := range []schedule.CreateRequest{
		{Name: "spring", Graph: "counter", Schedule: "30 2 * * *", Timezone: "America/New_York"},
		{Name: "autumn", Graph: "counter", Schedule: "cron(30 1 * * ? *)", Timezone: "America/New_York"},
	} {
		if _, err := e.svc.Create(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
	// Look every 10 minutes through both changes.
	for now := mustTime("2026-03-07T12:00:00Z"); now.Before(mustTime("2026-03-10T12:00:00Z")); now = now.Add(10 * time.Minute) {
		e.clock.Set(now.Format(time.RFC3339))
		e.tick(t)
	}
	for now := mustTime("2026-10-31T12:00:00Z"); now.Before(mustTime("2026-11-02T12:00:00Z")); now = now.Add(10 * time.Minute) {
		e.clock.Set(now.Format(time.RFC3339))
		e.tick(t)
	}
	var spring, autumn []string
	for _, id := range e.runIDs(t) {
		if strings.HasPrefix(id, "sched.spring.") {
			spring = append(spring, strings.TrimPrefix(id, "sched.spring."))
		} else {
			autumn = append(autumn, strings.TrimPrefix(id, "sched.autumn."))
		}
	}
	slices.Sort(spring)
	slices.Sort(autumn)
	// 02:30: none on March 8; the jump from March 10 to October 31 is made
	// up once (October 31 02:30 EDT); 02:30 EST on November 1 and 2.
	if got, want := strings.Join(spring, " "), "20260309T063000Z 20260310T063000Z 20261031T063000Z 20261101T073000Z 20261102T073000Z"; got != want {
		t.Errorf("02:30 New York firings:\n got %s\nwant %s", got, want)
	}
	// 01:30: on November 1 at 01:30 EDT (05:30Z) once, not again at
	// 01:30 EST (06:30Z).
	if got, want := strings.Join(autumn, " "), "20260308T063000Z 20260309T053000Z 20260310T053000Z 20261031T053000Z 20261101T053000Z 20261102T063000Z"; got != want {
		t.Errorf("01:30 New York firings:\n got %s\nwant %s", got, want)
	}
}

// TestThreadFirings: a schedule on a thread starts its runs on it with
// its strategy; a firing while the thread is busy with reject starts none
// and says why.
func TestThreadFirings(t *testing.T) {
	e := newEnv(t, schedule.NewMemoryStore())
	if _, _, err := e.runs.CreateThread(t.Context(), runs.CreateThreadRequest{ThreadID: "inbox"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Create(t.Context(), schedule.CreateRequest{Name: "triage", Graph: "counter", Schedule: "rate(1 hour)", ThreadID: "inbox", Strategy: "reject"}); err != nil {
		t.Fatal(err)
	}
	e.tick(t)
	first := schedule.FiringRunID("triage", e.clock.Now())
	r, err := e.runs.Get(t.Context(), first)
	if err != nil || r.ThreadID != "inbox" {
		t.Fatalf("first firing: %+v %v, want a run on thread inbox", r, err)
	}
	// The first run never ends here (the dispatcher only records): the
	// thread is busy at the next firing.
	e.clock.Set("2026-01-05T09:00:00Z")
	e.tick(t)
	sc := e.get(t, "triage")
	if sc.LastRunID != "" || !strings.Contains(sc.LastError, "inbox") || !sc.NextFireAt.Equal(mustTime("2026-01-05T10:00:00Z")) {
		t.Errorf("busy firing: last run %q, error %q, next %v; want no run, the reason, and the next hour", sc.LastRunID, sc.LastError, sc.NextFireAt)
	}
}

// TestRefused: bad schedules are refused with what to fix, as invalid
// requests.
func TestRefused(t *testing.T) {
	e := newEnv(t, schedule.NewMemoryStore())
	ok := schedule.CreateRequest{Name: "ok", Graph: "counter", Schedule: "0 9 * * *"}
	for _, tc := range []struct {
		name string
		edit func(r *schedule.CreateRequest)
		want string
	}{
		{"bad cron", func(r *schedule.CreateRequest) { r.Schedule = "0 25 * * *" }, "not a valid cron expression"},
		{"bad timezone", func(r *schedule.CreateRequest) { r.Timezone = "Europe/Pariss" }, "not an IANA time zone name"},
		{"unknown graph", func(r *schedule.CreateRequest) { r.Graph = "nope" }, `graph "nope" is not registered; graphs are counter`},
		{"no graph", func(r *schedule.CreateRequest) { r.Graph = "" }, "graph is missing"},
		{"no thread", func(r *schedule.CreateRequest) { r.ThreadID = "ghost" }, `thread "ghost" does not exist; create it first`},
		{"bad strategy", func(r *schedule.CreateRequest) { r.ThreadID, r.Strategy = "ghost", "sometimes" }, `strategy "sometimes"`},
		{"strategy without thread", func(r *schedule.CreateRequest) { r.Strategy = "enqueue" }, "give thread_id"},
		{"bad name", func(r *schedule.CreateRequest) { r.Name = "no spaces" }, "1 to 64 letters"},
		{"bad input", func(r *schedule.CreateRequest) { r.Input = json.RawMessage(`[1]`) }, "input must be a JSON object"},
		{"input not fitting", func(r *schedule.CreateRequest) { r.Input = json.RawMessage(`{"nope": 1}`) }, `input does not fit graph "counter"`},
	} {
		req := ok
		tc.edit(&req)
		_, err := e.svc.Create(t.Context(), req)
		if !errors.Is(err, runs.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an invalid request saying %q", tc.name, err, tc.want)
		}
	}
	if _, err := e.svc.Create(t.Context(), ok); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Create(t.Context(), ok); !errors.Is(err, runs.ErrConflict) {
		t.Errorf("a second schedule of the same name: %v, want a conflict", err)
	}
	aws := &schedule.Service{Runs: e.runs, Backend: schedule.NewMemoryStore(), AWS: true}
	req := ok
	req.Schedule = "0 9 1 * MON"
	if _, err := aws.Create(t.Context(), req); !errors.Is(err, runs.ErrInvalid) || !strings.Contains(err.Error(), "EventBridge Scheduler cannot restrict both") {
		t.Errorf("an expression EventBridge cannot take, on AWS: %v", err)
	}
	if err := e.svc.Delete(t.Context(), "missing"); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("delete of a missing schedule: %v, want not found", err)
	}
}

// TestLastFiringOnAWS: EventBridge Scheduler keeps no history, so on AWS
// the last firing is derived: the latest scheduled time's run, shown only
// once that run exists; a rate shows none (its period's start is not
// known after an update).
func TestLastFiringOnAWS(t *testing.T) {
	e := newEnv(t, schedule.NewMemoryStore())
	e.svc.AWS = true
	e.clock.Set("2026-01-05T07:30:00Z")
	for _, req := range []schedule.CreateRequest{
		{Name: "daily", Graph: "counter", Schedule: "cron(0 9 * * ? *)", Timezone: "Europe/Paris"},
		{Name: "once", Graph: "counter", Schedule: "at(2026-01-05T10:00:00)"},
		{Name: "rated", Graph: "counter", Schedule: "rate(5 minutes)"},
	} {
		if _, err := e.svc.Create(t.Context(), req); err != nil {
			t.Fatalf("create %s: %v", req.Name, err)
		}
	}
	last := func(name string) string {
		sc := e.get(t, name)
		if sc.LastFireAt == nil {
			return "none " + sc.LastRunID
		}
		return sc.LastFireAt.UTC().Format(time.RFC3339) + " " + sc.LastRunID
	}
	fire := func(name, at string) {
		t.Helper()
		if _, _, err := e.svc.Fire(t.Context(), e.get(t, name), mustTime(at)); err != nil {
			t.Fatal(err)
		}
	}
	e.clock.Set("2026-01-05T08:00:30Z")
	if got := last("daily"); got != "none " {
		t.Errorf("09:00 Paris passed but not delivered yet: last firing %q, want none", got)
	}
	fire("daily", "2026-01-05T08:00:00Z")
	fire("rated", "2026-01-05T07:30:00Z")
	want := "2026-01-05T08:00:00Z sched.daily.20260105T080000Z"
	if got := last("daily"); got != want {
		t.Errorf("after the firing was delivered: last firing %q, want %q", got, want)
	}
	// A rate's firings are its anchor (on AWS, the StartDate the API
	// sets) + k·5 minutes: at 08:00:30 the latest is 08:00, not 07:30.
	if got := last("rated"); got != "none " {
		t.Errorf("a rate whose 08:00 firing is not delivered yet: last firing %q, want none", got)
	}
	fire("rated", "2026-01-05T08:00:00Z")
	if got := last("rated"); got != "2026-01-05T08:00:00Z sched.rated.20260105T080000Z" {
		t.Errorf("a rate after its 08:00 firing: last firing %q", got)
	}
	e.clock.Set("2026-01-05T10:00:05Z")
	fire("once", "2026-01-05T10:00:00Z")
	fire("rated", "2026-01-05T10:00:00Z")
	all, err := e.svc.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]string{}
	for _, sc := range all {
		byName[sc.Name] = sc.LastRunID
	}
	if byName["daily"] != "sched.daily.20260105T080000Z" || byName["once"] != "sched.once.20260105T100000Z" || byName["rated"] != "sched.rated.20260105T100000Z" {
		t.Errorf("list's last runs: %v", byName)
	}
	// An update that keeps the rate keeps its firings; a new rate starts
	// a new period, whose first firing has not happened.
	desc := "every five minutes"
	if _, err := e.svc.Update(t.Context(), "rated", schedule.UpdateRequest{Description: &desc}); err != nil {
		t.Fatal(err)
	}
	if got := last("rated"); got != "2026-01-05T10:00:00Z sched.rated.20260105T100000Z" {
		t.Errorf("after an update of the description: last firing %q", got)
	}
	e.clock.Set("2026-01-05T10:02:00Z")
	expr := "rate(7 minutes)"
	if _, err := e.svc.Update(t.Context(), "rated", schedule.UpdateRequest{Schedule: &expr}); err != nil {
		t.Fatal(err)
	}
	e.clock.Set("2026-01-05T10:08:00Z")
	if got := last("rated"); got != "none " {
		t.Errorf("a new rate from 10:02, its 10:02 firing not delivered: last firing %q, want none", got)
	}
	// Days later the latest scheduled time's run does not exist (paused,
	// say): no firing is claimed.
	e.clock.Set("2026-01-08T12:00:00Z")
	if got := last("daily"); got != "none " {
		t.Errorf("the latest 09:00 did not fire: last firing %q, want none", got)
	}
	if got := last("once"); got != "2026-01-05T10:00:00Z sched.once.20260105T100000Z" {
		t.Errorf("an at() days after its firing: last firing %q", got)
	}
}
