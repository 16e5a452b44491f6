package runs

import (
	"context"
	"fmt"
	"time"
)

// Event retention: how long and how many of a run's events a log keeps.
//
// By count, a log keeps each run's newest events up to its retention
// (DefaultStreamRetention unless configured: NewMemoryEventLog, the SQLite
// store's SetEventRetention, dynamo.WithEventRetention). By age, events
// logged longer ago than the maximum age are deleted: embedded, by the
// Scheduler's sweep (embedded.SchedulerConfig.EventMaxAge) of a log that
// is an EventExpirer; on DynamoDB, by the table's TTL (dynamo.WithEventMaxAge).
// `superstep dev` and the Lambda functions default to DefaultEventMaxAge.
// A run's events also go with the run: deleting a run, or a thread with
// its runs, deletes them, and so does the expiry of a finished run's
// record where records expire (DynamoDB).
//
// When every event of a run has expired and the run goes on (an
// interrupted run answered a day later), its stream starts again from id
// 1; a client resuming from an older id is told that events were dropped
// (EventsDroppedError) and continues from the oldest kept.

// DefaultEventMaxAge is how long `superstep dev` and the Lambda functions
// keep a run's events unless told otherwise (--event-max-age,
// EVENT_MAX_AGE): a day, enough for a client to resume or replay a run's
// stream, not so long that an idle deployment keeps its history.
const DefaultEventMaxAge = 24 * time.Hour

// EventExpirer is an EventLog whose events expire by age: ExpireEvents
// deletes the events appended before before and returns how many it
// deleted. The embedded Scheduler calls it periodically
// (embedded.SchedulerConfig.EventMaxAge).
type EventExpirer interface {
	ExpireEvents(ctx context.Context, before time.Time) (int, error)
}

// CheckEventRetention checks retention settings given by a user:
// maxEvents, the events kept per run, must be 1 or more; maxAge, how long
// they are kept, 0 (no limit by age) or more. The error says what to fix.
func CheckEventRetention(maxEvents int, maxAge time.Duration) error {
	if maxEvents < 1 {
		return fmt.Errorf("events kept per run %d: want 1 or more (default %d): %w", maxEvents, DefaultStreamRetention, ErrInvalid)
	}
	if maxAge < 0 {
		return fmt.Errorf("event max age %s is negative: want 0 (no limit by age) or a duration such as %s: %w", maxAge, DefaultEventMaxAge, ErrInvalid)
	}
	return nil
}
