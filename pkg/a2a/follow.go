package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	core "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// watcher tells when a run may have changed: at each of its events when
// the Server has an event source (and now and then in case one was
// missed), else at each poll interval.
type watcher struct {
	events <-chan pregel.Event
	stop   func()
	ticker *time.Ticker
	poll   time.Duration
}

func (s *Server) watch(runID string) *watcher {
	w := &watcher{poll: s.poll, stop: func() {}}
	interval := s.poll
	if s.events != nil {
		w.events, w.stop = s.follow(runID)
		interval = max(s.poll, safetyPoll)
	}
	w.ticker = time.NewTicker(interval)
	return w
}

// followBuffer bounds the events read ahead for one watcher.
const followBuffer = 256

// follow returns the run's events from now on, read through a runs.Cursor
// over the Server's event streams, and a function that stops it. If the
// stream cannot be read, the channel is closed and the watcher follows
// the run record instead.
func (s *Server) follow(runID string) (<-chan pregel.Event, func()) {
	ch := make(chan pregel.Event, followBuffer)
	ctx, cancel := context.WithCancel(context.Background())
	readCtx, stop := context.WithTimeout(ctx, 10*time.Second)
	page, err := s.events.EventsSince(readCtx, runID, 0, 1)
	stop()
	if err != nil {
		s.log.Warn("a2a: read the run's stream; following the run record instead", "run_id", runID, "error", err)
		cancel()
		close(ch)
		return ch, func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(ch)
		cur := runs.NewCursor(s.events, runID, page.Last)
		defer cur.Close()
		for {
			ev, err := cur.Next(ctx)
			var dropped *runs.EventsDroppedError
			switch {
			case errors.As(err, &dropped):
				continue
			case err != nil:
				if ctx.Err() == nil && !errors.Is(err, runs.ErrWatchClosed) {
					s.log.Warn("a2a: follow the run's stream; following the run record instead", "run_id", runID, "error", err)
				}
				return
			}
			select {
			case ch <- ev.Event:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch, func() {
		cancel()
		<-done
	}
}

func (w *watcher) close() {
	w.ticker.Stop()
	w.stop()
}

// next waits for an event (returned) or a tick (nil), or until ctx ends.
func (w *watcher) next(ctx context.Context) (*pregel.Event, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case ev, ok := <-w.events:
		if !ok {
			// The source closed (shutdown): read the record instead.
			w.events = nil
			w.ticker.Reset(w.poll)
			return nil, nil
		}
		return &ev, nil
	case <-w.ticker.C:
		return nil, nil
	}
}

// pending reports whether events wait to be read.
func (w *watcher) pending() bool { return len(w.events) > 0 }

// get reads a run record for a task the caller already found.
func (s *Server) get(ctx context.Context, id string) (runs.Run, error) {
	r, err := s.svc.Get(ctx, id)
	if errors.Is(err, runs.ErrNotFound) {
		return runs.Run{}, core.NewError(core.ErrTaskNotFound, fmt.Sprintf("task %q not found", id))
	}
	if err != nil {
		return runs.Run{}, s.internal(ctx, "get run", id, err)
	}
	return r, nil
}

// wait returns a run once it is finished or paused, or as it stands after
// limit.
func (s *Server) wait(ctx context.Context, id string, limit time.Duration) (runs.Run, error) {
	w := s.watch(id)
	defer w.close()
	waitCtx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		r, err := s.get(ctx, id)
		if err != nil || settled(r) {
			return r, err
		}
		if _, err := w.next(waitCtx); err != nil {
			if ctx.Err() != nil {
				return runs.Run{}, ctx.Err()
			}
			return s.get(ctx, id)
		}
	}
}

// stream yields a task as it stands, then its status updates (with the
// progress of its nodes when there is an event source) until it finishes
// or pauses: the stream of message/stream and tasks/resubscribe. A
// completed task's artifact comes just before its final status. w watches
// the run from before its record was read, so that nothing is missed.
// first, when set, is the record to start from: the run as the message
// just created or resumed it.
func (s *Server) stream(ctx context.Context, w *watcher, id string, first *runs.Run, yield func(core.Event, error) bool) {
	var r runs.Run
	if first != nil {
		r = *first
	} else {
		var err error
		if r, err = s.get(ctx, id); err != nil {
			yield(nil, err)
			return
		}
	}
	t, err := s.task(ctx, r, taskView{artifacts: true})
	if err != nil {
		yield(nil, err)
		return
	}
	if !yield(t, nil) || settled(r) {
		return
	}
	last := statusKey(r)
	waitedForEnd := false
	for {
		ev, err := w.next(ctx)
		if err != nil {
			return // the client went away
		}
		if ev != nil {
			if up := progress(r, ev); up != nil && !yield(up, nil) {
				return
			}
			switch ev.Type {
			case pregel.EventRunStarted, pregel.EventStepFinished, pregel.EventRunFinished:
			default:
				continue // the record changes at step and run boundaries
			}
		}
		if r, err = s.get(ctx, id); err != nil {
			yield(nil, err)
			return
		}
		if settled(r) && (ev == nil || ev.Type != pregel.EventRunFinished) {
			// The run's remaining events come first: those read ahead, and
			// those its stream has yet to give (the record can show the end
			// before the follower has read the run's last events). Wait for
			// its run_finished event once, for at most one tick.
			if w.pending() {
				continue
			}
			if w.events != nil && !waitedForEnd {
				waitedForEnd = true
				continue
			}
		}
		if key := statusKey(r); key != last {
			last = key
			if r.Status == pregel.RunCompleted {
				a, err := s.artifact(ctx, r, nil)
				if err != nil {
					yield(nil, err)
					return
				}
				if !yield(&core.TaskArtifactUpdateEvent{TaskID: core.TaskID(r.ID), ContextID: contextOf(r), Artifact: a, LastChunk: true}, nil) {
					return
				}
			}
			if !yield(s.statusUpdate(r), nil) {
				return
			}
		}
		if settled(r) {
			return
		}
	}
}

// statusKey changes whenever a run's task status does.
func statusKey(r runs.Run) string {
	state, msg := status(r)
	key := string(state)
	if msg != nil && len(msg.Parts) > 0 {
		key += "|" + msg.Parts[0].Text()
	}
	return key
}

func (s *Server) statusUpdate(r runs.Run) *core.TaskStatusUpdateEvent {
	state, msg := status(r)
	ts := r.UpdatedAt
	return &core.TaskStatusUpdateEvent{
		TaskID:    core.TaskID(r.ID),
		ContextID: contextOf(r),
		Status:    core.TaskStatus{State: state, Message: msg, Timestamp: &ts},
		Metadata:  map[string]any{MetadataKey: s.runMetadata(r)},
	}
}

// progress turns a node's event into a working status update: which node
// of which step started or finished, and how (failures without their
// error, which may carry internals).
func progress(r runs.Run, ev *pregel.Event) *core.TaskStatusUpdateEvent {
	what := "started"
	switch ev.Type {
	case pregel.EventCustom:
		return nodeEvent(r, ev)
	case pregel.EventNodeStarted:
	case pregel.EventNodeFinished:
		if ev.Status == pregel.NodeInterrupted {
			return nil // the input-required status follows
		}
		what = string(ev.Status)
	default:
		return nil
	}
	text := fmt.Sprintf("step %d: %s %s", ev.Step, ev.Node, what)
	ts := ev.Time
	return &core.TaskStatusUpdateEvent{
		TaskID:    core.TaskID(r.ID),
		ContextID: contextOf(r),
		Status: core.TaskStatus{
			State: core.TaskStateWorking,
			Message: &core.Message{
				ID:        fmt.Sprintf("%s-%s-%s", r.ID, ev.TaskID, what),
				Role:      core.MessageRoleAgent,
				TaskID:    core.TaskID(r.ID),
				ContextID: contextOf(r),
				Parts:     core.ContentParts{core.NewTextPart(text)},
				Metadata:  map[string]any{MetadataKey: map[string]any{"event": string(ev.Type), "node": ev.Node, "step": ev.Step}},
			},
			Timestamp: &ts,
		},
	}
}

// nodeEvent turns an event a node sent with pregel.Emit into a working
// status update: its text is the piece of text of a message event
// (pregel.IsMessageEvent with a payload {"text": ...}), else
// "step N: node name: payload"; the metadata carries the event's name,
// node, step and payload.
func nodeEvent(r runs.Run, ev *pregel.Event) *core.TaskStatusUpdateEvent {
	var payload any
	_ = json.Unmarshal(ev.Payload, &payload)
	text := fmt.Sprintf("step %d: %s %s: %s", ev.Step, ev.Node, ev.Name, ev.Payload)
	if m, ok := payload.(map[string]any); ok && pregel.IsMessageEvent(ev.Name) {
		if t, ok := m["text"].(string); ok {
			text = t
		}
	}
	ts := ev.Time
	return &core.TaskStatusUpdateEvent{
		TaskID:    core.TaskID(r.ID),
		ContextID: contextOf(r),
		Status: core.TaskStatus{
			State: core.TaskStateWorking,
			Message: &core.Message{
				ID:        fmt.Sprintf("%s-%s-%s-%d", r.ID, ev.TaskID, ev.Name, ev.Time.UnixNano()),
				Role:      core.MessageRoleAgent,
				TaskID:    core.TaskID(r.ID),
				ContextID: contextOf(r),
				Parts:     core.ContentParts{core.NewTextPart(text)},
				Metadata: map[string]any{MetadataKey: map[string]any{
					"event": string(ev.Type), "name": ev.Name, "node": ev.Node, "step": ev.Step, "payload": payload,
				}},
			},
			Timestamp: &ts,
		},
	}
}
