package runstest

import (
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/runs"
)

// ExpiringEventLog is what RunEventExpiry tests: an event log whose events
// expire by age and that deletes a run's events.
type ExpiringEventLog interface {
	runs.EventLog
	runs.EventExpirer
	runs.RunDeleter
}

// RunEventExpiry checks the retention of an event log by age and with its
// runs: ExpireEvents deletes exactly the events appended before the time
// given, of every run, and nothing appended after; a run left with no
// events starts again from id 1; DeleteRun deletes that run's events and
// no other's. newLog returns an empty log.
func RunEventExpiry(t *testing.T, newLog func(t *testing.T) ExpiringEventLog) {
	ctx := t.Context()
	l := newLog(t)
	appendN := func(run string, n int) {
		t.Helper()
		if _, err := l.AppendEvents(ctx, run, sampleEvents(run, n)); err != nil {
			t.Fatal(err)
		}
	}
	page := func(run string) runs.EventPage {
		t.Helper()
		p, err := l.EventsSince(ctx, run, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	appendN("r1", 3)
	appendN("r2", 2)
	// Stores keep append times to the millisecond: a margin either side.
	time.Sleep(20 * time.Millisecond)
	cut := time.Now()
	time.Sleep(20 * time.Millisecond)
	appendN("r1", 2)
	appendN("r3", 1)

	n, err := l.ExpireEvents(ctx, cut)
	if err != nil {
		t.Fatal(err)
	}
	if n != 5 {
		t.Errorf("ExpireEvents deleted %d events; want 5 (r1's first 3, r2's 2)", n)
	}
	if p := page("r1"); p.First != 4 || p.Last != 5 {
		t.Errorf("r1 after expiry: First, Last = %d, %d; want 4, 5", p.First, p.Last)
	} else {
		checkIDs(t, "r1 after expiry", p.Events, 4, 2)
	}
	if p := page("r2"); len(p.Events) != 0 || p.Last != 0 {
		t.Errorf("r2 after expiry: %+v; want no events", p)
	}
	checkIDs(t, "r3 after expiry", page("r3").Events, 1, 1)
	if n, err := l.ExpireEvents(ctx, cut); err != nil || n != 0 {
		t.Errorf("ExpireEvents again = %d, %v; want 0, nil", n, err)
	}
	// A run whose events all expired numbers its next from 1.
	got, err := l.AppendEvents(ctx, "r2", sampleEvents("r2", 1))
	if err != nil {
		t.Fatal(err)
	}
	checkIDs(t, "r2's append after expiry", got, 1, 1)

	if err := l.DeleteRun(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	if p := page("r1"); len(p.Events) != 0 || p.Last != 0 {
		t.Errorf("r1 after DeleteRun: %+v; want no events", p)
	}
	checkIDs(t, "r3 after r1's deletion", page("r3").Events, 1, 1)
	checkIDs(t, "r2 after r1's deletion", page("r2").Events, 1, 1)
}
