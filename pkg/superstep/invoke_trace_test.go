package superstep

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/superstep/superstep/internal/graphs"
	"github.com/superstep/superstep/internal/mototest"
	"github.com/superstep/superstep/internal/otlptest"
	"github.com/superstep/superstep/pkg/serverless"
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
	cfg, err := serverless.Provision(t.Context(), srv.Config, serverless.Resources{Prefix: "invoke-otel"})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		serverless.EnvTable: cfg.Table, serverless.EnvTickQueue: cfg.TickQueueURL, serverless.EnvNodeQueue: cfg.NodeQueueURL,
		"AWS_ENDPOINT_URL": srv.URL, "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
		// A batch that would not export by itself before the test ends.
		"OTEL_BSP_SCHEDULE_DELAY": "600000",
	} {
		t.Setenv(k, v)
	}
	opts := WithGraphs(graphs.Graphs(nil)...)
	dir := t.TempDir()
	api, err := os.ReadFile("../../events/api-create-run.json")
	if err != nil {
		t.Fatal(err)
	}
	// A counter run that takes four ticks: limit 4.
	var ev events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(api, &ev); err != nil {
		t.Fatal(err)
	}
	ev.Body, ev.IsBase64Encoded = `{"input": {"limit": 4}, "run_id": "otel-chain"}`, false
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
		out, err := client.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(cfg.TickQueueURL), MaxNumberOfMessages: 1, MessageAttributeNames: []string{"All"},
			MessageSystemAttributeNames: nil,
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) != 1 {
			t.Fatalf("tick %d: no tick message in the queue", i)
		}
		m := out.Messages[0]
		rec := events.SQSMessage{MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
			EventSource: "aws:sqs", EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:invoke-otel-ticks.fifo",
			Attributes: map[string]string{"ApproximateReceiveCount": "1"}, MessageAttributes: map[string]events.SQSMessageAttribute{}}
		for k, a := range m.MessageAttributes {
			rec.MessageAttributes[k] = events.SQSMessageAttribute{DataType: aws.ToString(a.DataType), StringValue: a.StringValue}
		}
		event := filepath.Join(dir, "tick.json")
		writeEventFile(t, event, events.SQSEvent{Records: []events.SQSMessage{rec}})
		before := len(rcv.Spans())
		runWith(t, nil, []string{"invoke", "tick", "--event", event}, opts).want(t, ExitOK)
		if _, err := client.DeleteMessage(t.Context(), &sqs.DeleteMessageInput{QueueUrl: aws.String(cfg.TickQueueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
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
