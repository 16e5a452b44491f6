package tracing_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/superstep/superstep/pkg/a2a"
	"github.com/superstep/superstep/pkg/agent"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/tracing"
)

// An A2A message/stream from a traced client, on the embedded runtime:
// the client's span, the request's server span, the agent's invoke_agent
// root and the whole run under it are one trace, ending with the run's
// end span.
func TestA2AStreamTrace(t *testing.T) {
	r := newRecorder()
	chat, err := agent.New(agent.Config{Name: "chat", Model: bedrockModel{agent.ScriptedTurns(agent.Response{
		Message: agent.AssistantText("Hello."), StopReason: agent.StopEndTurn, Usage: agent.Usage{InputTokens: 3, OutputTokens: 2}})}})
	if err != nil {
		t.Fatal(err)
	}
	svc, sched := serviceAndScheduler(t, r, "sqlite", []*pregel.Graph{chat})
	agents, err := a2a.New(svc, a2a.WithEvents(sched), a2a.WithStreaming(true))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(a2a.Pattern, agents)
	srv := httptest.NewServer(r.Tracer.HTTPHandler(mux))
	t.Cleanup(srv.Close)

	ctx, span := caller(r, "client: stream")
	body := `{"jsonrpc": "2.0", "id": 1, "method": "message/stream", "params": {"message": {"kind": "message", "role": "user", "messageId": "m1", "contextId": "conv-1", "parts": [{"kind": "text", "text": "hi"}]}}}`
	req, _ := http.NewRequestWithContext(t.Context(), "POST", srv.URL+"/a2a/chat", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	stream, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	span.End()
	if resp.StatusCode != 200 || !strings.Contains(string(stream), `"completed"`) {
		t.Fatalf("message/stream: %d\n%s", resp.StatusCode, stream)
	}
	var spans []sdktrace.ReadOnlySpan
	deadline := time.Now().Add(5 * time.Second)
	for {
		spans = nil
		ended := false
		for _, s := range r.rec.Ended() {
			if s.SpanContext().TraceID() == span.SpanContext().TraceID() {
				spans = append(spans, s)
				ended = ended || strings.HasPrefix(s.Name(), tracing.SpanEnd+" ")
			}
		}
		if ended || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	got := tree(t, spans, "superstep.step", "superstep.run.status")
	want := `client: stream
  POST /a2a/{graph}
    invoke_agent chat
      superstep step=1
        node model step=1
          chat test.model-v1
      end chat step=1 run.status=completed
`
	if got != want {
		t.Errorf("span tree:\n%s\nwant:\n%s", got, want)
	}
}
