package runs

import (
	"context"
	"sync"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
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
}

// startEvents starts the batcher of an execution of runID; publish hands
// it the run's events until stopEvents.
func (s *Scheduler) startEvents(runID string) *eventBatcher {
	b := &eventBatcher{s: s, runID: runID, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	s.subMu.Lock()
	s.batchers[runID] = b
	s.subMu.Unlock()
	go b.loop()
	return b
}

// stopEvents writes what is left of the execution's events and stops its
// batcher.
func (s *Scheduler) stopEvents(b *eventBatcher) {
	s.subMu.Lock()
	if s.batchers[b.runID] == b {
		delete(s.batchers, b.runID)
	}
	s.subMu.Unlock()
	b.mu.Lock()
	b.closing = true
	b.mu.Unlock()
	close(b.stop)
	b.signal()
	<-b.done
}

func (b *eventBatcher) add(ev pregel.Event) {
	b.mu.Lock()
	b.buf = append(b.buf, ev)
	b.mu.Unlock()
	b.signal()
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
			b.s.logEvents(b.runID, batch)
		}
	}
}

// logEvent logs one event of a run: through the run's batcher while it
// executes here, else at once.
func (s *Scheduler) logEvent(ev pregel.Event) {
	s.subMu.Lock()
	b := s.batchers[ev.RunID]
	s.subMu.Unlock()
	if b != nil {
		b.add(ev)
		return
	}
	s.logEvents(ev.RunID, []pregel.Event{ev})
}

// logEvents appends evs to the log and delivers them to the run's
// watchers.
func (s *Scheduler) logEvents(runID string, evs []pregel.Event) {
	ctx := s.base
	if ctx == nil {
		ctx = context.Background()
	}
	logged, err := s.events.AppendEvents(ctx, runID, evs)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("log run events; watchers of the run miss them", "run_id", runID, "events", len(evs), "error", err)
		}
		return
	}
	s.hub.deliver(runID, logged)
}

// EventsSince reads the run's stream from the Scheduler's EventLog; see
// [EventReader].
func (s *Scheduler) EventsSince(ctx context.Context, runID string, after int64, limit int) (EventPage, error) {
	return s.events.EventsSince(ctx, runID, after, limit)
}

// WatchEvents subscribes to the run's events as the Scheduler logs them;
// see [LiveEvents]. A watcher reads the log after the last event it has
// (EventsSince) once it is watching, so that it misses none, and skips
// the events it gets twice by their ids. When the Watch ends with
// ErrWatchBehind, it reads the log again and watches anew.
func (s *Scheduler) WatchEvents(runID string) *Watch { return s.hub.watch(runID) }

var _ LiveEvents = (*Scheduler)(nil)
