package infra

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestSchedulerRole: only EventBridge Scheduler, for this account and this
// stack's schedule group, assumes SchedulerRole, and the role may only
// send to the start queue (the firings) and the events dead-letter queue
// (firings it could not send); the api function is told the group, the
// role and the queues.
func TestSchedulerRole(t *testing.T) {
	tp := loadTemplate(t)
	role := tp.resource(t, "SchedulerRole", "AWS::IAM::Role")
	trust := asList(asMap(role.Properties["AssumeRolePolicyDocument"])["Statement"])
	if len(trust) != 1 {
		t.Fatalf("SchedulerRole trust policy: %v, want one statement", trust)
	}
	st := asMap(trust[0])
	if p := fmt.Sprint(asMap(st["Principal"])["Service"]); p != "scheduler.amazonaws.com" || st["Action"] != "sts:AssumeRole" {
		t.Errorf("SchedulerRole is assumed by %v (%v), want scheduler.amazonaws.com", p, st["Action"])
	}
	cond := asMap(st["Condition"])
	if src := fmt.Sprint(asMap(cond["StringEquals"])["aws:SourceAccount"]); !strings.Contains(src, "AWS::AccountId") {
		t.Errorf("SchedulerRole trust: aws:SourceAccount %s, want the stack's account", src)
	}
	if arn := strings.Join(strs(asMap(cond["ArnLike"])["aws:SourceArn"]), ""); !strings.Contains(arn, "schedule/${ScheduleGroup}/*") {
		t.Errorf("SchedulerRole trust: aws:SourceArn %s, want this stack's schedule group", arn)
	}
	var sends []string
	for _, p := range asList(role.Properties["Policies"]) {
		for _, s := range asList(asMap(asMap(p)["PolicyDocument"])["Statement"]) {
			s := asMap(s)
			if a := strs(s["Action"]); !slices.Equal(a, []string{"sqs:SendMessage"}) {
				t.Errorf("SchedulerRole statement %v: actions %v, want sqs:SendMessage only", s["Sid"], a)
			}
			id, _, _ := refTarget(s["Resource"])
			sends = append(sends, id)
		}
	}
	if slices.Sort(sends); !slices.Equal(sends, []string{"EventsDeadLetterQueue", "StartQueue"}) {
		t.Errorf("SchedulerRole sends to %v, want EventsDeadLetterQueue and StartQueue", sends)
	}
	if _, ok := role.Properties["ManagedPolicyArns"]; ok {
		t.Error("SchedulerRole has managed policies; its statements are its own")
	}
	fn := tp.resource(t, "ApiFunction", "AWS::Serverless::Function")
	env := asMap(asMap(fn.Properties["Environment"])["Variables"])
	for k, want := range map[string]string{"SCHEDULE_GROUP": "ScheduleGroup", "SCHEDULER_ROLE_ARN": "SchedulerRole", "START_QUEUE_ARN": "StartQueue", "SCHEDULE_DLQ_ARN": "EventsDeadLetterQueue"} {
		if id, _, ok := refTarget(env[k]); !ok || id != want {
			t.Errorf("ApiFunction %s = %v, want from %s", k, env[k], want)
		}
	}
	tp.resource(t, "ScheduleGroup", "AWS::Scheduler::ScheduleGroup")
}
