package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/embedded"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// echoState is the state of the "echo" test graph.
type echoState struct {
	Text  string   `json:"text,omitempty"`
	Trail []string `json:"trail,omitempty" reduce:"append"`
}

// echoGraph runs upper -> exclaim -> End.
func echoGraph(t testing.TB) *pregel.Graph {
	t.Helper()
	b := pregel.NewGraph[echoState]("echo").Describe("Upper-cases and exclaims.")
	b.AddFunc("upper", func(ctx context.Context, s echoState) (echoState, error) {
		return echoState{Text: strings.ToUpper(s.Text), Trail: []string{"upper"}}, nil
	}, pregel.Writes("text", "trail"), pregel.Describe("Upper", "upper-cases the text"))
	b.AddFunc("exclaim", func(ctx context.Context, s echoState) (echoState, error) {
		return echoState{Text: s.Text + "!", Trail: []string{"exclaim"}}, nil
	}, pregel.Writes("text", "trail"))
	b.AddEdge(pregel.Start, "upper").AddEdge("upper", "exclaim").AddEdge("exclaim", pregel.End)
	g, err := b.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// askGraph interrupts for a name, then greets.
func askGraph(t testing.TB) *pregel.Graph {
	t.Helper()
	b := pregel.NewGraph[echoState]("ask").Describe("Asks for a name.")
	b.AddFunc("ask", func(ctx context.Context, s echoState) (echoState, error) {
		name, err := pregel.Interrupt[string](ctx, map[string]string{"question": "what is your name?"})
		if err != nil {
			return echoState{}, err
		}
		return echoState{Text: "hello " + name, Trail: []string{"ask"}}, nil
	}, pregel.Writes("text", "trail"))
	b.AddEdge(pregel.Start, "ask").AddEdge("ask", pregel.End)
	g, err := b.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// env is an API server on a real loopback port over in-memory stores.
type env struct {
	t     *testing.T
	srv   *httptest.Server
	svc   *runs.Service
	cps   *pregel.MemoryStore
	token string
}

type envOption func(*api.Config)

func withToken(tok string) envOption { return func(c *api.Config) { c.Token = tok } }

func withMaxBody(n int64) envOption { return func(c *api.Config) { c.MaxBodyBytes = n } }

// newEnv serves the API with a Dispatcher that only records what it is
// asked, so that runs move only when a test moves them (see finish).
func newEnv(t *testing.T, opts ...envOption) *env {
	t.Helper()
	reg, err := runs.NewRegistry(echoGraph(t), askGraph(t))
	if err != nil {
		t.Fatal(err)
	}
	cps := pregel.NewMemoryStore()
	svc := &runs.Service{
		Graphs:      reg,
		Runs:        runs.NewMemoryStore(),
		Checkpoints: cps,
		Dispatcher:  &recordingDispatcher{},
		Logger:      testLogger(t),
	}
	return startEnv(t, svc, cps, opts...)
}

func startEnv(t *testing.T, svc *runs.Service, cps *pregel.MemoryStore, opts ...envOption) *env {
	t.Helper()
	// A server whose dispatcher cannot stream serves no streams.
	_, streams := svc.Dispatcher.(runs.EventReader)
	cfg := api.Config{Service: svc, Logger: testLogger(t), NoStreams: !streams}
	for _, o := range opts {
		o(&cfg)
	}
	apiHandler, err := api.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(apiHandler)
	t.Cleanup(srv.Close)
	return &env{t: t, srv: srv, svc: svc, cps: cps, token: cfg.Token}
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// response is what the server answered.
type response struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request; body is sent as is (a string) or as JSON. headers
// are name, value pairs.
func (e *env) do(method, path string, body any, headers ...string) response {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = strings.NewReader(string(raw))
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if e.token != "" {
		req.Header.Set("Authorization", "Bearer "+e.token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" {
			req.Host = headers[i+1]
			continue
		}
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
		} else {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	res, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: raw}
}

// ok checks the status and decodes a JSON body into v (if not nil).
func (r response) ok(t *testing.T, status int, v any) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body: %s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q, want application/json", ct)
	}
	if v != nil {
		if err := json.Unmarshal(r.body, v); err != nil {
			t.Fatalf("decode %s: %v", r.body, err)
		}
	}
}

// problem checks that the response is a problem with status whose detail
// contains every one of want.
func (r response) problem(t *testing.T, status int, want ...string) api.Problem {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body: %s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json; body: %s", ct, r.body)
	}
	var p api.Problem
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("decode problem %s: %v", r.body, err)
	}
	if p.Status != status || p.Type == "" || p.Title == "" || p.Detail == "" {
		t.Fatalf("incomplete problem: %+v", p)
	}
	for _, w := range want {
		if !strings.Contains(p.Detail, w) {
			t.Errorf("detail %q does not contain %q", p.Detail, w)
		}
	}
	return p
}

// create starts a run of graph and returns it.
func (e *env) create(graph string, req api.CreateRunRequest) api.Run {
	e.t.Helper()
	var run api.Run
	e.do("POST", "/v1/graphs/"+graph+"/runs", req).ok(e.t, http.StatusAccepted, &run)
	return run
}

