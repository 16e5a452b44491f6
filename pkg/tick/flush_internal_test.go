package tick

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// countingLog is an EventLog that counts its appends.
type countingLog struct {
	mu      sync.Mutex
	appends [][]pregel.Event
	done    chan struct{} // receives after each append
}

func (l *countingLog) AppendEvents(_ context.Context, _ string, evs []pregel.Event) ([]runs.StreamEvent, error) {
	l.mu.Lock()
	l.appends = append(l.appends, evs)
	l.mu.Unlock()
	l.done <- struct{}{}
	return nil, nil
}

func (l *countingLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.appends)
}

// TestNodeEventAppendedAtOnce: a running node's first event after a
// quiet EventFlush (a model's first token) is appended at once; the
// node's next events wait for the period, and the runtime's own events
// (node_started, step_finished) wait for it too, so that a short step
// stays one append.
func TestNodeEventAppendedAtOnce(t *testing.T) {
	log := &countingLog{done: make(chan struct{}, 10)}
	h := &Handler{Events: log, EventFlush: time.Hour}
	ctx, end := h.startEvents(context.Background(), "r1")
	b := eventsFrom(ctx)

	emit(ctx, pregel.Event{Type: pregel.EventNodeStarted, Node: "model"})
	b.addNodeEvent(pregel.Event{Type: pregel.EventCustom, Name: "token", Node: "model"})
	time.Sleep(50 * time.Millisecond)
	if n := log.count(); n != 0 {
		t.Fatalf("%d appends within the call's first EventFlush; want the events held for one append", n)
	}

	// The last append (here the call's start) was an EventFlush ago.
	b.mu.Lock()
	b.flushed = time.Now().Add(-2 * time.Hour)
	b.mu.Unlock()
	b.mu.Lock()
	if b.timer != nil { // the pending periodic flush: an hour away
		b.timer.Stop()
		b.timer = nil
	}
	b.mu.Unlock()
	sent := time.Now()
	b.addNodeEvent(pregel.Event{Type: pregel.EventCustom, Name: "token", Node: "model"})
	select {
	case <-log.done:
	case <-time.After(10 * time.Second):
		t.Fatal("a node's event after a quiet EventFlush was not appended within 10 s (the period is an hour)")
	}
	t.Logf("appended %v after the event", time.Since(sent).Round(time.Millisecond))
	if got := len(log.appends[0]); got != 3 {
		t.Errorf("the first append holds %d events; want node_started and both tokens", got)
	}

	b.addNodeEvent(pregel.Event{Type: pregel.EventCustom, Name: "token", Node: "model"})
	emit(ctx, pregel.Event{Type: pregel.EventNodeFinished, Node: "model"})
	time.Sleep(50 * time.Millisecond)
	if n := log.count(); n != 1 {
		t.Fatalf("%d appends; the events after the first append must wait for the period (an hour) or the call's end", n)
	}
	end()
	if n := log.count(); n != 2 || len(log.appends[1]) != 2 {
		t.Fatalf("after the call: %d appends (last %d events); want 2, the last with the token and node_finished", n, len(log.appends[n-1]))
	}
}
