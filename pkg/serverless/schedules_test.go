package serverless_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	schedtypes "github.com/aws/aws-sdk-go-v2/service/scheduler/types"

	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/schedule"
	"github.com/superstep/superstep/pkg/schedule/awsscheduler"
)

// TestSchedulesOnEventBridge: /v1/schedules on a deployment creates,
// pauses, updates and deletes EventBridge Scheduler schedules (read back
// with the real SDK client from the emulator): the target is the start
// queue, sent with the scheduler's role, with the firing's start request
// as input. A firing's message delivered twice to the start path starts
// one run, which completes.
func TestSchedulesOnEventBridge(t *testing.T) {
	s := newStack(t, stackOptions{schedules: true})
	sch := scheduler.NewFromConfig(moto.Start(t).Config)
	get := func(name string) (*scheduler.GetScheduleOutput, error) {
		return sch.GetSchedule(t.Context(), &scheduler.GetScheduleInput{Name: aws.String(name), GroupName: aws.String(s.cfg.ScheduleGroup)})
	}

	var sc schedule.Schedule
	if st := s.do("POST", "/v1/schedules", map[string]any{"name": "nightly", "graph": "counter", "schedule": "0 2 * * *", "timezone": "Europe/Paris", "input": map[string]int{"limit": 2}}, &sc); st != http.StatusCreated {
		t.Fatalf("create: status %d", st)
	}
	if sc.Expression != "cron(0 2 * * ? *)" || sc.Timezone != "Europe/Paris" || sc.NextFireAt == nil || sc.Paused {
		t.Errorf("created %+v; want EventBridge's cron(0 2 * * ? *) in Europe/Paris with a next firing", sc)
	}
	out, err := get("nightly")
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(out.ScheduleExpression) != "cron(0 2 * * ? *)" || aws.ToString(out.ScheduleExpressionTimezone) != "Europe/Paris" || out.State != schedtypes.ScheduleStateEnabled {
		t.Errorf("EventBridge schedule: %s in %s, %s", aws.ToString(out.ScheduleExpression), aws.ToString(out.ScheduleExpressionTimezone), out.State)
	}
	if aws.ToString(out.Target.Arn) != s.cfg.StartQueueARN || aws.ToString(out.Target.RoleArn) != s.cfg.SchedulerRoleARN {
		t.Errorf("target %s with role %s; want the start queue %s with %s", aws.ToString(out.Target.Arn), aws.ToString(out.Target.RoleArn), s.cfg.StartQueueARN, s.cfg.SchedulerRoleARN)
	}
	template := aws.ToString(out.Target.Input)
	if !strings.Contains(template, `"scheduled_time":"`+awsscheduler.ScheduledTime+`"`) || !strings.Contains(template, `"schedule":"nightly"`) {
		t.Errorf("target input %s; want the schedule's name and EventBridge's scheduled-time attribute", template)
	}

	// Pause, resume, retime.
	if st := s.do("POST", "/v1/schedules/nightly/pause", nil, nil); st != http.StatusOK {
		t.Fatalf("pause: %d", st)
	}
	if out, err = get("nightly"); err != nil || out.State != schedtypes.ScheduleStateDisabled {
		t.Errorf("paused: %v %v, want DISABLED", out.State, err)
	}
	sc = schedule.Schedule{}
	if st := s.do("PATCH", "/v1/schedules/nightly", map[string]any{"schedule": "rate(5 minutes)", "paused": false}, &sc); st != http.StatusOK || sc.Paused || sc.Expression != "rate(5 minutes)" {
		t.Fatalf("update: %d %+v", st, sc)
	}
	if out, err = get("nightly"); err != nil || out.State != schedtypes.ScheduleStateEnabled || aws.ToString(out.ScheduleExpression) != "rate(5 minutes)" {
		t.Errorf("updated: %s %v %v", aws.ToString(out.ScheduleExpression), out.State, err)
	}
	var list api.ScheduleList
	if st := s.do("GET", "/v1/schedules", nil, &list); st != http.StatusOK || len(list.Schedules) != 1 || list.Schedules[0].Name != "nightly" {
		t.Errorf("list: %d %+v", st, list)
	}
	// What EventBridge cannot express is refused before it is asked.
	var p api.Problem
	if st := s.do("POST", "/v1/schedules", map[string]any{"name": "both", "graph": "counter", "schedule": "0 9 1 * MON"}, &p); st != http.StatusBadRequest || !strings.Contains(p.Detail, "cannot restrict both day-of-month") {
		t.Errorf("both day fields: %d %+v", st, p)
	}
	if st := s.do("POST", "/v1/schedules", map[string]any{"name": "nightly", "graph": "counter", "schedule": "@daily"}, &p); st != http.StatusConflict {
		t.Errorf("a name taken: %d %+v, want 409", st, p)
	}

	// A firing, as EventBridge Scheduler sends it, delivered twice.
	body := strings.ReplaceAll(template, awsscheduler.ScheduledTime, "2026-01-06T01:00:00Z")
	for i, id := range []string{"m-1", "m-2"} {
		ev, _ := json.Marshal(events.SQSEvent{Records: []events.SQSMessage{{MessageId: id, EventSource: "aws:sqs", Body: body}}})
		resp, err := s.app.HandleAPI(t.Context(), ev)
		if err != nil || len(resp.(events.SQSEventResponse).BatchItemFailures) != 0 {
			t.Fatalf("delivery %d: %+v %v", i+1, resp, err)
		}
	}
	runID := schedule.FiringRunID("nightly", time.Date(2026, 1, 6, 1, 0, 0, 0, time.UTC))
	r := s.waitStatus(runID, pregel.RunCompleted)
	if r.Graph != "counter" {
		t.Errorf("the firing's run: %+v", r)
	}
	page, err := s.app.Service.List(t.Context(), runs.Filter{Graph: "counter", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Runs) != 1 {
		var ids []string
		for _, r := range page.Runs {
			ids = append(ids, r.ID)
		}
		t.Errorf("runs of counter after two deliveries: %v, want one (%s)", ids, runID)
	}

	if st := s.do("DELETE", "/v1/schedules/nightly", nil, nil); st != http.StatusNoContent {
		t.Fatalf("delete: %d", st)
	}
	var nf *schedtypes.ResourceNotFoundException
	if _, err := get("nightly"); !errors.As(err, &nf) {
		t.Errorf("GetSchedule after delete: %v, want ResourceNotFoundException", err)
	}
	if st := s.do("GET", "/v1/schedules/nightly", nil, &p); st != http.StatusNotFound {
		t.Errorf("GET after delete: %d %+v", st, p)
	}
}
