package runs

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"

	"github.com/superstep/superstep/pkg/pregel"
)

// Message pieces in the stream: coalescing and compaction.
//
// A model node streams its answer as many small events (pregel.MessageDelta
// or pregel.MessageToken, one per token). Stored one each, a watched
// 1,000-token answer would cost ~300 KB of the log, each event repeating
// its run, graph, step, time, node, task and message. Two things keep what
// stays behind to the answer's text, once:
//
//   - Coalescing (CoalesceMessages): before a writer appends a batch, the
//     consecutive pieces of one message in it become one event (texts
//     joined). They get one id, and watchers see them as one piece.
//
//   - Compaction (Compactor, EventCompactor): pieces that were appended in
//     different batches, and so already have ids watchers may have seen,
//     are replaced in the log, once the message's run of pieces has ended,
//     by one event holding the whole text and the length of the piece each
//     id stood for (StreamEvent.Pieces). Its id is the last of those ids.
//
// Resuming inside a compacted message (Last-Event-ID = one of its ids but
// the last) gives, as one event under the message's last id, exactly the
// text of the pieces after the id resumed from ([StreamEvent.From]): the
// client gets the rest of the message once, never a word twice and never a
// gap; then what followed. A client resuming from an id before the message
// gets the whole message as one event. Before the message is compacted (it
// is still being streamed), a resume gets the pieces one by one, as live
// watchers did. So the text a client assembles is the same, whenever and
// from wherever it resumes.
//
// Two events are pieces of one message, and merge, when both are custom
// events with a message name (pregel.IsMessageEvent) of the same run,
// graph, step, node and task, whose payloads are JSON objects that are
// equal but for one string member, "text" or "input_json", the same in
// both. The agent's deltas of one content block (agent.MessageDelta) are
// such pieces; a tool call's start (it names the tool) is not merged with
// what precedes it. A merged event has the time of its last piece, and
// its payload's members are in sorted order.

// pieceKeys are the payload members whose strings merge.
var pieceKeys = [...]string{"text", "input_json"}

// piece is a message event's payload, parsed: the member key holds a
// string, text; rest are the other members, as they were.
type piece struct {
	key  string
	text string
	rest map[string]json.RawMessage
}

// mayBePiece is a cheap test that excludes most events before a payload
// is parsed.
func mayBePiece(ev *pregel.Event) bool {
	return ev.Type == pregel.EventCustom && pregel.IsMessageEvent(ev.Name) && len(ev.Payload) > 0 && ev.Payload[0] == '{'
}

