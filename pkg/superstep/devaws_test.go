//go:build !superstep.lambda

package superstep

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/superstep/superstep/internal/mototest"
)

// dev --aws --create against moto: the API served here, runs executed by
// the Lambda handlers called from local pollers, steered with the client
// commands, stopped by a signal.
func TestDevAWS(t *testing.T) {
	srv := mototest.Start(t)
	var b [3]byte
	rand.Read(b[:])
	prefix := "devaws-" + hex.EncodeToString(b[:])
	var out, errb syncBuffer
	env, sigs := serverEnv(&out, &errb)
	code := make(chan int, 1)
	go func() {
		// Short polls: mototest serialises the emulator's requests, so
		// a long poll would hold up every other one.
		code <- Run(context.Background(), env, []string{"dev", "--aws", "--endpoint", srv.URL, "--create", "--prefix", prefix,
			"--addr", "127.0.0.1:0", "--token", "tok", "--wait-time", "0", "--grace", "2s"}, testGraphs(nil))
	}()
	url := waitServing(t, &out, &errb, code)
	h := newHarness(t)
	h.env[ServerEnv] = url
	h.env[TokenEnv] = "tok"
	r := h.run("runs", "create", "counter", "--input", `{"limit": 3}`, "--run-id", "c1", "--wait").want(t, ExitOK)
	if !strings.Contains(r.stdout, "run c1 of counter created: completed at step 3") {
		t.Errorf("runs create:\n%s", r.stdout)
	}
	// A run streamed as it goes (POST with "stream": true): the
	// serverless handlers keep the events of a watched run.
	req, _ := http.NewRequestWithContext(t.Context(), "POST", url+"/v1/graphs/counter/runs",
		strings.NewReader(`{"input": {"limit": 4, "delay_ms": 100}, "run_id": "s1", "stream": true, "stream_mode": "events"}`))
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	stream := string(body)
	if resp.StatusCode != 200 || !strings.Contains(stream, "event: step_finished") || !strings.Contains(stream, "event: run_finished") ||
		!strings.Contains(stream, "event: end\ndata: {\"run_id\":\"s1\",\"status\":\"completed\"") {
		t.Errorf("stream of run s1 over dev --aws: %d\n%s", resp.StatusCode, stream)
	}
	h.run("runs", "create", "support-triage", "--input", triageInput(t), "--run-id", "t1", "--wait").want(t, ExitInterrupted)
	h.run("runs", "resume", "t1", "--answer", "approve", "--wait").want(t, ExitOK)

	stopServer(t, sigs, code, &errb)
	for _, s := range []string{"creating the table and queues", "serving (serverless handlers, local pollers)", prefix + "-ticks.fifo", "stopping: runs stay in the table and queues"} {
		if !strings.Contains(errb.String(), s) {
			t.Errorf("log lacks %q:\n%s", s, errb.String())
		}
	}
}

func TestDevAWSNeedsQueues(t *testing.T) {
	h := newHarness(t)
	r := h.run("dev", "--aws", "--endpoint", "http://127.0.0.1:1", "--table", "t").want(t, ExitUsage)
	if !strings.Contains(r.stderr, "TICK_QUEUE_URL") || !strings.Contains(r.stderr, "--create") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
}
