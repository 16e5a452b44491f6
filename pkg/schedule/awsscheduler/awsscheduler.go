// Package awsscheduler keeps a deployment's schedules (pkg/schedule) in
// Amazon EventBridge Scheduler: one EventBridge schedule per schedule, in
// the deployment's schedule group, whose target sends each firing to the
// start queue (SQS) as a start request. The api function starts the run
// with the id schedule.FiringRunID(name, scheduled time), so a firing
// delivered twice starts one run.
//
// A firing's message is the target's input with EventBridge Scheduler's
// context attribute <aws.scheduler.scheduled-time> filled in:
//
//	{"graph": "nightly-report", "input": {...}, "thread_id": "...",
//	 "strategy": "enqueue", "schedule": "nightly",
//	 "scheduled_time": "2026-01-06T01:00:00Z"}
//
// The schedule's state is EventBridge's (ENABLED or DISABLED: paused), its
// expression EventBridge's form (cron(...), rate(...), at(...)), its time
// zone ScheduleExpressionTimezone. A rate() schedule gets an explicit
// StartDate (the next whole minute when its period starts, kept on
// updates), so its firings are StartDate + k·period and its last firing
// can be computed. Writes go straight to EventBridge Scheduler: two
// updates at once, the last wins.
package awsscheduler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"

	"github.com/superstep/superstep/pkg/cronspec"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/schedule"
)

// ScheduledTime is EventBridge Scheduler's context attribute that it
// replaces, in a target's input, with the firing's scheduled time.
const ScheduledTime = "<aws.scheduler.scheduled-time>"

// MaxInputBytes bounds a schedule's run input: EventBridge Scheduler takes
// a target input of at most 8192 characters, and the start request around
// it needs the rest.
const MaxInputBytes = 7000

// API is the part of the EventBridge Scheduler client a Backend uses
// (*scheduler.Client).
type API interface {
	CreateSchedule(ctx context.Context, in *scheduler.CreateScheduleInput, opts ...func(*scheduler.Options)) (*scheduler.CreateScheduleOutput, error)
	GetSchedule(ctx context.Context, in *scheduler.GetScheduleInput, opts ...func(*scheduler.Options)) (*scheduler.GetScheduleOutput, error)
	UpdateSchedule(ctx context.Context, in *scheduler.UpdateScheduleInput, opts ...func(*scheduler.Options)) (*scheduler.UpdateScheduleOutput, error)
	DeleteSchedule(ctx context.Context, in *scheduler.DeleteScheduleInput, opts ...func(*scheduler.Options)) (*scheduler.DeleteScheduleOutput, error)
	ListSchedules(ctx context.Context, in *scheduler.ListSchedulesInput, opts ...func(*scheduler.Options)) (*scheduler.ListSchedulesOutput, error)
}

// Config names what a Backend's schedules use.
type Config struct {
	// Group is the schedule group of the deployment's schedules.
	Group string
	// TargetARN is the start queue's ARN: firings are sent there.
	TargetARN string
	// RoleARN is the role EventBridge Scheduler sends them with.
	RoleARN string
	// DeadLetterARN, optional, is the queue of firings that could not be
	// sent after EventBridge Scheduler's retries.
	DeadLetterARN string
	// Now is the clock of next firings (default time.Now).
	Now func() time.Time
}

// Backend is a schedule.Backend on EventBridge Scheduler.
type Backend struct {
	api API
	cfg Config
}

// New returns a Backend; Group, TargetARN and RoleARN are required.
func New(api API, cfg Config) (*Backend, error) {
	if cfg.Group == "" || cfg.TargetARN == "" || cfg.RoleARN == "" {
		return nil, errors.New("awsscheduler: the schedule group, the target's ARN and the role's ARN are required")
	}
	return &Backend{api: api, cfg: cfg}, nil
}

// Firing is the start request a schedule's target sends: a
// serverless.StartRequest with the schedule's name and scheduled time.
type Firing struct {
	Graph         string          `json:"graph"`
	Input         json.RawMessage `json:"input,omitempty"`
	ThreadID      string          `json:"thread_id,omitempty"`
	Strategy      string          `json:"strategy,omitempty"`
	Schedule      string          `json:"schedule"`
	ScheduledTime string          `json:"scheduled_time"`
}

func (b *Backend) now() time.Time {
	if b.cfg.Now != nil {
		return b.cfg.Now()
	}
	return time.Now()
}

