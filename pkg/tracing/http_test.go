package tracing_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/embedded"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/tracing"
)

// A nil Tracer leaves the handler as it is: untraced servers pay nothing.
func TestHTTPHandlerOff(t *testing.T) {
	h := http.NewServeMux()
	if got := (*tracing.Tracer)(nil).HTTPHandler(h); got != http.Handler(h) {
		t.Errorf("a nil Tracer wrapped the handler: %T", got)
	}
}

// The API behind HTTPHandler: a server span per request named after its
// route, the caller's trace context as its parent, the run created by a
// request in the request's trace, and streams that still stream.
func TestHTTPHandlerSpans(t *testing.T) {
	r := newRecorder()
	all, err := examples.All()
	if err != nil {
		t.Fatal(err)
	}
	reg, err := runs.NewRegistry(all...)
	if err != nil {
		t.Fatal(err)
	}
	records, cps := runs.NewMemoryStore(), pregel.NewMemoryStore()
	sched := embedded.NewScheduler(embedded.SchedulerConfig{Graphs: reg, Runs: records, Checkpoints: cps, Tracer: r})
	if err := sched.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sched.Shutdown(context.Background(), time.Second) })
	svc := &runs.Service{Graphs: reg, Runs: records, Checkpoints: cps, Dispatcher: sched, Tracer: r}
	apiHandler, err := api.New(api.Config{Service: svc, Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(r.HTTPHandler(apiHandler))
	t.Cleanup(srv.Close)

	// The caller's span, sent as traceparent.
	caller := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		SpanID:  trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8}, TraceFlags: trace.FlagsSampled, Remote: true,
	})
	send := func(method, path, body string, traced bool) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer tok")
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if traced {
			propagation.TraceContext{}.Inject(trace.ContextWithRemoteSpanContext(context.Background(), caller), propagation.HeaderCarrier(req.Header))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	if resp := send("POST", "/v1/graphs/counter/runs", `{"run_id": "c1", "input": {"limit": 2}}`, true); resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusAccepted {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("create: %s %s", resp.Status, b)
	}
	waitRun(t, svc, "c1", pregel.RunCompleted)
	// The stream, through the wrapped writer: it flushes, and ends.
	resp := send("GET", "/v1/runs/c1/stream?mode=updates", "", false)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("stream Content-Type %q", ct)
	}
	ended := false
	for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
		if sc.Text() == "event: end" {
			ended = true
		}
	}
	if !ended {
		t.Error("the stream through HTTPHandler did not end with its end event")
	}
	send("GET", "/v1/runs/c1", "", false).Body.Close()
	send("GET", "/v1/nowhere", "", false).Body.Close()
	srv.Close() // every request has ended, and so its span

	spans := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range r.rec.Ended() {
		if s.SpanKind() == trace.SpanKindServer {
			spans[s.Name()] = s
		}
	}
	for _, tc := range []struct {
		name, route, status string
	}{
		{"POST /v1/graphs/{graph}/runs", "/v1/graphs/{graph}/runs", ""},
		{"GET /v1/runs/{run_id}/stream", "/v1/runs/{run_id}/stream", "200"},
		{"GET /v1/runs/{run_id}", "/v1/runs/{run_id}", "200"},
		{"GET", "", "404"},
	} {
		s, ok := spans[tc.name]
		if !ok {
			t.Errorf("no server span %q; server spans: %v", tc.name, keys(spans))
			continue
		}
		if got := attr(s, "http.route"); got != tc.route {
			t.Errorf("%s: http.route %q, want %q", tc.name, got, tc.route)
		}
		if got := attr(s, "http.response.status_code"); tc.status != "" && got != tc.status {
			t.Errorf("%s: status code %q, want %s", tc.name, got, tc.status)
		}
	}
	// The create request continues the caller's trace, and the run's
	// spans (its root, its steps) are in it, under the request's span.
	create := spans["POST /v1/graphs/{graph}/runs"]
	if create == nil {
		t.FailNow()
	}
	if create.Parent().SpanID() != caller.SpanID() || create.SpanContext().TraceID() != caller.TraceID() {
		t.Errorf("the create span's parent is %s in trace %s, want the caller's span %s in %s", create.Parent().SpanID(), create.SpanContext().TraceID(), caller.SpanID(), caller.TraceID())
	}
	var root sdktrace.ReadOnlySpan
	steps := 0
	for _, s := range r.rec.Ended() {
		switch {
		case strings.HasPrefix(s.Name(), tracing.SpanRun):
			root = s
		case s.Name() == tracing.SpanStep && s.SpanContext().TraceID() == caller.TraceID():
			steps++
		}
	}
	if root == nil || root.Parent().SpanID() != create.SpanContext().SpanID() {
		t.Errorf("the run's root span is not a child of the request that created it: %v", root)
	}
	if steps != 2 {
		t.Errorf("%d superstep spans in the caller's trace, want 2", steps)
	}
	// A request without trace context starts a trace of its own.
	if get := spans["GET /v1/runs/{run_id}"]; get != nil && (get.Parent().IsValid() || get.SpanContext().TraceID() == caller.TraceID()) {
		t.Errorf("an untraced request joined a trace: parent %v", get.Parent())
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// OTEL_PROPAGATORS chooses how trace context is written: in HTTP headers,
// queue messages and run records alike.
func TestFromEnvPropagators(t *testing.T) {
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	for _, tc := range []struct {
		env     string
		fields  []string // written into a run record
		missing []string
	}{
		{"", []string{"traceparent"}, []string{"b3"}},
		{"b3", []string{"b3"}, []string{"traceparent"}},
		{"tracecontext, xray", []string{"traceparent", "X-Amzn-Trace-Id"}, []string{"b3"}},
	} {
		t.Run(tc.env, func(t *testing.T) {
			t.Setenv("OTEL_PROPAGATORS", tc.env)
			tr, err := tracing.FromEnv(context.Background(), "test")
			if err != nil || tr == nil {
				t.Fatalf("FromEnv = %v, %v", tr, err)
			}
			defer tr.Shutdown(context.Background())
			run := &runs.Run{ID: "r", Graph: "g"}
			_, end := tr.StartRun(context.Background(), run)
			end(nil)
			for _, f := range tc.fields {
				if run.Trace[f] == "" && run.Trace[strings.ToLower(f)] == "" {
					t.Errorf("the run record's trace context %v lacks %s", run.Trace, f)
				}
			}
			for _, f := range tc.missing {
				if _, ok := run.Trace[f]; ok {
					t.Errorf("the run record's trace context %v has %s", run.Trace, f)
				}
			}
		})
	}
	t.Setenv("OTEL_PROPAGATORS", "tracecontext,smoke-signals")
	if _, err := tracing.FromEnv(context.Background(), "test"); err == nil || !strings.Contains(err.Error(), "smoke-signals") {
		t.Errorf("FromEnv with an unknown propagator: %v, want an error naming it", err)
	}
}
