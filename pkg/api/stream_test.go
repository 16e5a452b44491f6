package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/embedded"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/store/sqlite"
)

// fanState is the state of the streaming test graphs.
type fanState struct {
	N       int      `json:"n"`
	Results []int    `json:"results,omitempty" reduce:"append"`
	Total   int      `json:"total,omitempty"`
	Text    []string `json:"text,omitempty" reduce:"append"`
	// Pad is the size of a padding text in each token event.
	Pad int `json:"pad,omitempty"`
}

// streamEnv is the API over a SQLite store and an embedded Scheduler on a
// loopback listener, as `superstep dev` serves it.
type streamEnv struct {
	t     testing.TB
	srv   *httptest.Server
	store *sqlite.Store
	sched *embedded.Scheduler
	svc   *runs.Service
	// gate holds the "gated" graph's node until closed; emitted is closed
	// when that node has emitted its event.
	gate    chan struct{}
	emitted chan struct{}
	token   string
	// deadline, if set, is the deadline the server gives each request
	// (as a Lambda function's timeout does).
	deadline time.Duration
}

type streamOption func(*api.Config, *sqlite.Store)

// streamDeadline gives each request a deadline d after it starts.
func streamDeadline(e *streamEnv, d time.Duration) streamOption {
	return func(*api.Config, *sqlite.Store) { e.deadline = d }
}

func streamToken(tok string) streamOption {
	return func(c *api.Config, _ *sqlite.Store) { c.Token = tok }
}

func streamHeartbeat(d time.Duration) streamOption {
	return func(c *api.Config, _ *sqlite.Store) { c.Heartbeat = d }
}

func streamRetention(n int) streamOption {
	return func(_ *api.Config, s *sqlite.Store) { s.SetEventRetention(n) }
}

func newStreamEnv(t testing.TB, opts ...streamOption) *streamEnv {
	t.Helper()
	return newStreamEnvWith(t, &streamEnv{}, opts...)
}

// newStreamEnvWith is newStreamEnv on e, which opts may refer to.
func newStreamEnvWith(t testing.TB, e *streamEnv, opts ...streamOption) *streamEnv {
	t.Helper()
	e.t, e.gate, e.emitted = t, make(chan struct{}), make(chan struct{})
	var once sync.Once

	fan := pregel.NewGraph[fanState]("fan")
	fan.AddFunc("split", func(context.Context, fanState) (fanState, error) { return fanState{}, nil })
	fan.AddFunc("work", func(ctx context.Context, s fanState) (fanState, error) {
		i, err := pregel.Arg[int](ctx)
		if err != nil {
			return fanState{}, err
		}
		_ = pregel.Emit(ctx, "progress", map[string]int{"item": i})
		_ = pregel.Emit(ctx, pregel.MessageToken, map[string]string{"text": fmt.Sprint("t", i)})
		return fanState{Results: []int{i}}, nil
	}, pregel.Writes("results"))
	fan.AddFunc("collect", func(_ context.Context, s fanState) (fanState, error) {
		return fanState{Total: len(s.Results)}, nil
	}, pregel.Writes("total"))
	fan.AddEdge(pregel.Start, "split")
	fan.AddFanOut("split", "work", func(_ context.Context, s fanState) ([]any, error) {
		items := make([]any, s.N)
		for i := range items {
			items[i] = i
		}
		return items, nil
	})
	fan.AddEdge("work", "collect").AddEdge("collect", pregel.End)

	gated := pregel.NewGraph[fanState]("gated")
	gated.AddFunc("wait", func(ctx context.Context, s fanState) (fanState, error) {
		_ = pregel.Emit(ctx, "progress", map[string]string{"state": "waiting"})
		once.Do(func() { close(e.emitted) })
		select {
		case <-e.gate:
		case <-ctx.Done():
			return fanState{}, ctx.Err()
		}
		return fanState{Text: []string{"opened"}}, nil
	}, pregel.Writes("text"))
	gated.AddFunc("chat", func(ctx context.Context, s fanState) (fanState, error) {
		pad := strings.Repeat("x", s.Pad)
		for i := range s.N {
			_ = pregel.Emit(ctx, pregel.MessageToken, map[string]any{"i": i, "pad": pad})
		}
		return fanState{Text: []string{"chatted"}}, nil
	}, pregel.Writes("text"))
	gated.AddEdge(pregel.Start, "wait").AddEdge("wait", "chat").AddEdge("chat", pregel.End)

	chatty := pregel.NewGraph[fanState]("chatty")
	chatty.AddFunc("chat", func(ctx context.Context, s fanState) (fanState, error) {
		for i := range s.N {
			_ = pregel.Emit(ctx, pregel.MessageToken, map[string]int{"i": i})
		}
		return fanState{Text: []string{"chatted"}}, nil
	}, pregel.Writes("text"))
	chatty.AddEdge(pregel.Start, "chat").AddEdge("chat", pregel.End)

	// twice asks two questions in one node: answering the first, the run
	// is interrupted again at the same step.
	twice := pregel.NewGraph[fanState]("twice")
	twice.AddFunc("ask", func(ctx context.Context, s fanState) (fanState, error) {
		name, err := pregel.Interrupt[string](ctx, map[string]string{"question": "name?"})
		if err != nil {
			return fanState{}, err
		}
		city, err := pregel.Interrupt[string](ctx, map[string]string{"question": "city?"})
		if err != nil {
			return fanState{}, err
		}
		return fanState{Text: []string{name, city}}, nil
	}, pregel.Writes("text"))
	twice.AddEdge(pregel.Start, "ask").AddEdge("ask", pregel.End)

	var graphs []*pregel.Graph
	for _, b := range []*pregel.Builder[fanState]{fan, gated, chatty, twice} {
		g, err := b.Compile()
		if err != nil {
			t.Fatal(err)
		}
		graphs = append(graphs, g)
	}
	graphs = append(graphs, askGraph(t))
	reg, err := runs.NewRegistry(graphs...)
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "superstep.db"))
	if err != nil {
		t.Fatal(err)
	}
	e.store = st
	cfg := api.Config{Logger: streamLogger(t)}
	for _, o := range opts {
		o(&cfg, st)
	}
	e.sched = embedded.NewScheduler(embedded.SchedulerConfig{Graphs: reg, Runs: st, Checkpoints: st, Logger: streamLogger(t)})
	if err := e.sched.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.svc = &runs.Service{Graphs: reg, Runs: st, Checkpoints: st, Dispatcher: e.sched, Logger: streamLogger(t)}
	cfg.Service = e.svc
	e.token = cfg.Token
	// Small socket buffers on the server's side, so that a client that
	// stops reading blocks the server's writes soon.
	ah, err := api.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler = ah
	if e.deadline > 0 {
		inner := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, cancel := context.WithTimeout(r.Context(), e.deadline)
			defer cancel()
			inner.ServeHTTP(w, r.WithContext(ctx))
		})
	}
	e.srv = httptest.NewUnstartedServer(h)
	e.srv.Listener = smallBuffers{e.srv.Listener}
	e.srv.Start()
	t.Cleanup(func() {
		select {
		case <-e.gate:
		default:
			close(e.gate)
		}
		e.srv.CloseClientConnections()
		e.srv.Close()
		if err := e.sched.Shutdown(context.Background(), 5*time.Second); err != nil {
			t.Error(err)
		}
		st.Close()
	})
	return e
}

