package embedded

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// The Scheduler's event stream: every event of a run it executes (the
// engine's and the nodes' own, see pregel.Emit) is appended to the
// Scheduler's EventLog, which gives it its id, then delivered to the run's
// Watches. An execution's events go through an eventBatcher: the engine
// hands an event over without waiting (a slice append), and one goroutine
// per execution appends whatever has gathered in one AppendEvents call
// while the previous call was in progress (group commit), so that a fast
// step costs a write or two and a slow node's events (tokens, progress)
// reach watchers as they come. Watchers never slow a run: each has a
// bounded buffer and is dropped (ErrWatchBehind) when it is full.
//
// After the first event of a batch, the batcher waits eventLinger for
// more, so that a run of short steps is logged a few steps per write.
//
// Which runs' events are logged is the Scheduler's EventsMode, as on the
// serverless runtime (RUN_EVENTS). Under EventsWatched, the default, a
// run's events are logged while it is watched (WatchEvents, as every
// stream's Cursor does, or Subscribe), for the rest of that execution,
// and for WatchLease after its last watcher left (so a client that
// reconnects within it misses nothing). An unwatched run writes nothing
// to the log: its events are held in memory (the newest maxHeld and
// run_started) while it executes and for RecentWindow after, then
// dropped. A watcher that arrives in that time gets those held events
// first, so a stream opened as its run starts or just after it ended
// (stream: true) sees it from run_started. A client that connects later,
// or after a restart, finds only what was logged while someone watched;
// the stream then ends with the run's record (how it ended), which is
// what the serverless runtime serves for such a run too.
//
// A model's answer: watchers get each piece (message_delta, token) as it
// is logged, one event each. The batcher follows what it logged with a
// runs.Compactor and, once a message's run of pieces ends (or every 32
// batches while it goes on), has the log replace them by one event
// holding the text (runs.EventCompactor: the memory and SQLite logs). A
// replay, a late watcher, or one that fell behind and reads the log gets
// the answer whole; one that resumes from a piece's id gets the rest of
// it (runs.StreamEvent.From). See pkg/runs/compact.go.

// EventsMode says which runs' events a Scheduler logs.
type EventsMode string

// The event modes.
const (
	// EventsWatched, the default: the events of watched runs only (see
	// above). An unwatched run pays nothing in the log.
	EventsWatched EventsMode = "watched"
	// EventsOn: every run's events; any stream replays a run from its
	// start (within the log's retention).
	EventsOn EventsMode = "on"
	// EventsOff: none; streams show how runs end, nothing else.
	EventsOff EventsMode = "off"
)

// ParseEventsMode checks a mode given by a user ("" is EventsWatched).
func ParseEventsMode(s string) (EventsMode, error) {
	switch m := EventsMode(s); m {
	case "":
		return EventsWatched, nil
	case EventsWatched, EventsOn, EventsOff:
		return m, nil
	}
	return "", fmt.Errorf("events mode %q: want %s, %s or %s: %w", s, EventsWatched, EventsOn, EventsOff, runs.ErrInvalid)
}

// WatchLease is how long a run's events are still logged after its last
// watcher left (EventsWatched).
const WatchLease = 2 * time.Minute

// maxHeld bounds the events held for an unwatched execution; when more
// come, the oldest half (but run_started) is dropped.
const maxHeld = 1024

// maxLeases bounds the leases a Scheduler remembers.
const maxLeases = 4096

// eventBatcher gathers one execution's events for the log.
type eventBatcher struct {
	s     *Scheduler
	runID string
	wake  chan struct{}
	stop  chan struct{} // closed by stopEvents
	done  chan struct{}

	mu      sync.Mutex
	buf     []pregel.Event
	closing bool
	// watched: the events are logged; else they are held (unwatched
	// runs under EventsWatched).
	watched bool
	held    []pregel.Event

	// comp follows the batches logged, for compaction; used by loop, then
	// by stopEvents.
	comp runs.Compactor
}

