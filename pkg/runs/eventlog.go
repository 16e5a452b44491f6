package runs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
)

// DefaultStreamRetention is how many events an EventLog keeps per run when
// its configuration does not say: the newest ones. A stream resumed from an
// event older than those kept starts again from the oldest kept (see
// EventPage.First).
const DefaultStreamRetention = 10000

// MaxEventPage bounds the events one EventsSince call returns.
const MaxEventPage = 1000

// StreamEvent is one event of a run's stream (GET /v1/runs/{id}/stream,
// A2A streaming): an engine event ([pregel.Event], including those a node
// sent with [pregel.Emit]) with its place in the stream, the SSE id a
// client resumes from. A run record's history is [Event], not this.
type StreamEvent struct {
	// ID numbers the run's events from 1, in the order they happened;
	// each event's id is one more than the previous one's, but for an
	// event the log compacted from the pieces of a message (see
	// Compactor): it stands for the ids FirstID to ID.
	ID int64 `json:"id"`
	pregel.Event
	// Pieces are, on an event compacted from several pieces of a message,
	// the length in bytes of the text of each, oldest first: one per id
	// it stands for. Nil on others. EventLogs keep them (LoggedEvent) and
	// use them to give a reader that resumes inside the message the rest
	// of it (From).
	Pieces []int `json:"-"`
}

// EventPage is a part of a run's stream.
type EventPage struct {
	// Events are the events asked for, oldest first: each one's FirstID
	// is one more than the previous one's ID (consecutive ids, but for
	// compacted events, which stand for several). The first may be the
	// rest of a compacted event (StreamEvent.From).
	Events []StreamEvent
	// First is the id of the oldest event the log keeps for the run, and
	// Last the id of its newest (both 0 when it keeps none). Events
	// between the one asked to start after and First were dropped by the
	// log's retention.
	First, Last int64
}

// EventLog keeps the streams of runs, for watchers that start late or
// resume after a disconnect. Implementations must be safe for concurrent
// use; one writer appends to a run's stream at a time (the embedded Scheduler
// executing it). The package runstest holds a conformance suite
// (runstest.RunEventLog).
//
// A log keeps a bounded number of each run's newest events (its
// retention); the method names carry "Events" so that a store can
// implement EventLog beside Store.
type EventLog interface {
	EventReader
	// AppendEvents adds evs, in order, to the end of the run's stream
	// and returns them with their ids: the first gets the id after the
	// newest stored.
	AppendEvents(ctx context.Context, runID string, evs []pregel.Event) ([]StreamEvent, error)
}

// EventReader reads runs' streams.
type EventReader interface {
	// EventsSince returns up to limit (at most MaxEventPage; that many
	// when 0 or less) events of the run with ids above after, oldest
	// first. A run with no events gives an empty page, not an error; a
	// negative after is an error wrapping ErrInvalid.
	EventsSince(ctx context.Context, runID string, after int64, limit int) (EventPage, error)
}

// LiveEvents is an EventReader that also delivers events as they are
// logged: the embedded Scheduler (package embedded). Streams of a bare EventReader poll it.
type LiveEvents interface {
	EventReader
	// WatchEvents subscribes to the run's events logged from now on.
	WatchEvents(runID string) *Watch
}

// PageLimit clamps the limit of an EventsSince call to 1..MaxEventPage
// (0 or less gives MaxEventPage); for EventLog implementations.
func PageLimit(limit int) int {
	if limit <= 0 || limit > MaxEventPage {
		return MaxEventPage
	}
	return limit
}

// MemoryEventLog is an EventLog in memory. It keeps at most Retention
// events per run (the newest) and the streams of at most MaxRuns runs
// (the streams appended to most recently). Create it with
// NewMemoryEventLog.
type MemoryEventLog struct {
	retention int
	maxRuns   int

	mu    sync.Mutex
	runs  map[string]*memStream
	clock int64 // orders streams by last append
}

type memStream struct {
	events []StreamEvent // oldest first
	at     []time.Time   // when each of events was appended
	last   int64
	used   int64
}

// DefaultMemoryEventRuns is how many runs' streams a MemoryEventLog keeps
// when not told.
const DefaultMemoryEventRuns = 1000

// NewMemoryEventLog returns an empty MemoryEventLog keeping retention
// events per run and the streams of maxRuns runs (defaults
// DefaultStreamRetention and DefaultMemoryEventRuns when 0 or less).
func NewMemoryEventLog(retention, maxRuns int) *MemoryEventLog {
	if retention <= 0 {
		retention = DefaultStreamRetention
	}
	if maxRuns <= 0 {
		maxRuns = DefaultMemoryEventRuns
	}
	return &MemoryEventLog{retention: retention, maxRuns: maxRuns, runs: make(map[string]*memStream)}
}