// streamLogger logs to the test, or nowhere in a benchmark.
func streamLogger(tb testing.TB) *slog.Logger {
	if t, ok := tb.(*testing.T); ok {
		return testLogger(t)
	}
	return slog.New(slog.DiscardHandler)
}

// smallBuffers gives its connections a 64 KiB send buffer.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(64 << 10)
	}
	return c, err
}

// create starts a run of graph with input and returns its id.
func (e *streamEnv) create(graph, id, input string) {
	e.t.Helper()
	_, _, err := e.svc.Create(e.t.Context(), graph, runs.CreateRequest{RunID: id, Input: json.RawMessage(input)})
	if err != nil {
		e.t.Fatal(err)
	}
}

// sse is one message of a stream.
type sse struct {
	id, event, data string
}

// sseClient reads a stream over HTTP.
type sseClient struct {
	resp *http.Response
	rd   *bufio.Reader
	// comments counts the comment lines read.
	comments int
}

// open sends a request for a stream; headers are name, value pairs.
func (e *streamEnv) open(method, path, body string, headers ...string) *sseClient {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if e.token != "" {
		req.Header.Set("Authorization", "Bearer "+e.token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { resp.Body.Close() })
	return &sseClient{resp: resp, rd: bufio.NewReader(resp.Body)}
}

// stream opens GET /v1/runs/{id}/stream?query and checks the answer is a
// stream.
func (e *streamEnv) stream(id, query string, headers ...string) *sseClient {
	e.t.Helper()
	c := e.open("GET", "/v1/runs/"+id+"/stream?"+query, "", headers...)
	if c.resp.StatusCode != http.StatusOK || c.resp.Header.Get("Content-Type") != "text/event-stream" {
		body, _ := io.ReadAll(c.resp.Body)
		e.t.Fatalf("stream of %s: %d %s %s", id, c.resp.StatusCode, c.resp.Header.Get("Content-Type"), body)
	}
	return c
}

// next reads the next message, or returns io.EOF at the end of the stream.
func (c *sseClient) next() (sse, error) {
	var m sse
	for {
		line, err := c.rd.ReadString('\n')
		if err != nil {
			return m, err
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if m.event != "" || m.data != "" {
				return m, nil
			}
		case strings.HasPrefix(line, ":"):
			c.comments++
		case strings.HasPrefix(line, "id: "):
			m.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			m.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			m.data = line[6:]
		default:
			return m, fmt.Errorf("unexpected line %q", line)
		}
	}
}

// all reads the stream to its end, which must be an "end" event.
func (c *sseClient) all(t *testing.T) []sse {
	t.Helper()
	var out []sse
	for {
		m, err := c.next()
		if err == io.EOF {
			if len(out) == 0 || out[len(out)-1].event != "end" {
				t.Fatalf("stream ended without an end event after %d messages", len(out))
			}
			return out
		}
		if err != nil {
			t.Fatalf("read stream: %v after %d messages", err, len(out))
		}
		out = append(out, m)
	}
}

func decode[T any](t *testing.T, m sse) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(m.data), &v); err != nil {
		t.Fatalf("decode %s event %q: %v", m.event, m.data, err)
	}
	return v
}

