//go:build !superstep.lambda

package superstep

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/pregel"
)

// dropProxy forwards requests to a server; its first stream request is
// cut after `cut` messages, as a network failure would. It
// records the Last-Event-ID of each stream request.
type dropProxy struct {
	target *url.URL
	cut    int
	mu     sync.Mutex
	ids    []string // Last-Event-ID of each stream request ("" for none)
}

func (p *dropProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u := *p.target
	u.Path, u.RawQuery = r.URL.Path, r.URL.RawQuery
	req, err := http.NewRequestWithContext(r.Context(), r.Method, u.String(), r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	stream := strings.HasSuffix(r.URL.Path, "/stream")
	first := false
	if stream {
		p.mu.Lock()
		first = len(p.ids) == 0
		p.ids = append(p.ids, r.Header.Get("Last-Event-ID"))
		p.mu.Unlock()
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	if !stream || !first {
		rc := http.NewResponseController(w)
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				_, _ = w.Write(buf[:n])
				_ = rc.Flush()
			}
			if err != nil {
				return
			}
		}
	}
	// Pass the first `cut` messages (comments too), then break the
	// connection.
	br := bufio.NewReader(resp.Body)
	for n := 0; n < p.cut; {
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		_, _ = io.WriteString(w, line)
		if line == "\n" {
			n++
		}
	}
	_ = http.NewResponseController(w).Flush()
	panic(http.ErrAbortHandler)
}

func (p *dropProxy) lastEventIDs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.ids...)
}

// devClient is a harness that talks to the dev server at u.
func devClient(t *testing.T, u, tok string) *harness {
	h := newHarness(t)
	h.env[ServerEnv], h.env[TokenEnv] = u, tok
	return h
}

func TestRunsWatch(t *testing.T) {
	u := startDev(t)
	h := devClient(t, u, "tok")

	// A run that stops at an interrupt: tokens as they come, the question,
	// exit code 3.
	h.run("runs", "create", "assistant", "--input", assistantInput(t), "--run-id", "a1").want(t, ExitOK)
	r := h.run("runs", "watch", "a1").want(t, ExitInterrupted)
	for _, re := range []string{
		`(?m)^run a1 of assistant started$`,
		`(?m)^step 1  1 task  \+\S+$`,
		`(?m)^  model: Let me look that up\.$`,
		`(?m)^  model\s+completed\s+\S+$`,
		`(?m)^  tools\s+interrupted\s+\S+$`,
		`(?m)^run interrupted at step \d+ after \S+$`,
		`(?m)^Waiting for an answer \(superstep runs resume a1 --answer VALUE\):\n  tools \(interrupt \S+\) asks to approve the call:\n    refund \{"order_id":"A-1001","cents":4500,"reason":"customer request"\}\n`,
	} {
		if !regexpMatch(re, r.stdout) {
			t.Errorf("watch of an interrupted run does not match %s:\n%s", re, r.stdout)
		}
	}
	// Answered with --wait (which follows the stream), then replayed.
	r = h.run("runs", "resume", "a1", "--answer", "approve", "--wait").want(t, ExitOK)
	if !strings.Contains(r.stdout, "run a1 of assistant resumed: completed at step") {
		t.Errorf("resume --wait:\n%s", r.stdout)
	}
	r = h.run("runs", "watch", "a1").want(t, ExitOK)
	for _, re := range []string{`(?m)^  model: Here is what I found\. A-1001, your \S+`, `(?m)^run a1 of assistant resumed after step \d+$`, `(?m)^run completed at step \d+ after \S+$`} {
		if !regexpMatch(re, r.stdout) {
			t.Errorf("watch of a finished run does not match %s:\n%s", re, r.stdout)
		}
	}

	// --json: one object per event, increasing ids (consecutive but where
	// the log compacted a message's pieces), the end last.
	r = h.run("runs", "watch", "a1", "--json").want(t, ExitOK)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	var last watchLine
	var answer strings.Builder
	prev := 0
	for i, l := range lines {
		var wl watchLine
		if err := json.Unmarshal([]byte(l), &wl); err != nil {
			t.Fatalf("line %d is not JSON: %v\n%s", i+1, err, l)
		}
		if i < len(lines)-1 {
			id, err := strconv.Atoi(wl.ID)
			if err != nil || id <= prev {
				t.Errorf("line %d has id %q, want one above %d", i+1, wl.ID, prev)
			}
			prev = id
		}
		var ev struct {
			Name    string `json:"name"`
			Payload struct {
				Text string `json:"text"`
			} `json:"payload"`
		}
		if wl.Event == string(pregel.EventCustom) && json.Unmarshal(wl.Data, &ev) == nil && ev.Name == "message_delta" {
			answer.WriteString(ev.Payload.Text)
		}
		last = wl
	}
	var end api.StreamEnd
	if err := json.Unmarshal(last.Data, &end); last.Event != "end" || err != nil || end.Status != pregel.RunCompleted || end.RunID != "a1" {
		t.Errorf("last line %+v (%v), want the end of a completed run", last, err)
	}
	// The replay holds each answer's text once, whole (compacted).
	if !strings.Contains(answer.String(), "Here is what I found. A-1001, your ") || strings.Count(answer.String(), "Here is what I found.") != 1 {
		t.Errorf("the message deltas of the replay say %q; want the model's answers, each once", answer.String())
	}

	// A drained run exits 4; an unknown one is a usage error.
	h.run("runs", "create", "counter", "--input", `{"limit": 200, "delay_ms": 20}`, "--run-id", "slow").want(t, ExitOK)
	h.run("runs", "drain", "slow", "--reason", "lunch").want(t, ExitOK)
	r = h.run("runs", "watch", "slow").want(t, ExitDrained)
	if !regexpMatch(`(?m)^run drained at step \d+ after \S+ \(lunch\)$`, r.stdout) {
		t.Errorf("watch of a drained run:\n%s", r.stdout)
	}
	r = h.run("runs", "watch", "nope").want(t, ExitUsage)
	if !strings.Contains(r.stderr, `"nope"`) {
		t.Errorf("watch of an unknown run:\n%s", r.stderr)
	}
	r = devClient(t, u, "wrong").run("runs", "watch", "a1").want(t, ExitUsage)
	if !strings.Contains(r.stderr, "token") {
		t.Errorf("watch with a wrong token:\n%s", r.stderr)
	}
}