// finish drives a run to where it stops, in place of a dispatcher, and
// records the outcome on its record.
func (e *env) finish(id string, opts ...pregel.RunOption) {
	e.t.Helper()
	ctx := context.Background()
	run, err := e.svc.Get(ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	g, _ := e.svc.Graphs.Get(run.Graph)
	res, err := g.Resume(ctx, id, append(opts, pregel.WithStore(e.cps))...)
	if err != nil && res == nil {
		e.t.Fatal(err)
	}
	_, err = runs.Mutate(ctx, e.svc.Runs, id, func(r *runs.Run) error {
		r.Status, r.Step, r.Counters, r.Interrupts, r.Resume = res.Status, res.Step, res.Counters, res.Interrupts, nil
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

// snapshot renders every stored run record and checkpoint, to show that a
// refused request changed nothing.
func (e *env) snapshot() string {
	e.t.Helper()
	ctx := context.Background()
	page, err := e.svc.Runs.ListRuns(ctx, runs.Filter{Limit: 500})
	if err != nil {
		e.t.Fatal(err)
	}
	var b strings.Builder
	for _, r := range page.Runs {
		raw, _ := json.Marshal(r)
		b.Write(raw)
		h, err := e.cps.History(ctx, r.ID)
		if err != nil && !errors.Is(err, pregel.ErrNotFound) {
			e.t.Fatal(err)
		}
		raw, _ = json.Marshal(h)
		b.Write(raw)
		pending, _ := e.cps.PendingTasks(ctx, r.ID, r.Step+1)
		raw, _ = json.Marshal(pending)
		b.Write(raw)
		b.WriteByte('\n')
	}
	return b.String()
}

func TestGraphs(t *testing.T) {
	e := newEnv(t)

	var list api.GraphList
	e.do("GET", "/v1/graphs", nil).ok(t, http.StatusOK, &list)
	want := []api.GraphSummary{
		{Name: "ask", Description: "Asks for a name.", NodeCount: 1, Channels: []string{"text", "trail"}},
		{Name: "echo", Description: "Upper-cases and exclaims.", NodeCount: 2, Channels: []string{"text", "trail"}},
	}
	if got, _ := json.Marshal(list.Graphs); string(got) != mustJSON(t, want) {
		t.Errorf("graphs = %s, want %s", got, mustJSON(t, want))
	}

	var g api.Graph
	e.do("GET", "/v1/graphs/echo", nil).ok(t, http.StatusOK, &g)
	if g.Name != "echo" || len(g.Nodes) != 2 || g.Nodes[0].ID != "upper" || g.Nodes[0].Name != "Upper" ||
		!slices.Equal(g.Nodes[0].Writes, []string{"text", "trail"}) || !slices.Equal(g.Channels, []string{"text", "trail"}) {
		t.Errorf("graph = %+v", g)
	}
	for _, s := range []string{"flowchart TD", "upper", "upper --> exclaim", "exclaim"} {
		if !strings.Contains(g.Mermaid, s) {
			t.Errorf("mermaid lacks %q:\n%s", s, g.Mermaid)
		}
	}
	if strings.Contains(g.Mermaid, "classDef") || g.NodeStatuses != nil {
		t.Errorf("diagram without a run is coloured:\n%s", g.Mermaid)
	}
	// The input schema, from the state struct: each channel a property,
	// none required.
	if want := `{"type":"object","properties":{"text":{"type":"string"},"trail":{"type":["null","array"],"items":{"type":"string"}}},"additionalProperties":false}`; string(g.InputSchema) != want {
		t.Errorf("input_schema = %s, want %s", g.InputSchema, want)
	}

	// Coloured by a run: completed nodes, then an interrupted one.
	run := e.create("echo", api.CreateRunRequest{Input: json.RawMessage(`{"text":"hi"}`)})
	e.finish(run.RunID)
	e.do("GET", "/v1/graphs/echo?run="+run.RunID, nil).ok(t, http.StatusOK, &g)
	if g.RunID != run.RunID || g.NodeStatuses["upper"] != pregel.NodeCompleted || g.NodeStatuses["exclaim"] != pregel.NodeCompleted {
		t.Errorf("statuses = %v", g.NodeStatuses)
	}
	if !strings.Contains(g.Mermaid, "class upper completed") || !strings.Contains(g.Mermaid, "class exclaim completed") {
		t.Errorf("mermaid not coloured:\n%s", g.Mermaid)
	}
	ask := e.create("ask", api.CreateRunRequest{})
	e.finish(ask.RunID)
	e.do("GET", "/v1/graphs/ask?run="+ask.RunID, nil).ok(t, http.StatusOK, &g)
	if g.NodeStatuses["ask"] != pregel.NodeInterrupted || !strings.Contains(g.Mermaid, "class ask interrupted") {
		t.Errorf("interrupted run: statuses %v, mermaid:\n%s", g.NodeStatuses, g.Mermaid)
	}

	for _, tc := range []struct {
		name, path string
		status     int
		detail     []string
	}{
		{"unknown graph", "/v1/graphs/nope", 404, []string{`graph "nope" is not registered`, "ask, echo"}},
		{"unknown run", "/v1/graphs/echo?run=nope", 404, []string{`run "nope" does not exist`}},
		{"run of another graph", "/v1/graphs/ask?run=" + run.RunID, 400, []string{`graph "echo", not "ask"`}},
		{"unknown query parameter", "/v1/graphs/echo?runid=x", 400, []string{`unknown query parameter "runid"`, "takes run"}},
		{"unknown path", "/v2/graphs", 404, []string{"/v2/graphs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.do("GET", tc.path, nil).problem(t, tc.status, tc.detail...)
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func TestCreateRun(t *testing.T) {
	e := newEnv(t)

	res := e.do("POST", "/v1/graphs/echo/runs", map[string]any{"input": map[string]any{"text": "hi"}, "run_id": "r1", "context_id": "c1"})
	var run api.Run
	res.ok(t, http.StatusAccepted, &run)
	if run.RunID != "r1" || run.Graph != "echo" || run.Status != pregel.RunPending || run.ContextID != "c1" ||
		string(run.Input) != `{"text":"hi"}` || run.CreatedAt.IsZero() {
		t.Errorf("run = %+v", run)
	}
	if loc := res.header.Get("Location"); loc != "/v1/runs/r1" {
		t.Errorf("Location = %q", loc)
	}

	// Same id, same input (spelled differently): 200 with the same run.
	var again api.Run
	e.do("POST", "/v1/graphs/echo/runs", `{"run_id":"r1", "input": { "text" : "hi" }}`).ok(t, http.StatusOK, &again)
	if again.RunID != "r1" || !again.CreatedAt.Equal(run.CreatedAt) {
		t.Errorf("idempotent create = %+v", again)
	}

	// Without run_id, a new id each time.
	a := e.create("echo", api.CreateRunRequest{})
	b := e.create("echo", api.CreateRunRequest{})
	if a.RunID == "" || a.RunID == b.RunID {
		t.Errorf("generated ids %q, %q", a.RunID, b.RunID)
	}
	// An empty body is a run without input.
	e.do("POST", "/v1/graphs/echo/runs", "").ok(t, http.StatusAccepted, nil)
}

func TestCreateRunRefused(t *testing.T) {
	e := newEnv(t, withMaxBody(256))
	e.create("echo", api.CreateRunRequest{RunID: "r1", Input: json.RawMessage(`{"text":"hi"}`)})

	for _, tc := range []struct {
		name   string
		graph  string
		body   string
		status int
		detail []string
	}{
		{"same id, other input", "echo", `{"run_id":"r1","input":{"text":"ho"}}`, 409, []string{`run "r1" already exists`}},
		{"same id, other graph", "ask", `{"run_id":"r1","input":{"text":"hi"}}`, 409, []string{`run "r1" already exists`}},
		{"unknown graph", "nope", `{}`, 404, []string{`graph "nope" is not registered; graphs are ask, echo`}},
		{"malformed JSON", "echo", "{\n  \"input\": {\"text\": \"hi\"},\n}", 400, []string{"not valid JSON", "line 3, column 1"}},
		{"truncated JSON", "echo", `{"input": {"text"`, 400, []string{"ends before"}},
		{"wrong type", "echo", `{"run_id": 5}`, 400, []string{`field "run_id" must be a string, not a number`}},
		{"not an object", "echo", `["x"]`, 400, []string{"must be a JSON object, not an array"}},
		{"unknown field", "echo", `{"inputs": {}}`, 400, []string{`unknown field "inputs"`, "input, run_id, context_id"}},
		{"trailing data", "echo", `{} {}`, 400, []string{"more data after"}},
		{"unknown channel", "echo", `{"input": {"txt": "hi"}}`, 400, []string{`"txt" is not a channel of graph "echo"; channels are text, trail`}},
		{"input not an object", "echo", `{"input": 5}`, 400, []string{"input must be a JSON object of channel values"}},
		{"bad run id", "echo", `{"run_id": "a b"}`, 400, []string{`run_id "a b" must be`}},
		{"bad context id", "echo", `{"context_id": "/x"}`, 400, []string{`context_id "/x" must be`}},
		{"oversized body", "echo", `{"input": {"text": "` + strings.Repeat("x", 300) + `"}}`, 413, []string{"exceeds 256 bytes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.snapshot()
			p := e.do("POST", "/v1/graphs/"+tc.graph+"/runs", tc.body).problem(t, tc.status, tc.detail...)
			if p.Instance != "/v1/graphs/"+tc.graph+"/runs" {
				t.Errorf("instance = %q", p.Instance)
			}
			if after := e.snapshot(); after != before {
				t.Errorf("stored data changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

func TestRunEndpoints(t *testing.T) {
	e := newEnv(t)
	run := e.create("echo", api.CreateRunRequest{RunID: "r1", Input: json.RawMessage(`{"text":"hi"}`)})

	// Before it runs: step 0 only, values are the input.
	var d api.RunDetail
	e.do("GET", "/v1/runs/r1", nil).ok(t, http.StatusOK, &d)
	if d.RunID != "r1" || d.Status != pregel.RunPending || len(d.Steps) != 1 || string(d.Values["text"]) != `"hi"` {
		t.Errorf("detail = %+v", d)
	}

	e.finish(run.RunID)
	e.do("GET", "/v1/runs/r1", nil).ok(t, http.StatusOK, &d)
	if d.Status != pregel.RunCompleted || d.Step != 2 || d.Counters.Completed != 2 || string(d.Values["text"]) != `"HI!"` ||
		string(d.Values["trail"]) != `["upper","exclaim"]` {
		t.Errorf("detail = %+v values %s", d, d.Values)
	}
	if len(d.Steps) != 3 || d.Steps[1].Tasks[0].Node != "upper" || d.Steps[1].Tasks[0].Status != pregel.NodeCompleted ||
		!slices.Equal(d.Steps[2].Changed, []string{"text", "trail"}) || !slices.Equal(d.Steps[1].Next, []string{"exclaim"}) {
		t.Errorf("steps = %+v", d.Steps)
	}
	// The raw body uses the documented names.
	var raw map[string]any
	e.do("GET", "/v1/runs/r1", nil).ok(t, http.StatusOK, &raw)
	for _, k := range []string{"run_id", "graph", "status", "input", "created_at", "updated_at", "step", "counters", "steps", "values"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("run detail lacks %q: %v", k, raw)
		}
	}
	for _, k := range []string{"version", "resume", "ID", "events", "events_dropped"} {
		if _, ok := raw[k]; ok {
			t.Errorf("run detail has internal field %q", k)
		}
	}

	// Events: created by the API, completed by the executor.
	var evs api.EventList
	e.do("GET", "/v1/runs/r1/events", nil).ok(t, http.StatusOK, &evs)
	if got := eventSummary(evs); evs.RunID != "r1" || got != "created/pending/0 completed/completed/2" || evs.EventsDropped != 0 {
		t.Errorf("events = %s (%+v)", got, evs)
	}
	if !evs.Events[0].At.Equal(run.CreatedAt) {
		t.Errorf("created event at %v, run created at %v", evs.Events[0].At, run.CreatedAt)
	}
	e.do("GET", "/v1/runs/r1/events", nil).ok(t, http.StatusOK, &raw)
	if _, ok := raw["events_dropped"]; !ok {
		t.Errorf("event list lacks events_dropped: %v", raw)
	}

	// Checkpoints.
	var cl api.CheckpointList
	e.do("GET", "/v1/runs/r1/checkpoints", nil).ok(t, http.StatusOK, &cl)
	if cl.RunID != "r1" || len(cl.Checkpoints) != 3 || cl.Checkpoints[2].Step != 2 {
		t.Errorf("checkpoints = %+v", cl)
	}
	var cp pregel.Checkpoint
	e.do("GET", "/v1/runs/r1/checkpoints/1", nil).ok(t, http.StatusOK, &cp)
	if cp.Step != 1 || cp.RunID != "r1" || string(cp.Values["text"]) != `"HI"` || len(cp.Next) != 1 {
		t.Errorf("checkpoint 1 = %+v", cp)
	}
	var latest pregel.Checkpoint
	e.do("GET", "/v1/runs/r1/checkpoints/latest", nil).ok(t, http.StatusOK, &latest)
	if latest.Step != 2 || !latest.Done() {
		t.Errorf("latest checkpoint = %+v", latest)
	}
	// Each task says when it ran, in the run, its steps and checkpoints.
	for _, ts := range []pregel.TaskStatus{d.Steps[1].Tasks[0], d.Steps[2].Tasks[0], cl.Checkpoints[1].Tasks[0], cp.Tasks[0], latest.Tasks[0]} {
		if ts.Started.IsZero() || ts.Finished.Before(ts.Started) || ts.Started.Before(run.CreatedAt.Add(-time.Second)) {
			t.Errorf("task %s ran from %v to %v (run created %v)", ts.Node, ts.Started, ts.Finished, run.CreatedAt)
		}
	}
	if d.Steps[2].Tasks[0].Started.Before(d.Steps[1].Tasks[0].Finished) {
		t.Errorf("step 2 began at %v, before step 1 ended at %v", d.Steps[2].Tasks[0].Started, d.Steps[1].Tasks[0].Finished)
	}
	if !cp.Tasks[0].Started.Equal(d.Steps[1].Tasks[0].Started) {
		t.Errorf("checkpoint 1 and the run disagree on when upper started: %v, %v", cp.Tasks[0].Started, d.Steps[1].Tasks[0].Started)
	}

	// HEAD works where GET does.
	if res := e.do("HEAD", "/v1/runs/r1", nil); res.status != http.StatusOK || len(res.body) != 0 {
		t.Errorf("HEAD: %d %q", res.status, res.body)
	}

	for _, tc := range []struct {
		name, method, path string
		status             int
		detail             []string
	}{
		{"unknown run", "GET", "/v1/runs/nope", 404, []string{`run "nope" does not exist`}},
		{"checkpoints of unknown run", "GET", "/v1/runs/nope/checkpoints", 404, []string{`run "nope" does not exist`}},
		{"events of unknown run", "GET", "/v1/runs/nope/events", 404, []string{`run "nope" does not exist`}},
		{"query on events", "GET", "/v1/runs/r1/events?limit=1", 400, []string{`unknown query parameter "limit"`}},
		{"POST on events", "POST", "/v1/runs/r1/events", 405, []string{"use GET, HEAD"}},
		{"checkpoint of unknown run", "GET", "/v1/runs/nope/checkpoints/0", 404, []string{`run "nope" does not exist`}},
		{"step not a number", "GET", "/v1/runs/r1/checkpoints/one", 400, []string{`step "one" must be a step number`}},
		{"negative step", "GET", "/v1/runs/r1/checkpoints/-1", 400, []string{`step "-1"`}},
		{"step too far", "GET", "/v1/runs/r1/checkpoints/9", 404, []string{`run "r1" has no step 9`}},
		{"wrong method", "DELETE", "/v1/runs/r1", 405, []string{"does not accept DELETE; use GET, HEAD"}},
		{"wrong method on a collection", "PUT", "/v1/graphs/echo/runs", 405, []string{"use POST"}},
		{"GET on an action", "GET", "/v1/runs/r1/drain", 405, []string{"use POST"}},
		{"query on run", "GET", "/v1/runs/r1?x=1", 400, []string{`unknown query parameter "x"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.snapshot()
			res := e.do(tc.method, tc.path, nil)
			res.problem(t, tc.status, tc.detail...)
			if allow := res.header.Get("Allow"); tc.status == 405 && (allow == "" || !strings.Contains(tc.detail[0], allow)) {
				t.Errorf("Allow = %q", allow)
			}
			if after := e.snapshot(); after != before {
				t.Errorf("stored data changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

func TestListRuns(t *testing.T) {
	e := newEnv(t)
	for i := range 5 {
		ctx := fmt.Sprintf("c%d", i%2)
		e.create("echo", api.CreateRunRequest{RunID: fmt.Sprintf("e%d", i), ContextID: ctx})
	}
	e.create("ask", api.CreateRunRequest{RunID: "a0"})
	e.finish("e1")

	list := func(query string) api.RunList {
		t.Helper()
		var l api.RunList
		e.do("GET", "/v1/runs"+query, nil).ok(t, http.StatusOK, &l)
		return l
	}
	names := func(l api.RunList) []string {
		var out []string
		for _, r := range l.Runs {
			out = append(out, r.RunID)
		}
		slices.Sort(out)
		return out
	}
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"", []string{"a0", "e0", "e1", "e2", "e3", "e4"}},
		{"?graph=ask", []string{"a0"}},
		{"?graph=echo&status=completed", []string{"e1"}},
		{"?status=pending&context_id=c1", []string{"e3"}},
		{"?context_id=c0", []string{"e0", "e2", "e4"}},
		{"?graph=", []string{"a0", "e0", "e1", "e2", "e3", "e4"}},
	} {
		if got := names(list(tc.query)); !slices.Equal(got, tc.want) {
			t.Errorf("GET /v1/runs%s = %v, want %v", tc.query, got, tc.want)
		}
	}

	// Pages of 4 then 2, no run twice.
	first := list("?limit=4")
	if len(first.Runs) != 4 || first.NextPageToken == "" {
		t.Fatalf("first page = %+v", first)
	}
	second := list("?limit=4&page_token=" + first.NextPageToken)
	if len(second.Runs) != 2 || second.NextPageToken != "" {
		t.Fatalf("second page = %+v", second)
	}
	all := slices.Concat(names(first), names(second))
	slices.Sort(all)
	if !slices.Equal(all, []string{"a0", "e0", "e1", "e2", "e3", "e4"}) {
		t.Errorf("pages = %v", all)
	}
	var raw map[string]any
	e.do("GET", "/v1/runs?limit=10", nil).ok(t, http.StatusOK, &raw)
	if _, ok := raw["next_page_token"]; ok {
		t.Errorf("last page has a next_page_token: %v", raw)
	}

	for _, tc := range []struct {
		query  string
		status int
		detail string
	}{
		{"?status=done", 400, `status "done" is not a run status`},
		{"?graph=nope", 400, `graph "nope" is not registered`},
		{"?limit=0", 400, `limit "0" must be`},
		{"?limit=x", 400, `limit "x" must be`},
		{"?limit=501", 400, `limit "501" must be`},
		{"?graph=echo&graph=ask", 400, `"graph" is given 2 times`},
		{"?state=running", 400, `unknown query parameter "state"`},
		{"?page_token=garbage", 400, `page token "garbage" is not one this server issued`},
	} {
		t.Run(tc.query, func(t *testing.T) {
			e.do("GET", "/v1/runs"+tc.query, nil).problem(t, tc.status, tc.detail)
		})
	}
}

func TestRunControl(t *testing.T) {
	e := newEnv(t, withMaxBody(128))
	e.create("echo", api.CreateRunRequest{RunID: "pending"})
	e.create("echo", api.CreateRunRequest{RunID: "done"})
	e.finish("done")
	e.create("ask", api.CreateRunRequest{RunID: "asking"})
	e.finish("asking")

	// Refusals first: none changes anything.
	for _, tc := range []struct {
		name, path, body string
		status           int
		detail           []string
	}{
		{"drain unknown run", "/v1/runs/nope/drain", `{}`, 404, []string{`run "nope" does not exist`}},
		{"cancel unknown run", "/v1/runs/nope/cancel", ``, 404, []string{`run "nope" does not exist`}},
		{"resume unknown run", "/v1/runs/nope/resume", `{"resume": 1}`, 404, []string{`run "nope" does not exist`}},
		{"drain finished run", "/v1/runs/done/drain", `{"reason": "x"}`, 409, []string{`run "done" is completed; only pending or running runs can be drained`}},
		{"cancel finished run", "/v1/runs/done/cancel", ``, 409, []string{`run "done" is completed and cannot be cancelled`}},
		{"resume finished run", "/v1/runs/done/resume", `{"resume": 1}`, 409, []string{`run "done" is completed; only interrupted or drained runs can be resumed`}},
		{"resume pending run", "/v1/runs/pending/resume", ``, 409, []string{`run "pending" is pending`}},
		{"resume interrupted run without value", "/v1/runs/asking/resume", ``, 400, []string{`waits for a value for interrupt(s)`}},
		{"resume unknown interrupt", "/v1/runs/asking/resume", `{"resume_by_id": {"zz": 1}}`, 400, []string{`no pending interrupt "zz"`}},
		{"resume both ways", "/v1/runs/asking/resume", `{"resume": 1, "resume_by_id": {"zz": 1}}`, 400, []string{"not both"}},
		{"resume unknown field", "/v1/runs/asking/resume", `{"value": 1}`, 400, []string{`unknown field "value"`, "resume, resume_by_id"}},
		{"drain malformed", "/v1/runs/pending/drain", `{"reason": }`, 400, []string{"not valid JSON", "column 12"}},
		{"drain reason not a string", "/v1/runs/pending/drain", `{"reason": 1}`, 400, []string{`field "reason" must be a string, not a number`}},
		{"cancel with fields", "/v1/runs/pending/cancel", `{"force": true}`, 400, []string{`unknown field "force"`, "takes no fields"}},
		{"drain oversized", "/v1/runs/pending/drain", `{"reason": "` + strings.Repeat("x", 200) + `"}`, 413, []string{"exceeds 128 bytes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.snapshot()
			e.do("POST", tc.path, tc.body).problem(t, tc.status, tc.detail...)
			if after := e.snapshot(); after != before {
				t.Errorf("stored data changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}

	// Drain a pending run: 202, recorded; again keeps the first reason.
	var run api.Run
	e.do("POST", "/v1/runs/pending/drain", `{"reason":"deploy"}`).ok(t, http.StatusAccepted, &run)
	if !run.DrainRequested || run.DrainReason != "deploy" {
		t.Errorf("drained = %+v", run)
	}
	e.do("POST", "/v1/runs/pending/drain", ``).ok(t, http.StatusAccepted, &run)
	if run.DrainReason != "deploy" {
		t.Errorf("second drain = %+v", run)
	}
	// Cancel it: requested (202) since it is not paused.
	e.do("POST", "/v1/runs/pending/cancel", ``).ok(t, http.StatusAccepted, &run)
	if !run.CancelRequested || run.Status != pregel.RunPending {
		t.Errorf("cancel = %+v", run)
	}

	// Resume the interrupted run with a value: pending again, and the
	// value reaches the node.
	var ask api.RunDetail
	e.do("GET", "/v1/runs/asking", nil).ok(t, http.StatusOK, &ask)
	if ask.Status != pregel.RunInterrupted || len(ask.Interrupts) != 1 || string(ask.Interrupts[0].Value) != `{"question":"what is your name?"}` {
		t.Fatalf("interrupted run = %+v", ask)
	}
	e.do("POST", "/v1/runs/asking/resume", map[string]any{"resume_by_id": map[string]any{ask.Interrupts[0].ID: "Ada"}}).ok(t, http.StatusAccepted, &run)
	if run.Status != pregel.RunPending {
		t.Errorf("resumed = %+v", run)
	}
	e.finish("asking", pregel.WithResume("Ada"))
	e.do("GET", "/v1/runs/asking", nil).ok(t, http.StatusOK, &ask)
	if ask.Status != pregel.RunCompleted || string(ask.Values["text"]) != `"hello Ada"` {
		t.Errorf("after resume = %+v %s", ask, ask.Values)
	}

	// Cancel a paused run: at once (200).
	e.create("ask", api.CreateRunRequest{RunID: "asking2"})
	e.finish("asking2")
	e.do("POST", "/v1/runs/asking2/cancel", `{}`).ok(t, http.StatusOK, &run)
	if run.Status != pregel.RunCancelled {
		t.Errorf("cancel paused = %+v", run)
	}
}

func TestAuth(t *testing.T) {
	e := newEnv(t, withToken("s3cret"))
	for _, tc := range []struct {
		name, auth string
		status     int
		challenge  string
	}{
		{"missing", "", 401, `Bearer realm="superstep"`},
		{"wrong", "Bearer nope", 401, `Bearer realm="superstep", error="invalid_token"`},
		{"prefix of the token", "Bearer s3cre", 401, `error="invalid_token"`},
		{"other scheme", "Basic czNjcmV0", 401, `Bearer realm="superstep"`},
		{"right", "Bearer s3cret", 200, ""},
		{"right, scheme in lower case", "bearer s3cret", 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := e.do("GET", "/v1/graphs", nil, "Authorization", tc.auth)
			if tc.status == 200 {
				res.ok(t, 200, nil)
				return
			}
			res.problem(t, tc.status, "token")
			if got := res.header.Get("WWW-Authenticate"); !strings.Contains(got, tc.challenge) {
				t.Errorf("WWW-Authenticate = %q, want %q", got, tc.challenge)
			}
		})
	}
	// A refused create stores nothing.
	before := e.snapshot()
	e.do("POST", "/v1/graphs/echo/runs", `{}`, "Authorization", "").problem(t, 401)
	if e.snapshot() != before {
		t.Error("unauthenticated create stored a run")
	}
	// Health needs no token.
	var h api.Health
	e.do("GET", "/healthz", nil, "Authorization", "").ok(t, http.StatusOK, &h)
	if h.Status != "ok" {
		t.Errorf("health = %+v", h)
	}

	// Routes mounted with Handle sit behind the same check.
	handler, err := api.New(api.Config{Service: e.svc, Token: "s3cret", Logger: testLogger(t), NoStreams: true})
	if err != nil {
		t.Fatal(err)
	}
	handler.Handle("POST /a2a/{graph}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.PathValue("graph")) }))
	srv := httptest.NewServer(handler)
	defer srv.Close()
	mounted := &env{t: t, srv: srv}
	mounted.do("POST", "/a2a/echo", `{}`).problem(t, http.StatusUnauthorized)
	if res := mounted.do("POST", "/a2a/echo", `{}`, "Authorization", "Bearer s3cret"); res.status != 200 || string(res.body) != "echo" {
		t.Errorf("mounted route: %d %s", res.status, res.body)
	}
}

func TestCrossOriginBrowserRequestRefused(t *testing.T) {
	e := newEnv(t)
	before := e.snapshot()
	e.do("POST", "/v1/graphs/echo/runs", `{}`, "Sec-Fetch-Site", "cross-site").problem(t, http.StatusForbidden, "cross-origin")
	if e.snapshot() != before {
		t.Error("cross-origin create stored a run")
	}
	e.do("GET", "/v1/graphs", nil, "Sec-Fetch-Site", "cross-site").ok(t, http.StatusOK, nil)
	e.do("POST", "/v1/graphs/echo/runs", `{}`, "Sec-Fetch-Site", "same-origin").ok(t, http.StatusAccepted, nil)
}

func TestPanicsAndInternalErrors(t *testing.T) {
	reg, err := runs.NewRegistry(echoGraph(t))
	if err != nil {
		t.Fatal(err)
	}
	cps := pregel.NewMemoryStore()
	store := &failingStore{Store: runs.NewMemoryStore(), err: errors.New("sqlite: disk I/O error at /var/db/runs.db")}
	svc := &runs.Service{Graphs: reg, Runs: store, Checkpoints: cps, Dispatcher: &recordingDispatcher{}, Logger: testLogger(t)}
	e := startEnv(t, svc, cps)
	h, err := api.New(api.Config{Service: svc, Logger: testLogger(t), NoStreams: true})
	if err != nil {
		t.Fatal(err)
	}
	h.Handle("GET /boom", http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("kaboom") }))
	h.Handle("GET /extra/{x}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.PathValue("x")) }))
	srv := httptest.NewServer(h)
	defer srv.Close()

	for _, path := range []string{"/v1/runs", "/v1/runs/r1"} {
		p := e.do("GET", path, nil).problem(t, http.StatusInternalServerError)
		if p.Detail != "internal error" || strings.Contains(string(mustJSON(t, p)), "sqlite") {
			t.Errorf("internal error leaked: %+v", p)
		}
	}
	e2 := &env{t: t, srv: srv}
	if p := e2.do("GET", "/boom", nil).problem(t, http.StatusInternalServerError); p.Detail != "internal error" {
		t.Errorf("panic: %+v", p)
	}
	if res := e2.do("GET", "/extra/x1", nil); res.status != 200 || string(res.body) != "x1" {
		t.Errorf("extra route: %d %s", res.status, res.body)
	}
	// The server still serves after a panic.
	e2.do("GET", "/healthz", nil).ok(t, http.StatusOK, nil)
}

// TestConcurrentControl sends many drains and cancels at one run at once:
// each gets a well-formed answer and the run ends in one consistent record.
func TestConcurrentControl(t *testing.T) {
	e := newEnv(t)
	e.create("echo", api.CreateRunRequest{RunID: "r1"})
	var wg sync.WaitGroup
	statuses := make([]int, 40)
	for i := range statuses {
		wg.Go(func() {
			path := "/v1/runs/r1/drain"
			if i%2 == 1 {
				path = "/v1/runs/r1/cancel"
			}
			req, _ := http.NewRequest("POST", e.srv.URL+path, strings.NewReader(`{}`))
			res, err := e.srv.Client().Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			res.Body.Close()
			statuses[i] = res.StatusCode
		})
	}
	wg.Wait()
	for i, s := range statuses {
		if s != http.StatusAccepted && s != http.StatusConflict {
			t.Errorf("request %d: status %d", i, s)
		}
	}
	var run api.Run
	e.do("GET", "/v1/runs/r1", nil).ok(t, http.StatusOK, &run)
	if !run.CancelRequested {
		t.Errorf("run = %+v", run)
	}
}

// eventSummary renders events as type/status/step(detail), space-separated.
func eventSummary(l api.EventList) string {
	parts := make([]string, len(l.Events))
	for i, ev := range l.Events {
		parts[i] = fmt.Sprintf("%s/%s/%d", ev.Type, ev.Status, ev.Step)
		if ev.Detail != "" {
			parts[i] += "(" + ev.Detail + ")"
		}
	}
	return strings.Join(parts, " ")
}

// recordingDispatcher remembers what it was asked and runs nothing.
type recordingDispatcher struct {
	mu         sync.Mutex
	dispatched []string
	signalled  []string
}

func (d *recordingDispatcher) Dispatch(ctx context.Context, r runs.Run) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dispatched = append(d.dispatched, r.ID)
	return nil
}

func (d *recordingDispatcher) Signal(ctx context.Context, r runs.Run) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.signalled = append(d.signalled, r.ID)
}

// failingStore fails listing and reading with an internal error.
type failingStore struct {
	runs.Store
	err error
}

func (s *failingStore) GetRun(ctx context.Context, id string) (runs.Run, error) {
	return runs.Run{}, fmt.Errorf("get run: %w", s.err)
}

func (s *failingStore) ListRuns(ctx context.Context, f runs.Filter) (runs.Page, error) {
	return runs.Page{}, fmt.Errorf("list runs: %w", s.err)
}

// holds pauses node "a" of the "slow" graph in chosen runs until the test
// releases it.
type holds struct {
	mu sync.Mutex
	m  map[string]*hold
}

type hold struct {
	entered chan struct{} // receives when the node starts waiting
	release chan struct{} // closed to let it finish
}

// add makes node "a" of run id wait.
func (h *holds) add(id string) *hold {
	h.mu.Lock()
	defer h.mu.Unlock()
	hd := &hold{entered: make(chan struct{}, 1), release: make(chan struct{})}
	h.m[id] = hd
	return hd
}

func (h *holds) wait(ctx context.Context) error {
	info, _ := pregel.TaskFrom(ctx)
	h.mu.Lock()
	hd := h.m[info.RunID]
	h.mu.Unlock()
	if hd == nil {
		return nil
	}
	select {
	case hd.entered <- struct{}{}:
	default:
	}
	select {
	case <-hd.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// slowGraph runs a -> b -> c, each adding to the text and the trail;
// node a waits while its run is held.
func slowGraph(t testing.TB, h *holds) *pregel.Graph {
	t.Helper()
	b := pregel.NewGraph[echoState]("slow").Describe("Three steps; the first may be held.")
	for _, n := range []string{"a", "b", "c"} {
		b.AddFunc(n, func(ctx context.Context, s echoState) (echoState, error) {
			if n == "a" {
				if err := h.wait(ctx); err != nil {
					return echoState{}, err
				}
			}
			return echoState{Text: s.Text + n, Trail: []string{n}}, nil
		}, pregel.Writes("text", "trail"))
	}
	b.AddEdge(pregel.Start, "a").AddEdge("a", "b").AddEdge("b", "c").AddEdge("c", pregel.End)
	g, err := b.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// newSchedulerEnv serves the API over the embedded Scheduler, which
// executes runs in the background as `superstep dev` does.
func newSchedulerEnv(t *testing.T) (*env, *holds) {
	t.Helper()
	h := &holds{m: make(map[string]*hold)}
	reg, err := runs.NewRegistry(echoGraph(t), askGraph(t), slowGraph(t, h))
	if err != nil {
		t.Fatal(err)
	}
	store, cps := runs.NewMemoryStore(), pregel.NewMemoryStore()
	sched := embedded.NewScheduler(embedded.SchedulerConfig{Graphs: reg, Runs: store, Checkpoints: cps, Logger: testLogger(t)})
	if err := sched.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	svc := &runs.Service{Graphs: reg, Runs: store, Checkpoints: cps, Dispatcher: sched, Logger: testLogger(t)}
	e := startEnv(t, svc, cps)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := sched.Shutdown(ctx, 100*time.Millisecond); err != nil {
			t.Error(err)
		}
	})
	return e, h
}

// await polls a run until its status is want.
func (e *env) await(id string, want pregel.RunStatus) api.RunDetail {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var d api.RunDetail
		e.do("GET", "/v1/runs/"+id, nil).ok(e.t, http.StatusOK, &d)
		if d.Status == want {
			return d
		}
		if d.Status.Terminal() || time.Now().After(deadline) {
			e.t.Fatalf("run %s is %s, want %s: %+v", id, d.Status, want, d)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (e *env) entered(hd *hold) {
	e.t.Helper()
	select {
	case <-hd.entered:
	case <-time.After(10 * time.Second):
		e.t.Fatal("node a did not start")
	}
}

func TestEndToEnd(t *testing.T) {
	t.Run("create and complete", func(t *testing.T) {
		e, _ := newSchedulerEnv(t)
		run := e.create("echo", api.CreateRunRequest{Input: json.RawMessage(`{"text":"hi"}`)})
		d := e.await(run.RunID, pregel.RunCompleted)
		if string(d.Values["text"]) != `"HI!"` || d.Counters.Completed != 2 || d.Step != 2 || len(d.Steps) != 3 {
			t.Errorf("completed run = %+v %s", d, d.Values)
		}
		var g api.Graph
		e.do("GET", "/v1/graphs/echo?run="+run.RunID, nil).ok(t, http.StatusOK, &g)
		if g.NodeStatuses["upper"] != pregel.NodeCompleted || g.NodeStatuses["exclaim"] != pregel.NodeCompleted {
			t.Errorf("statuses = %v", g.NodeStatuses)
		}
		// Creating it again with the same id and input is a no-op.
		var again api.Run
		e.do("POST", "/v1/graphs/echo/runs", api.CreateRunRequest{RunID: run.RunID, Input: json.RawMessage(`{"text":"hi"}`)}).ok(t, http.StatusOK, &again)
		if again.Status != pregel.RunCompleted {
			t.Errorf("again = %+v", again)
		}
	})

	t.Run("fleet drain and resume", func(t *testing.T) {
		e, h := newSchedulerEnv(t)
		input := json.RawMessage(`{"text":"s"}`)
		hd := h.add("f1")
		created := e.create("slow", api.CreateRunRequest{RunID: "f1", Input: input})
		if created.GraphVersion == nil || len(created.GraphVersion.Fingerprint) != 16 {
			t.Errorf("run view graph_version = %+v, want a fingerprint", created.GraphVersion)
		}
		e.entered(hd)
		e.do("POST", "/v1/runs/drain", api.FleetDrainRequest{Graph: "slow"}).problem(t, http.StatusBadRequest, "needs a reason")
		e.do("POST", "/v1/runs/drain", api.FleetDrainRequest{Graph: "nope", Reason: "deploy"}).problem(t, http.StatusBadRequest, `graph "nope" is not registered`)
		e.do("POST", "/v1/runs/resume", api.FleetResumeRequest{Status: pregel.RunInterrupted}).problem(t, http.StatusBadRequest, "only drained runs")
		var res api.FleetResult
		e.do("POST", "/v1/runs/drain", api.FleetDrainRequest{Reason: "deploy", Version: created.GraphVersion.Fingerprint}).ok(t, http.StatusAccepted, &res)
		if len(res.Runs) != 1 || res.Runs[0] != "f1" {
			t.Errorf("fleet drain = %+v, want f1", res)
		}
		close(hd.release)
		e.await("f1", pregel.RunDrained)
		var list api.RunList
		e.do("GET", "/v1/runs?version=no-such-version", nil).ok(t, http.StatusOK, &list)
		if len(list.Runs) != 0 {
			t.Errorf("list by an unknown version = %+v, want none", list.Runs)
		}
		e.do("POST", "/v1/runs/resume", api.FleetResumeRequest{Status: pregel.RunDrained, Graph: "slow"}).ok(t, http.StatusAccepted, &res)
		if len(res.Runs) != 1 || res.Runs[0] != "f1" {
			t.Errorf("fleet resume = %+v, want f1", res)
		}
		e.await("f1", pregel.RunCompleted)
	})

	t.Run("drain then resume ends like an undisturbed run", func(t *testing.T) {
		e, h := newSchedulerEnv(t)
		input := json.RawMessage(`{"text":"s"}`)
		plain := e.create("slow", api.CreateRunRequest{Input: input})
		want := e.await(plain.RunID, pregel.RunCompleted)

		hd := h.add("drained")
		e.create("slow", api.CreateRunRequest{RunID: "drained", Input: input})
		e.entered(hd)
		var g api.Graph
		e.do("GET", "/v1/graphs/slow?run=drained", nil).ok(t, http.StatusOK, &g)
		if g.NodeStatuses["a"] != pregel.NodeRunning || !strings.Contains(g.Mermaid, "class a running") {
			t.Errorf("held run: statuses %v", g.NodeStatuses)
		}
		var run api.Run
		e.do("POST", "/v1/runs/drained/drain", api.DrainRequest{Reason: "deploy"}).ok(t, http.StatusAccepted, &run)
		if !run.DrainRequested || run.DrainReason != "deploy" {
			t.Errorf("drain = %+v", run)
		}
		close(hd.release)
		d := e.await("drained", pregel.RunDrained)
		if d.Step != 1 || d.DrainReason != "deploy" || string(d.Values["text"]) != `"sa"` {
			t.Errorf("drained run = %+v %s", d, d.Values)
		}
		// Resume needs no body for a drained run.
		e.do("POST", "/v1/runs/drained/resume", "").ok(t, http.StatusAccepted, &run)
		got := e.await("drained", pregel.RunCompleted)
		if mustJSON(t, got.Values) != mustJSON(t, want.Values) || got.Counters != want.Counters || got.Step != want.Step {
			t.Errorf("resumed run ended with %s %+v, undisturbed with %s %+v", got.Values, got.Counters, want.Values, want.Counters)
		}

		// Its history, in order.
		var evs api.EventList
		e.do("GET", "/v1/runs/drained/events", nil).ok(t, http.StatusOK, &evs)
		wantEvents := "created/pending/0 running/running/0 drain_requested/running/0(deploy) drained/drained/1(deploy) " +
			"resume_requested/pending/1 running/running/1 completed/completed/3"
		if got := eventSummary(evs); got != wantEvents || evs.EventsDropped != 0 {
			t.Errorf("events:\n  %s\nwant\n  %s", got, wantEvents)
		}
		for i := 1; i < len(evs.Events); i++ {
			if evs.Events[i].At.Before(evs.Events[i-1].At) {
				t.Errorf("event %d at %v, before the one before it at %v", i, evs.Events[i].At, evs.Events[i-1].At)
			}
		}
		// Listings leave the history out.
		var raw map[string][]map[string]any
		e.do("GET", "/v1/runs", nil).ok(t, http.StatusOK, &raw)
		for _, r := range raw["runs"] {
			if _, ok := r["events"]; ok {
				t.Errorf("listed run has events: %v", r)
			}
		}
	})

	t.Run("interrupt then resume", func(t *testing.T) {
		e, _ := newSchedulerEnv(t)
		for _, tc := range []struct {
			name string
			body func(interrupt string) any
		}{
			{"resume", func(string) any { return map[string]any{"resume": "Ada"} }},
			{"resume_by_id", func(id string) any { return map[string]any{"resume_by_id": map[string]any{id: "Ada"}} }},
		} {
			t.Run(tc.name, func(t *testing.T) {
				run := e.create("ask", api.CreateRunRequest{})
				d := e.await(run.RunID, pregel.RunInterrupted)
				if len(d.Interrupts) != 1 || d.Interrupts[0].Node != "ask" {
					t.Fatalf("interrupted run = %+v", d)
				}
				// Without a value: 400, and the run still waits.
				e.do("POST", "/v1/runs/"+run.RunID+"/resume", "").problem(t, 400, "waits for a value")
				e.await(run.RunID, pregel.RunInterrupted)
				e.do("POST", "/v1/runs/"+run.RunID+"/resume", tc.body(d.Interrupts[0].ID)).ok(t, http.StatusAccepted, nil)
				id := d.Interrupts[0].ID
				d = e.await(run.RunID, pregel.RunCompleted)
				if string(d.Values["text"]) != `"hello Ada"` || len(d.Interrupts) != 0 {
					t.Errorf("resumed run = %+v %s", d, d.Values)
				}
				var evs api.EventList
				e.do("GET", "/v1/runs/"+run.RunID+"/events", nil).ok(t, http.StatusOK, &evs)
				// The answer given is in the history.
				answered := `(answer: "Ada")`
				if tc.name == "resume_by_id" {
					answered = `(answer to ` + id + `: "Ada")`
				}
				want := "created/pending/0 running/running/0 interrupted/interrupted/0(" + id + ") resume_requested/pending/0" + answered + " running/running/0 completed/completed/1"
				if got := eventSummary(evs); got != want {
					t.Errorf("events:\n  %s\nwant\n  %s", got, want)
				}
				// Resuming a completed run: 409, nothing changes.
				before := e.snapshot()
				e.do("POST", "/v1/runs/"+run.RunID+"/resume", `{"resume": "again"}`).problem(t, 409, "is completed")
				if e.snapshot() != before {
					t.Error("refused resume changed stored data")
				}
			})
		}
	})

	t.Run("cancel a running run", func(t *testing.T) {
		e, h := newSchedulerEnv(t)
		hd := h.add("c1")
		e.create("slow", api.CreateRunRequest{RunID: "c1", Input: json.RawMessage(`{"text":"s"}`)})
		e.entered(hd)
		var run api.Run
		res := e.do("POST", "/v1/runs/c1/cancel", "")
		if res.status != http.StatusAccepted && res.status != http.StatusOK {
			t.Fatalf("cancel: %d %s", res.status, res.body)
		}
		res.ok(t, res.status, &run)
		d := e.await("c1", pregel.RunCancelled)
		if d.Step != 0 || string(d.Values["text"]) != `"s"` {
			t.Errorf("cancelled run applied its unfinished step: %+v %s", d, d.Values)
		}
		var evs api.EventList
		e.do("GET", "/v1/runs/c1/events", nil).ok(t, http.StatusOK, &evs)
		if got, want := eventSummary(evs), "created/pending/0 running/running/0 cancel_requested/running/0 cancelled/cancelled/0"; got != want {
			t.Errorf("events:\n  %s\nwant\n  %s", got, want)
		}
		// Drain, cancel and resume of a cancelled run: 409.
		for _, action := range []string{"drain", "cancel", "resume"} {
			e.do("POST", "/v1/runs/c1/"+action, "").problem(t, 409, "cancelled")
		}
	})
}

// TestListCheckpointsPaged: a long run's checkpoints come in pages
// (default 100, limit 1 to 500) linked by next_page_token, oldest first,
// each step once.
func TestListCheckpointsPaged(t *testing.T) {
	e := newEnv(t)
	e.create("echo", api.CreateRunRequest{RunID: "long"})
	const steps = 230
	first := 0 // the steps the run has already
	if cp, err := e.cps.Load(t.Context(), "long", pregel.Latest); err == nil {
		first = cp.Step + 1
	}
	for i := first; i < steps; i++ {
		cp := &pregel.Checkpoint{RunID: "long", Graph: "echo", Step: i,
			Values: map[string]json.RawMessage{"text": json.RawMessage(fmt.Sprintf(`"%d"`, i))}, Versions: map[string]int{"text": i},
			Next: []pregel.Trigger{{Node: "upper"}}}
		if err := e.cps.Commit(t.Context(), cp); err != nil {
			t.Fatal(err)
		}
	}
	follow := func(t *testing.T, query string) (sizes []int, got []int) {
		t.Helper()
		tok := ""
		for range steps + 1 {
			q := query
			if tok != "" {
				q += "&page_token=" + url.QueryEscape(tok)
			}
			var cl api.CheckpointList
			e.do("GET", "/v1/runs/long/checkpoints?"+q, nil).ok(t, http.StatusOK, &cl)
			if cl.RunID != "long" {
				t.Fatalf("run_id %q", cl.RunID)
			}
			sizes = append(sizes, len(cl.Checkpoints))
			for _, s := range cl.Checkpoints {
				got = append(got, s.Step)
			}
			if tok = cl.NextPageToken; tok == "" {
				return sizes, got
			}
		}
		t.Fatalf("more than %d pages", steps+1)
		return nil, nil
	}
	for _, tc := range []struct {
		query string
		sizes []int
	}{
		{"", []int{100, 100, 30}},
		{"limit=100", []int{100, 100, 30}},
		{"limit=1", slices.Repeat([]int{1}, steps)},
		{"limit=115", []int{115, 115}},
		{"limit=500", []int{steps}},
	} {
		t.Run(tc.query, func(t *testing.T) {
			sizes, got := follow(t, tc.query)
			if !slices.Equal(sizes, tc.sizes) {
				t.Errorf("page sizes %v, want %v", sizes, tc.sizes)
			}
			for i, s := range got {
				if s != i {
					t.Fatalf("step %d listed at %d: %v", s, i, got)
				}
			}
			if len(got) != steps {
				t.Errorf("%d steps listed, want %d", len(got), steps)
			}
		})
	}
	var raw map[string]any
	e.do("GET", "/v1/runs/long/checkpoints?limit=500", nil).ok(t, http.StatusOK, &raw)
	if _, ok := raw["next_page_token"]; ok {
		t.Errorf("last page has a next_page_token")
	}
	// A run record whose step 0 is not stored yet.
	if _, _, err := e.svc.Runs.CreateRun(t.Context(), runs.Run{ID: "new", Graph: "echo", Status: pregel.RunPending}); err != nil {
		t.Fatal(err)
	}
	e.do("GET", "/v1/runs/new/checkpoints", nil).ok(t, http.StatusOK, &raw)
	if l, ok := raw["checkpoints"].([]any); !ok || len(l) != 0 {
		t.Errorf("run with no step: checkpoints %v, want []", raw["checkpoints"])
	}

	var runsPage api.RunList
	e.do("GET", "/v1/runs?limit=1", nil).ok(t, http.StatusOK, &runsPage)
	for _, tc := range []struct {
		query  string
		status int
		detail string
	}{
		{"?limit=0", 400, `limit "0" must be a whole number between 1 and 500`},
		{"?limit=501", 400, `limit "501" must be`},
		{"?limit=ten", 400, `limit "ten" must be`},
		{"?page_token=garbage", 400, `page token "garbage" is not one this store issued; start the listing again without it`},
		{"?page_token=" + url.QueryEscape(runsPage.NextPageToken), 400, `is not one this store issued`},
		{"?after=3", 400, `unknown query parameter "after"`},
	} {
		t.Run(tc.query, func(t *testing.T) {
			e.do("GET", "/v1/runs/long/checkpoints"+tc.query, nil).problem(t, tc.status, tc.detail)
		})
	}
	e.do("GET", "/v1/runs/nope/checkpoints?limit=5", nil).problem(t, 404, `run "nope" does not exist`)
}
