package cronspec

import (
	"strings"
	"testing"
	"time"
)

func mustParse(t *testing.T, expr, tz string) *Spec {
	t.Helper()
	s, err := Parse(expr, tz)
	if err != nil {
		t.Fatalf("Parse(%q, %q): %v", expr, tz, err)
	}
	return s
}

func at(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestParseRefused: bad expressions and time zones are refused with what
// to write instead.
func TestParseRefused(t *testing.T) {
	for _, tc := range []struct{ expr, tz, want string }{
		{"", "", "the schedule is empty"},
		{"* * * *", "", "has 4 fields; a cron expression has 5"},
		{"0 9 * * * *", "", "has 6 fields"},
		{"61 * * * *", "", "not a valid cron expression"},
		{"0 9 * * 8", "", "not a valid cron expression"},
		{"0 0 30 2 *", "", "never fires"},
		{"@every 5m", "", "write a rate such as rate(5 minutes)"},
		{"0 9 * * *", "Mars/Olympus", `timezone "Mars/Olympus" is not an IANA time zone name`},
		{"0 9 * * *", "Local", "depends on the machine"},
		{"cron(0 9 * * * *)", "", "exactly one of day-of-month (*) and day-of-week (*) must be ?"},
		{"cron(0 9 ? * MON-FRI 2030)", "", "only * is supported"},
		{"cron(0 9 L * ? *)", "", "uses L, W or #"},
		{"cron(0 9 ? * 2#1 *)", "", "uses L, W or #"},
		{"cron(0 9 ? * 8 *)", "", "day 8 is out of range 1-7"},
		{"cron(0 9 * *)", "", "has 4 fields; the AWS form has 6"},
		{"rate(0 minutes)", "", "whole number from 1"},
		{"rate(5 seconds)", "", `unit "seconds"`},
		{"rate(soon)", "", "want rate(N minutes|hours|days)"},
		{"at(tomorrow)", "", "want at(yyyy-mm-ddThh:mm:ss)"},
		{"CRON_TZ=Europe/Paris 0 9 * * *", "", "give the time zone as the timezone field"},
		{strings.Repeat("1,", 200) + "1 * * * *", "", "at most 256"},
	} {
		_, err := Parse(tc.expr, tc.tz)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q, %q) = %v, want an error containing %q", tc.expr, tc.tz, err, tc.want)
		}
	}
}

// TestNext: firings of each form, in their time zone.
func TestNext(t *testing.T) {
	created := at(t, "2026-01-05T10:07:00Z")
	for _, tc := range []struct {
		expr, tz, after string
		want            []string
	}{
		// 09:00 on weekdays in Paris (UTC+1 in January).
		{"0 9 * * 1-5", "Europe/Paris", "2026-01-09T07:59:00Z", []string{"2026-01-09T08:00:00Z", "2026-01-12T08:00:00Z"}},
		// The same in the AWS form (MON-FRI = 2-6).
		{"cron(0 9 ? * 2-6 *)", "Europe/Paris", "2026-01-09T07:59:00Z", []string{"2026-01-09T08:00:00Z", "2026-01-12T08:00:00Z"}},
		{"cron(0 9 ? * MON-FRI *)", "Europe/Paris", "2026-01-09T08:00:00Z", []string{"2026-01-12T08:00:00Z"}},
		{"cron(30 12 1 * ? *)", "", "2026-01-05T00:00:00Z", []string{"2026-02-01T12:30:00Z", "2026-03-01T12:30:00Z"}},
		{"@daily", "Asia/Tokyo", "2026-01-05T00:00:00Z", []string{"2026-01-05T15:00:00Z", "2026-01-06T15:00:00Z"}},
		// A rate: from its anchor (the schedule's creation), every period.
		{"rate(15 minutes)", "", "2026-01-05T10:07:00Z", []string{"2026-01-05T10:22:00Z", "2026-01-05T10:37:00Z"}},
		{"rate(1 day)", "America/New_York", "2026-03-07T10:07:00Z", []string{"2026-03-08T10:07:00Z", "2026-03-09T10:07:00Z"}},
		// Once, in its zone.
		{"at(2026-02-01T09:00:00)", "America/New_York", "2026-01-05T00:00:00Z", []string{"2026-02-01T14:00:00Z"}},
	} {
		s := mustParse(t, tc.expr, tc.tz)
		cur := at(t, tc.after)
		for i, w := range tc.want {
			nx, ok := s.Next(cur, created)
			if !ok || !nx.Equal(at(t, w)) {
				t.Errorf("%s in %q: firing %d after %s = %s %v, want %s", tc.expr, tc.tz, i+1, cur, nx, ok, w)
				break
			}
			cur = nx
		}
	}
	s := mustParse(t, "at(2026-02-01T09:00:00)", "")
	if nx, ok := s.Next(at(t, "2026-02-01T09:00:00Z"), created); ok {
		t.Errorf("at() fired again at %s", nx)
	}
}