// A connection that drops in the middle of a stream is opened again from
// the last event: watch shows each event once, --wait still returns.
func TestRunsWatchResumesDroppedStream(t *testing.T) {
	u := startDev(t)
	target, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	proxy := func(cut int) (*dropProxy, *harness) {
		p := &dropProxy{target: target, cut: cut}
		srv := httptest.NewServer(p)
		t.Cleanup(srv.Close)
		return p, devClient(t, srv.URL, "tok")
	}
	h := devClient(t, u, "tok")
	h.run("runs", "create", "counter", "--input", `{"limit": 4, "delay_ms": 30}`, "--run-id", "c1").want(t, ExitOK)

	// The table: the comment and 5 events pass, then the line breaks.
	p, ph := proxy(6)
	r := ph.run("runs", "watch", "c1").want(t, ExitOK)
	if ids := p.lastEventIDs(); len(ids) != 2 || ids[0] != "" || ids[1] != "5" {
		t.Errorf("stream requests had Last-Event-ID %q, want none then 5", ids)
	}
	if !strings.Contains(r.stderr, "reconnecting after event 5") {
		t.Errorf("stderr does not tell of the reconnection:\n%s", r.stderr)
	}
	for step := 1; step <= 4; step++ {
		if n := len(regexp.MustCompile(fmt.Sprintf(`(?m)^step %d  1 task`, step)).FindAllString(r.stdout, -1)); n != 1 {
			t.Errorf("step %d shown %d times:\n%s", step, n, r.stdout)
		}
	}
	if n := strings.Count(r.stdout, "run completed at step 4"); n != 1 {
		t.Errorf("the end shown %d times:\n%s", n, r.stdout)
	}

	// --json through a broken line is what it is without one.
	want := h.run("runs", "watch", "c1", "--json").want(t, ExitOK).stdout
	for _, cut := range []int{2, 7, 12} {
		_, ph := proxy(cut)
		if got := ph.run("runs", "watch", "c1", "--json").want(t, ExitOK).stdout; got != want {
			t.Errorf("cut after %d messages: got\n%s\nwant\n%s", cut, got, want)
		}
	}

	// --wait through a line that breaks after the stream's first comment.
	p, ph = proxy(1)
	r = ph.run("runs", "create", "counter", "--input", `{"limit": 3, "delay_ms": 30}`, "--run-id", "c2", "--wait").want(t, ExitOK)
	if !strings.Contains(r.stdout, "run c2 of counter created: completed at step 3") {
		t.Errorf("create --wait:\n%s", r.stdout)
	}
	if ids := p.lastEventIDs(); len(ids) < 2 {
		t.Errorf("create --wait opened %d streams, want a second after the break", len(ids))
	}
}