var _ EventLog = (*MemoryEventLog)(nil)

// AppendEvents implements EventLog.
func (m *MemoryEventLog) AppendEvents(ctx context.Context, runID string, evs []pregel.Event) ([]StreamEvent, error) {
	if runID == "" {
		return nil, fmt.Errorf("append events with no run id: %w", ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.runs[runID]
	if s == nil {
		s = &memStream{}
		m.runs[runID] = s
		m.evictLocked(runID)
	}
	m.clock++
	s.used = m.clock
	out := make([]StreamEvent, len(evs))
	now := time.Now()
	for i, ev := range evs {
		s.last++
		out[i] = StreamEvent{ID: s.last, Event: ev}
		s.at = append(s.at, now)
	}
	s.events = append(s.events, out...)
	// Keep the ids after last - retention (an event compacted across the
	// cut stays whole).
	cut := s.last - int64(m.retention)
	if over, _ := slices.BinarySearchFunc(s.events, cut+1, func(e StreamEvent, id int64) int { return cmp.Compare(e.ID, id) }); over > 0 {
		s.events = append(s.events[:0:0], s.events[over:]...)
		s.at = append(s.at[:0:0], s.at[over:]...)
	}
	return out, nil
}

var _ EventCompactor = (*MemoryEventLog)(nil)

// CompactEvents implements [EventCompactor].
func (m *MemoryEventLog) CompactEvents(ctx context.Context, runID string, c Compaction) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.runs[runID]
	if s == nil {
		return fmt.Errorf("compact events %d to %d of run %q: the run has none: %w", c.First, c.Last, runID, ErrConflict)
	}
	i, _ := slices.BinarySearchFunc(s.events, c.First, func(e StreamEvent, id int64) int { return cmp.Compare(e.ID, id) })
	j, _ := slices.BinarySearchFunc(s.events, c.Last+1, func(e StreamEvent, id int64) int { return cmp.Compare(e.ID, id) })
	if j-i != c.Stored || i == len(s.events) || s.events[i].FirstID() != c.First {
		return fmt.Errorf("compact events %d to %d of run %q: the log holds others: %w", c.First, c.Last, runID, ErrConflict)
	}
	at := s.at[j-1]
	evs := slices.Clone(c.Events)
	ats := make([]time.Time, len(evs))
	for k := range ats {
		ats[k] = at
	}
	s.events = slices.Replace(s.events, i, j, evs...)
	s.at = slices.Replace(s.at, i, j, ats...)
	return nil
}

var (
	_ EventExpirer = (*MemoryEventLog)(nil)
	_ RunDeleter   = (*MemoryEventLog)(nil)
)

// ExpireEvents implements [EventExpirer]: it deletes the events appended
// before before; a run left with none is forgotten (its next event is
// number 1).
func (m *MemoryEventLog) ExpireEvents(ctx context.Context, before time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for id, s := range m.runs {
		k, _ := slices.BinarySearchFunc(s.at, before, time.Time.Compare)
		if k == 0 {
			continue
		}
		n += k
		if k == len(s.events) {
			delete(m.runs, id)
			continue
		}
		s.events = append(s.events[:0:0], s.events[k:]...)
		s.at = append(s.at[:0:0], s.at[k:]...)
	}
	return n, nil
}

// DeleteRun implements [RunDeleter]: it deletes the run's events.
func (m *MemoryEventLog) DeleteRun(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.runs, id)
	return nil
}

// evictLocked drops the least recently appended stream while there are
// more than maxRuns, never keep's.
func (m *MemoryEventLog) evictLocked(keep string) {
	for len(m.runs) > m.maxRuns {
		var oldest string
		var used int64 = -1
		for id, s := range m.runs {
			if id != keep && (used < 0 || s.used < used) {
				oldest, used = id, s.used
			}
		}
		delete(m.runs, oldest)
	}
}

