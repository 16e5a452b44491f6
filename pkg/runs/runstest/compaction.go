package runstest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// CompactingEventLog is what RunEventCompaction tests.
type CompactingEventLog interface {
	runs.EventLog
	runs.EventCompactor
}

// StreamedTurn returns the events of a model's streamed answer as a run
// logs them: run and step events, a text answer of words pieces (one
// message_delta each, as agent.MessageDelta), a tool call's start and its
// input in three pieces, then the ends. It also returns the text each
// message member gets (see AssembleMessages).
func StreamedTurn(run string, words int) ([]pregel.Event, map[string]string) {
	at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	ev := func(typ pregel.EventType) pregel.Event {
		at = at.Add(time.Millisecond)
		return pregel.Event{Type: typ, RunID: run, Graph: "agent", Step: 1, Time: at, Node: "model", TaskID: "t1"}
	}
	delta := func(payload string) pregel.Event {
		e := ev(pregel.EventCustom)
		e.Name, e.Payload = pregel.MessageDelta, json.RawMessage(payload)
		return e
	}
	evs := []pregel.Event{ev(pregel.EventRunStarted), ev(pregel.EventStepStarted), ev(pregel.EventNodeStarted)}
	want := map[string]string{}
	for i := range words {
		w := fmt.Sprintf("w%d ", i)
		if i%7 == 3 {
			w = fmt.Sprintf("«%d» \"q\"\n", i) // multi-byte and escaped text
		}
		raw, _ := json.Marshal(w)
		evs = append(evs, delta(`{"message_id":"msg-t1","block":0,"text":`+string(raw)+`}`))
		want["msg-t1/0/text"] += w
	}
	evs = append(evs, delta(`{"message_id":"msg-t1","block":1,"tool_call_id":"c1","tool_name":"search"}`))
	for _, p := range []string{`{"q":`, `"go`, `"}`} {
		raw, _ := json.Marshal(p)
		evs = append(evs, delta(`{"message_id":"msg-t1","block":1,"input_json":`+string(raw)+`}`))
		want["msg-t1/1/input_json"] += p
	}
	fin := ev(pregel.EventNodeFinished)
	fin.Status = pregel.NodeCompleted
	evs = append(evs, fin, ev(pregel.EventStepFinished))
	end := ev(pregel.EventRunFinished)
	end.RunStatus = pregel.RunCompleted
	return append(evs, end), want
}

// AssembleMessages adds to texts the text that the message events of evs
// carry, by message, block and member ("msg-t1/0/text"), and returns the
// types of the other events, in order (custom events as "custom:name").
func AssembleMessages(t testing.TB, evs []runs.StreamEvent, texts map[string]string) []string {
	t.Helper()
	var others []string
	for _, e := range evs {
		if e.Type != pregel.EventCustom || !pregel.IsMessageEvent(e.Name) {
			others = append(others, string(e.Type))
			continue
		}
		var p struct {
			MessageID string  `json:"message_id"`
			Block     int     `json:"block"`
			Text      *string `json:"text"`
			InputJSON *string `json:"input_json"`
		}
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			t.Fatalf("event %d: payload %s: %v", e.ID, e.Payload, err)
		}
		switch {
		case p.Text != nil:
			texts[fmt.Sprintf("%s/%d/text", p.MessageID, p.Block)] += *p.Text
		case p.InputJSON != nil:
			texts[fmt.Sprintf("%s/%d/input_json", p.MessageID, p.Block)] += *p.InputJSON
		default:
			others = append(others, "custom:"+string(e.Payload))
		}
	}
	return others
}