// startEvents starts the batcher of an execution of runID; publish hands
// it the run's events until stopEvents.
func (s *Scheduler) startEvents(runID string) *eventBatcher {
	b := &eventBatcher{s: s, runID: runID, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	s.subMu.Lock()
	b.watched = s.watchedLocked(runID)
	delete(s.recent, runID) // the new execution's events follow
	s.batchers[runID] = b
	s.subMu.Unlock()
	go b.loop()
	return b
}

// stopEvents writes what is left of the execution's events and stops its
// batcher.
func (s *Scheduler) stopEvents(b *eventBatcher) {
	b.mu.Lock()
	b.closing = true
	b.mu.Unlock()
	close(b.stop)
	b.signal()
	<-b.done
	s.subMu.Lock()
	defer s.subMu.Unlock()
	if s.batchers[b.runID] == b {
		delete(s.batchers, b.runID)
	}
	b.mu.Lock()
	left, held := b.buf, b.held
	b.buf, b.held = nil, nil
	b.mu.Unlock()
	if len(left) > 0 {
		// Watched as the loop ended.
		b.compact(b.comp.Appended(s.logEvents(b.runID, left)))
	}
	b.compact(b.comp.Flush())
	if len(held) > 0 {
		s.keepRecentLocked(b.runID, held)
	}
}

// recentEvents are the events of an unwatched execution that ended, kept
// in memory for RecentWindow.
type recentEvents struct {
	evs   []pregel.Event
	until time.Time
}

// RecentWindow is how long the Scheduler keeps in memory the events of an
// unwatched execution that ended (the newest 1,024, and run_started): a
// watcher that comes within it gets them, so that a stream opened just
// after its run was created (stream: true) sees the run from its start.
const RecentWindow = 10 * time.Second

// maxRecent bounds the ended executions whose events are kept.
const maxRecent = 256

// keepRecentLocked keeps evs, the held events of runID's unwatched
// execution, for RecentWindow. The caller holds subMu.
func (s *Scheduler) keepRecentLocked(runID string, evs []pregel.Event) {
	now := time.Now()
	if len(s.recent) >= maxRecent {
		for id, r := range s.recent {
			if !now.Before(r.until) {
				delete(s.recent, id)
			}
		}
		for id := range s.recent {
			if len(s.recent) < maxRecent {
				break
			}
			delete(s.recent, id)
		}
	}
	s.recent[runID] = recentEvents{evs: evs, until: now.Add(RecentWindow)}
}

func (b *eventBatcher) add(ev pregel.Event) {
	b.mu.Lock()
	if !b.watched {
		b.hold(ev)
		b.mu.Unlock()
		return
	}
	b.buf = append(b.buf, ev)
	b.mu.Unlock()
	b.signal()
}

// hold keeps ev of an unwatched execution in memory: the execution's
// newest maxHeld events, and its run_started. The caller holds b.mu.
func (b *eventBatcher) hold(ev pregel.Event) {
	if b.s.mode == EventsOff {
		return
	}
	if len(b.held) >= maxHeld {
		keep := 0 // run_started stays at the front
		if b.held[0].Type == pregel.EventRunStarted {
			keep = 1
		}
		n := copy(b.held[keep:], b.held[keep+(len(b.held)-keep)/2:])
		clear(b.held[keep+n:])
		b.held = b.held[:keep+n]
	}
	b.held = append(b.held, ev)
}

// watch makes the execution's events logged from now on, the held ones
// first.
func (b *eventBatcher) watch() {
	b.mu.Lock()
	if b.watched {
		b.mu.Unlock()
		return
	}
	b.watched = true
	b.buf = append(b.held, b.buf...)
	b.held = nil
	b.mu.Unlock()
	b.signal()
}

// watchedLocked reports whether runID's events are to be logged: under
// EventsWatched, while it has a watcher or a lease. The caller holds
// subMu.
func (s *Scheduler) watchedLocked(runID string) bool {
	switch s.mode {
	case EventsOn:
		return true
	case EventsOff:
		return false
	}
	if len(s.subs[runID]) > 0 || s.hub.Watching(runID) {
		return true
	}
	until, ok := s.leases[runID]
	if ok && time.Now().Before(until) {
		return true
	}
	if ok {
		delete(s.leases, runID)
	}
	return false
}

// markWatchedLocked makes the events of runID's execution here, if any,
// logged from now on. The caller holds subMu.
func (s *Scheduler) markWatchedLocked(runID string) {
	if s.mode == EventsOff {
		return
	}
	if r, ok := s.recent[runID]; ok {
		// Nothing of that execution was logged: its events go first.
		delete(s.recent, runID)
		if time.Now().Before(r.until) {
			s.logEvents(runID, r.evs)
		}
	}
	if b := s.batchers[runID]; b != nil {
		b.watch()
	}
}

// leaseLocked keeps runID's events logged for WatchLease after a watcher
// left. The caller holds subMu.
func (s *Scheduler) leaseLocked(runID string) {
	if s.mode != EventsWatched {
		return
	}
	now := time.Now()
	if len(s.leases) >= maxLeases {
		for id, until := range s.leases {
			if !now.Before(until) {
				delete(s.leases, id)
			}
		}
		if len(s.leases) >= maxLeases {
			clear(s.leases)
		}
	}
	s.leases[runID] = now.Add(WatchLease)
}

func (b *eventBatcher) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// maxBatch bounds the events of one AppendEvents call, so that a watcher
// with an empty buffer always has room for a batch.
const maxBatch = 256

// eventLinger is how long a batch waits for more events after its first.
const eventLinger = 5 * time.Millisecond

func (b *eventBatcher) loop() {
	defer close(b.done)
	var batch []pregel.Event
	linger := time.NewTimer(eventLinger)
	linger.Stop()
	for range b.wake {
		linger.Reset(eventLinger)
		select {
		case <-linger.C:
		case <-b.stop:
			linger.Stop()
		}
		for {
			b.mu.Lock()
			n := min(len(b.buf), maxBatch)
			batch = append(batch[:0], b.buf[:n]...)
			rest := copy(b.buf, b.buf[n:])
			clear(b.buf[rest:])
			b.buf = b.buf[:rest]
			closing := b.closing
			b.mu.Unlock()
			if n == 0 {
				if closing {
					return
				}
				break
			}
			b.compact(b.comp.Appended(b.s.logEvents(b.runID, batch)))
		}
	}
}

// compact makes c, a compaction of the execution's message pieces, when
// the log can.
func (b *eventBatcher) compact(c *runs.Compaction) {
	if c == nil {
		return
	}
	l, ok := b.s.events.(runs.EventCompactor)
	if !ok {
		b.comp.Reset()
		return
	}
	ctx := b.s.base
	if ctx == nil {
		ctx = context.Background()
	}
	if err := l.CompactEvents(ctx, b.runID, *c); err != nil {
		// The pieces stay as they were logged.
		b.comp.Reset()
		if ctx.Err() == nil {
			b.s.log.Warn("compact a message's events", "run_id", b.runID, "first", c.First, "last", c.Last, "error", err)
		}
	}
}

// logEvent logs one event of a run: through the run's batcher while it
// executes here, else at once.
func (s *Scheduler) logEvent(ev pregel.Event) {
	s.subMu.Lock()
	b := s.batchers[ev.RunID]
	watched := b == nil && s.watchedLocked(ev.RunID)
	s.subMu.Unlock()
	if b != nil {
		b.add(ev)
		return
	}
	if watched {
		s.logEvents(ev.RunID, []pregel.Event{ev})
	}
}

// logEvents appends evs to the log, delivers them to the run's watchers
// and returns them with their ids (nil when the append failed).
func (s *Scheduler) logEvents(runID string, evs []pregel.Event) []runs.StreamEvent {
	ctx := s.base
	if ctx == nil {
		ctx = context.Background()
	}
	logged, err := s.events.AppendEvents(ctx, runID, evs)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("log run events; watchers of the run miss them", "run_id", runID, "events", len(evs), "error", err)
		}
		return nil
	}
	s.hub.Deliver(runID, logged)
	return logged
}

// EventsSince reads the run's stream from the Scheduler's EventLog; see
// [runs.EventReader].
func (s *Scheduler) EventsSince(ctx context.Context, runID string, after int64, limit int) (runs.EventPage, error) {
	return s.events.EventsSince(ctx, runID, after, limit)
}

// WatchEvents subscribes to the run's events as the Scheduler logs them;
// see [runs.LiveEvents]. A watcher reads the log after the last event it has
// (EventsSince) once it is watching, so that it misses none, and skips
// the events it gets twice by their ids. When the Watch ends with
// ErrWatchBehind, it reads the log again and watches anew.
func (s *Scheduler) WatchEvents(runID string) *runs.Watch {
	w := s.hub.Watch(runID, func() {
		s.subMu.Lock()
		s.leaseLocked(runID)
		s.subMu.Unlock()
	})
	s.subMu.Lock()
	s.markWatchedLocked(runID)
	s.subMu.Unlock()
	return w
}

// EventLog returns the log the Scheduler appends the runs' events to; see
// [runs.EventLogHolder].
func (s *Scheduler) EventLog() runs.EventLog { return s.events }

var (
	_ runs.LiveEvents     = (*Scheduler)(nil)
	_ runs.EventLogHolder = (*Scheduler)(nil)
)
