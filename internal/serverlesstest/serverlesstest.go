// Package serverlesstest sets up what the tests of superstep's Lambda
// functions share: the table and queues on moto_server and the
// environment a function reads to use them, the sample API event, and
// the SQS event of the next message of a queue. The tests run the
// functions either in process (`superstep invoke`) or as bootstraps
// behind the runtime emulator (internal/rietest).
package serverlesstest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/superstep/superstep/internal/mototest"
	"github.com/superstep/superstep/pkg/serverless"
)

// Provision makes a table and queues named after prefix on srv and
// returns their Config and the environment (NAME=VALUE, as exec.Cmd.Env
// takes it) a function needs to use them: the table, the tick, node and
// start queues, and moto's endpoint, region and test credentials.
func Provision(t testing.TB, srv *mototest.Server, prefix string) (serverless.Config, []string) {
	t.Helper()
	cfg, err := serverless.Provision(t.Context(), srv.Config, serverless.Resources{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	return cfg, []string{
		serverless.EnvTable + "=" + cfg.Table,
		serverless.EnvTickQueue + "=" + cfg.TickQueueURL,
		serverless.EnvNodeQueue + "=" + cfg.NodeQueueURL,
		serverless.EnvStartQueue + "=" + cfg.StartQueueURL,
		"AWS_ENDPOINT_URL=" + srv.URL,
		"AWS_REGION=" + mototest.Region, "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
	}
}

// Setenv sets each NAME=VALUE of env for the rest of the test, for a
// function run in the test's process.
func Setenv(t testing.TB, env []string) {
	t.Helper()
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			t.Fatalf("serverlesstest.Setenv: %q is not NAME=VALUE", kv)
		}
		t.Setenv(k, v)
	}
}

// APIEvent is the repository's sample API event (events/api-create-run.json
// under root) with body as its body.
func APIEvent(t testing.TB, root, body string) events.APIGatewayV2HTTPRequest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "events", "api-create-run.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ev events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatal(err)
	}
	ev.Body, ev.IsBase64Encoded = body, false
	return ev
}

// Receive takes the next message of the queue at url on srv, failing the
// test when there is none, and returns it as the SQS event Lambda would
// deliver from the queue named by arn, and the message's receipt handle.
func Receive(t testing.TB, srv *mototest.Server, url, arn string) (events.SQSEvent, *string) {
	t.Helper()
	out, err := sqs.NewFromConfig(srv.Config).ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(url), MaxNumberOfMessages: 1, MessageAttributeNames: []string{"All"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Messages) != 1 {
		t.Fatalf("no message in the queue %s", url)
	}
	m := out.Messages[0]
	rec := events.SQSMessage{MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
		EventSource: "aws:sqs", EventSourceARN: arn,
		Attributes: map[string]string{"ApproximateReceiveCount": "1"}, MessageAttributes: map[string]events.SQSMessageAttribute{}}
	for k, a := range m.MessageAttributes {
		rec.MessageAttributes[k] = events.SQSMessageAttribute{DataType: aws.ToString(a.DataType), StringValue: a.StringValue}
	}
	return events.SQSEvent{Records: []events.SQSMessage{rec}}, m.ReceiptHandle
}