func endOf(t *testing.T, msgs []sse) api.StreamEnd {
	t.Helper()
	if len(msgs) == 0 || msgs[len(msgs)-1].event != "end" {
		t.Fatalf("the stream ended without an end event (%d messages)", len(msgs))
	}
	return decode[api.StreamEnd](t, msgs[len(msgs)-1])
}

// events decodes the messages of mode events (all but the end).
func events(t *testing.T, msgs []sse) []runs.StreamEvent {
	t.Helper()
	var out []runs.StreamEvent
	for _, m := range msgs {
		if m.event == "end" || m.event == "reset" {
			continue
		}
		ev := decode[runs.StreamEvent](t, m)
		if m.id != fmt.Sprint(ev.ID) || m.event != string(ev.Type) {
			t.Fatalf("message id %q event %q carries event %d %s", m.id, m.event, ev.ID, ev.Type)
		}
		out = append(out, ev)
	}
	return out
}

// TestStreamFanOutInCommitOrder checks that every event of a fan-out run
// arrives once, with consecutive ids, in the order the engine produced
// them: each step's events between its step_started and step_finished, the
// steps in commit order, each task's custom events between its
// node_started and node_finished; and that the stream ends with the run.
func TestStreamFanOutInCommitOrder(t *testing.T) {
	e := newStreamEnv(t)
	const n = 20
	e.create("fan", "f1", fmt.Sprintf(`{"n": %d}`, n))
	msgs := e.stream("f1", "mode=events").all(t)
	if end := endOf(t, msgs); end.Status != pregel.RunCompleted || end.Step != 3 || end.RunID != "f1" {
		t.Errorf("end = %+v; want f1 completed at step 3", end)
	}
	evs := events(t, msgs)
	for i, ev := range evs {
		if ev.ID != int64(i+1) {
			t.Fatalf("event %d has id %d; want %d", i, ev.ID, i+1)
		}
	}
	// The same sequence as the log.
	var logged []runs.StreamEvent
	for after := int64(0); ; {
		page, err := e.store.EventsSince(t.Context(), "f1", after, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Events) == 0 {
			break
		}
		logged = append(logged, page.Events...)
		after = page.Events[len(page.Events)-1].ID
	}
	if len(logged) != len(evs) {
		t.Fatalf("streamed %d events; the log holds %d", len(evs), len(logged))
	}
	for i := range evs {
		if evs[i].Type != logged[i].Type || evs[i].TaskID != logged[i].TaskID || evs[i].Step != logged[i].Step {
			t.Fatalf("event %d streamed as %s %s step %d; logged as %s %s step %d", i+1, evs[i].Type, evs[i].TaskID, evs[i].Step, logged[i].Type, logged[i].TaskID, logged[i].Step)
		}
	}

	if evs[0].Type != pregel.EventRunStarted || evs[len(evs)-1].Type != pregel.EventRunFinished || evs[len(evs)-1].RunStatus != pregel.RunCompleted {
		t.Fatalf("stream runs from %s to %s %s; want run_started to run_finished completed", evs[0].Type, evs[len(evs)-1].Type, evs[len(evs)-1].RunStatus)
	}
	step := 0
	open := map[string]bool{} // tasks started and not finished
	custom := map[string]int{}
	var committed []int
	for _, ev := range evs[1 : len(evs)-1] {
		switch ev.Type {
		case pregel.EventStepStarted:
			if ev.Step != step+1 || len(open) != 0 {
				t.Fatalf("step_started %d after step %d with %d tasks open", ev.Step, step, len(open))
			}
			step = ev.Step
		case pregel.EventNodeStarted:
			open[ev.TaskID] = true
		case pregel.EventCustom:
			if !open[ev.TaskID] {
				t.Fatalf("custom event %s of task %s outside its node_started..node_finished", ev.Name, ev.TaskID)
			}
			custom[ev.TaskID]++
		case pregel.EventNodeFinished:
			if !open[ev.TaskID] {
				t.Fatalf("node_finished of task %s that did not start", ev.TaskID)
			}
			delete(open, ev.TaskID)
		case pregel.EventStepFinished:
			if ev.Step != step || len(open) != 0 {
				t.Fatalf("step_finished %d in step %d with %d tasks open", ev.Step, step, len(open))
			}
			committed = append(committed, ev.Step)
		}
		if ev.Step != step {
			t.Fatalf("%s of step %d within step %d", ev.Type, ev.Step, step)
		}
	}
	if !slices.Equal(committed, []int{1, 2, 3}) {
		t.Errorf("steps committed %v; want [1 2 3]", committed)
	}
	if len(custom) != n {
		t.Errorf("custom events from %d tasks; want %d", len(custom), n)
	}
	for task, k := range custom {
		if k != 2 {
			t.Errorf("task %s sent %d custom events; want 2", task, k)
		}
	}
}

