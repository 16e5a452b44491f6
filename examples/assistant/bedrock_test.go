package assistant_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/superstep/superstep/examples/assistant"
	"github.com/superstep/superstep/pkg/agent"
	"github.com/superstep/superstep/pkg/pregel"
)

func frame(t *testing.T, typ, payload string) []byte {
	var h eventstream.Headers
	h.Set(":message-type", eventstream.StringValue("event"))
	h.Set(":event-type", eventstream.StringValue(typ))
	h.Set(":content-type", eventstream.StringValue("application/json"))
	var buf bytes.Buffer
	if err := eventstream.NewEncoder().Encode(&buf, eventstream.Message{Headers: h, Payload: []byte(payload)}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// With SUPERSTEP_ASSISTANT_MODEL set, the example graph talks to Bedrock
// (here a local server speaking ConverseStream, reached through the SDK's
// standard endpoint variable) with the AWS configuration of the
// environment.
func TestAssistantOnBedrockByEnv(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		time.Sleep(5 * time.Millisecond) // see the fake Bedrock of pkg/agent/bedrock: the SDK races instant answers
		w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
		for _, f := range [][2]string{
			{"messageStart", `{"role":"assistant"}`},
			{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Hello from Bedrock."}}`},
			{"contentBlockStop", `{"contentBlockIndex":0}`},
			{"messageStop", `{"stopReason":"end_turn"}`},
			{"metadata", `{"usage":{"inputTokens":9,"outputTokens":4,"totalTokens":13},"metrics":{"latencyMs":5}}`},
		} {
			w.Write(frame(t, f[0], f[1]))
		}
	}))
	defer srv.Close()
	t.Setenv(assistant.ModelEnv, "us.amazon.nova-lite-v1:0")
	t.Setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", srv.URL)
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
	g, err := assistant.Graph()
	if err != nil {
		t.Fatal(err)
	}
	res, err := g.Run(context.Background(), agent.TextInput("hi"))
	if err != nil || res.Status != pregel.RunCompleted {
		t.Fatalf("run: %v %v", res.Status, err)
	}
	var st agent.State
	if err := res.Decode(&st); err != nil {
		t.Fatal(err)
	}
	if got := st.Messages[len(st.Messages)-1].Text(); got != "Hello from Bedrock." || st.Usage.Total.TotalTokens != 13 {
		t.Fatalf("answer %q, usage %+v", got, st.Usage)
	}
	if len(paths) != 1 || !strings.HasSuffix(paths[0], "/converse-stream") || !strings.Contains(paths[0], "nova-lite") {
		t.Fatalf("calls %v", paths)
	}
}