// TestDaylightSaving: as EventBridge Scheduler does, a firing in the hour
// skipped in spring does not happen; one in the hour repeated in autumn
// happens once.
func TestDaylightSaving(t *testing.T) {
	ny := "America/New_York" // 2026: clocks go forward on March 8 at 02:00, back on November 1 at 02:00
	s := mustParse(t, "30 2 * * *", ny)
	nx, _ := s.Next(at(t, "2026-03-07T08:00:00Z"), time.Time{}) // after 03:00 EST on March 7
	if want := at(t, "2026-03-09T06:30:00Z"); !nx.Equal(want) {
		t.Errorf("02:30 daily across spring forward: next %s, want %s (March 8 has no 02:30)", nx, want)
	}
	s = mustParse(t, "30 1 * * *", ny)
	first, _ := s.Next(at(t, "2026-11-01T04:00:00Z"), time.Time{}) // 00:00 EDT
	if want := at(t, "2026-11-01T05:30:00Z"); !first.Equal(want) {
		t.Fatalf("01:30 on November 1: %s, want %s (01:30 EDT)", first, want)
	}
	second, _ := s.Next(first, time.Time{})
	if want := at(t, "2026-11-02T06:30:00Z"); !second.Equal(want) {
		t.Errorf("after 01:30 EDT on November 1: %s, want %s (01:30 EST comes again that day, and does not fire)", second, want)
	}
	// Every 30 minutes keeps firing through the repeated hour: each
	// wall-clock time once.
	s = mustParse(t, "*/30 * * * *", ny)
	var got []string
	cur := at(t, "2026-11-01T04:59:00Z")
	for range 5 {
		cur, _ = s.Next(cur, time.Time{})
		got = append(got, cur.In(s.Location()).Format("15:04 MST"))
	}
	if w := "01:00 EDT,01:30 EDT,02:00 EST,02:30 EST,03:00 EST"; strings.Join(got, ",") != w {
		t.Errorf("*/30 across fall back: %v, want %s", got, w)
	}
}

// TestAWS: every accepted expression has its EventBridge Scheduler form,
// but those EventBridge cannot express.
func TestAWS(t *testing.T) {
	for _, tc := range []struct{ expr, want, err string }{
		{"0 9 * * 1-5", "cron(0 9 ? * 2-6 *)", ""},
		{"0 9 * * 0,6", "cron(0 9 ? * 1,7 *)", ""},
		{"0 9 * * MON-FRI", "cron(0 9 ? * MON-FRI *)", ""},
		{"*/5 * * * *", "cron(*/5 * * * ? *)", ""},
		{"0 0 1 * *", "cron(0 0 1 * ? *)", ""},
		{"@hourly", "cron(0 * * * ? *)", ""},
		{"@weekly", "cron(0 0 ? * 1 *)", ""},
		{"cron(0 9 ? * MON-FRI *)", "cron(0 9 ? * MON-FRI *)", ""},
		{"rate(1 minutes)", "rate(1 minute)", ""},
		{"rate(2 hour)", "rate(2 hours)", ""},
		{"at(2030-01-01T00:00:00)", "at(2030-01-01T00:00:00)", ""},
		{"0 9 1 * 1", "", "cannot restrict both day-of-month"},
		{"0 9 * * */2", "", "write the days out"},
	} {
		got, err := mustParse(t, tc.expr, "").AWS()
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("AWS(%q) = %q, %v; want an error containing %q", tc.expr, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("AWS(%q) = %q, %v; want %q", tc.expr, got, err, tc.want)
		}
	}
}

// TestPrevious counts the firings missed in a window and names the last.
func TestPrevious(t *testing.T) {
	s := mustParse(t, "0 * * * *", "")
	last, n := s.Previous(at(t, "2026-01-05T10:00:00Z"), at(t, "2026-01-05T13:30:00Z"), time.Time{})
	if n != 3 || !last.Equal(at(t, "2026-01-05T13:00:00Z")) {
		t.Errorf("Previous = %s, %d; want 13:00, 3", last, n)
	}
}
