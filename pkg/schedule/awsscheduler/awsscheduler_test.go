package awsscheduler_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"

	"github.com/superstep/superstep/internal/mototest"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/schedule"
	"github.com/superstep/superstep/pkg/schedule/awsscheduler"
)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

type noDispatch struct{}

func (noDispatch) Dispatch(context.Context, runs.Run) error { return nil }
func (noDispatch) Signal(context.Context, runs.Run)         {}

type state struct {
	N int `json:"n"`
}

// TestRateStartDate: on EventBridge Scheduler (moto, through the real SDK
// client) a rate() schedule is created with a StartDate at the next whole
// minute, so its firings are StartDate + k·period and the API shows the
// last one (its run read by FiringRunID) as it does for cron() and at().
// An update that keeps the rate keeps the firings (the StartDate moves to
// the next of them: EventBridge refuses one in the past); a new rate starts
// a new period; a cron has no StartDate.
func TestRateStartDate(t *testing.T) {
	srv := mototest.Start(t)
	api := scheduler.NewFromConfig(srv.Config)
	const group = "rate-start"
	if _, err := api.CreateScheduleGroup(t.Context(), &scheduler.CreateScheduleGroupInput{Name: aws.String(group)}); err != nil {
		t.Fatal(err)
	}
	// The clock starts at the real time (moto stamps CreationDate with
	// it), 20 s past a minute.
	c := &clock{}
	t0 := time.Now().UTC().Truncate(time.Minute).Add(20 * time.Second)
	c.Set(t0)
	b, err := awsscheduler.New(api, awsscheduler.Config{Group: group, Now: c.Now,
		TargetARN: "arn:aws:sqs:us-east-1:123456789012:starts", RoleARN: "arn:aws:iam::123456789012:role/scheduler"})
	if err != nil {
		t.Fatal(err)
	}
	g := pregel.NewGraph[state]("counter")
	g.AddFunc("inc", func(_ context.Context, s state) (state, error) { return state{N: s.N + 1}, nil })
	g.AddEdge(pregel.Start, "inc").AddEdge("inc", pregel.End)
	cg, err := g.Compile()
	if err != nil {
		t.Fatal(err)
	}
	reg, err := runs.NewRegistry(cg)
	if err != nil {
		t.Fatal(err)
	}
	store := runs.NewMemoryStore()
	rs := &runs.Service{Graphs: reg, Runs: store, Checkpoints: pregel.NewMemoryStore(), Threads: store, Dispatcher: noDispatch{}, Now: c.Now}
	svc := &schedule.Service{Runs: rs, Backend: b, AWS: true, Now: c.Now}

	startDate := func(name string) *time.Time {
		t.Helper()
		out, err := api.GetSchedule(t.Context(), &scheduler.GetScheduleInput{Name: aws.String(name), GroupName: aws.String(group)})
		if err != nil {
			t.Fatal(err)
		}
		return out.StartDate
	}
	last := func(name string) (string, string) {
		t.Helper()
		sc, err := svc.Get(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		next := "none"
		if sc.NextFireAt != nil {
			next = sc.NextFireAt.UTC().Format(time.RFC3339)
		}
		if sc.LastFireAt == nil {
			return "none " + sc.LastRunID, next
		}
		return sc.LastFireAt.UTC().Format(time.RFC3339) + " " + sc.LastRunID, next
	}
	at := func(d time.Duration) string { return t0.Truncate(time.Minute).Add(d).Format(time.RFC3339) }
	id := func(d time.Duration) string { return schedule.FiringRunID("rated", t0.Truncate(time.Minute).Add(d)) }

	if _, err := svc.Create(t.Context(), schedule.CreateRequest{Name: "rated", Graph: "counter", Schedule: "rate(5 minutes)"}); err != nil {
		t.Fatal(err)
	}
	s := t0.Truncate(time.Minute).Add(time.Minute)
	if got := startDate("rated"); got == nil || !got.Equal(s) {
		t.Fatalf("StartDate %v, want the next whole minute %s", got, s)
	}
	if l, next := last("rated"); l != "none " || next != at(time.Minute) {
		t.Errorf("new rate: last %q next %s, want none and %s", l, next, at(time.Minute))
	}

	// 12 minutes on: firings at +1, +6 and +11 minutes; the latest is
	// shown once its run exists.
	c.Set(t0.Add(12 * time.Minute))
	if l, _ := last("rated"); l != "none " {
		t.Errorf("the +11 min firing not delivered: last %q, want none", l)
	}
	sc, err := svc.Get(t.Context(), "rated")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.Fire(t.Context(), sc, t0.Truncate(time.Minute).Add(11*time.Minute)); err != nil {
		t.Fatal(err)
	}
	want := at(11*time.Minute) + " " + id(11*time.Minute)
	if l, next := last("rated"); l != want || next != at(16*time.Minute) {
		t.Errorf("after the firing: last %q next %s, want %q and %s", l, next, want, at(16*time.Minute))
	}

	// Pause and resume: the StartDate moves to the next firing of the
	// same period (not into the past), the last firing still shows.
	for _, paused := range []bool{true, false} {
		if _, err := svc.Update(t.Context(), "rated", schedule.UpdateRequest{Paused: &paused}); err != nil {
			t.Fatal(err)
		}
	}
	if got := startDate("rated"); got == nil || !got.Equal(s.Add(15*time.Minute)) {
		t.Errorf("after pause and resume: StartDate %v, want %s (the period kept)", got, s.Add(15*time.Minute))
	}
	if l, next := last("rated"); l != want || next != at(16*time.Minute) {
		t.Errorf("after pause and resume: last %q next %s, want %q and %s", l, next, want, at(16*time.Minute))
	}

	// A new rate: a new period from the next whole minute.
	c.Set(t0.Add(13 * time.Minute))
	expr := "rate(7 minutes)"
	if _, err := svc.Update(t.Context(), "rated", schedule.UpdateRequest{Schedule: &expr}); err != nil {
		t.Fatal(err)
	}
	if got := startDate("rated"); got == nil || !got.Equal(s.Add(13*time.Minute)) {
		t.Errorf("after a new rate: StartDate %v, want %s", got, s.Add(13*time.Minute))
	}
	c.Set(t0.Add(15 * time.Minute))
	if l, next := last("rated"); l != "none " || next != at(21*time.Minute) {
		t.Errorf("a new rate: last %q next %s, want none (its first firing, +14 min, has no run) and %s", l, next, at(21*time.Minute))
	}

	// A cron has none.
	cron := "cron(0 9 * * ? *)"
	if _, err := svc.Update(t.Context(), "rated", schedule.UpdateRequest{Schedule: &cron}); err != nil {
		t.Fatal(err)
	}
	if got := startDate("rated"); got != nil {
		t.Errorf("a cron: StartDate %v, want none", got)
	}
}
