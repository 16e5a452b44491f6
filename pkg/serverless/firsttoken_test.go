package serverless_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/agent"
	"github.com/superstep/superstep/pkg/agent/bedrock"
	"github.com/superstep/superstep/pkg/agent/bedrock/bedrocktest"
	"github.com/superstep/superstep/pkg/pregel"
)

// TestFirstTokenThroughFunctionURL: an agent's answer reaches a client of
// the stream function's URL token by token. The fake Bedrock answers a
// ConverseStream with its first word after ttft and each later word gap
// after the one before; the client creates the run with "stream": true
// through the function URL (HandleFunctionURL, lambdaurl in process) and
// reads the SSE answer. The first word must arrive before the model has
// written its last one (the stream flushes each event, not a buffer at the
// end); the latency over the model's TTFT, and the time to the first SSE
// event of the create, are logged (bench/README.md). Generous by design:
// it asserts order, not a tight time, so it holds on a loaded machine.
func TestFirstTokenThroughFunctionURL(t *testing.T) {
	t.Parallel()
	const ttft, gap, words = 300 * time.Millisecond, 500 * time.Millisecond, 6
	var asked atomic.Int64 // when the model was called (unix ns)
	srv := bedrocktest.NewFunc(func(bedrocktest.Request) bedrocktest.Reply {
		asked.Store(time.Now().UnixNano())
		r := bedrocktest.Text("alpha bravo charlie delta echo foxtrot")
		r.FirstTokenAfter, r.TokenInterval = ttft, gap
		return r
	})
	t.Cleanup(srv.Close)
	g, err := agent.New(agent.Config{Name: "ttft-agent", Model: bedrock.New(srv.Client(), "m")})
	if err != nil {
		t.Fatal(err)
	}
	// The default events mode (watched): the create marks the run
	// watched before its model node starts, or the first words would be
	// missing from the stream (they were, 1 run in 3 under load, when
	// only the stream's first read marked it).
	s := newStack(t, stackOptions{streaming: true, graphs: []*pregel.Graph{g}})
	body, _ := json.Marshal(map[string]any{"run_id": "ttft-1", "input": "Say six words.", "stream": true, "stream_mode": "messages"})
	req, err := http.NewRequestWithContext(t.Context(), "POST", s.url+"/v1/graphs/ttft-agent/runs", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	sent := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("create with stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var firstEvent, firstToken time.Time
	deadline := time.AfterFunc(60*time.Second, func() { resp.Body.Close() })
	defer deadline.Stop()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "data:") && firstEvent.IsZero() {
			firstEvent = time.Now()
		}
		if strings.HasPrefix(line, "data:") && strings.Contains(line, "alpha") {
			firstToken = time.Now()
			break
		}
	}
	if firstToken.IsZero() {
		t.Fatalf("the stream ended (or 60 s passed) without the answer's first word; scan error: %v", sc.Err())
	}
	at := time.Unix(0, asked.Load())
	last := at.Add(ttft + (words-1)*gap) // when the model writes its last word
	t.Logf("first SSE event %v after the request; first token %v after the model's TTFT (%v)",
		firstEvent.Sub(sent).Round(time.Millisecond), firstToken.Sub(at.Add(ttft)).Round(time.Millisecond), ttft)
	if !firstToken.Before(last) {
		t.Errorf("the first word reached the client %v after the model wrote its last word: the stream is buffered, not flushed per token",
			firstToken.Sub(last).Round(time.Millisecond))
	}
}