// parts are the EventBridge fields of s.
func (b *Backend) parts(s schedule.Schedule) (spec *cronspec.Spec, expr string, target *types.Target, state types.ScheduleState, err error) {
	if spec, err = cronspec.Parse(s.Expression, s.Timezone); err != nil {
		return nil, "", nil, "", fmt.Errorf("%s: %w", err.Error(), runs.ErrInvalid)
	}
	if expr, err = spec.AWS(); err != nil {
		return nil, "", nil, "", fmt.Errorf("schedule %q: %s: %w", s.Expression, err.Error(), runs.ErrInvalid)
	}
	// Not HTML-escaped: EventBridge Scheduler replaces the attribute
	// only as written, <aws.scheduler.scheduled-time>.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(Firing{Graph: s.Graph, Input: s.Input, ThreadID: s.ThreadID, Strategy: string(s.Strategy), Schedule: s.Name, ScheduledTime: ScheduledTime}); err != nil {
		return nil, "", nil, "", err
	}
	in := bytes.TrimSpace(buf.Bytes())
	if len(in) > 8192 {
		return nil, "", nil, "", fmt.Errorf("the schedule's start request is %d characters; EventBridge Scheduler takes at most 8192: make the input smaller: %w", len(in), runs.ErrInvalid)
	}
	target = &types.Target{Arn: aws.String(b.cfg.TargetARN), RoleArn: aws.String(b.cfg.RoleARN), Input: aws.String(string(in))}
	if b.cfg.DeadLetterARN != "" {
		target.DeadLetterConfig = &types.DeadLetterConfig{Arn: aws.String(b.cfg.DeadLetterARN)}
	}
	state = types.ScheduleStateEnabled
	if s.Paused {
		state = types.ScheduleStateDisabled
	}
	return spec, expr, target, state, nil
}

// rateStart is the StartDate of a rate() schedule, which fixes its
// firings at StartDate + k·period. A new period (a schedule created, or
// its expression changed) starts at the next whole minute, EventBridge
// Scheduler's precision. An update that keeps the expression keeps the
// firings: the StartDate moves to the first of them at or after now
// (EventBridge refuses a StartDate more than 5 minutes in the past).
func rateStart(spec *cronspec.Spec, now time.Time, prevExpr, expr string, prevStart *time.Time) *time.Time {
	if spec.Kind() != cronspec.KindRate {
		return nil
	}
	if prevStart == nil || prevExpr != expr {
		t := now.UTC().Truncate(time.Minute)
		if t.Before(now) {
			t = t.Add(time.Minute)
		}
		return &t
	}
	t := prevStart.UTC()
	if t.Before(now) {
		period := spec.Interval()
		k := (now.Sub(t) + period - 1) / period
		t = t.Add(k * period)
	}
	return &t
}

// Create implements schedule.Backend.
func (b *Backend) Create(ctx context.Context, s schedule.Schedule) (schedule.Schedule, error) {
	spec, expr, target, state, err := b.parts(s)
	if err != nil {
		return schedule.Schedule{}, err
	}
	_, err = b.api.CreateSchedule(ctx, &scheduler.CreateScheduleInput{
		Name: aws.String(s.Name), GroupName: aws.String(b.cfg.Group),
		ScheduleExpression: aws.String(expr), ScheduleExpressionTimezone: aws.String(s.Timezone),
		StartDate:          rateStart(spec, b.now(), "", expr, nil),
		FlexibleTimeWindow: &types.FlexibleTimeWindow{Mode: types.FlexibleTimeWindowModeOff},
		Target:             target, State: state, Description: description(s.Description),
	})
	if err != nil {
		return schedule.Schedule{}, b.classify(s.Name, "create", err)
	}
	return b.Get(ctx, s.Name)
}

func description(d string) *string {
	if d == "" {
		return nil
	}
	return aws.String(d)
}

// classify maps EventBridge Scheduler's errors to the runs package's.
func (b *Backend) classify(name, op string, err error) error {
	var nf *types.ResourceNotFoundException
	var conflict *types.ConflictException
	var bad *types.ValidationException
	switch {
	case errors.As(err, &nf):
		return fmt.Errorf("there is no schedule %q: %w", name, runs.ErrNotFound)
	case errors.As(err, &conflict):
		return fmt.Errorf("schedule %q exists; choose another name, or update it: %w", name, runs.ErrConflict)
	case errors.As(err, &bad):
		return fmt.Errorf("EventBridge Scheduler refused schedule %q: %s: %w", name, aws.ToString(bad.Message), runs.ErrInvalid)
	}
	return fmt.Errorf("awsscheduler: %s schedule %q: %w", op, name, err)
}

// Get implements schedule.Backend.
func (b *Backend) Get(ctx context.Context, name string) (schedule.Schedule, error) {
	out, err := b.get(ctx, name)
	if err != nil {
		return schedule.Schedule{}, err
	}
	return b.fromAWS(out)
}

func (b *Backend) get(ctx context.Context, name string) (*scheduler.GetScheduleOutput, error) {
	out, err := b.api.GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String(name), GroupName: aws.String(b.cfg.Group)})
	if err != nil {
		return nil, b.classify(name, "get", err)
	}
	return out, nil
}

