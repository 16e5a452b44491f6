package inspector_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/embedded"
	"github.com/superstep/superstep/pkg/inspector"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

type gateState struct {
	Log []string `json:"log,omitempty" reduce:"append"`
}

// TestInspectorFollowsStream checks that a run page follows the run's SSE
// stream instead of polling, with and without a token (the page reads the
// stream with fetch, which sends the Authorization header): while a node
// waits, the page reads the run record only now and then and shows the
// text the node streamed so far; when the stream drops it reconnects with
// Last-Event-ID and shows nothing twice; and it shows the run completed
// as soon as the node is let go.
func TestInspectorFollowsStream(t *testing.T) {
	for _, tok := range []string{"", token} {
		name := "no token"
		if tok != "" {
			name = "token"
		}
		t.Run(name, func(t *testing.T) { testFollowsStream(t, tok) })
	}
}

// streamReq is what the page sent to open a stream.
type streamReq struct{ auth, lastID string }

func testFollowsStream(t *testing.T, tok string) {
	gate := make(chan struct{})
	b0 := pregel.NewGraph[gateState]("gate")
	b0.AddFunc("wait", func(ctx context.Context, s gateState) (gateState, error) {
		for _, w := range []string{"Hello", " from", " the"} {
			if err := pregel.Emit(ctx, pregel.MessageToken, map[string]string{"text": w}); err != nil {
				return gateState{}, err
			}
		}
		select {
		case <-gate:
		case <-ctx.Done():
			return gateState{}, ctx.Err()
		}
		if err := pregel.Emit(ctx, pregel.MessageToken, map[string]string{"text": " gate."}); err != nil {
			return gateState{}, err
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
	sched := embedded.NewScheduler(embedded.SchedulerConfig{Graphs: reg, Runs: records, Checkpoints: cps, Logger: logger})
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
	var (
		polls atomic.Int32
		mu    sync.Mutex
		reqs  []streamReq
	)
	streams := func() []streamReq {
		mu.Lock()
		defer mu.Unlock()
		return append([]streamReq(nil), reqs...)
	}
	apiHandler, err := api.New(api.Config{Service: svc, Logger: logger, Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	h := inspector.New(apiHandler)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v1/runs/g1":
			polls.Add(1)
		case strings.HasSuffix(r.URL.Path, "/stream"):
			mu.Lock()
			authorized := tok == "" || r.Header.Get("Authorization") == "Bearer "+tok
			if authorized {
				reqs = append(reqs, streamReq{r.Header.Get("Authorization"), r.Header.Get("Last-Event-ID")})
			}
			first := authorized && len(reqs) == 1
			mu.Unlock()
			if first { // the first stream drops after a moment
				// Cancelled, not given a deadline: the API ends a stream
				// early, with nothing sent, when its request's deadline is
				// that close (a Lambda function's timeout).
				ctx, cancel := context.WithCancel(r.Context())
				defer time.AfterFunc(400*time.Millisecond, cancel).Stop()
				defer cancel()
				r = r.WithContext(ctx)
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	if _, _, err := svc.Create(t.Context(), "gate", runs.CreateRequest{RunID: "g1"}); err != nil {
		t.Fatal(err)
	}

	b := newBrowser(t)
	b.run("open the run", chromedp.Navigate(srv.URL+"/#/runs/g1"))
	if tok != "" {
		b.run("give the token", chromedp.WaitVisible(chromedp.CSS(`#token-input`)),
			chromedp.SendKeys(chromedp.CSS(`#token-input`), tok), chromedp.Click(chromedp.CSS(`#token-submit`)))
	}
	b.run("see it run", chromedp.WaitVisible(chromedp.CSS(`#run-status [data-status="running"]`)),
		chromedp.WaitVisible(`//div[@id="stream-output"]//span[@class="text"][. = "Hello from the"]`))
	b.shot("stream-" + strings.ReplaceAll(t.Name()[len("TestInspectorFollowsStream/"):], " ", "-") + "-running")
	time.Sleep(1500 * time.Millisecond) // the first stream drops and the page reconnects
	before := polls.Load()
	time.Sleep(3 * time.Second) // polling would read the run 3 times
	got := streams()
	if n := polls.Load() - before; n > 1 || len(got) < 2 {
		t.Errorf("in 3 s of a waiting run the page read the run %d times and opened %d streams; want at most 1 read, and the stream reopened after it dropped", n, len(got))
	}
	if len(got) >= 2 && (got[1].lastID == "" || got[0].lastID != "") {
		t.Errorf("stream requests had Last-Event-ID %q then %q; want none, then the last event read", got[0].lastID, got[1].lastID)
	}
	for i, r := range got {
		if tok != "" && r.auth != "Bearer "+tok {
			t.Errorf("stream request %d had Authorization %q", i, r.auth)
		}
	}
	close(gate)
	start := time.Now()
	b.run("see it complete", chromedp.WaitVisible(chromedp.CSS(`#run-status [data-status="completed"]`)),
		chromedp.WaitVisible(`//div[@id="stream-output"]//span[@class="text"][. = "Hello from the gate."]`))
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the page showed the run completed %v after it did", d)
	}
	b.clean("stream")
}

// TestChatStreamsText checks that a thread's chat view shows the text its
// active run's model streams as it comes, before the run commits it, and
// that the run's end shows at once.
func TestChatStreamsText(t *testing.T) {
	gate := make(chan struct{})
	b0 := pregel.NewGraph[gateState]("gate")
	b0.AddFunc("wait", func(ctx context.Context, s gateState) (gateState, error) {
		for _, w := range []string{"Thinking", " about", " it"} {
			if err := pregel.Emit(ctx, pregel.MessageToken, map[string]string{"text": w}); err != nil {
				return gateState{}, err
			}
		}
		select {
		case <-gate:
		case <-ctx.Done():
			return gateState{}, ctx.Err()
		}
		return gateState{Log: []string{"done"}}, nil
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
	svc := &runs.Service{Graphs: reg, Runs: records, Checkpoints: cps, Threads: records, Logger: logger}
	sched := embedded.NewScheduler(embedded.SchedulerConfig{Graphs: reg, Runs: records, Checkpoints: cps, Logger: logger, OnStop: svc.RunStopped, StartThreadRun: svc.StartThreadRun})
	svc.Dispatcher = sched
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
	apiHandler, err := api.New(api.Config{Service: svc, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(inspector.New(apiHandler))
	t.Cleanup(srv.Close)
	ctx := t.Context()
	if _, _, err := svc.CreateThread(ctx, runs.CreateThreadRequest{ThreadID: "s1"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.CreateOnThread(ctx, "s1", runs.ThreadRunRequest{Graph: "gate"}); err != nil {
		t.Fatal(err)
	}

	b := newBrowser(t)
	b.run("open the thread", chromedp.Navigate(srv.URL+"/#/threads/s1"),
		chromedp.WaitVisible(`//div[@id="chat-live"]//div[@class="text"][. = "Thinking about it"]`))
	b.shot("chat-streaming")
	close(gate)
	b.run("see it end", chromedp.WaitVisible(chromedp.CSS(`#thread-status [data-status="idle"]`)),
		chromedp.WaitNotVisible(chromedp.CSS(`#chat-live`)))
	b.waitText(`#chat`, `"done"`)
	b.clean("chat stream")
}
