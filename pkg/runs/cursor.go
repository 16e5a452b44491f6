package runs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
)

// DefaultCursorPoll is how often a Cursor reads the log when it has no live
// events to wait on.
const DefaultCursorPoll = 100 * time.Millisecond

// DefaultCursorFastPoll is how often a Cursor reads the log while a node
// of the run is running (a node_started given, its node_finished not
// yet): a model's first token waits at most this long for the read.
const DefaultCursorFastPoll = 25 * time.Millisecond

// EventsDroppedError is returned by Cursor.Next when events the cursor
// should have given next are gone from the log (its retention dropped
// them): the stream continues from First, the oldest event kept.
type EventsDroppedError struct {
	// After is the id the cursor was after; First the id it continues
	// from.
	After, First int64
}

func (e *EventsDroppedError) Error() string {
	return fmt.Sprintf("events %d to %d of the run are no longer kept; the stream continues from event %d", e.After+1, e.First-1, e.First)
}

// Cursor reads a run's stream in order, from the log and then live as
// events are logged, missing none and repeating none: it watches before it
// reads the log (when its source is LiveEvents), skips live events it has
// already read, and when it falls behind a live source (ErrWatchBehind)
// reads the log again. A source without live events is polled. A Cursor is
// used by one goroutine; Close it when done.
type Cursor struct {
	src   EventReader
	live  LiveEvents // nil: poll
	runID string
	after int64
	// Poll is how often the log is read when there is no live source
	// (default DefaultCursorPoll); set it before the first Next.
	Poll time.Duration
	// FastPoll is Poll while a node runs (default DefaultCursorFastPoll).
	FastPoll time.Duration
	// running counts the nodes started and not finished in the events
	// given.
	running int

	watch  *Watch
	buf    []StreamEvent
	synced bool // the log was read since the watch started
	timer  *time.Timer
}

// NewCursor returns a cursor over runID's stream that gives the events
// after the id after (0: from the start).
func NewCursor(src EventReader, runID string, after int64) *Cursor {
	c := &Cursor{src: src, runID: runID, after: after}
	c.live, _ = src.(LiveEvents)
	return c
}

// After is the id of the last event Next returned (or the cursor's
// starting point).
func (c *Cursor) After() int64 { return c.after }

// Close stops watching.
func (c *Cursor) Close() {
	if c.watch != nil {
		c.watch.Stop()
		c.watch = nil
	}
	if c.timer != nil {
		c.timer.Stop()
	}
}

// Pending reports whether the cursor holds events read from the log and
// not yet returned: Next gives them without waiting.
func (c *Cursor) Pending() bool { return len(c.buf) > 0 }

// ErrNoEvent is returned by NextWithin when no event came in time.
var ErrNoEvent = errors.New("no event within the time given")

// NextWithin is Next, but gives up waiting for a new event after d and
// returns ErrNoEvent. Reading events already logged is not bounded by d.
func (c *Cursor) NextWithin(ctx context.Context, d time.Duration) (StreamEvent, error) {
	t := time.NewTimer(max(d, 0))
	defer t.Stop()
	return c.next(ctx, t.C)
}

// Next returns the next event of the stream, waiting for it until ctx is
// done (then ctx's error). When events were lost to the log's retention,
// it returns an *EventsDroppedError once, and the events from the oldest
// kept after it. When the live source shuts down (embedded.Scheduler.Shutdown), it
// returns ErrWatchClosed once, and polls the log from then on.
func (c *Cursor) Next(ctx context.Context) (StreamEvent, error) {
	return c.next(ctx, nil)
}

// next is Next, giving up with ErrNoEvent when expired fires while it
// waits.
func (c *Cursor) next(ctx context.Context, expired <-chan time.Time) (StreamEvent, error) {
	for {
		if len(c.buf) > 0 {
			ev := c.buf[0]
			c.buf = c.buf[1:]
			c.after = ev.ID
			c.running = nodesRunning(c.running, ev)
			return ev, nil
		}
		if c.live != nil && c.watch == nil {
			c.watch = c.live.WatchEvents(c.runID)
			c.synced = false
		}
		if !c.synced {
			if err := c.read(ctx); err != nil {
				return StreamEvent{}, err
			}
			if len(c.buf) > 0 {
				continue
			}
		}
		if c.watch == nil {
			if err := c.sleep(ctx, expired); err != nil {
				return StreamEvent{}, err
			}
			continue
		}
		// An event waiting wins over expired, which may have fired while
		// the log was read.
		var (
			ev StreamEvent
			ok bool
		)
		select {
		case ev, ok = <-c.watch.C:
		default:
			select {
			case <-ctx.Done():
				return StreamEvent{}, ctx.Err()
			case <-expired:
				return StreamEvent{}, ErrNoEvent
			case ev, ok = <-c.watch.C:
			}
		}
		switch {
		case !ok:
			c.synced = false
			if errors.Is(c.watch.Err(), ErrWatchBehind) {
				c.watch = nil // watch again and read the log
				continue
			}
			// The source shut down: say so once, then poll.
			c.watch, c.live = nil, nil
			return StreamEvent{}, ErrWatchClosed
		case ev.ID <= c.after:
			// Read from the log already.
		case ev.ID == c.after+1:
			c.after = ev.ID
			return ev, nil
		default:
			c.synced = false // a gap: read the log
		}
	}
}

// read fills the buffer from the log.
func (c *Cursor) read(ctx context.Context) error {
	page, err := c.src.EventsSince(ctx, c.runID, c.after, 0)
	if err != nil {
		return err
	}
	if page.First > c.after+1 || c.after > page.Last {
		// Events after c.after are gone, or c.after was never given
		// (the log was lost): continue from the oldest kept.
		first := max(page.First, 1)
		dropped := &EventsDroppedError{After: c.after, First: first}
		c.after, c.buf = first-1, nil
		return dropped
	}
	c.buf = page.Events
	// Caught up with the log: from now on the watch gives what follows.
	c.synced = c.watch != nil && (len(page.Events) == 0 || page.Events[len(page.Events)-1].ID >= page.Last)
	return nil
}

func (c *Cursor) sleep(ctx context.Context, expired <-chan time.Time) error {
	d := c.Poll
	if d <= 0 {
		d = DefaultCursorPoll
	}
	if c.running > 0 {
		d = cmp.Or(c.FastPoll, min(d, DefaultCursorFastPoll))
	}
	if c.timer == nil {
		c.timer = time.NewTimer(d)
	} else {
		c.timer.Reset(d)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-expired:
		return ErrNoEvent
	case <-c.timer.C:
		return nil
	}
}

// nodesRunning is how many nodes run after ev, n before it.
func nodesRunning(n int, ev StreamEvent) int {
	switch ev.Type {
	case pregel.EventNodeStarted:
		return n + 1
	case pregel.EventNodeFinished:
		return max(0, n-1)
	case pregel.EventStepFinished, pregel.EventRunFinished:
		return 0
	}
	return n
}
