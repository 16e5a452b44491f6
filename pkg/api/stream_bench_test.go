package api_test

import (
	"fmt"
	"io"
	"testing"
)

// BenchmarkStreamEvents measures events per second through one SSE
// connection (mode events) on a loopback listener, from the API over a
// SQLite store and the Scheduler:
//
//   - replay: the stream of a finished run of 10,000 token events, read
//     from the event log;
//   - live: a new run of 10,000 token events per iteration, streamed as it
//     runs (the run's own time included).
func BenchmarkStreamEvents(b *testing.B) {
	const tokens = 10000
	b.Run("replay", func(b *testing.B) {
		e := newStreamEnv(b)
		e.create("chatty", "bench", fmt.Sprintf(`{"n": %d}`, tokens))
		if err := e.sched.WaitIdle(b.Context()); err != nil {
			b.Fatal(err)
		}
		var events int
		for b.Loop() {
			events += readStream(b, e, "bench")
		}
		b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	})
	b.Run("live", func(b *testing.B) {
		e := newStreamEnv(b)
		var events, n int
		for b.Loop() {
			n++
			id := fmt.Sprint("live-", n)
			e.create("chatty", id, fmt.Sprintf(`{"n": %d}`, tokens))
			events += readStream(b, e, id)
		}
		b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	})
}

// readStream reads a run's stream to its end and returns its events.
func readStream(b *testing.B, e *streamEnv, id string) int {
	c := e.stream(id, "mode=events")
	n := 0
	for {
		m, err := c.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		if m.id != "" {
			n++
		}
	}
	c.resp.Body.Close()
	if n < 10000 {
		b.Fatalf("stream of %s: %d events", id, n)
	}
	return n
}
