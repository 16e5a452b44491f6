package tick

import (
	"context"
	"sync"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// The run's stream on the serverless path. With Handler.Events set, the
// tick and node handlers append the events the embedded engine observes
// (pregel.Event) to the run's event log: run_started when a tick starts a
// pending run, step_started when a step's tasks start, node_started, the
// node's own events (pregel.Emit: progress, token deltas), node_finished
// with the status, state_updated and step_finished when a step commits,
// interrupted, and run_finished when the run stops (completed, failed,
// cancelled, interrupted, drained). A watcher (GET /v1/runs/{id}/stream
// on the api function) reads the log.
//
// The events of one handler call are gathered and appended together when
// the call ends, so a superstep costs one append (one PutItem with the
// DynamoDB store) whoever watches. When a node runs longer than
// EventFlush, what has gathered is appended every EventFlush while it
// runs, so that its progress and tokens reach watchers before it ends.
// A failed append is logged and does not fail the call: the run's state
// is in its checkpoints, the stream only reports it.
//
// The pieces of a model's answer (pregel.IsMessageEvent) gathered in one
// append are coalesced into one event (runs.CoalesceMessages): a watcher
// gets what was streamed in each EventFlush as one piece. Once the
// message's run of pieces ends (or every 32 appends while it goes on),
// the call replaces what it appended of it by one event holding the
// text, when the log can (runs.EventCompactor: the DynamoDB store): a
// watched turn leaves one item, not one per flush. See runs.Compactor
// for what a stream resumed inside the message gets.
//
// With Handler.EventFilter set, a call keeps the events of a run only
// when the filter approves the run record it read (the serverless
// runtime keeps those of watched runs, runs.Run.WatchedUntil): others
// cost nothing.

// EventLog is where a Handler appends run events: a runs.EventLog such as
// the DynamoDB store.
type EventLog interface {
	AppendEvents(ctx context.Context, runID string, evs []pregel.Event) ([]runs.StreamEvent, error)
}

// DefaultEventFlush is how often a handler call appends the events of a
// node still running (Handler.EventFlush).
const DefaultEventFlush = 50 * time.Millisecond

// eventBuffer gathers the events of one handler call.
type eventBuffer struct {
	h     *Handler
	ctx   context.Context // for appends: not cancelled with the call
	runID string

	mu      sync.Mutex
	graph   string
	off     bool // the run's events are not kept (EventFilter)
	evs     []pregel.Event
	timer   *time.Timer // pending periodic flush; nil when none
	flushed time.Time   // when the last append (or the call) began
	closed  bool
	writeMu sync.Mutex     // one append at a time, in order
	comp    runs.Compactor // with writeMu
}

type eventsKey struct{}

// startEvents returns ctx carrying a buffer for the events of runID, and
// the function that appends what is left when the call ends. Without
// Handler.Events both do nothing.
func (h *Handler) startEvents(ctx context.Context, runID string) (context.Context, func()) {
	if h.Events == nil {
		return ctx, func() {}
	}
	b := &eventBuffer{h: h, ctx: context.WithoutCancel(ctx), runID: runID, flushed: time.Now()}
	return context.WithValue(ctx, eventsKey{}, b), b.close
}

func eventsFrom(ctx context.Context) *eventBuffer {
	b, _ := ctx.Value(eventsKey{}).(*eventBuffer)
	return b
}

// noteRun tells the call's buffer the run record read: the graph name
// the events carry, and whether they are kept (Handler.EventFilter).
func noteRun(ctx context.Context, run runs.Run) {
	if b := eventsFrom(ctx); b != nil {
		b.mu.Lock()
		b.graph = run.Graph
		b.off = b.h.EventFilter != nil && !b.h.EventFilter(run)
		if b.off {
			b.evs = nil
		}
		b.mu.Unlock()
	}
}

// emit adds an event of the call's run; it does nothing without a buffer.
func emit(ctx context.Context, ev pregel.Event) {
	if b := eventsFrom(ctx); b != nil {
		b.add(ev)
	}
}

// nodeSink returns ctx under which a node's pregel.Emit events go to the
// call's buffer.
func nodeSink(ctx context.Context) context.Context {
	b := eventsFrom(ctx)
	if b == nil {
		return ctx
	}
	return pregel.WithEventSink(ctx, b.addNodeEvent)
}

func (b *eventBuffer) add(ev pregel.Event) { b.push(ev, false) }

// addNodeEvent adds a running node's own event (a token): appended at
// once when the last append (or the call) began EventFlush ago or more,
// so that a model's first token is not held back; later ones every
// EventFlush.
func (b *eventBuffer) addNodeEvent(ev pregel.Event) { b.push(ev, true) }

func (b *eventBuffer) push(ev pregel.Event, soon bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.off {
		return
	}
	ev.RunID, ev.Graph = b.runID, b.graph
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	b.evs = append(b.evs, ev)
	if b.timer == nil && !b.closed {
		d := b.h.EventFlush
		if d <= 0 {
			d = DefaultEventFlush
		}
		if soon {
			d = max(0, d-time.Since(b.flushed))
		}
		b.timer = time.AfterFunc(d, b.flushLater)
	}
}

// flushLater appends what gathered while a node runs.
func (b *eventBuffer) flushLater() {
	b.mu.Lock()
	b.timer = nil
	closed := b.closed
	b.mu.Unlock()
	if !closed {
		b.flush()
	}
}

// close appends what is left; the call's events after it are dropped.
func (b *eventBuffer) close() {
	b.mu.Lock()
	b.closed = true
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	b.mu.Unlock()
	b.flush()
	b.writeMu.Lock()
	b.compact(b.comp.Flush())
	b.writeMu.Unlock()
}

func (b *eventBuffer) flush() {
	b.writeMu.Lock()
	defer b.writeMu.Unlock()
	b.mu.Lock()
	evs := b.evs
	b.evs = nil
	if len(evs) > 0 {
		b.flushed = time.Now()
	}
	b.mu.Unlock()
	if len(evs) == 0 {
		return
	}
	evs = runs.CoalesceMessages(evs)
	logged, err := b.h.Events.AppendEvents(b.ctx, b.runID, evs)
	if err != nil {
		b.h.log().Warn("append run events; watchers of the run miss them", "run_id", b.runID, "events", len(evs), "error", err)
		return
	}
	b.compact(b.comp.Appended(logged))
}

// compact makes c, a compaction of the call's message pieces, when the
// log can. The caller holds writeMu.
func (b *eventBuffer) compact(c *runs.Compaction) {
	if c == nil {
		return
	}
	l, ok := b.h.Events.(runs.EventCompactor)
	if !ok {
		b.comp.Reset()
		return
	}
	if err := l.CompactEvents(b.ctx, b.runID, *c); err != nil {
		// The pieces stay as they were appended.
		b.comp.Reset()
		b.h.log().Warn("compact a message's events", "run_id", b.runID, "first", c.First, "last", c.Last, "error", err)
	}
}

// emitStepCommitted adds the events of a committed step: the channels it
// changed, then step_finished.
func emitStepCommitted(ctx context.Context, prev, cp *pregel.Checkpoint, tasks int) {
	if eventsFrom(ctx) == nil {
		return
	}
	if values, appended := pregel.StepChanges(prev, cp); values != nil || appended != nil {
		emit(ctx, pregel.Event{Type: pregel.EventStateUpdated, Step: cp.Step, Values: values, Appended: appended})
	}
	emit(ctx, pregel.Event{Type: pregel.EventStepFinished, Step: cp.Step, Tasks: tasks})
}

// emitNodeFinished adds the node_finished event of a task's result.
func emitNodeFinished(ctx context.Context, t pregel.Task, res pregel.TaskResult) {
	emit(ctx, pregel.Event{Type: pregel.EventNodeFinished, Step: t.Step, Node: t.Node(), TaskID: t.ID, Status: res.Status, Reason: res.Reason,
		Error: res.Error, Attempts: res.Attempts, Writes: res.Writes, Interrupts: res.Interrupts})
}

// emitRunStopped adds the run_finished event of a record that stopped.
func emitRunStopped(ctx context.Context, r runs.Run) {
	emit(ctx, pregel.Event{Type: pregel.EventRunFinished, Step: r.Step, RunStatus: r.Status, Interrupts: r.Interrupts, Reason: r.DrainReason, Error: r.Error,
		History: r.HistoryLen()})
}
