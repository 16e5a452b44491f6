package infra

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/superstep/superstep/internal/graphs"
	"github.com/superstep/superstep/internal/mototest"
	"github.com/superstep/superstep/internal/otlptest"
	"github.com/superstep/superstep/internal/rietest"
	"github.com/superstep/superstep/internal/serverlesstest"
)

// TestBootstrapsTrace: the api and tick bootstraps, behind the runtime
// emulator with an OTLP endpoint set, export each invocation's spans
// before it returns (one trace: the api's root, the tick's superstep and
// node spans), and a line a graph's own node logs with
// slog.InfoContext(ctx, …) carries the ids of its exported node span.
func TestBootstrapsTrace(t *testing.T) {
	rcv := otlptest.Start(t)
	srv := mototest.Start(t)
	cfg, env := serverlesstest.Provision(t, srv, "rietrace")
	bin := t.TempDir()
	rietest.BuildBootstrap(t, "..", "./functions/...", bin+string(os.PathSeparator))
	env = append(env, rcv.Env()...) // only the per-invocation flush exports
	env = append(env,
		"SUPERSTEP_FUNCTION=",
		graphs.ExecLogEnv+"="+filepath.Join(t.TempDir(), "exec.log"),
	)
	api := rietest.Start(t, filepath.Join(bin, "api"), env...)
	tickFn := rietest.Start(t, filepath.Join(bin, "tick"), env...)

	ev := serverlesstest.APIEvent(t, "..", `{"input": {"rounds": 1}, "run_id": "rie-traced"}`)
	ev.RawPath, ev.RequestContext.HTTP.Path = "/v1/graphs/"+graphs.ExecLogGraph+"/runs", "/v1/graphs/"+graphs.ExecLogGraph+"/runs"
	payload, _ := json.Marshal(ev)
	if code, resp := api.Invoke(t, payload); code != 200 || !strings.Contains(string(resp), `"statusCode":202`) {
		t.Fatalf("api: %d %s\n%s", code, resp, api.Logs())
	}
	var trace string
	for _, s := range rcv.Spans() {
		if s.Name == "invoke_workflow "+graphs.ExecLogGraph {
			trace = s.TraceID
		}
	}
	if trace == "" {
		t.Fatalf("the api invocation exported no invoke_workflow span: %+v\n%s", rcv.Spans(), api.Logs())
	}

	tick, _ := serverlesstest.Receive(t, srv, cfg.TickQueueURL, "arn:aws:sqs:us-east-1:123456789012:rietrace-ticks.fifo")
	payload, _ = json.Marshal(tick)
	if code, resp := tickFn.Invoke(t, payload); code != 200 || strings.Contains(string(resp), "itemIdentifier") {
		t.Fatalf("tick: %d %s\n%s", code, resp, tickFn.Logs())
	}
	spans := map[string]otlptest.Span{}
	for _, s := range rcv.Spans() {
		spans[s.SpanID] = s
		if s.TraceID != trace {
			t.Errorf("span %q is in trace %s, want the run's %s", s.Name, s.TraceID, trace)
		}
	}
	// The node's own line, JSON in the function's log.
	deadline := time.Now().Add(5 * time.Second)
	var line string
	for line == "" && time.Now().Before(deadline) {
		line = regexp.MustCompile(`\{[^\n]*"msg":"` + regexp.QuoteMeta(graphs.ExecLogLine) + `"[^\n]*\}`).FindString(tickFn.Logs())
		time.Sleep(20 * time.Millisecond)
	}
	if line == "" {
		t.Fatalf("the tick function's log has no line of the node's own:\n%s", tickFn.Logs())
	}
	var l struct {
		TraceID string `json:"trace_id"`
		SpanID  string `json:"span_id"`
	}
	if err := json.Unmarshal([]byte(line), &l); err != nil {
		t.Fatal(err)
	}
	if s, ok := spans[l.SpanID]; !ok || l.TraceID != trace || !strings.HasPrefix(s.Name, "node ") {
		t.Errorf("the node's log line %s does not carry the ids of an exported node span of the run (got %+v)", line, s)
	}
}