// EventsSince implements EventLog.
func (m *MemoryEventLog) EventsSince(ctx context.Context, runID string, after int64, limit int) (EventPage, error) {
	if after < 0 {
		return EventPage{}, fmt.Errorf("event id %d is negative: %w", after, ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return EventPage{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.runs[runID]
	if s == nil || len(s.events) == 0 {
		return EventPage{}, nil
	}
	page := EventPage{First: s.events[0].FirstID(), Last: s.last}
	start, _ := slices.BinarySearchFunc(s.events, after+1, func(e StreamEvent, id int64) int { return cmp.Compare(e.ID, id) })
	if start >= len(s.events) {
		return page, nil
	}
	end := min(start+PageLimit(limit), len(s.events))
	page.Events = append([]StreamEvent(nil), s.events[start:end]...)
	page.Events[0] = page.Events[0].From(after)
	return page, nil
}

// Watch is a live subscription to a run's stream, from a [LiveEvents]
// source's WatchEvents (the embedded Scheduler's), made by a [WatchHub].
// Events arrive on C in id order, as they are logged. C is closed when the watch ends: Stop was called, the watcher
// fell too far behind, or the source shut down; Err then says which.
type Watch struct {
	// C delivers the run's events as they are logged.
	C <-chan StreamEvent

	ch   chan StreamEvent
	stop func()
	mu   sync.Mutex
	err  error
}

// Errors that end a Watch.
var (
	// ErrWatchBehind: the watcher did not keep up and was dropped; it
	// resumes by reading the log after the last event it got, then
	// watching again.
	ErrWatchBehind = errors.New("watcher fell behind; resume from the event log")
	// ErrWatchClosed: the source shut down; read the log instead.
	ErrWatchClosed = errors.New("event source shut down")
	// ErrWatchStopped: Stop was called.
	ErrWatchStopped = errors.New("watch stopped")
)

// Err says why C was closed, or is nil while it is open.
func (w *Watch) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Stop ends the watch; C is closed if it was not already.
func (w *Watch) Stop() { w.stop() }

// end closes C with err (once); the caller holds the hub's lock.
func (w *Watch) end(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
		close(w.ch)
	}
}

// watchBuffer bounds the events buffered for one Watch; a watcher that
// falls further behind is dropped (ErrWatchBehind).
const watchBuffer = 1024

// WatchHub fans the events a LiveEvents source logs out to the Watches of
// each run: the source calls Deliver with what it appended to its log, and
// its WatchEvents returns Watch. The zero value is ready to use; it must
// not be copied after first use. The embedded Scheduler (package
// embedded) is built on one.
type WatchHub struct {
	mu      sync.Mutex
	watches map[string]map[*Watch]struct{}
	closed  bool
}

// Watch returns a new Watch of the run's events delivered from now on.
// onStop, if set, is called after each call of the Watch's Stop (not when
// the hub ends the watch itself). After Close, the Watch is returned
// ended with ErrWatchClosed.
func (h *WatchHub) Watch(runID string, onStop func()) *Watch {
	ch := make(chan StreamEvent, watchBuffer)
	w := &Watch{C: ch, ch: ch}
	w.stop = func() {
		h.mu.Lock()
		h.removeLocked(runID, w)
		w.end(ErrWatchStopped)
		h.mu.Unlock()
		if onStop != nil {
			onStop()
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		w.end(ErrWatchClosed)
		return w
	}
	if h.watches == nil {
		h.watches = make(map[string]map[*Watch]struct{})
	}
	if h.watches[runID] == nil {
		h.watches[runID] = make(map[*Watch]struct{})
	}
	h.watches[runID][w] = struct{}{}
	return w
}

// Watching reports whether runID has a Watch.
func (h *WatchHub) Watching(runID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.watches[runID]) > 0
}

func (h *WatchHub) removeLocked(runID string, w *Watch) {
	delete(h.watches[runID], w)
	if len(h.watches[runID]) == 0 {
		delete(h.watches, runID)
	}
}

// Deliver sends evs, just logged, to the run's watchers without blocking;
// a watcher without room for all of them is dropped (its Watch ends with
// ErrWatchBehind).
func (h *WatchHub) Deliver(runID string, evs []StreamEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.watches[runID] {
		if cap(w.ch)-len(w.ch) < len(evs) {
			h.removeLocked(runID, w)
			w.end(ErrWatchBehind)
			continue
		}
		for _, ev := range evs {
			w.ch <- ev
		}
	}
}

// Close ends every watch with ErrWatchClosed; later Watches start ended.
func (h *WatchHub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for id, ws := range h.watches {
		for w := range ws {
			w.end(ErrWatchClosed)
		}
		delete(h.watches, id)
	}
}

var _ StorageMeter = (*MemoryEventLog)(nil)

// RunStorage implements [StorageMeter]: EventBytes is the size of the
// run's kept events as JSON.
func (m *MemoryEventLog) RunStorage(ctx context.Context, runID string) (Storage, error) {
	if err := ctx.Err(); err != nil {
		return Storage{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var n int64
	if s := m.runs[runID]; s != nil {
		for i := range s.events {
			b, err := json.Marshal(LoggedEvent{Event: s.events[i].Event, Pieces: s.events[i].Pieces})
			if err != nil {
				return Storage{}, err
			}
			n += int64(len(b))
		}
	}
	return Storage{EventBytes: n, Measured: []string{StorageEvents}}, nil
}
