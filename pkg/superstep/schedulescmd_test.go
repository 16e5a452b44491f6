//go:build !superstep.lambda

package superstep

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestSchedulesCommands: through 'superstep schedules' against a dev
// server, a rate schedule fires at once (as on EventBridge Scheduler) and
// its run completes; it is listed with its last and next firings, paused,
// resumed and deleted; bad schedules exit 2 saying what to fix.
func TestSchedulesCommands(t *testing.T) {
	h := newHarness(t)
	h.env[ServerEnv] = startDev(t)
	h.env[TokenEnv] = "tok"

	r := h.run("schedules", "create", "tick", "--graph", "counter", "--schedule", "rate(1 hour)", "--timezone", "Europe/Paris", "--input", `{"limit": 2}`).want(t, ExitOK)
	wantOut(t, r, "Schedule:", "tick", "rate(1 hour) (Europe/Paris)", "State:", "active")
	var sc struct {
		LastRunID  string     `json:"last_run_id"`
		NextFireAt *time.Time `json:"next_fire_at"`
		Paused     bool       `json:"paused"`
	}
	deadline := time.Now().Add(10 * time.Second)
	for sc.LastRunID == "" {
		if time.Now().After(deadline) {
			t.Fatalf("the rate schedule did not fire within 10s: %s", h.run("schedules", "show", "tick").stdout)
		}
		time.Sleep(20 * time.Millisecond)
		out := h.run("schedules", "show", "tick", "--json").want(t, ExitOK).stdout
		if err := json.Unmarshal([]byte(out), &sc); err != nil {
			t.Fatalf("schedules show --json: %v\n%s", err, out)
		}
	}
	if !strings.HasPrefix(sc.LastRunID, "sched.tick.") || sc.NextFireAt == nil || time.Until(*sc.NextFireAt) < 50*time.Minute {
		t.Errorf("after the first firing: last run %q, next %v; want sched.tick.TIME and the next about an hour on", sc.LastRunID, sc.NextFireAt)
	}
	h.run("runs", "watch", sc.LastRunID).want(t, ExitOK) // it completes
	wantOut(t, h.run("schedules", "list").want(t, ExitOK), "NAME", "tick", "counter", "rate(1 hour)", "active", sc.LastRunID)
	if r := h.run("schedules", "pause", "tick").want(t, ExitOK); !regexp.MustCompile(`State:\s+paused\nNext firing:\s+-\n`).MatchString(r.stdout) {
		t.Errorf("paused: %s; want paused with no next firing", r.stdout)
	}
	wantOut(t, h.run("schedules", "list").want(t, ExitOK), "paused")
	wantOut(t, h.run("schedules", "resume", "tick").want(t, ExitOK), "active")
	wantOut(t, h.run("schedules", "update", "tick", "--schedule", "cron(0 9 ? * MON-FRI *)").want(t, ExitOK), "cron(0 9 ? * MON-FRI *) (Europe/Paris)")

	wantOut(t, h.run("schedules", "create", "bad", "--graph", "counter", "--schedule", "0 9 * *").want(t, ExitUsage), "has 4 fields")
	wantOut(t, h.run("schedules", "create", "bad", "--graph", "counter", "--schedule", "0 9 * * *", "--timezone", "Paris").want(t, ExitUsage), `timezone "Paris" is not an IANA time zone name`)
	wantOut(t, h.run("schedules", "create", "bad", "--graph", "nope", "--schedule", "0 9 * * *").want(t, ExitUsage), `graph "nope" is not registered`)
	wantOut(t, h.run("schedules", "create", "bad", "--graph", "counter", "--schedule", "0 9 * * *", "--thread", "ghost").want(t, ExitUsage), `thread "ghost" does not exist`)

	wantOut(t, h.run("schedules", "delete", "tick").want(t, ExitOK), "schedule tick deleted")
	wantOut(t, h.run("schedules", "show", "tick").want(t, ExitUsage), `there is no schedule "tick"`)
}