// TestStreamModes checks what each mode sends for a fan-out run, and that
// modes combine.
func TestStreamModes(t *testing.T) {
	e := newStreamEnv(t)
	e.create("fan", "m1", `{"n": 3}`)
	count := func(msgs []sse) map[string]int {
		out := map[string]int{}
		for _, m := range msgs {
			out[m.event]++
		}
		return out
	}

	values := e.stream("m1", "").all(t) // values by default
	if got := count(values); got["values"] != 4 || len(got) != 2 {
		t.Errorf("default mode sent %v; want 4 values (steps 0 to 3) and the end", got)
	}
	last := decode[fanState](t, values[len(values)-2])
	if last.Total != 3 || len(last.Results) != 3 || last.N != 3 {
		t.Errorf("last values = %+v; want the final state", last)
	}

	msgs := e.stream("m1", "mode=updates,messages,custom").all(t)
	if got := count(msgs); got["updates"] != 5 || got["messages"] != 3 || got["custom"] != 3 || len(got) != 4 {
		t.Errorf("updates,messages,custom sent %v; want 5 updates, 3 messages, 3 custom and the end", got)
	}
	for _, m := range msgs {
		switch m.event {
		case "updates":
			u := decode[api.StreamUpdate](t, m)
			if u.Node == "work" && (u.Status != pregel.NodeCompleted || len(u.Writes["results"]) == 0) {
				t.Errorf("update of work = %+v; want completed with its results", u)
			}
		case "messages":
			if ne := decode[api.StreamNodeEvent](t, m); ne.Name != pregel.MessageToken || ne.Node != "work" || !strings.Contains(string(ne.Payload), `"text":"t`) {
				t.Errorf("message = %+v", ne)
			}
		case "custom":
			if ne := decode[api.StreamNodeEvent](t, m); ne.Name != "progress" || ne.Node != "work" || ne.Step != 2 {
				t.Errorf("custom = %+v", ne)
			}
		}
		if m.event != "end" && m.id == "" {
			t.Errorf("%s message without an id", m.event)
		}
	}

	both := e.stream("m1", "mode=updates,events").all(t)
	// Every update comes before its node_finished, which carries the id.
	for i, m := range both {
		if m.event == "updates" {
			if m.id != "" || both[i+1].event != "node_finished" || both[i+1].id == "" {
				t.Fatalf("updates message %d: id %q, followed by %s %q; want no id, then node_finished with the id", i, m.id, both[i+1].event, both[i+1].id)
			}
		}
	}
}

// TestStreamCustomEventBeforeNodeFinishes checks that a node's event
// reaches a client while the node still runs: the node waits until the
// test has read its event.
func TestStreamCustomEventBeforeNodeFinishes(t *testing.T) {
	e := newStreamEnv(t)
	e.create("gated", "g1", `{"n": 2}`)
	c := e.stream("g1", "mode=custom,updates")
	m, err := c.next()
	if err != nil {
		t.Fatal(err)
	}
	if m.event != "custom" || !strings.Contains(m.data, `"waiting"`) {
		t.Fatalf("first message %s %s; want the custom event of the waiting node", m.event, m.data)
	}
	// The node is still waiting: nothing has finished.
	if r, err := e.svc.Get(t.Context(), "g1"); err != nil || r.Status != pregel.RunRunning || r.Step != 0 {
		t.Fatalf("run = %s at step %d (%v); want running at step 0", r.Status, r.Step, err)
	}
	close(e.gate)
	rest := c.all(t)
	if rest[0].event != "updates" || !strings.Contains(rest[0].data, `"wait"`) {
		t.Errorf("after the gate opened: %s %s; want the wait node's update", rest[0].event, rest[0].data)
	}
	if end := endOf(t, rest); end.Status != pregel.RunCompleted {
		t.Errorf("end = %+v", end)
	}
}

