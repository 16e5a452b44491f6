package runs_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// polledLog is a log without live events (as on DynamoDB): a cursor
// polls it. It counts the reads.
type polledLog struct {
	log   *runs.MemoryEventLog
	reads atomic.Int64
}

func (p *polledLog) EventsSince(ctx context.Context, runID string, after int64, limit int) (runs.EventPage, error) {
	p.reads.Add(1)
	return p.log.EventsSince(ctx, runID, after, limit)
}

// TestCursorPollsFastWhileANodeRuns: a cursor over a polled log reads it
// every FastPoll while a node of the run is running (its node_started
// given, not its node_finished), so that a model's first token waits
// little for the read, and every Poll otherwise.
func TestCursorPollsFastWhileANodeRuns(t *testing.T) {
	ctx := context.Background()
	src := &polledLog{log: runs.NewMemoryEventLog(0, 0)}
	appendEv := func(ev pregel.Event) {
		t.Helper()
		if _, err := src.log.AppendEvents(ctx, "r1", []pregel.Event{ev}); err != nil {
			t.Fatal(err)
		}
	}
	cur := runs.NewCursor(src, "r1", 0)
	defer cur.Close()
	cur.Poll, cur.FastPoll = time.Hour, 10*time.Millisecond
	// readsWhileWaiting is how many reads a wait of d with no new event
	// makes.
	readsWhileWaiting := func(d time.Duration) int64 {
		t.Helper()
		before := src.reads.Load()
		if _, err := cur.NextWithin(ctx, d); !errors.Is(err, runs.ErrNoEvent) {
			t.Fatalf("NextWithin: %v; want ErrNoEvent", err)
		}
		return src.reads.Load() - before
	}
	appendEv(pregel.Event{Type: pregel.EventStepStarted, Step: 1})
	if ev, err := cur.Next(ctx); err != nil || ev.Type != pregel.EventStepStarted {
		t.Fatalf("Next: %+v, %v", ev, err)
	}
	if n := readsWhileWaiting(300 * time.Millisecond); n > 1 {
		t.Errorf("no node running: %d reads in 300 ms with Poll an hour; want at most 1", n)
	}

	appendEv(pregel.Event{Type: pregel.EventNodeStarted, Step: 1, Node: "model"})
	if ev, err := cur.Next(ctx); err != nil || ev.Type != pregel.EventNodeStarted {
		t.Fatalf("Next: %+v, %v", ev, err)
	}
	if n := readsWhileWaiting(300 * time.Millisecond); n < 3 {
		t.Errorf("a node running: %d reads in 300 ms with FastPoll 10 ms; want the log polled fast", n)
	}

	appendEv(pregel.Event{Type: pregel.EventNodeFinished, Step: 1, Node: "model", Status: pregel.NodeCompleted})
	if ev, err := cur.Next(ctx); err != nil || ev.Type != pregel.EventNodeFinished {
		t.Fatalf("Next: %+v, %v", ev, err)
	}
	if n := readsWhileWaiting(300 * time.Millisecond); n > 1 {
		t.Errorf("the node finished: %d reads in 300 ms; want the slow poll again", n)
	}
}