// Against a server that does not stream runs (501), --wait polls and
// watch says what to use instead; a server that answers a stream with
// something else is refused.
func TestWaitWithoutStreams(t *testing.T) {
	var polls int
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case r.Method == http.MethodPost:
			io.WriteString(w, `{"run_id":"r1","graph":"counter","status":"pending"}`)
		case strings.HasSuffix(r.URL.Path, "/r1/stream"):
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusNotImplemented)
			io.WriteString(w, `{"status":501,"title":"Not implemented"}`)
		case strings.HasSuffix(r.URL.Path, "/r2/stream"):
			io.WriteString(w, `<html>a login page</html>`)
		default:
			polls++
			status := "running"
			if polls > 2 {
				status = "failed"
			}
			fmt.Fprintf(w, `{"run_id":"r1","graph":"counter","status":%q,"step":2}`, status)
		}
	}))
	defer srv.Close()
	h := newHarness(t)
	h.env[ServerEnv] = srv.URL
	r := h.run("runs", "create", "counter", "--wait").want(t, ExitFailed)
	if !strings.Contains(r.stdout, "run r1 of counter created: failed at step 2") || polls != 3 {
		t.Errorf("create --wait after %d polls:\n%s%s", polls, r.stdout, r.stderr)
	}
	r = h.run("runs", "watch", "r1").want(t, ExitFailed)
	if !strings.Contains(r.stderr, "does not stream runs; use 'superstep runs show r1'") {
		t.Errorf("watch:\n%s", r.stderr)
	}
	r = h.run("runs", "watch", "r2").want(t, ExitFailed)
	if !strings.Contains(r.stderr, "not an event stream") {
		t.Errorf("watch of a non-stream:\n%s", r.stderr)
	}
}

func TestReadSSE(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []sseMessage
	}{
		{"one event", "id: 3\nevent: custom\ndata: {\"a\":1}\n\n", []sseMessage{{ID: "3", Event: "custom", Data: []byte(`{"a":1}`)}}},
		{"comments and heartbeats skipped", ": stream of run x\n\n: heartbeat\n\nevent: end\ndata: {}\n\n", []sseMessage{{Event: "end", Data: []byte(`{}`)}}},
		{"data lines joined, no space after the colon", "data:a\ndata: b\n\n", []sseMessage{{Event: "message", Data: []byte("a\nb")}}},
		{"CRLF line ends", "event: x\r\ndata: 1\r\n\r\n", []sseMessage{{Event: "x", Data: []byte("1")}}},
		{"a message without data is not dispatched", "event: x\n\nid: 4\ndata: 2\n\n", []sseMessage{{ID: "4", Event: "message", Data: []byte("2")}}},
		{"unknown fields ignored", "retry: 10\nfoo\ndata: 1\n\n", []sseMessage{{Event: "message", Data: []byte("1")}}},
		{"a message cut off is dropped", "data: 1\n\ndata: 2\n", []sseMessage{{Event: "message", Data: []byte("1")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []sseMessage
			err := readSSE(strings.NewReader(tc.in), func(m sseMessage) error {
				got = append(got, m)
				return nil
			})
			if err != io.ErrUnexpectedEOF {
				t.Errorf("readSSE returned %v at the end of the stream, want io.ErrUnexpectedEOF", err)
			}
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tc.want) {
				t.Errorf("messages %q, want %q", got, tc.want)
			}
		})
	}
}
