//go:build !superstep.lambda

package superstep

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/superstep/superstep/internal/graphs"
	"github.com/superstep/superstep/internal/mototest"
	"github.com/superstep/superstep/internal/otlptest"
	"github.com/superstep/superstep/internal/serverlesstest"
)

// TestInvokeExportsSpans: `superstep invoke` with tracing on exports the
// spans of its invocation before it exits. A run is driven through a
// chain of five invocations (api, then each tick message the last one
// sent, read from the queue), each a process of its own as far as the
// provider goes; after each, the OTLP receiver holds its spans, all in
// the one trace the api invocation started.
func TestInvokeExportsSpans(t *testing.T) {
	rcv := otlptest.Start(t)
	srv := mototest.Start(t)
	cfg, env := serverlesstest.Provision(t, srv, "invoke-otel")
	serverlesstest.Setenv(t, append(env, rcv.Env()...)) // a batch that would not export by itself before the test ends
	opts := WithGraphs(graphs.Graphs(nil)...)
	dir := t.TempDir()
	// A counter run that takes four ticks: limit 4.
	ev := serverlesstest.APIEvent(t, "../..", `{"input": {"limit": 4}, "run_id": "otel-chain"}`)
	event := filepath.Join(dir, "api.json")
	writeEventFile(t, event, ev)

	r := runWith(t, nil, []string{"invoke", "api", "--event", event}, opts).want(t, ExitOK)
	if !strings.Contains(r.stdout, `"statusCode":202`) {
		t.Fatalf("invoke api: %s", r.stdout)
	}
	spans := rcv.Spans()
	if len(spans) == 0 {
		t.Fatal("invoke api exported no spans")
	}
	trace := ""
	for _, s := range spans {
		if strings.HasPrefix(s.Name, "invoke_workflow") {
			trace = s.TraceID
		}
	}
	if trace == "" {
		t.Fatalf("invoke api exported no invoke_workflow span: %+v", spans)
	}

	client := sqs.NewFromConfig(srv.Config)
	for i := 1; i <= 4; i++ {
		tick, receipt := serverlesstest.Receive(t, srv, cfg.TickQueueURL, "arn:aws:sqs:us-east-1:123456789012:invoke-otel-ticks.fifo")
		event := filepath.Join(dir, "tick.json")
		writeEventFile(t, event, tick)
		before := len(rcv.Spans())
		runWith(t, nil, []string{"invoke", "tick", "--event", event}, opts).want(t, ExitOK)
		if _, err := client.DeleteMessage(t.Context(), &sqs.DeleteMessageInput{QueueUrl: aws.String(cfg.TickQueueURL), ReceiptHandle: receipt}); err != nil {
			t.Fatal(err)
		}
		got := rcv.Spans()[before:]
		if len(got) == 0 {
			t.Fatalf("invoke tick %d exported no spans", i)
		}
		for _, s := range got {
			if s.TraceID != trace {
				t.Errorf("tick %d: span %q in trace %s, want the run's %s", i, s.Name, s.TraceID, trace)
			}
		}
	}
}

func writeEventFile(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