// TestStreamResume checks that a client that disconnects and reconnects
// with Last-Event-ID (header, or the last_event_id parameter) gets exactly
// the events after that id: none missing, none repeated.
func TestStreamResume(t *testing.T) {
	e := newStreamEnv(t)
	e.create("gated", "r1", `{"n": 50}`)
	c := e.stream("r1", "mode=events")
	var first []sse
	for len(first) < 4 { // run_started, step_started, node_started, custom
		m, err := c.next()
		if err != nil {
			t.Fatal(err)
		}
		first = append(first, m)
	}
	c.resp.Body.Close() // disconnect in the middle of the run
	<-e.emitted
	close(e.gate)

	lastID := first[len(first)-1].id
	rest := e.stream("r1", "mode=events", "Last-Event-ID", lastID).all(t)
	whole := e.stream("r1", "mode=events").all(t)
	got := events(t, append(append([]sse{}, first...), rest...))
	want := events(t, whole)
	if len(got) != len(want) {
		t.Fatalf("before and after the reconnect: %d events; a whole stream has %d", len(got), len(want))
	}
	for i := range got {
		if got[i].ID != want[i].ID || got[i].Type != want[i].Type {
			t.Fatalf("event %d: %d %s; the whole stream has %d %s", i, got[i].ID, got[i].Type, want[i].ID, want[i].Type)
		}
	}
	if endOf(t, rest).Status != pregel.RunCompleted {
		t.Errorf("resumed stream ends %+v", endOf(t, rest))
	}

	// The query parameter, as an EventSource's first request can send.
	tail := e.stream("r1", "mode=events&last_event_id="+fmt.Sprint(len(want)-2)).all(t)
	if evs := events(t, tail); len(evs) != 2 || evs[1].Type != pregel.EventRunFinished {
		t.Errorf("from the next-to-last id: %d events; want the last 2", len(evs))
	}
	// Resuming after the last event: only the end.
	if done := e.stream("r1", "mode=events", "Last-Event-ID", fmt.Sprint(len(want))).all(t); len(done) != 1 {
		t.Errorf("after the last event: %d messages; want the end alone", len(done))
	}
}

// TestStreamManyWatchers checks that 100 clients watching one run at once
// all get the same events.
func TestStreamManyWatchers(t *testing.T) {
	e := newStreamEnv(t)
	e.create("gated", "w1", `{"n": 100}`)
	const watchers = 100
	got := make([][]runs.StreamEvent, watchers)
	var wg sync.WaitGroup
	var ready sync.WaitGroup
	ready.Add(watchers)
	for i := range watchers {
		c := e.stream("w1", "mode=events")
		wg.Go(func() {
			m, err := c.next() // run_started: the stream is live
			ready.Done()
			if err != nil {
				t.Error(err)
				return
			}
			got[i] = events(t, append([]sse{m}, c.all(t)...))
		})
	}
	ready.Wait()
	close(e.gate)
	wg.Wait()
	want := got[0]
	if len(want) < 100 || want[len(want)-1].Type != pregel.EventRunFinished {
		t.Fatalf("watcher 0 got %d events ending with %s", len(want), want[len(want)-1].Type)
	}
	for i, evs := range got {
		if len(evs) != len(want) {
			t.Fatalf("watcher %d got %d events; watcher 0 got %d", i, len(evs), len(want))
		}
		for j := range evs {
			if evs[j].ID != want[j].ID || evs[j].Type != want[j].Type || evs[j].TaskID != want[j].TaskID {
				t.Fatalf("watcher %d, event %d: %d %s; watcher 0: %d %s", i, j, evs[j].ID, evs[j].Type, want[j].ID, want[j].Type)
			}
		}
	}
}

// TestStreamSlowClient checks that a client that stops reading does not
// hold the run back: the run completes while the client reads nothing,
// and the client then gets every event, in order.
func TestStreamSlowClient(t *testing.T) {
	e := newStreamEnv(t)
	// 2 MB of stream: far more than the socket buffers hold.
	const tokens = 5000
	e.create("gated", "s1", fmt.Sprintf(`{"n": %d, "pad": 300}`, tokens))
	// A client with a modest receive buffer, so that the server's writes
	// block soon after it stops reading.
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			_ = conn.(*net.TCPConn).SetReadBuffer(64 << 10)
		}
		return conn, err
	}}}
	req, _ := http.NewRequestWithContext(t.Context(), "GET", e.srv.URL+"/v1/runs/s1/stream?mode=events", nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	c := &sseClient{resp: resp, rd: bufio.NewReaderSize(resp.Body, 512)}
	if _, err := c.next(); err != nil { // the stream is live
		t.Fatal(err)
	}
	close(e.gate)
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := e.svc.Get(t.Context(), "s1")
		if err != nil {
			t.Fatal(err)
		}
		if r.Status == pregel.RunCompleted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run is %s after 30 s while its client reads nothing", r.Status)
		}
		time.Sleep(5 * time.Millisecond)
	}
	evs := events(t, c.all(t))
	if len(evs) < tokens {
		t.Fatalf("the slow client got %d events; want more than %d", len(evs), tokens)
	}
	for i, ev := range evs {
		if ev.ID != int64(i+2) {
			t.Fatalf("event %d has id %d; want %d", i, ev.ID, i+2)
		}
	}
}

