package runstest

import (
	"testing"
	"time"
)

// A cancel or resume whose answer was lost and that was refused when
// asked again took effect only if the run's events show it, after its
// call (applied): not an earlier request's, nor a rollback's.
func TestFaultsLostRequestApplied(t *testing.T) {
	call := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	before, after := call.Add(-time.Millisecond), call.Add(time.Millisecond)
	ev := func(at time.Time, typ, detail string) RunEvent { return RunEvent{At: at, Type: typ, Detail: detail} }
	tests := []struct {
		name   string
		op     string
		events []RunEvent
		run    RunView
		want   bool
	}{
		{"resume applied", "resume", []RunEvent{ev(before, "created", ""), ev(after, "resume_requested", `answer: "yes"`)}, RunView{}, true},
		{"resume not applied", "resume", []RunEvent{ev(before, "created", ""), ev(after, "cancelled", "")}, RunView{}, false},
		{"an earlier resume", "resume", []RunEvent{ev(before, "resume_requested", `answer: "yes"`)}, RunView{}, false},
		{"cancel of a running run", "cancel", []RunEvent{ev(after, "cancel_requested", ""), ev(after, "cancelled", "")}, RunView{}, true},
		{"cancel of a queued run", "cancel", []RunEvent{ev(after, "cancelled", "")}, RunView{}, true},
		{"an earlier cancel", "cancel", []RunEvent{ev(before, "cancel_requested", ""), ev(before, "cancelled", "")}, RunView{}, false},
		{"a rollback's cancel", "cancel", []RunEvent{ev(after, "cancel_requested", "rolled back by run r2 on its thread"), ev(after, "cancelled", "")}, RunView{SupersededBy: "r2"}, false},
		{"a paused run superseded", "cancel", []RunEvent{ev(after, "cancelled", "")}, RunView{SupersededBy: "r2"}, false},
		{"completed", "cancel", []RunEvent{ev(after, "completed", "")}, RunView{}, false},
	}
	for _, tt := range tests {
		if got := applied(tt.op, tt.events, tt.run, call); got != tt.want {
			t.Errorf("%s: applied = %v, want %v", tt.name, got, tt.want)
		}
	}
}