// fromAWS turns an EventBridge schedule into a Schedule, its next firing
// computed from now.
func (b *Backend) fromAWS(out *scheduler.GetScheduleOutput) (schedule.Schedule, error) {
	name := aws.ToString(out.Name)
	var f Firing
	if out.Target == nil || json.Unmarshal([]byte(aws.ToString(out.Target.Input)), &f) != nil || f.Schedule != name {
		return schedule.Schedule{}, fmt.Errorf("awsscheduler: schedule %q of group %s was not made by superstep (its target's input is not a firing)", name, b.cfg.Group)
	}
	s := schedule.Schedule{Name: name, Graph: f.Graph, Expression: aws.ToString(out.ScheduleExpression), Timezone: aws.ToString(out.ScheduleExpressionTimezone),
		Input: f.Input, ThreadID: f.ThreadID, Strategy: runs.Strategy(f.Strategy), Description: aws.ToString(out.Description),
		Paused: out.State == types.ScheduleStateDisabled}
	if s.Timezone == "" {
		s.Timezone = "UTC"
	}
	// A rate's firings are StartDate + k·period (rateStart). A rate
	// schedule made before superstep set StartDate started when
	// EventBridge Scheduler made it, as far as anyone can tell: its
	// next firing is computed from its creation, and Anchor stays zero
	// (its firing times are not known).
	anchor := time.Time{}
	if out.CreationDate != nil {
		s.CreatedAt, anchor = out.CreationDate.UTC(), out.CreationDate.UTC()
	}
	if out.StartDate != nil {
		s.Anchor = out.StartDate.UTC()
		anchor = s.Anchor
	}
	if out.LastModificationDate != nil {
		s.UpdatedAt = out.LastModificationDate.UTC()
	}
	if spec, err := cronspec.Parse(s.Expression, s.Timezone); err == nil && !s.Paused {
		if t, ok := spec.Next(b.now(), anchor); ok {
			s.NextFireAt = &t
		}
	}
	return s, nil
}

// List implements schedule.Backend: one ListSchedules page per 100
// schedules, and a GetSchedule for each (the listing carries no target).
func (b *Backend) List(ctx context.Context) ([]schedule.Schedule, error) {
	var out []schedule.Schedule
	p := scheduler.NewListSchedulesPaginator(b.api, &scheduler.ListSchedulesInput{GroupName: aws.String(b.cfg.Group), MaxResults: aws.Int32(100)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("awsscheduler: list schedules: %w", err)
		}
		for _, sum := range page.Schedules {
			s, err := b.Get(ctx, aws.ToString(sum.Name))
			if errors.Is(err, runs.ErrNotFound) {
				continue // deleted meanwhile
			}
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b schedule.Schedule) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Mutate implements schedule.Backend: a read, then an UpdateSchedule of
// every field (the last writer wins). A rate() schedule whose expression
// stays keeps its firing times (rateStart).
func (b *Backend) Mutate(ctx context.Context, name string, fn func(*schedule.Schedule) error) (schedule.Schedule, error) {
	cur, err := b.get(ctx, name)
	if err != nil {
		return schedule.Schedule{}, err
	}
	s, err := b.fromAWS(cur)
	if err != nil {
		return schedule.Schedule{}, err
	}
	if err := fn(&s); err != nil {
		return schedule.Schedule{}, err
	}
	spec, expr, target, state, err := b.parts(s)
	if err != nil {
		return schedule.Schedule{}, err
	}
	_, err = b.api.UpdateSchedule(ctx, &scheduler.UpdateScheduleInput{
		Name: aws.String(name), GroupName: aws.String(b.cfg.Group),
		ScheduleExpression: aws.String(expr), ScheduleExpressionTimezone: aws.String(s.Timezone),
		StartDate:          rateStart(spec, b.now(), aws.ToString(cur.ScheduleExpression), expr, cur.StartDate),
		FlexibleTimeWindow: &types.FlexibleTimeWindow{Mode: types.FlexibleTimeWindowModeOff},
		Target:             target, State: state, Description: description(s.Description),
	})
	if err != nil {
		return schedule.Schedule{}, b.classify(name, "update", err)
	}
	return b.Get(ctx, name)
}

// Delete implements schedule.Backend.
func (b *Backend) Delete(ctx context.Context, name string) error {
	if _, err := b.api.DeleteSchedule(ctx, &scheduler.DeleteScheduleInput{Name: aws.String(name), GroupName: aws.String(b.cfg.Group)}); err != nil {
		return b.classify(name, "delete", err)
	}
	return nil
}

// ParseFiring reads the scheduled time of a firing's start request.
func ParseFiring(scheduledTime string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, scheduledTime)
	if err != nil {
		return time.Time{}, fmt.Errorf("scheduled_time %q is not an RFC 3339 time (EventBridge Scheduler's %s)", scheduledTime, ScheduledTime)
	}
	return t.UTC(), nil
}