// RunEventCompaction checks the compaction of a streamed answer
// (runs.Compactor, runs.EventCompactor): a writer appends a turn in
// batches of one to three events, as a watched model streams, and compacts
// what its Compactor says. The test then resumes the stream from every id
// the writer's watchers could have seen (each one of the turn, and 0),
// (with pages of a few events from every fifth), and checks that it gets exactly the text
// that followed that id, once, and the other events that followed it, in
// order; that ids increase; and that the log keeps a handful of events
// for the turn, not one per piece. A resume from an id halfway through
// the turn, taken before the compaction, gets the same. A compaction that
// does not match what the log holds changes nothing. newLog returns an
// empty log.
func RunEventCompaction(t *testing.T, newLog func(t *testing.T) CompactingEventLog) {
	ctx := t.Context()
	l := newLog(t)
	const run = "turn"
	evs, want := StreamedTurn(run, 40)
	var (
		logged []runs.StreamEvent // as watchers saw them
		c      runs.Compactor
		comps  int
	)
	resume := func(after int64, limit int) (map[string]string, []string) {
		t.Helper()
		texts := map[string]string{}
		var others []string
		prev := after
		for range 10000 {
			page, err := l.EventsSince(ctx, run, after, limit)
			if err != nil {
				t.Fatalf("EventsSince(%d): %v", after, err)
			}
			if page.First > after+1 {
				t.Fatalf("EventsSince(%d): First = %d: events were dropped", after, page.First)
			}
			if len(page.Events) == 0 {
				return texts, others
			}
			for _, e := range page.Events {
				if e.ID <= prev {
					t.Fatalf("resume from %d: event id %d after %d", after, e.ID, prev)
				}
				prev = e.ID
			}
			others = append(others, AssembleMessages(t, page.Events, texts)...)
			after = page.Events[len(page.Events)-1].ID
		}
		t.Fatal("the stream does not end")
		return nil, nil
	}
	expect := func(after int64) (map[string]string, []string) {
		texts := map[string]string{}
		var rest []runs.StreamEvent
		for _, e := range logged {
			if e.ID > after {
				rest = append(rest, e)
			}
		}
		return texts, AssembleMessages(t, rest, texts)
	}
	check := func(what string, after int64, limit int) {
		t.Helper()
		gotT, gotO := resume(after, limit)
		wantT, wantO := expect(after)
		if fmt.Sprint(gotT) != fmt.Sprint(wantT) || strings.Join(gotO, ",") != strings.Join(wantO, ",") {
			t.Fatalf("%s: resume from %d (pages of %d):\n got %q %v\nwant %q %v", what, after, limit, gotT, gotO, wantT, wantO)
		}
	}
	var midway int64
	for i := 0; i < len(evs); {
		n := 1 + i%3
		if i < 3 {
			n = 3 // run, step and node started together
		}
		batch := runs.CoalesceMessages(evs[i:min(i+n, len(evs))])
		i += n
		got, err := l.AppendEvents(ctx, run, batch)
		if err != nil {
			t.Fatal(err)
		}
		logged = append(logged, got...)
		if len(logged) > 20 && midway == 0 {
			midway = logged[len(logged)-1].ID
			check("before any compaction", midway-5, 4)
		}
		if comp := c.Appended(got); comp != nil {
			if err := l.CompactEvents(ctx, run, *comp); err != nil {
				t.Fatalf("CompactEvents(%d..%d): %v", comp.First, comp.Last, err)
			}
			comps++
		}
	}
	if comp := c.Flush(); comp != nil {
		if err := l.CompactEvents(ctx, run, *comp); err != nil {
			t.Fatal(err)
		}
		comps++
	}
	texts, _ := expect(0)
	if fmt.Sprint(texts) != fmt.Sprint(want) {
		t.Fatalf("the writer logged %q; want %q", texts, want)
	}
	if comps == 0 {
		t.Fatal("the Compactor asked for no compaction")
	}
	last := logged[len(logged)-1].ID
	for after := int64(0); after <= last; after++ {
		limit := 0
		if after%5 == 0 {
			limit = 3
		}
		check("compacted", after, limit)
	}
	check("compacted, whole pages", 0, 0)
	page, err := l.EventsSince(ctx, run, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if page.First != 1 || page.Last != last {
		t.Errorf("First, Last = %d, %d; want 1, %d", page.First, page.Last, last)
	}
	// run, step and node started; the text; the tool call's start and its
	// input; node and step finished; run finished.
	if len(page.Events) != 9 {
		var types []string
		for _, e := range page.Events {
			types = append(types, fmt.Sprintf("%d:%s", e.ID, e.Type))
		}
		t.Errorf("the log keeps %d events for the turn (%v); want 9", len(page.Events), types)
	}

	// A compaction that the log does not match changes nothing.
	bad := runs.Compaction{First: 2, Last: 3, Stored: 1, Events: []runs.StreamEvent{{ID: 3, Event: evs[2], Pieces: []int{0, 0}}}}
	if err := l.CompactEvents(ctx, run, bad); err == nil {
		t.Error("CompactEvents of ids the log holds fewer events for succeeded; want an error")
	}
	check("after a refused compaction", 0, 0)
}
