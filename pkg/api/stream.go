package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// DefaultHeartbeat is how often a stream with nothing to send writes a
// comment line, so that proxies keep the connection open.
const DefaultHeartbeat = 15 * time.Second

// Stream modes: what GET /v1/runs/{run_id}/stream sends (several may be
// asked for at once).
const (
	// ModeValues: the run's state (every channel) at its start and after
	// each committed step, as event "values".
	ModeValues = "values"
	// ModeUpdates: each node's writes as it finishes, as event "updates".
	ModeUpdates = "updates"
	// ModeMessages: the pieces of a model's answer that nodes emit under
	// the names of pregel.IsMessageEvent, as event "messages".
	ModeMessages = "messages"
	// ModeCustom: the other events nodes emit with pregel.Emit, as event
	// "custom".
	ModeCustom = "custom"
	// ModeEvents: every event of the run, each under its own type
	// (run_started, step_started, node_started, custom, node_finished,
	// state_updated, step_finished, interrupted, run_finished).
	ModeEvents = "events"
)

var allModes = []string{ModeValues, ModeUpdates, ModeMessages, ModeCustom, ModeEvents}

// StreamModes is a set of stream modes: in JSON, a list of modes or one
// string of comma-separated modes.
type StreamModes []string

// UnmarshalJSON accepts ["values", "updates"] and "values,updates".
func (m *StreamModes) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err == nil {
		*m = splitModes(s)
		return nil
	}
	var list []string
	if err := json.Unmarshal(data, &list); err != nil {
		return errors.New(`stream_mode must be a list of modes or a string such as "values,updates"`)
	}
	*m = nil
	for _, s := range list {
		*m = append(*m, splitModes(s)...)
	}
	return nil
}