// parsePiece parses ev as a message piece.
func parsePiece(ev *pregel.Event) (piece, bool) {
	if !mayBePiece(ev) {
		return piece{}, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(ev.Payload, &m) != nil {
		return piece{}, false
	}
	p := piece{rest: m}
	for _, k := range pieceKeys {
		raw, ok := m[k]
		if !ok {
			continue
		}
		if p.key != "" || json.Unmarshal(raw, &p.text) != nil {
			return piece{}, false // two of them, or not a string
		}
		p.key = k
	}
	if p.key == "" {
		return piece{}, false
	}
	delete(m, p.key)
	return p, true
}

// sameMessage reports whether b continues a: the same message, the same
// member streamed.
func sameMessage(a, b *pregel.Event, pa, pb *piece) bool {
	if a.RunID != b.RunID || a.Graph != b.Graph || a.Step != b.Step || a.Node != b.Node || a.TaskID != b.TaskID || a.Name != b.Name ||
		pa.key != pb.key || len(pa.rest) != len(pb.rest) {
		return false
	}
	for k, v := range pa.rest {
		if w, ok := pb.rest[k]; !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

// encode is the payload of p with text as its streamed member.
func (p *piece) encode(text string) json.RawMessage {
	raw, _ := json.Marshal(text)
	p.rest[p.key] = raw
	out, _ := json.Marshal(p.rest) // RawMessages of a valid payload, and a string
	delete(p.rest, p.key)
	return out
}

// parsePieces parses the message pieces among evs (nil entries for the
// others), or returns nil when no two adjacent events may be pieces.
func parsePieces(n int, ev func(int) *pregel.Event) []*piece {
	adjacent := false
	for i := 1; i < n && !adjacent; i++ {
		adjacent = mayBePiece(ev(i-1)) && mayBePiece(ev(i))
	}
	if !adjacent {
		return nil
	}
	ps := make([]*piece, n)
	for i := range n {
		if p, ok := parsePiece(ev(i)); ok {
			ps[i] = &p
		}
	}
	return ps
}

// CoalesceMessages returns evs with each run of consecutive pieces of one
// message merged into one event (see the notes above). It returns evs
// itself when there is nothing to merge, and never changes evs. Writers
// call it on a batch before they append it.
func CoalesceMessages(evs []pregel.Event) []pregel.Event {
	ps := parsePieces(len(evs), func(i int) *pregel.Event { return &evs[i] })
	if ps == nil {
		return evs
	}
	var out []pregel.Event
	for i := 0; i < len(evs); {
		j := i + 1
		for j < len(evs) && ps[i] != nil && ps[j] != nil && sameMessage(&evs[j-1], &evs[j], ps[j-1], ps[j]) {
			j++
		}
		if j == i+1 {
			out = append(out, evs[i])
			i = j
			continue
		}
		var b strings.Builder
		for k := i; k < j; k++ {
			b.WriteString(ps[k].text)
		}
		ev := evs[j-1]
		ev.Payload = ps[i].encode(b.String())
		out = append(out, ev)
		i = j
	}
	if len(out) == len(evs) {
		return evs
	}
	return out
}

// FirstID is the id of the first piece an event stands for: its ID, or
// for an event compacted from several (Pieces), the first of their ids.
func (e StreamEvent) FirstID() int64 {
	if n := len(e.Pieces); n > 1 {
		return e.ID - int64(n) + 1
	}
	return e.ID
}

// From returns the part of e a reader that has the events up to id after
// has not had: e itself when after is below FirstID, else (a compacted
// event, after one of its ids) the event with the text of its pieces after
// it, under the same id. EventLogs give what EventsSince returns through
// it.
func (e StreamEvent) From(after int64) StreamEvent {
	first := e.FirstID()
	if after < first || after >= e.ID {
		return e
	}
	skip := int(after - first + 1)
	p, ok := parsePiece(&e.Event)
	if !ok {
		return e
	}
	off := 0
	for _, n := range e.Pieces[:skip] {
		off += n
	}
	if off > len(p.text) {
		off = len(p.text)
	}
	e.Payload = p.encode(p.text[off:])
	e.Pieces = e.Pieces[skip:]
	return e
}

// LoggedEvent is an event as an EventLog stores it: the event, and the
// pieces of a compacted one (StreamEvent.Pieces) as member "pieces".
type LoggedEvent struct {
	pregel.Event
	Pieces []int `json:"pieces,omitempty"`
}

// EventCompactor is an EventLog that can replace a writer's pieces of a
// message by one event (see the notes above and Compactor). The embedded
// Scheduler and the serverless tick and node handlers use it when their
// log has it.
type EventCompactor interface {
	// CompactEvents replaces the run's events with ids c.First to c.Last
	// by c.Events. It changes nothing and returns an error when the log
	// does not hold c.Stored events for those ids (as after a retention
	// drop).
	CompactEvents(ctx context.Context, runID string, c Compaction) error
}

// Compaction replaces a span of a run's stream by fewer events.
type Compaction struct {
	// First and Last are the ids replaced: whole AppendEvents calls of
	// one writer, one after the other.
	First, Last int64
	// Stored is how many events the log holds for those ids.
	Stored int
	// Events replace them, oldest first, each under the last id it stands
	// for; their ids (FirstID to ID) tile First..Last.
	Events []StreamEvent
}

// maxOpenBatches is how many batches a message's pieces may span before a
// Compactor compacts them, even while the message goes on: it bounds what
// a compaction rewrites and what a Compactor holds.
const maxOpenBatches = 32

// Compactor follows what one writer appends to a run's stream and says
// when the pieces of a message it appended in several batches are to be
// compacted: when the run of pieces ends (an event that does not continue
// it is appended, or the writer stops: Flush), and every maxOpenBatches
// batches while it goes on. A Compactor covers only batches with
// consecutive ids (another writer's batch in between ends the run). The
// zero value is ready to use; it is not safe for concurrent use.
type Compactor struct {
	evs    []StreamEvent // the events of the open batches
	ps     []*piece      // evs parsed: nil for those that are no pieces
	starts []int         // where each open batch starts in evs
}

// Appended tells c the events of an AppendEvents call, with their ids; it
// returns the compaction to make now, if any. The writer calls the log's
// CompactEvents with it, and Reset when that fails.
func (c *Compactor) Appended(logged []StreamEvent) *Compaction {
	if len(logged) == 0 {
		return nil
	}
	var out *Compaction
	if len(c.evs) > 0 && logged[0].FirstID() != c.evs[len(c.evs)-1].ID+1 {
		// Not after the open batches: what they hold is final.
		out = c.compact(true)
		c.Reset()
	}
	c.starts = append(c.starts, len(c.evs))
	c.evs = append(c.evs, logged...)
	for i := range logged {
		var pp *piece
		if p, ok := parsePiece(&logged[i].Event); ok {
			pp = &p
		}
		c.ps = append(c.ps, pp)
	}
	if out != nil {
		c.trim()
		return out
	}
	out = c.compact(len(c.starts) >= maxOpenBatches)
	c.trim()
	return out
}

// Flush returns the compaction of what the open batches hold, the writer
// having stopped (nil when there is nothing to compact), and forgets them.
func (c *Compactor) Flush() *Compaction {
	out := c.compact(true)
	c.Reset()
	return out
}

// Reset forgets the open batches.
func (c *Compactor) Reset() {
	clear(c.evs)
	clear(c.ps)
	c.evs, c.ps, c.starts = c.evs[:0], c.ps[:0], c.starts[:0]
}

// compact returns the compaction of the open batches when a run of two or
// more pieces has ended in them, or, with final, when any has; the open
// batches are then the one batch of the replacement.
func (c *Compactor) compact(final bool) *Compaction {
	ps := c.ps
	type span struct{ i, j int }
	var runs []span
	for i := 0; i < len(c.evs); {
		j := i + 1
		for j < len(c.evs) && ps[i] != nil && ps[j] != nil && sameMessage(&c.evs[j-1].Event, &c.evs[j].Event, ps[j-1], ps[j]) {
			j++
		}
		if j > i+1 {
			runs = append(runs, span{i, j})
		}
		i = j
	}
	if len(runs) == 0 {
		return nil
	}
	if last := runs[len(runs)-1]; !final && last.j == len(c.evs) && len(runs) == 1 {
		return nil // the only run may go on
	}
	comp := &Compaction{First: c.evs[0].FirstID(), Last: c.evs[len(c.evs)-1].ID, Stored: len(c.evs)}
	next := 0
	for _, r := range runs {
		comp.Events = append(comp.Events, c.evs[next:r.i]...)
		var (
			b      strings.Builder
			pieces []int
		)
		for k := r.i; k < r.j; k++ {
			b.WriteString(ps[k].text)
			if len(c.evs[k].Pieces) > 1 {
				pieces = append(pieces, c.evs[k].Pieces...)
			} else {
				pieces = append(pieces, len(ps[k].text))
			}
		}
		ev := c.evs[r.j-1]
		ev.Payload, ev.Pieces = ps[r.i].encode(b.String()), pieces
		comp.Events = append(comp.Events, ev)
		next = r.j
	}
	comp.Events = append(comp.Events, c.evs[next:]...)
	c.evs = append(c.evs[:0], comp.Events...)
	clear(c.ps)
	c.ps = c.ps[:0]
	for i := range c.evs {
		var pp *piece
		if p, ok := parsePiece(&c.evs[i].Event); ok {
			pp = &p
		}
		c.ps = append(c.ps, pp)
	}
	c.starts = append(c.starts[:0], 0)
	return comp
}

// trim forgets the open batches that a run of pieces still going on does
// not reach.
func (c *Compactor) trim() {
	n := len(c.evs)
	if n == 0 || c.ps[n-1] == nil {
		c.Reset()
		return
	}
	// Where the trailing run starts.
	s := n - 1
	for s > 0 && c.ps[s-1] != nil && sameMessage(&c.evs[s-1].Event, &c.evs[s].Event, c.ps[s-1], c.ps[s]) {
		s--
	}
	k := 0
	for k+1 < len(c.starts) && c.starts[k+1] <= s {
		k++
	}
	if k == 0 {
		return
	}
	drop := c.starts[k]
	c.evs = append(c.evs[:0], c.evs[drop:]...)
	c.ps = append(c.ps[:0], c.ps[drop:]...)
	c.starts = c.starts[k:]
	for i := range c.starts {
		c.starts[i] -= drop
	}
}
