package infra

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/superstep/superstep/examples/loop"
	"github.com/superstep/superstep/internal/graphs"
	"github.com/superstep/superstep/internal/mototest"
	"github.com/superstep/superstep/internal/rietest"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/serverless"
)

// streamTimeout is the stream function's timeout under the emulator, so
// that a stream of a run that goes on ends soon.
const streamTimeout = 5

var streamTimeoutEnv = fmt.Sprintf("AWS_LAMBDA_FUNCTION_TIMEOUT=%d", streamTimeout)

// streamed is a function URL streaming response as the function writes
// it (content type application/vnd.awslambda.http-integration-response):
// a JSON prelude, eight zero bytes, the body.
type streamed struct {
	StatusCode int               `json:"statusCode"`
	Headers    map[string]string `json:"headers"`
	body       string
}

func parseStreamed(t *testing.T, resp []byte) streamed {
	t.Helper()
	prelude, body, ok := bytes.Cut(resp, make([]byte, 8))
	var s streamed
	if !ok || json.Unmarshal(prelude, &s) != nil {
		t.Fatalf("not a streamed HTTP integration response (prelude, 8 NUL bytes, body): %q", resp)
	}
	s.body = string(body)
	return s
}

// TestStreamBootstrapUnderRuntimeEmulator runs functions/stream behind
// the Lambda runtime interface emulator, against moto, as Lambda runs it
// behind a function URL in RESPONSE_STREAM mode: the handler answers with
// a streamed HTTP integration response (a JSON prelude with the status
// and headers, eight NUL bytes, the body); the stream of a finished run
// replays every event with
// consecutive ids and ends with its end event, a stream resumed with
// Last-Event-ID gives the rest, and the stream of a run that goes on ends
// cleanly before the function's timeout.
func TestStreamBootstrapUnderRuntimeEmulator(t *testing.T) {
	srv := mototest.Start(t)
	cfg, err := serverless.Provision(t.Context(), srv.Config, serverless.Resources{Prefix: "riestream"})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Events = serverless.EventsOn
	reg, err := graphs.Registry(nil)
	if err != nil {
		t.Fatal(err)
	}
	app, err := serverless.New(serverless.Options{Config: cfg, AWS: srv.Config, Graphs: reg})
	if err != nil {
		t.Fatal(err)
	}
	// Run a counter to its end with the serverless handlers, polled here.
	if _, _, err := app.Service.Create(t.Context(), loop.Name, runs.CreateRequest{RunID: "done", Input: json.RawMessage(`{"limit": 3}`)}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	polled := make(chan error, 1)
	go func() {
		polled <- app.Pollers(serverless.PollOptions{IdleDelay: 50 * time.Millisecond, Timeout: 30 * time.Second}).Run(ctx)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := app.Service.Get(t.Context(), "done")
		if err == nil && r.Status == pregel.RunCompleted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run done: %+v, %v after 30 s", r, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-polled; err != nil {
		t.Fatal(err)
	}
	// A run nothing executes now.
	if _, _, err := app.Service.Create(t.Context(), loop.Name, runs.CreateRequest{RunID: "stuck", Input: json.RawMessage(`{"limit": 3}`)}); err != nil {
		t.Fatal(err)
	}

	bin := filepath.Join(t.TempDir(), "bootstrap")
	rietest.BuildBootstrap(t, "..", "./functions/stream", bin)
	em := rietest.Start(t, bin,
		serverless.EnvTable+"="+cfg.Table, serverless.EnvTickQueue+"="+cfg.TickQueueURL, serverless.EnvNodeQueue+"="+cfg.NodeQueueURL,
		"AWS_ENDPOINT_URL="+srv.URL, "AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
		"SUPERSTEP_FUNCTION=", streamTimeoutEnv)
	sample, err := os.ReadFile("../events/functionurl-stream-run.json")
	if err != nil {
		t.Fatal(err)
	}
	invoke := func(t *testing.T, run, lastEventID string) (streamed, time.Duration) {
		t.Helper()
		var ev map[string]any
		if err := json.Unmarshal(sample, &ev); err != nil {
			t.Fatal(err)
		}
		path := "/v1/runs/" + run + "/stream"
		ev["rawPath"], ev["rawQueryString"] = path, "mode=events"
		ev["requestContext"].(map[string]any)["http"].(map[string]any)["path"] = path
		if lastEventID != "" {
			ev["headers"].(map[string]any)["last-event-id"] = lastEventID
		}
		payload, _ := json.Marshal(ev)
		start := time.Now()
		code, resp := em.Invoke(t, payload)
		took := time.Since(start)
		if code != 200 || strings.Contains(string(resp), `"errorType"`) {
			t.Fatalf("invoke: %d %s\n%s", code, resp, em.Logs())
		}
		// This emulator hands the streamed response on whole, without
		// the response mode and content type headers; the framing of
		// the body (a prelude and eight NUL bytes) is what a streaming
		// function URL handler writes, and what Lambda turns into the
		// HTTP response.
		s := parseStreamed(t, resp)
		if s.StatusCode != 200 || s.Headers["Content-Type"] != "text/event-stream" {
			t.Fatalf("stream: %d %v; want 200 text/event-stream", s.StatusCode, s.Headers)
		}
		return s, took
	}
	ids := regexp.MustCompile(`(?m)^id: (\d+)$`)

	t.Run("finished run", func(t *testing.T) {
		s, _ := invoke(t, "done", "")
		got := ids.FindAllStringSubmatch(s.body, -1)
		// 3 steps: run_started, then per step step_started,
		// node_started, node_finished, state_updated, step_finished,
		// and run_finished.
		if len(got) != 17 {
			t.Fatalf("%d events; want 17:\n%s", len(got), s.body)
		}
		for i, m := range got {
			if m[1] != fmt.Sprint(i+1) {
				t.Fatalf("event %d has id %s", i, m[1])
			}
		}
		if !strings.Contains(s.body, "event: end\ndata: {\"run_id\":\"done\",\"status\":\"completed\"") {
			t.Errorf("no end event saying completed:\n%s", s.body)
		}
		rest, _ := invoke(t, "done", "15")
		if got := ids.FindAllStringSubmatch(rest.body, -1); len(got) != 2 || got[0][1] != "16" {
			t.Errorf("resumed after 15: %v; want events 16 and 17", got)
		}
	})
	t.Run("run going on", func(t *testing.T) {
		s, took := invoke(t, "stuck", "")
		if strings.Contains(s.body, "event: end") || !strings.Contains(s.body, "Last-Event-ID") {
			t.Errorf("stream of a run going on: %q; want no end, and a comment saying to reconnect", s.body)
		}
		if took >= streamTimeout*time.Second {
			t.Errorf("the invocation took %v; want it to end before the %d s timeout", took, streamTimeout)
		}
	})
}