func splitModes(s string) []string {
	var out []string
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// modeSet is a parsed StreamModes.
type modeSet struct{ values, updates, messages, custom, events bool }

// parseModes checks modes; none means values.
func parseModes(modes []string) (modeSet, error) {
	var m modeSet
	if len(modes) == 0 {
		m.values = true
		return m, nil
	}
	for _, mode := range modes {
		switch mode {
		case ModeValues:
			m.values = true
		case ModeUpdates:
			m.updates = true
		case ModeMessages:
			m.messages = true
		case ModeCustom:
			m.custom = true
		case ModeEvents:
			m.events = true
		default:
			return m, invalidf("unknown stream mode %q; modes are %s (several may be given, separated by commas)", mode, strings.Join(allModes, ", "))
		}
	}
	return m, nil
}

// StreamUpdate is the data of an "updates" event: a node's writes.
type StreamUpdate struct {
	Step       int                        `json:"step"`
	Node       string                     `json:"node"`
	TaskID     string                     `json:"task_id"`
	Status     pregel.NodeStatus          `json:"status"`
	Writes     map[string]json.RawMessage `json:"writes,omitempty"`
	Error      string                     `json:"error,omitempty"`
	Interrupts []pregel.InterruptInfo     `json:"interrupts,omitempty"`
}

// StreamNodeEvent is the data of a "messages" or "custom" event: what a
// node sent with pregel.Emit.
type StreamNodeEvent struct {
	Step    int             `json:"step"`
	Node    string          `json:"node"`
	TaskID  string          `json:"task_id"`
	Name    string          `json:"name"`
	Payload json.RawMessage `json:"payload"`
}

// StreamEnd is the data of the "end" event that closes every stream: how
// the run stopped, as its record shows.
type StreamEnd struct {
	RunID       string                 `json:"run_id"`
	Status      pregel.RunStatus       `json:"status"`
	Step        int                    `json:"step"`
	Error       string                 `json:"error,omitempty"`
	FailedNode  string                 `json:"failed_node,omitempty"`
	DrainReason string                 `json:"drain_reason,omitempty"`
	Interrupts  []pregel.InterruptInfo `json:"interrupts,omitempty"`
}

// StreamReset is the data of a "reset" event: events the client should
// have received next are no longer kept (see the retention in README.md),
// and the stream goes on from the oldest kept, FirstID. A client that
// builds state from the events starts again from there; a client in
// "values" mode gets the full state at the next step anyway.
type StreamReset struct {
	Reason  string `json:"reason"`
	FirstID int64  `json:"first_id"`
}

// streamGrace is how long a stream waits for the last events of a run
// whose record shows it stopped before its stream does.
const streamGrace = time.Second

// StreamDeadlineMargin is how long before its request's deadline a stream
// ends: a server that gives requests a deadline (a Lambda function's
// timeout, see pkg/serverless) has the stream end cleanly, with a comment
// saying so, rather than be cut off; the client reconnects with the
// Last-Event-ID of the last event it got.
const StreamDeadlineMargin = time.Second

// streamWriteTimeout bounds each write to a stream: a client that reads
// nothing for that long is disconnected (it resumes with Last-Event-ID).
const streamWriteTimeout = 30 * time.Second

// streamRun serves GET /v1/runs/{run_id}/stream.
func (h *Handler) streamRun(w http.ResponseWriter, r *http.Request) error {
	if err := allowedQuery(r, "mode", "last_event_id"); err != nil {
		return err
	}
	modes, err := parseModes(splitModes(r.URL.Query().Get("mode")))
	if err != nil {
		return err
	}
	after, err := lastEventID(r)
	if err != nil {
		return err
	}
	id := r.PathValue("run_id")
	if _, err := h.svc.Get(r.Context(), id); err != nil {
		return runErr(id, err)
	}
	return h.stream(w, r, id, modes, after)
}

// lastEventID reads where a client resumes: the Last-Event-ID header (set
// by EventSource on reconnects), else the last_event_id parameter.
func lastEventID(r *http.Request) (int64, error) {
	name, s := "Last-Event-ID header", r.Header.Get("Last-Event-ID")
	if s == "" {
		name, s = "last_event_id parameter", r.URL.Query().Get("last_event_id")
	}
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 {
		return 0, invalidf("%s %q must be the id of an event of the stream (a whole number, 0 for the start)", name, s)
	}
	return n, nil
}

// errNoStreams answers streams on a server without an event source.
var errNoStreams = &problem{Status: http.StatusNotImplemented, Type: typeNotImplemented, Title: "Not implemented",
	Detail: "this server does not stream runs; poll GET /v1/runs/{run_id} instead"}

const typeNotImplemented = "urn:superstep:problem:not-implemented"

// stream answers with the run's stream after the event id after, until
// the run stops or the client goes away.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, id string, modes modeSet, after int64) error {
	if h.events == nil {
		return errNoStreams
	}
	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("X-Accel-Buffering", "no") // nginx: do not buffer
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return nil
	}
	s := &sseStream{h: h, w: w, rc: http.NewResponseController(w), r: r, id: id, modes: modes}
	defer func() { _ = s.rc.SetWriteDeadline(time.Time{}) }()
	if err := s.comment("stream of run " + id); err != nil {
		return nil
	}
	s.run(after)
	return nil
}

// sseStream is one stream being served.
type sseStream struct {
	h     *Handler
	w     http.ResponseWriter
	rc    *http.ResponseController
	r     *http.Request
	id    string
	modes modeSet
	buf   bytes.Buffer
	// unflushed: written since the last flush.
	unflushed bool
}

