// Package schedule runs graphs on a clock: a Schedule names a graph, an
// expression (cron, or EventBridge Scheduler's cron/rate/at forms; see
// pkg/cronspec), a time zone, an input and optionally a thread, and each
// firing starts a run.
//
// A [Service] validates schedules against a [runs.Service] (the graph is
// registered, the input fits it, the thread exists) and keeps them in a
// [Backend]: embedded, a [Store] (memory or SQLite) fired by a [Runner] in
// the process (`superstep dev`); on AWS, EventBridge Scheduler
// (pkg/schedule/eventbridge), which sends each firing to the start queue.
//
// Every firing's run id is [FiringRunID] of the schedule's name and the
// firing's scheduled time, so a firing delivered twice, or fired again
// after a crash, starts one run.
package schedule

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/superstep/superstep/pkg/cronspec"
	"github.com/superstep/superstep/pkg/runs"
)

// Schedule is a graph run on a clock.
type Schedule struct {
	// Name identifies the schedule: 1 to 64 letters, digits, '.', '_'
	// or '-' (EventBridge Scheduler's rule for names).
	Name string `json:"name"`
	// Graph is the graph each firing runs.
	Graph string `json:"graph"`
	// Expression is when it fires (see pkg/cronspec).
	Expression string `json:"schedule"`
	// Timezone is the IANA zone Expression is evaluated in ("UTC").
	Timezone string `json:"timezone"`
	// Input is each run's input, a JSON object.
	Input json.RawMessage `json:"input,omitempty"`
	// ThreadID, when set, makes each firing a run on the thread, with
	// Strategy (reject, enqueue, interrupt or rollback) if the thread is
	// busy.
	ThreadID string        `json:"thread_id,omitempty"`
	Strategy runs.Strategy `json:"strategy,omitempty"`
	// Description is free text.
	Description string `json:"description,omitempty"`
	// Paused schedules do not fire.
	Paused    bool      `json:"paused"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// NextFireAt is the next firing (none: paused, or an at() that has
	// fired).
	NextFireAt *time.Time `json:"next_fire_at,omitempty"`
	// LastFireAt is the scheduled time of the last firing, LastRunID its
	// run, LastError why it started none.
	LastFireAt *time.Time `json:"last_fire_at,omitempty"`
	LastRunID  string     `json:"last_run_id,omitempty"`
	LastError  string     `json:"last_error,omitempty"`
	// Missed counts the firings skipped by the catch-up policy.
	Missed int `json:"missed,omitempty"`
	// Anchor is when a rate's period started (the expression's last
	// change); kept by the backend, not shown.
	Anchor time.Time `json:"-"`
}

// Backend keeps schedules. Errors wrap runs.ErrNotFound for an unknown
// name and runs.ErrConflict for a name taken.
type Backend interface {
	Create(ctx context.Context, s Schedule) (Schedule, error)
	Get(ctx context.Context, name string) (Schedule, error)
	// List returns every schedule, by name.
	List(ctx context.Context) ([]Schedule, error)
	// Mutate applies fn to the stored schedule and stores the result.
	Mutate(ctx context.Context, name string, fn func(*Schedule) error) (Schedule, error)
	Delete(ctx context.Context, name string) error
}

// validName reports whether s is 1 to 64 bytes of ASCII letters,
// digits and ".", "_" and "-". It is the regular expression ^[A-Za-z0-9._-]{1,64}$ without one:
// compiling a counted repetition costs milliseconds at every process's
// start (a Lambda function's cold start among them).
func validName(s string) bool {
	if len(s) < 1 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("._-", c) >= 0) {
			return false
		}
	}
	return true
}

// FiringRunID is the run id of the firing of schedule name at its
// scheduled time at: a duplicate delivery of the firing names the same
// run, and starts none.
func FiringRunID(name string, at time.Time) string {
	return "sched." + name + "." + at.UTC().Format("20060102T150405Z")
}

// Service applies the rules of schedules. It is safe for concurrent use.
type Service struct {
	// Runs starts the firings' runs and knows the graphs and threads.
	Runs *runs.Service
	// Backend keeps the schedules.
	Backend Backend
	// AWS requires expressions that EventBridge Scheduler accepts.
	AWS bool
	// MaxInputBytes bounds a schedule's input (0: no bound beyond the
	// request's).
	MaxInputBytes int
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Changed, if set, is called after a schedule is created, updated or
	// deleted (the embedded Runner's wake-up).
	Changed func()
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

func (s *Service) changed() {
	if s.Changed != nil {
		s.Changed()
	}
}

// CreateRequest asks for a schedule.
type CreateRequest struct {
	Name        string          `json:"name"`
	Graph       string          `json:"graph"`
	Schedule    string          `json:"schedule"`
	Timezone    string          `json:"timezone,omitempty"`
	Input       json.RawMessage `json:"input,omitempty"`
	ThreadID    string          `json:"thread_id,omitempty"`
	Strategy    string          `json:"strategy,omitempty"`
	Description string          `json:"description,omitempty"`
	Paused      bool            `json:"paused,omitempty"`
}

// UpdateRequest changes a schedule; absent fields stay.
type UpdateRequest struct {
	Schedule    *string         `json:"schedule,omitempty"`
	Timezone    *string         `json:"timezone,omitempty"`
	Input       json.RawMessage `json:"input,omitempty"`
	Strategy    *string         `json:"strategy,omitempty"`
	Description *string         `json:"description,omitempty"`
	Paused      *bool           `json:"paused,omitempty"`
}

func invalid(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, runs.ErrInvalid)...)
}

// Parse parses sc's expression in its zone, as the Service checks it.
func (s *Service) parse(expr, tz string) (*cronspec.Spec, error) {
	spec, err := cronspec.Parse(expr, tz)
	if err != nil {
		return nil, invalid("%s", err.Error())
	}
	if s.AWS {
		if _, err := spec.AWS(); err != nil {
			return nil, invalid("schedule %q: %s", expr, err.Error())
		}
	}
	return spec, nil
}

// Spec returns sc's parsed expression.
func Spec(sc Schedule) (*cronspec.Spec, error) { return cronspec.Parse(sc.Expression, sc.Timezone) }

// input checks the input against the graph.
func (s *Service) input(ctx context.Context, graph string, raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil || buf.Bytes()[0] != '{' {
		return nil, invalid("input must be a JSON object of channel values")
	}
	if s.MaxInputBytes > 0 && buf.Len() > s.MaxInputBytes {
		return nil, invalid("input is %d bytes; a schedule's input is at most %d bytes here: keep large data elsewhere and pass a reference", buf.Len(), s.MaxInputBytes)
	}
	g, ok := s.Runs.Graphs.Get(graph)
	if !ok {
		return nil, s.unknownGraph(graph)
	}
	if _, err := g.Start(ctx, "schedule-check", buf.Bytes()); err != nil {
		return nil, invalid("input does not fit graph %q: %s", graph, strings.TrimPrefix(strings.TrimPrefix(err.Error(), "pregel: "), "invalid input: "))
	}
	return buf.Bytes(), nil
}

func (s *Service) unknownGraph(graph string) error {
	var names []string
	for _, g := range s.Runs.Graphs.List() {
		names = append(names, g.Name())
	}
	return invalid("graph %q is not registered; graphs are %s", graph, strings.Join(names, ", "))
}

// Create validates req and stores the schedule.
func (s *Service) Create(ctx context.Context, req CreateRequest) (Schedule, error) {
	if !validName(req.Name) {
		return Schedule{}, invalid("name %q must be 1 to 64 letters, digits, '.', '_' or '-'", req.Name)
	}
	if req.Graph == "" {
		return Schedule{}, invalid("graph is missing; name the graph each firing runs")
	}
	if _, ok := s.Runs.Graphs.Get(req.Graph); !ok {
		return Schedule{}, s.unknownGraph(req.Graph)
	}
	tz := req.Timezone
	if tz == "" {
		tz = "UTC"
	}
	spec, err := s.parse(req.Schedule, tz)
	if err != nil {
		return Schedule{}, err
	}
	input, err := s.input(ctx, req.Graph, req.Input)
	if err != nil {
		return Schedule{}, err
	}
	var strategy runs.Strategy
	if req.ThreadID != "" {
		if strategy, err = runs.ParseStrategy(req.Strategy); err != nil {
			return Schedule{}, invalid("strategy %q: want reject, enqueue, interrupt or rollback", req.Strategy)
		}
		if _, err := s.Runs.GetThread(ctx, req.ThreadID); err != nil {
			if errors.Is(err, runs.ErrNotFound) {
				return Schedule{}, invalid("thread %q does not exist; create it first (POST /v1/threads) or leave thread_id out for runs of their own", req.ThreadID)
			}
			return Schedule{}, err
		}
	} else if req.Strategy != "" {
		return Schedule{}, invalid("strategy applies to a schedule on a thread; give thread_id or leave strategy out")
	}
	now := s.now()
	sc := Schedule{Name: req.Name, Graph: req.Graph, Expression: spec.Expression(), Timezone: tz, Input: input,
		ThreadID: req.ThreadID, Strategy: strategy, Description: req.Description, Paused: req.Paused,
		CreatedAt: now, UpdatedAt: now, Anchor: now}
	sc.NextFireAt = nextFire(spec, sc, now)
	out, err := s.Backend.Create(ctx, sc)
	if err != nil {
		return Schedule{}, err
	}
	s.changed()
	return out, nil
}

// nextFire is sc's first firing after now (a rate fires at its anchor
// first, as EventBridge Scheduler fires a new rate schedule at once).
func nextFire(spec *cronspec.Spec, sc Schedule, now time.Time) *time.Time {
	if sc.Paused {
		return nil
	}
	after := now
	if spec.Kind() == cronspec.KindRate {
		after = now.Add(-time.Nanosecond)
	}
	t, ok := spec.Next(after, sc.Anchor)
	if !ok {
		return nil
	}
	return &t
}

// Get returns a schedule.
func (s *Service) Get(ctx context.Context, name string) (Schedule, error) {
	if !validName(name) {
		return Schedule{}, fmt.Errorf("there is no schedule %q: %w", name, runs.ErrNotFound)
	}
	sc, err := s.Backend.Get(ctx, name)
	if err != nil {
		return Schedule{}, err
	}
	if err := s.deriveLast(ctx, &sc); err != nil {
		return Schedule{}, err
	}
	return sc, nil
}

// List returns every schedule, by name.
func (s *Service) List(ctx context.Context) ([]Schedule, error) {
	all, err := s.Backend.List(ctx)
	if err != nil {
		return nil, err
	}
	for i := range all {
		if err := s.deriveLast(ctx, &all[i]); err != nil {
			return nil, err
		}
	}
	return all, nil
}

// lastWindows are the spans deriveLast looks back over for the latest
// scheduled time, shortest first, so a frequent cron costs few steps.
var lastWindows = []time.Duration{time.Hour, 24 * time.Hour, 8 * 24 * time.Hour, 32 * 24 * time.Hour, 367 * 24 * time.Hour}

// deriveLast fills sc's last firing on AWS, where EventBridge Scheduler
// keeps no history: the latest scheduled time at or before now (since the
// schedule was created) names a run (FiringRunID), and if that run exists
// it is the last firing. If it does not (not delivered yet, or the
// schedule was paused then) the last firing stays empty. A rate's
// firings are Anchor + k·period (on AWS the schedule's StartDate, which
// the API sets); a rate schedule without one (made before the API set
// StartDate) shows none.
func (s *Service) deriveLast(ctx context.Context, sc *Schedule) error {
	if !s.AWS || sc.LastFireAt != nil || sc.LastRunID != "" {
		return nil
	}
	spec, err := Spec(*sc)
	if err != nil {
		return nil
	}
	now := s.now()
	since := sc.CreatedAt.Add(-time.Nanosecond)
	var last time.Time
	if spec.Kind() == cronspec.KindRate {
		if last = lastOfRate(sc.Anchor, spec.Interval(), now); last.IsZero() || !last.After(since) {
			return nil
		}
	}
	for _, w := range append(lastWindows, now.Sub(since)) {
		if !last.IsZero() {
			break
		}
		from := now.Add(-w)
		if from.Before(since) {
			from = since
		}
		if last, _ = spec.Previous(from, now, sc.Anchor); !last.IsZero() || !from.After(since) {
			break
		}
	}
	if last.IsZero() {
		return nil
	}
	id := FiringRunID(sc.Name, last)
	if _, err := s.Runs.Get(ctx, id); err != nil {
		if errors.Is(err, runs.ErrNotFound) {
			return nil
		}
		return fmt.Errorf("schedule %q: read its last firing's run: %w", sc.Name, err)
	}
	sc.LastFireAt, sc.LastRunID = &last, id
	return nil
}

// lastOfRate is the latest of anchor + k·period (k any integer) at or
// before now; zero without an anchor.
func lastOfRate(anchor time.Time, period time.Duration, now time.Time) time.Time {
	if anchor.IsZero() || period <= 0 {
		return time.Time{}
	}
	d := now.Sub(anchor)
	k := d / period
	if d < 0 && d%period != 0 {
		k-- // floor, not toward zero
	}
	return anchor.Add(k * period)
}

// Update applies req: pausing clears the next firing, resuming (or
// changing the expression or zone) computes it from now; firings missed
// while paused are not made up.
func (s *Service) Update(ctx context.Context, name string, req UpdateRequest) (Schedule, error) {
	if !validName(name) {
		return Schedule{}, fmt.Errorf("there is no schedule %q: %w", name, runs.ErrNotFound)
	}
	cur, err := s.Backend.Get(ctx, name)
	if err != nil {
		return Schedule{}, err
	}
	var input json.RawMessage
	if req.Input != nil {
		if input, err = s.input(ctx, cur.Graph, req.Input); err != nil {
			return Schedule{}, err
		}
	}
	var strategy *runs.Strategy
	if req.Strategy != nil {
		if cur.ThreadID == "" {
			return Schedule{}, invalid("strategy applies to a schedule on a thread; this one has none")
		}
		st, err := runs.ParseStrategy(*req.Strategy)
		if err != nil {
			return Schedule{}, invalid("strategy %q: want reject, enqueue, interrupt or rollback", *req.Strategy)
		}
		strategy = &st
	}
	expr, tz := cur.Expression, cur.Timezone
	if req.Schedule != nil {
		expr = *req.Schedule
	}
	if req.Timezone != nil {
		tz = *req.Timezone
		if tz == "" {
			tz = "UTC"
		}
	}
	spec, err := s.parse(expr, tz)
	if err != nil {
		return Schedule{}, err
	}
	now := s.now()
	out, err := s.Backend.Mutate(ctx, name, func(sc *Schedule) error {
		resumed := req.Paused != nil && !*req.Paused && sc.Paused
		retimed := spec.Expression() != sc.Expression || tz != sc.Timezone
		sc.Expression, sc.Timezone = spec.Expression(), tz
		if req.Input != nil {
			sc.Input = input
		}
		if strategy != nil {
			sc.Strategy = *strategy
		}
		if req.Description != nil {
			sc.Description = *req.Description
		}
		if req.Paused != nil {
			sc.Paused = *req.Paused
		}
		if retimed {
			sc.Anchor = now
		}
		if retimed || resumed || sc.Paused {
			sc.NextFireAt = nextFire(spec, *sc, now)
		}
		sc.UpdatedAt = now
		return nil
	})
	if err != nil {
		return Schedule{}, err
	}
	s.changed()
	return out, nil
}

// Delete removes a schedule; runs it started stay.
func (s *Service) Delete(ctx context.Context, name string) error {
	if !validName(name) {
		return fmt.Errorf("there is no schedule %q: %w", name, runs.ErrNotFound)
	}
	if err := s.Backend.Delete(ctx, name); err != nil {
		return err
	}
	s.changed()
	return nil
}

// Fire starts the run of sc's firing scheduled at at, with the run id
// FiringRunID(sc.Name, at): firing again for the same time returns the
// same run (created false).
func (s *Service) Fire(ctx context.Context, sc Schedule, at time.Time) (runs.Run, bool, error) {
	return Start(ctx, s.Runs, Firing{Schedule: sc.Name, At: at, Graph: sc.Graph, Input: sc.Input, ThreadID: sc.ThreadID, Strategy: sc.Strategy})
}

// Firing is one firing of a schedule, as the embedded Runner makes it or
// as EventBridge Scheduler delivers it.
type Firing struct {
	Schedule string
	At       time.Time
	Graph    string
	Input    json.RawMessage
	ThreadID string
	Strategy runs.Strategy
}

// Start starts f's run on svc, idempotently (FiringRunID).
func Start(ctx context.Context, svc *runs.Service, f Firing) (runs.Run, bool, error) {
	id := FiringRunID(f.Schedule, f.At)
	if f.ThreadID != "" {
		return svc.CreateOnThread(ctx, f.ThreadID, runs.ThreadRunRequest{Graph: f.Graph, RunID: id, Input: f.Input, Strategy: f.Strategy})
	}
	return svc.Create(ctx, f.Graph, runs.CreateRequest{RunID: id, Input: f.Input})
}