// TestStreamBadInput checks the answers to requests that cannot stream.
func TestStreamBadInput(t *testing.T) {
	e := newStreamEnv(t)
	e.create("fan", "b1", `{"n": 1}`)
	e.stream("b1", "").all(t)
	for _, tc := range []struct {
		name, path string
		headers    []string
		status     int
		detail     string
	}{
		{"unknown run", "/v1/runs/nope/stream", nil, 404, `run "nope" does not exist`},
		{"unknown mode", "/v1/runs/b1/stream?mode=values,debug", nil, 400, `unknown stream mode "debug"; modes are values, updates, messages, custom, events`},
		{"malformed Last-Event-ID", "/v1/runs/b1/stream", []string{"Last-Event-ID", "abc"}, 400, `Last-Event-ID header "abc" must be the id of an event`},
		{"negative last_event_id", "/v1/runs/b1/stream?last_event_id=-3", nil, 400, `last_event_id parameter "-3"`},
		{"unknown parameter", "/v1/runs/b1/stream?modes=values", nil, 400, `unknown query parameter "modes"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := e.open("GET", tc.path, "", tc.headers...)
			body, _ := io.ReadAll(c.resp.Body)
			var p api.Problem
			_ = json.Unmarshal(body, &p)
			if c.resp.StatusCode != tc.status || !strings.Contains(p.Detail, tc.detail) || c.resp.Header.Get("Content-Type") != "application/problem+json" {
				t.Errorf("%d %s %s; want %d with %q", c.resp.StatusCode, c.resp.Header.Get("Content-Type"), body, tc.status, tc.detail)
			}
		})
	}
	t.Run("id beyond the stream", func(t *testing.T) {
		msgs := e.stream("b1", "mode=events", "Last-Event-ID", "9999").all(t)
		if msgs[0].event != "reset" || decode[api.StreamReset](t, msgs[0]).FirstID != 1 || msgs[1].event != "run_started" {
			t.Errorf("from an id the stream never had: %s then %s; want reset to event 1, then the stream", msgs[0].event, msgs[1].event)
		}
	})
}

// TestStreamRetentionReset checks the reset event sent to a client whose
// last event is no longer kept.
func TestStreamRetentionReset(t *testing.T) {
	e := newStreamEnv(t, streamRetention(10))
	e.create("chatty", "c1", `{"n": 30}`)
	if err := e.sched.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	msgs := e.stream("c1", "mode=events").all(t)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the stream of a finished run took %v", d)
	}
	if msgs[0].event != "reset" {
		t.Fatalf("first message %s; want reset (the run has more events than are kept)", msgs[0].event)
	}
	reset := decode[api.StreamReset](t, msgs[0])
	evs := events(t, msgs)
	if len(evs) != 10 || evs[0].ID != reset.FirstID || evs[9].Type != pregel.EventRunFinished {
		t.Errorf("after the reset to %d: %d events from %d; want the 10 kept", reset.FirstID, len(evs), evs[0].ID)
	}
	resumed := e.stream("c1", "mode=events", "Last-Event-ID", "3").all(t)
	if resumed[0].event != "reset" || !strings.Contains(resumed[0].data, "events 4 to") {
		t.Errorf("resuming from a dropped event: %s %s; want a reset naming the events lost", resumed[0].event, resumed[0].data)
	}
}

// TestStreamInterruptedRun checks that a stream ends when its run waits
// for input, saying so, and that after a resume a new stream continues
// from the old one's last id.
func TestStreamInterruptedRun(t *testing.T) {
	e := newStreamEnv(t)
	e.create("ask", "i1", `{}`)
	first := e.stream("i1", "mode=updates").all(t)
	end := endOf(t, first)
	if end.Status != pregel.RunInterrupted || len(end.Interrupts) != 1 || !strings.Contains(string(end.Interrupts[0].Value), "name") {
		t.Fatalf("end = %+v; want interrupted with the question", end)
	}
	lastID := first[len(first)-2].id
	if _, err := e.svc.Resume(t.Context(), "i1", runs.ResumeRequest{Value: json.RawMessage(`"Ada"`)}); err != nil {
		t.Fatal(err)
	}
	rest := e.stream("i1", "mode=updates", "Last-Event-ID", lastID).all(t)
	if endOf(t, rest).Status != pregel.RunCompleted || rest[0].event != "updates" || !strings.Contains(rest[0].data, "hello Ada") {
		t.Errorf("after the resume: %+v; want the ask node's update, then completed", rest)
	}
}

// TestStreamInterruptedAgainAtSameStep checks that the stream of a run
// resumed and interrupted again at the same step, read from the start or
// resumed from before the first interrupt, does not end at the first
// interrupt's run_finished (which has the status and step the record
// shows again) but delivers every event through the second interrupt and
// ends with it.
func TestStreamInterruptedAgainAtSameStep(t *testing.T) {
	e := newStreamEnv(t)
	e.create("twice", "q1", `{}`)
	first := e.stream("q1", "mode=events").all(t)
	if end := endOf(t, first); end.Status != pregel.RunInterrupted || len(end.Interrupts) != 1 || !strings.Contains(string(end.Interrupts[0].Value), "name?") {
		t.Fatalf("first stream ends %+v; want interrupted asking the name", end)
	}
	firstEvs := events(t, first)
	stop1 := firstEvs[len(firstEvs)-1]
	if stop1.Type != pregel.EventRunFinished {
		t.Fatalf("first stream's last event is %s; want run_finished", stop1.Type)
	}
	if _, err := e.svc.Resume(t.Context(), "q1", runs.ResumeRequest{Value: json.RawMessage(`"Ada"`)}); err != nil {
		t.Fatal(err)
	}
	if err := e.sched.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	rec, err := e.svc.Get(t.Context(), "q1")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != pregel.RunInterrupted || rec.Step != stop1.Step || len(rec.Interrupts) != 1 || !strings.Contains(string(rec.Interrupts[0].Value), "city?") {
		t.Fatalf("after the first answer the run is %s at step %d with %+v; want interrupted again at step %d asking the city", rec.Status, rec.Step, rec.Interrupts, stop1.Step)
	}

	whole := events(t, e.stream("q1", "mode=events").all(t))
	if len(whole) <= len(firstEvs) {
		t.Fatalf("the run has %d events after its resume; it had %d before", len(whole), len(firstEvs))
	}
	stop2 := whole[len(whole)-1]
	for _, tc := range []struct {
		name  string
		after int64 // Last-Event-ID; 0: from the start
	}{
		{"from the start", 0},
		{"from the first event", 1},
		{"from just before the first run_finished", stop1.ID - 1},
		{"from the first run_finished", stop1.ID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hdr []string
			if tc.after > 0 {
				hdr = []string{"Last-Event-ID", fmt.Sprint(tc.after)}
			}
			msgs := e.stream("q1", "mode=events", hdr...).all(t)
			got := events(t, msgs)
			if want := int(stop2.ID - tc.after); len(got) != want {
				t.Fatalf("%d events after %d; want %d, through the second interrupt (event %d)", len(got), tc.after, want, stop2.ID)
			}
			for i, ev := range got {
				if ev.ID != tc.after+int64(i)+1 {
					t.Fatalf("event %d has id %d; want %d", i, ev.ID, tc.after+int64(i)+1)
				}
			}
			if last := got[len(got)-1]; last.Type != pregel.EventRunFinished || last.ID != stop2.ID {
				t.Errorf("last event %d %s; want the second run_finished, %d", last.ID, last.Type, stop2.ID)
			}
			if end := endOf(t, msgs); end.Status != pregel.RunInterrupted || len(end.Interrupts) != 1 || !strings.Contains(string(end.Interrupts[0].Value), "city?") {
				t.Errorf("end = %+v; want interrupted asking the city", end)
			}
		})
	}

	// Answered, the run completes, and a stream from the start goes
	// through both interrupts to the end.
	if _, err := e.svc.Resume(t.Context(), "q1", runs.ResumeRequest{Value: json.RawMessage(`"Paris"`)}); err != nil {
		t.Fatal(err)
	}
	done := e.stream("q1", "mode=events").all(t)
	if end := endOf(t, done); end.Status != pregel.RunCompleted {
		t.Errorf("after the second answer the stream ends %+v; want completed", end)
	}
	var stops int
	for _, ev := range events(t, done) {
		if ev.Type == pregel.EventRunFinished {
			stops++
		}
	}
	if stops != 3 {
		t.Errorf("the finished run's stream has %d run_finished events; want 3 (two interrupts, then completed)", stops)
	}
}

// TestStreamHeartbeatAndAuth checks heartbeats on an idle stream, and
// that streams need the API's token.
func TestStreamHeartbeatAndAuth(t *testing.T) {
	e := newStreamEnv(t, streamToken("s3cret"), streamHeartbeat(20*time.Millisecond))
	e.create("gated", "h1", `{"n": 1}`)
	c := e.stream("h1", "mode=updates")
	time.Sleep(150 * time.Millisecond)
	close(e.gate)
	c.all(t)
	if c.comments < 3 {
		t.Errorf("%d comment lines in 150 ms with a 20 ms heartbeat; want several", c.comments)
	}

	req, _ := http.NewRequest("GET", e.srv.URL+"/v1/runs/h1/stream", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without the token: %d; want 401", resp.StatusCode)
	}
}

// TestCreateRunStream checks POST /v1/graphs/{graph}/runs with "stream":
// true: the answer is the new run's stream.
func TestCreateRunStream(t *testing.T) {
	e := newStreamEnv(t)
	c := e.open("POST", "/v1/graphs/fan/runs", `{"input": {"n": 2}, "run_id": "p1", "stream": true, "stream_mode": ["updates", "custom"]}`)
	if c.resp.StatusCode != http.StatusOK || c.resp.Header.Get("Content-Type") != "text/event-stream" || c.resp.Header.Get("Location") != "/v1/runs/p1" {
		t.Fatalf("%d %s, Location %q; want 200 text/event-stream at /v1/runs/p1", c.resp.StatusCode, c.resp.Header.Get("Content-Type"), c.resp.Header.Get("Location"))
	}
	msgs := c.all(t)
	if end := endOf(t, msgs); end.Status != pregel.RunCompleted || end.RunID != "p1" {
		t.Errorf("end = %+v", end)
	}
	kinds := map[string]int{}
	for _, m := range msgs {
		kinds[m.event]++
	}
	if kinds["updates"] != 4 || kinds["custom"] != 2 {
		t.Errorf("streamed %v; want 4 updates and 2 custom", kinds)
	}

	for _, tc := range []struct{ body, detail string }{
		{`{"stream_mode": "values"}`, `stream_mode is given without "stream": true`},
		{`{"stream": true, "stream_mode": "values,tokens"}`, `unknown stream mode "tokens"`},
	} {
		c := e.open("POST", "/v1/graphs/fan/runs", tc.body)
		body, _ := io.ReadAll(c.resp.Body)
		var p api.Problem
		_ = json.Unmarshal(body, &p)
		if c.resp.StatusCode != 400 || !strings.Contains(p.Detail, tc.detail) {
			t.Errorf("%s: %d %s; want 400 with %q", tc.body, c.resp.StatusCode, body, tc.detail)
		}
	}
	if page, err := e.svc.List(t.Context(), runs.Filter{}); err != nil || len(page.Runs) != 1 {
		t.Errorf("runs after the refused requests: %d (%v); want 1", len(page.Runs), err)
	}
}

// TestStreamWithoutSource checks the answer of a server built to serve no
// streams (Config.NoStreams).
func TestStreamWithoutSource(t *testing.T) {
	e := newEnv(t)
	e.do("POST", "/v1/graphs/echo/runs", `{"run_id": "x1"}`)
	resp := e.do("GET", "/v1/runs/x1/stream", nil)
	if resp.status != http.StatusNotImplemented || !strings.Contains(string(resp.body), "poll GET /v1/runs/{run_id}") {
		t.Errorf("%d %s; want 501 saying to poll", resp.status, resp.body)
	}
}

// TestStreamEndsAtShutdown checks that streams do not keep the server
// from stopping: the stream of a run stopped by the Scheduler's shutdown
// ends with it (drained), and the stream of a run left pending ends
// without an end event, for the client to resume from its last event.
func TestStreamEndsAtShutdown(t *testing.T) {
	e := newStreamEnv(t)
	e.create("gated", "d1", `{"n": 1}`)
	c := e.stream("d1", "mode=events")
	<-e.emitted
	done := make(chan []sse, 1)
	go func() {
		var msgs []sse
		for {
			m, err := c.next()
			if err != nil {
				done <- msgs
				return
			}
			msgs = append(msgs, m)
		}
	}()
	// The gated node holds the run: no grace, a hard stop (which, on a
	// loaded machine, may take longer than a moment).
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := e.sched.Shutdown(ctx, 0); err != nil {
		t.Fatal(err)
	}
	select {
	case msgs := <-done:
		if end := endOf(t, msgs); end.Status != pregel.RunDrained || end.DrainReason != embedded.ShutdownReason {
			t.Errorf("stream at shutdown ends with %+v; want drained by the shutdown", end)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream is still open 5 s after the scheduler shut down")
	}

	// A run created now stays pending until the next start.
	e.create("fan", "d2", `{"n": 1}`)
	c2 := e.stream("d2", "mode=events")
	ended := make(chan error, 1)
	go func() {
		for {
			m, err := c2.next()
			if err != nil {
				ended <- err
				return
			}
			if m.event == "end" {
				ended <- fmt.Errorf("end event %s for a pending run", m.data)
				return
			}
		}
	}()
	select {
	case err := <-ended:
		if err != io.EOF {
			t.Errorf("stream of a pending run after shutdown: %v; want it closed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream of a pending run is still open 5 s after the scheduler shut down")
	}
}

// TestStreamEndsBeforeDeadline checks the stream of a server that gives
// requests a deadline (a Lambda function): it ends cleanly a margin
// before it, without an end event and with a comment saying to
// reconnect, and the reconnection with Last-Event-ID gives the rest.
func TestStreamEndsBeforeDeadline(t *testing.T) {
	const deadline = 1500 * time.Millisecond
	e := &streamEnv{}
	newStreamEnvWith(t, e, streamDeadline(e, deadline))
	e.create("gated", "t1", `{"n": 2}`)
	start := time.Now()
	c := e.stream("t1", "mode=events")
	var first []sse
	for {
		m, err := c.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		first = append(first, m)
	}
	took := time.Since(start)
	if took > deadline || took < deadline-api.StreamDeadlineMargin-200*time.Millisecond {
		t.Errorf("the stream ended after %v; want about %v (the deadline less the margin)", took, deadline-api.StreamDeadlineMargin)
	}
	if len(first) == 0 || slices.ContainsFunc(first, func(m sse) bool { return m.event == "end" }) {
		t.Fatalf("before the deadline: %d messages (end among them?); want the run's first events and no end", len(first))
	}
	close(e.gate)
	last := first[len(first)-1].id
	c2 := e.stream("t1", "mode=events", "Last-Event-ID", last)
	rest := c2.all(t)
	if end := endOf(t, rest); end.Status != pregel.RunCompleted {
		t.Errorf("end after reconnecting: %+v", end)
	}
	all := events(t, append(first, rest...))
	for i, ev := range all {
		if ev.ID != int64(i+1) {
			t.Fatalf("event %d of the two streams has id %d: missed or repeated", i, ev.ID)
		}
	}
}
