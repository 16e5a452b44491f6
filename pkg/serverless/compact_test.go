package serverless_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/agent"
	"github.com/superstep/superstep/pkg/agent/bedrock"
	"github.com/superstep/superstep/pkg/agent/bedrock/bedrocktest"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/runs/runstest"
	"github.com/superstep/superstep/pkg/serverless"
)

// TestWatchedTurnCompactsServerless streams an agent's answer, which the
// model (Bedrock's API, faked) sends a word every 20 ms, through the
// stream function while the tick function appends the run's events to
// the table (moto): the watcher gets the words as they are flushed; once
// the turn is over the table holds the answer as one item's event, not
// an item per flush; and a stream resumed with Last-Event-ID from any id
// the watcher got gives exactly the text that followed it, once, and the
// events that followed it.
func TestWatchedTurnCompactsServerless(t *testing.T) {
	t.Parallel()
	const words = 24
	var text strings.Builder
	for i := range words {
		fmt.Fprintf(&text, "w%d ", i)
	}
	answer := strings.TrimSpace(text.String())
	srv := bedrocktest.NewFunc(func(bedrocktest.Request) bedrocktest.Reply {
		r := bedrocktest.Text(answer)
		r.TokenInterval = 20 * time.Millisecond
		return r
	})
	t.Cleanup(srv.Close)
	g, err := agent.New(agent.Config{Name: "compact-agent", Model: bedrock.New(srv.Client(), "m")})
	if err != nil {
		t.Fatal(err)
	}
	s := newStack(t, stackOptions{streaming: true, graphs: []*pregel.Graph{g}, config: func(c *serverless.Config) { c.Events = serverless.EventsOn }})
	s.create("compact-agent", "ct1", "Say it.")
	live := streamEvents(t, s.openStream("/v1/runs/ct1/stream?mode=events").untilEnd(t, 0))
	texts := map[string]string{}
	runstest.AssembleMessages(t, live, texts)
	got := ""
	for k, v := range texts {
		if strings.HasSuffix(k, "/text") {
			got += v
		}
	}
	if got != answer {
		t.Fatalf("the watcher assembled %q; want %q", got, answer)
	}
	pieces := 0
	for _, ev := range live {
		if ev.Name == agent.EventMessageDelta {
			pieces++
		}
	}
	if pieces < 2 {
		t.Fatalf("the watcher got the answer in %d event(s); want it as the model streams it", pieces)
	}
	stored, err := s.app.Service.Runs.(runs.EventReader).EventsSince(t.Context(), "ct1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	kept := 0
	for _, ev := range stored.Events {
		if ev.Name == agent.EventMessageDelta {
			kept++
		}
	}
	if kept != 1 {
		t.Errorf("the table keeps the answer as %d events (%d event items); want 1 (the watcher got %d)", kept, eventItems(t, s, "ct1"), pieces)
	}
	for _, from := range append([]runs.StreamEvent{{}}, live...) {
		msgs := s.openStream("/v1/runs/ct1/stream?mode=events", "Last-Event-ID", fmt.Sprint(from.ID)).untilEnd(t, 0)
		endEvent(t, msgs)
		got, want := map[string]string{}, map[string]string{}
		gotO := runstest.AssembleMessages(t, streamEvents(t, msgs), got)
		var rest []runs.StreamEvent
		for _, ev := range live {
			if ev.ID > from.ID {
				rest = append(rest, ev)
			}
		}
		wantO := runstest.AssembleMessages(t, rest, want)
		if fmt.Sprint(got, gotO) != fmt.Sprint(want, wantO) {
			t.Fatalf("resume from %d: got %q %v; want %q %v", from.ID, got, gotO, want, wantO)
		}
	}
}