func (s *sseStream) run(after int64) {
	ctx := s.r.Context()
	cur := runs.NewCursor(s.h.events, s.id, after)
	cur.Poll = s.h.poll
	defer cur.Close()
	var (
		last      *runs.StreamEvent // the last event read
		check     = true            // read the record
		idle      bool              // the last wait for an event timed out
		graceEnds time.Time         // the record is final; the stream should be soon
		beat      = time.Now().Add(s.h.heartbeat)
		endAt     time.Time // the request's deadline, less the margin
	)
	if d, ok := ctx.Deadline(); ok {
		endAt = d.Add(-StreamDeadlineMargin)
	}
	for {
		if !endAt.IsZero() && !time.Now().Before(endAt) {
			_ = s.comment("the stream ends here, before the server's time limit; reconnect with the Last-Event-ID of the last event received to go on")
			return
		}
		if check {
			check = false
			rec, err := s.h.svc.Get(ctx, s.id)
			if err != nil {
				s.fail(err)
				return
			}
			if stoppedStatus(rec.Status) {
				// The run has stopped: end once its stream has too, with
				// the run_finished event that matches the record. Should
				// that not come (a paused run cancelled without running
				// again), end after a grace period without events.
				caughtUp := finishedAt(last, &rec)
				if graceEnds.IsZero() {
					graceEnds = time.Now().Add(streamGrace)
				}
				if caughtUp || (idle && !time.Now().Before(graceEnds)) {
					_ = s.send("end", "", StreamEnd{RunID: rec.ID, Status: rec.Status, Step: rec.Step, Error: rec.Error,
						FailedNode: rec.FailedNode, DrainReason: rec.DrainReason, Interrupts: rec.Interrupts})
					return
				}
				// Look again at the next run_finished, or when idle.
			} else {
				graceEnds = time.Time{}
			}
		}
		wait := time.Until(beat)
		if !graceEnds.IsZero() {
			wait = min(wait, max(time.Until(graceEnds), 10*time.Millisecond))
		}
		if !endAt.IsZero() {
			wait = min(wait, max(time.Until(endAt), 0))
		}
		ev, err := cur.NextWithin(ctx, wait)
		idle = errors.Is(err, runs.ErrNoEvent)
		var dropped *runs.EventsDroppedError
		switch {
		case ctx.Err() != nil:
			return // the client went away
		case errors.As(err, &dropped):
			reason := fmt.Sprintf("events %d to %d are no longer kept (the server keeps each run's newest events); the stream goes on from event %d", dropped.After+1, dropped.First-1, dropped.First)
			if dropped.After >= dropped.First {
				reason = fmt.Sprintf("event %d is not in this run's stream; the stream starts again from event %d", dropped.After, dropped.First)
			}
			if s.send("reset", "", StreamReset{Reason: reason, FirstID: dropped.First}) != nil {
				return
			}
			continue
		case errors.Is(err, runs.ErrWatchClosed):
			// The server is shutting down: end here, and let the client
			// reconnect (to the next server) from its last event.
			_ = s.comment("the server is shutting down; reconnect with the Last-Event-ID of the last event received")
			return
		case idle:
			check = check || !graceEnds.IsZero()
			if !time.Now().Before(beat) {
				if s.comment("heartbeat") != nil {
					return
				}
				beat = time.Now().Add(s.h.heartbeat)
				check = true // now and then, in case an event was missed
			}
			continue
		case err != nil:
			s.fail(err)
			return
		}
		last = &ev
		if ev.Type == pregel.EventRunFinished {
			check = true
		}
		// Events read from the log in a batch go out in one flush.
		if s.event(ctx, ev, !cur.Pending()) != nil {
			return
		}
	}
}

// finishedAt reports whether ev is the run_finished event of the stop
// that the stopped run's record rec shows. Status and step alone do not
// tell: a run resumed and interrupted again at the same step (a question
// asked again) had an earlier run_finished just like it, and the stream
// replaying that one must go on to the events of the resumed execution.
// The length of the record's history at the stop tells them apart; events
// logged without it (by an older version) are matched on status and step.
func finishedAt(ev *runs.StreamEvent, rec *runs.Run) bool {
	if ev == nil || ev.Type != pregel.EventRunFinished || ev.RunStatus != rec.Status || ev.Step != rec.Step {
		return false
	}
	return ev.History == 0 || ev.History == rec.HistoryLen()
}

// stoppedStatus reports whether a run with status st has stopped (for
// now: interrupted and drained runs may be resumed).
func stoppedStatus(st pregel.RunStatus) bool {
	return st != pregel.RunPending && st != pregel.RunRunning
}

