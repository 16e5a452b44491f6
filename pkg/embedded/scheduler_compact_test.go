package embedded_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/agent"
	"github.com/superstep/superstep/pkg/embedded"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/runs/runstest"
	"github.com/superstep/superstep/pkg/store/sqlite"
)

// pacedModel answers every request with words words, streamed one every
// gap, as a model served over the network does.
type pacedModel struct {
	words int
	gap   time.Duration
}

func (m pacedModel) answer() string {
	var b strings.Builder
	for i := range m.words {
		fmt.Fprintf(&b, "word%d ", i)
	}
	return b.String()
}

func (m pacedModel) Generate(ctx context.Context, req *agent.Request) (*agent.Response, error) {
	return &agent.Response{Message: agent.Message{Role: agent.RoleAssistant, Content: []agent.Block{{Text: m.answer()}}}, StopReason: agent.StopEndTurn}, nil
}

func (m pacedModel) Stream(ctx context.Context, req *agent.Request, onDelta func(agent.Delta)) (*agent.Response, error) {
	resp, _ := m.Generate(ctx, req)
	for w := range strings.SplitAfterSeq(m.answer(), " ") {
		if w == "" {
			continue
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(m.gap):
		}
		onDelta(agent.Delta{Text: w})
	}
	return resp, nil
}

// TestSchedulerCompactsWatchedTurn checks a watched agent turn on the
// memory and SQLite logs: a live watcher gets the answer's words as the
// model streams them (one event each: they come slower than the batcher
// gathers); once the turn is over the log holds the answer as one event,
// not one per word; and a client that resumes from any id the watcher
// got (Last-Event-ID) gets exactly the text that followed it, once, and
// the events that followed it.
func TestSchedulerCompactsWatchedTurn(t *testing.T) {
	model := pacedModel{words: 40, gap: 8 * time.Millisecond}
	for _, tt := range []struct {
		name string
		log  func(t *testing.T) runs.EventLog
	}{
		{"memory", func(*testing.T) runs.EventLog { return runs.NewMemoryEventLog(0, 0) }},
		{"sqlite", func(t *testing.T) runs.EventLog {
			st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "superstep.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return st
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g, err := agent.New(agent.Config{Model: model})
			if err != nil {
				t.Fatal(err)
			}
			reg, err := runs.NewRegistry(g)
			if err != nil {
				t.Fatal(err)
			}
			log := slog.New(slog.DiscardHandler)
			st, cps, events := runs.NewMemoryStore(), pregel.NewMemoryStore(), tt.log(t)
			sched := embedded.NewScheduler(embedded.SchedulerConfig{Graphs: reg, Runs: st, Checkpoints: cps, Events: events, Logger: log})
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(func() {
				cancel()
				ctx, stop := context.WithTimeout(context.Background(), 5*time.Second)
				defer stop()
				_ = sched.WaitIdle(ctx)
			})
			if err := sched.Start(ctx); err != nil {
				t.Fatal(err)
			}
			svc := &runs.Service{Graphs: reg, Runs: st, Checkpoints: cps, Dispatcher: sched, Logger: log}

			cur := runs.NewCursor(sched, "r", 0)
			defer cur.Close()
			if _, _, err := svc.Create(t.Context(), "agent", runs.CreateRequest{RunID: "r", Input: agent.TextInput("hi")}); err != nil {
				t.Fatal(err)
			}
			wait, stop := context.WithTimeout(t.Context(), 10*time.Second)
			defer stop()
			var live []runs.StreamEvent
			for {
				ev, err := cur.Next(wait)
				if err != nil {
					t.Fatalf("after %v: %v", types(live), err)
				}
				live = append(live, ev)
				if ev.Type == pregel.EventRunFinished {
					break
				}
			}
			texts := map[string]string{}
			runstest.AssembleMessages(t, live, texts)
			if got := texts["msg-"+taskOf(live)+"/0/text"]; got != model.answer() {
				t.Fatalf("the watcher assembled %q; want %q", got, model.answer())
			}
			deltas := 0
			for _, ev := range live {
				if ev.Name == agent.EventMessageDelta {
					deltas++
				}
			}
			if deltas < model.words/4 {
				t.Errorf("the watcher got the answer in %d events; want it as the model streams it (%d words)", deltas, model.words)
			}
			if err := sched.WaitIdle(t.Context()); err != nil {
				t.Fatal(err)
			}

			stored := allEvents(t, sched, "r")
			kept := 0
			for _, ev := range stored {
				if ev.Name == agent.EventMessageDelta {
					kept++
				}
			}
			if kept != 1 {
				t.Errorf("the log keeps the answer as %d events; want 1 (of %d seen live)", kept, deltas)
			}
			for _, from := range append([]runs.StreamEvent{{}}, live...) {
				after := from.ID
				rest := allEventsAfter(t, sched, "r", after)
				got := map[string]string{}
				gotOthers := runstest.AssembleMessages(t, rest, got)
				want := map[string]string{}
				var tail []runs.StreamEvent
				for _, ev := range live {
					if ev.ID > after {
						tail = append(tail, ev)
					}
				}
				wantOthers := runstest.AssembleMessages(t, tail, want)
				if fmt.Sprint(got) != fmt.Sprint(want) || fmt.Sprint(gotOthers) != fmt.Sprint(wantOthers) {
					t.Fatalf("resume from %d: got %q %v; want %q %v", after, got, gotOthers, want, wantOthers)
				}
			}
		})
	}
}

// taskOf is the task id of the first message event of evs.
func taskOf(evs []runs.StreamEvent) string {
	for _, ev := range evs {
		if ev.Name == agent.EventMessageDelta {
			return ev.TaskID
		}
	}
	return ""
}

// allEventsAfter reads the run's stream after an id through a Cursor, as
// a stream resumed with Last-Event-ID does, to its run_finished.
func allEventsAfter(t *testing.T, src runs.EventReader, id string, after int64) []runs.StreamEvent {
	t.Helper()
	cur := runs.NewCursor(src, id, after)
	defer cur.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	var out []runs.StreamEvent
	for len(out) == 0 || out[len(out)-1].Type != pregel.EventRunFinished {
		if after > 0 && len(out) == 0 && !cur.Pending() {
			// Resumed from the last event: nothing follows.
			if ev, err := cur.NextWithin(ctx, 50*time.Millisecond); err == nil {
				out = append(out, ev)
				continue
			}
			return nil
		}
		ev, err := cur.Next(ctx)
		if err != nil {
			t.Fatalf("resume from %d, after %v: %v", after, types(out), err)
		}
		out = append(out, ev)
	}
	return out
}
