package inspector_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/inspector"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

type gateState struct {
	Log []string `json:"log,omitempty" reduce:"append"`
}

// TestInspectorFollowsStream checks that a run page of a server without a
// token follows the run's SSE stream instead of polling: while a node
// waits, the page reads the run record only now and then, and it shows the
// run completed as soon as the node is let go.
func TestInspectorFollowsStream(t *testing.T) {
	gate := make(chan struct{})
	b0 := pregel.NewGraph[gateState]("gate")
	b0.AddFunc("wait", func(ctx context.Context, s gateState) (gateState, error) {
		select {
		case <-gate:
		case <-ctx.Done():
			return gateState{}, ctx.Err()
		}
		return gateState{Log: []string{"wait"}}, nil
	}, pregel.Writes("log"))
	b0.AddEdge(pregel.Start, "wait").AddEdge("wait", pregel.End)
	g, err := b0.Compile()
	if err != nil {
		t.Fatal(err)
	}
	reg, err := runs.NewRegistry(g)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	records, cps := runs.NewMemoryStore(), pregel.NewMemoryStore()
	sched := runs.NewScheduler(runs.SchedulerConfig{Graphs: reg, Runs: records, Checkpoints: cps, Logger: logger})
	if err := sched.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-gate:
		default:
			close(gate)
		}
		_ = sched.Shutdown(context.Background(), time.Second)
	})
	svc := &runs.Service{Graphs: reg, Runs: records, Checkpoints: cps, Dispatcher: sched, Logger: logger}
	var polls, streams atomic.Int32
	h := inspector.New(api.New(api.Config{Service: svc, Logger: logger}))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v1/runs/g1":
			polls.Add(1)
		case strings.HasSuffix(r.URL.Path, "/stream"):
			streams.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	if _, _, err := svc.Create(t.Context(), "gate", runs.CreateRequest{RunID: "g1"}); err != nil {
		t.Fatal(err)
	}

	b := newBrowser(t)
	b.run("open the run", chromedp.Navigate(srv.URL+"/#/runs/g1"),
		chromedp.WaitVisible(chromedp.CSS(`#run-status [data-status="running"]`)))
	time.Sleep(500 * time.Millisecond) // the stream opens
	before := polls.Load()
	time.Sleep(3 * time.Second) // polling would read the run 3 times
	if n := polls.Load() - before; n > 1 || streams.Load() == 0 {
		t.Errorf("in 3 s of a waiting run the page read the run %d times and opened %d streams; want at most 1 read, and the stream", n, streams.Load())
	}
	close(gate)
	start := time.Now()
	b.run("see it complete", chromedp.WaitVisible(chromedp.CSS(`#run-status [data-status="completed"]`)))
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the page showed the run completed %v after it did", d)
	}
	b.clean("stream")
}