// event writes what the modes make of ev; the last message carries ev's
// id, so that a client resuming from it has had all of them.
func (s *sseStream) event(ctx context.Context, ev runs.StreamEvent, flush bool) error {
	type msg struct {
		name string
		data any
	}
	var out []msg
	switch ev.Type {
	case pregel.EventRunStarted, pregel.EventStepFinished:
		if s.modes.values {
			cp, err := s.h.svc.Checkpoint(ctx, s.id, ev.Step)
			if err == nil {
				out = append(out, msg{ModeValues, cp.Values})
			} else {
				s.h.log.WarnContext(ctx, "api: stream values: load checkpoint", "run_id", s.id, "step", ev.Step, "error", err)
			}
		}
	case pregel.EventNodeFinished:
		if s.modes.updates {
			out = append(out, msg{ModeUpdates, StreamUpdate{Step: ev.Step, Node: ev.Node, TaskID: ev.TaskID, Status: ev.Status, Writes: ev.Writes, Error: ev.Error, Interrupts: ev.Interrupts}})
		}
	case pregel.EventCustom:
		ne := StreamNodeEvent{Step: ev.Step, Node: ev.Node, TaskID: ev.TaskID, Name: ev.Name, Payload: ev.Payload}
		if pregel.IsMessageEvent(ev.Name) {
			if s.modes.messages {
				out = append(out, msg{ModeMessages, ne})
			}
		} else if s.modes.custom {
			out = append(out, msg{ModeCustom, ne})
		}
	}
	if s.modes.events {
		out = append(out, msg{string(ev.Type), ev})
	}
	s.buf.Reset()
	for i, m := range out {
		id := ""
		if i == len(out)-1 {
			id = strconv.FormatInt(ev.ID, 10)
		}
		if err := s.format(m.name, id, m.data); err != nil {
			return err
		}
	}
	return s.write(flush)
}

// format appends one message to the buffer.
func (s *sseStream) format(name, id string, data any) error {
	raw, err := json.Marshal(data)
	if err != nil {
		s.h.log.Error("api: stream: encode event", "run_id", s.id, "event", name, "error", err)
		return err
	}
	if id != "" {
		s.buf.WriteString("id: ")
		s.buf.WriteString(id)
		s.buf.WriteByte('\n')
	}
	s.buf.WriteString("event: ")
	s.buf.WriteString(name)
	s.buf.WriteString("\ndata: ")
	s.buf.Write(raw) // compact JSON holds no line breaks
	s.buf.WriteString("\n\n")
	return nil
}

// send writes one message.
func (s *sseStream) send(name, id string, data any) error {
	s.buf.Reset()
	if err := s.format(name, id, data); err != nil {
		return err
	}
	return s.flush()
}

// comment writes a comment line, which clients ignore.
func (s *sseStream) comment(text string) error {
	s.buf.Reset()
	s.buf.WriteString(": ")
	s.buf.WriteString(text)
	s.buf.WriteString("\n\n")
	return s.flush()
}

// fail ends the stream on an error of the server: logged, and told to
// the client as an "error" event; it may reconnect.
func (s *sseStream) fail(err error) {
	s.h.log.ErrorContext(s.r.Context(), "api: stream failed", "run_id", s.id, "error", err)
	_ = s.send("error", "", Problem{Type: typeInternal, Title: "Internal server error", Status: http.StatusInternalServerError,
		Detail: "the stream stopped on a server error; reconnect with the Last-Event-ID of the last event received", Instance: s.r.URL.Path})
}

func (s *sseStream) flush() error { return s.write(true) }

// write writes the buffer, and flushes what was written (now or before)
// when flush is set.
func (s *sseStream) write(flush bool) error {
	if s.buf.Len() > 0 {
		_ = s.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		if _, err := s.w.Write(s.buf.Bytes()); err != nil {
			return err
		}
		s.unflushed = true
	}
	if !flush || !s.unflushed {
		return nil
	}
	s.unflushed = false
	return s.rc.Flush()
}

// createStreamModes checks the stream fields of a request to create a
// run.
func createStreamModes(req CreateRunRequest) (modeSet, error) {
	if !req.Stream && len(req.StreamMode) > 0 {
		return modeSet{}, invalidf(`stream_mode is given without "stream": true; add it to have the run's stream as the answer`)
	}
	return parseModes(req.StreamMode)
}
