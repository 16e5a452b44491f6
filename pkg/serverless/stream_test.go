package serverless_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/superstep/superstep/examples/loop"
	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/serverless"
)

// functionURL serves app as Lambda serves a function URL in
// RESPONSE_STREAM mode: each request becomes a LambdaFunctionURLRequest
// event for HandleFunctionURL, invoked with a deadline (the function's
// timeout), and the streaming response's body is copied to the client as
// the handler writes it.
func functionURL(app *serverless.App, timeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ev := &events.LambdaFunctionURLRequest{
			Version:        "2.0",
			RawPath:        r.URL.Path,
			RawQueryString: r.URL.RawQuery,
			Headers:        map[string]string{},
			Body:           string(body),
			RequestContext: events.LambdaFunctionURLRequestContext{
				DomainName: r.Host,
				HTTP:       events.LambdaFunctionURLRequestContextHTTPDescription{Method: r.Method, Path: r.URL.Path, SourceIP: "127.0.0.1"},
			},
		}
		for k, v := range r.Header {
			ev.Headers[strings.ToLower(k)] = strings.Join(v, ",")
		}
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		resp, err := app.HandleFunctionURL(ctx, ev)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		for k, v := range resp.Headers {
			w.Header().Set(k, v)
		}
		w.WriteHeader(resp.StatusCode)
		rc := http.NewResponseController(w)
		buf := make([]byte, 32<<10)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil {
					return
				}
				_ = rc.Flush()
			}
			if err != nil {
				return
			}
		}
	})
}

// sseMsg is one message of a stream.
type sseMsg struct{ id, event, data string }

// sseReader reads a stream.
type sseReader struct {
	resp     *http.Response
	rd       *bufio.Reader
	comments []string
}

func (s *stack) openStream(path string, headers ...string) *sseReader {
	s.t.Helper()
	req, err := http.NewRequestWithContext(s.t.Context(), "GET", s.url+path, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		s.t.Fatalf("GET %s: %d %s %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	return &sseReader{resp: resp, rd: bufio.NewReader(resp.Body)}
}

// next returns the next message, io.EOF at the end of the stream.
func (c *sseReader) next() (sseMsg, error) {
	var m sseMsg
	for {
		line, err := c.rd.ReadString('\n')
		if err != nil {
			return m, err
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if m.event != "" {
				return m, nil
			}
		case strings.HasPrefix(line, ":"):
			c.comments = append(c.comments, line)
		case strings.HasPrefix(line, "id: "):
			m.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			m.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			m.data = line[6:]
		}
	}
}

// untilEnd reads messages up to the end event (included), or n messages
// (n > 0), or the end of the stream.
func (c *sseReader) untilEnd(t *testing.T, n int) []sseMsg {
	t.Helper()
	var out []sseMsg
	for n <= 0 || len(out) < n {
		m, err := c.next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
		if m.event == "end" {
			return out
		}
	}
	return out
}

// streamEvents decodes the events of mode events (all but end).
func streamEvents(t *testing.T, msgs []sseMsg) []runs.StreamEvent {
	t.Helper()
	var out []runs.StreamEvent
	for _, m := range msgs {
		if m.event == "end" {
			continue
		}
		var ev runs.StreamEvent
		if err := json.Unmarshal([]byte(m.data), &ev); err != nil {
			t.Fatalf("%s event %q: %v", m.event, m.data, err)
		}
		if m.id != fmt.Sprint(ev.ID) {
			t.Fatalf("message id %q carries event %d", m.id, ev.ID)
		}
		out = append(out, ev)
	}
	return out
}

func endEvent(t *testing.T, msgs []sseMsg) api.StreamEnd {
	t.Helper()
	if len(msgs) == 0 || msgs[len(msgs)-1].event != "end" {
		t.Fatalf("the stream has no end event (%d messages)", len(msgs))
	}
	var end api.StreamEnd
	if err := json.Unmarshal([]byte(msgs[len(msgs)-1].data), &end); err != nil {
		t.Fatal(err)
	}
	return end
}

// TestStreamServerlessRun streams a run of remote-fanout executed by the
// tick and node handlers (SQS on moto, the table's event log, every run's
// events kept: RUN_EVENTS=on) through the stream function's function URL
// (lambdaurl): the node's own events come
// between its start and finish; a stream cut in the middle and resumed
// with Last-Event-ID gives exactly the rest; the interrupt ends the
// stream, and after the resume the stream goes on to the end.
func TestStreamServerlessRun(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{streaming: true, work: func(ctx context.Context) {
		n, _ := pregel.Arg[int](ctx)
		_ = pregel.Emit(ctx, "progress", map[string]int{"item": n})
	}, config: func(c *serverless.Config) { c.Events = serverless.EventsOn }})
	s.create("remote-fanout", "sr1", map[string]any{})

	// A first watcher goes away after 4 messages; the second resumes.
	first := s.openStream("/v1/runs/sr1/stream?mode=events").untilEnd(t, 4)
	last := first[len(first)-1].id
	rest := s.openStream("/v1/runs/sr1/stream?mode=events", "Last-Event-ID", last).untilEnd(t, 0)
	if end := endEvent(t, rest); end.Status != pregel.RunInterrupted {
		t.Fatalf("end = %+v; want interrupted", end)
	}
	// A watcher from the start gets the same events, once each.
	whole := s.openStream("/v1/runs/sr1/stream?mode=events").untilEnd(t, 0)
	evs := streamEvents(t, whole)
	resumed := streamEvents(t, append(first, rest...))
	if len(evs) != len(resumed) {
		t.Fatalf("a resumed watcher got %d events, one from the start %d", len(resumed), len(evs))
	}
	running := map[string]bool{}
	custom := 0
	for i, ev := range evs {
		if ev.ID != int64(i+1) || resumed[i].ID != ev.ID || resumed[i].Type != ev.Type {
			t.Fatalf("event %d: id %d %s, resumed %d %s", i, ev.ID, ev.Type, resumed[i].ID, resumed[i].Type)
		}
		switch ev.Type {
		case pregel.EventNodeStarted:
			running[ev.TaskID] = true
		case pregel.EventCustom:
			custom++
			if !running[ev.TaskID] || ev.Node != "work" {
				t.Errorf("custom event %d of %s (task %s) outside its node", ev.ID, ev.Node, ev.TaskID)
			}
		case pregel.EventNodeFinished:
			if !running[ev.TaskID] {
				t.Errorf("node_finished %d of task %s without node_started", ev.ID, ev.TaskID)
			}
			delete(running, ev.TaskID)
		}
	}
	if custom != 3 {
		t.Errorf("%d custom events; want one per work task (3)", custom)
	}
	if lastEv := evs[len(evs)-1]; lastEv.Type != pregel.EventRunFinished || lastEv.RunStatus != pregel.RunInterrupted {
		t.Errorf("the stream's last event is %s %s; want run_finished interrupted", lastEv.Type, lastEv.RunStatus)
	}

	// Resume; the stream goes on from where it was.
	if st := s.do("POST", "/v1/runs/sr1/resume", map[string]any{"resume": "yes"}, nil); st != http.StatusAccepted && st != http.StatusOK {
		t.Fatalf("resume: %d", st)
	}
	more := s.openStream("/v1/runs/sr1/stream?mode=events,updates", "Last-Event-ID", fmt.Sprint(evs[len(evs)-1].ID)).untilEnd(t, 0)
	if end := endEvent(t, more); end.Status != pregel.RunCompleted {
		t.Fatalf("end after the resume = %+v; want completed", end)
	}
	updates := 0
	for _, m := range more {
		if m.event == "updates" {
			updates++
		}
	}
	if updates != 1 {
		t.Errorf("%d updates after the resume; want 1 (approve)", updates)
	}
}

// askTwiceGraph's node asks two questions: answering the first, the run
// is interrupted again at the same step.
func askTwiceGraph(t *testing.T) *pregel.Graph {
	t.Helper()
	type state struct {
		Answers []string `json:"answers,omitempty"`
	}
	b := pregel.NewGraph[state]("ask-twice")
	b.AddFunc("ask", func(ctx context.Context, _ state) (state, error) {
		name, err := pregel.Interrupt[string](ctx, map[string]string{"question": "name?"})
		if err != nil {
			return state{}, err
		}
		city, err := pregel.Interrupt[string](ctx, map[string]string{"question": "city?"})
		if err != nil {
			return state{}, err
		}
		return state{Answers: []string{name, city}}, nil
	}, pregel.Writes("answers"))
	b.AddEdge(pregel.Start, "ask").AddEdge("ask", pregel.End)
	g, err := b.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestStreamServerlessInterruptedAgain: on the serverless path, the
// stream of a run interrupted, resumed and interrupted again at the same
// step does not end at the first interrupt's run_finished, whether read
// from the start or resumed from before it: it ends with the second.
func TestStreamServerlessInterruptedAgain(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{streaming: true, graphs: []*pregel.Graph{askTwiceGraph(t)},
		config: func(c *serverless.Config) { c.Events = serverless.EventsOn }})
	s.create("ask-twice", "tw1", map[string]any{})
	first := streamEvents(t, s.openStream("/v1/runs/tw1/stream?mode=events").untilEnd(t, 0))
	stop1 := first[len(first)-1]
	if stop1.Type != pregel.EventRunFinished || stop1.RunStatus != pregel.RunInterrupted {
		t.Fatalf("first stream's last event %s %s; want run_finished interrupted", stop1.Type, stop1.RunStatus)
	}
	if st := s.do("POST", "/v1/runs/tw1/resume", map[string]any{"resume": "Ada"}, nil); st != http.StatusAccepted && st != http.StatusOK {
		t.Fatalf("resume: %d", st)
	}
	rec := s.waitStatus("tw1", pregel.RunInterrupted)
	if rec.Step != stop1.Step || len(rec.Interrupts) != 1 || !strings.Contains(string(rec.Interrupts[0].Value), "city?") {
		t.Fatalf("after the first answer: step %d, interrupts %+v; want step %d asking the city", rec.Step, rec.Interrupts, stop1.Step)
	}
	for _, after := range []int64{0, stop1.ID - 1} {
		var hdr []string
		if after > 0 {
			hdr = []string{"Last-Event-ID", fmt.Sprint(after)}
		}
		msgs := s.openStream("/v1/runs/tw1/stream?mode=events", hdr...).untilEnd(t, 0)
		evs := streamEvents(t, msgs)
		if len(evs) <= int(stop1.ID-after) {
			t.Fatalf("after %d: the stream ends after %d events, at the first interrupt (event %d)", after, len(evs), stop1.ID)
		}
		for i, ev := range evs {
			if ev.ID != after+int64(i)+1 {
				t.Fatalf("after %d: event %d has id %d", after, i, ev.ID)
			}
		}
		last := evs[len(evs)-1]
		if last.Type != pregel.EventRunFinished || last.RunStatus != pregel.RunInterrupted {
			t.Errorf("after %d: last event %d %s; want the second run_finished", after, last.ID, last.Type)
		}
		if end := endEvent(t, msgs); len(end.Interrupts) != 1 || !strings.Contains(string(end.Interrupts[0].Value), "city?") {
			t.Errorf("after %d: end %+v; want interrupted asking the city", after, end)
		}
	}
}

// TestFunctionURLStreamEndsBeforeTimeout: the stream of a run that does
// not stop ends cleanly before the function's timeout (no end event, a
// comment saying to reconnect), with a 200, not cut by the timeout.
func TestFunctionURLStreamEndsBeforeTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 4 * time.Second
	s := newStack(t, stackOptions{streaming: true, noPollers: true, deadline: timeout})
	s.create("remote-fanout", "pending1", map[string]any{}) // no pollers: it stays pending
	start := time.Now()
	c := s.openStream("/v1/runs/pending1/stream?mode=events")
	msgs := c.untilEnd(t, 0)
	took := time.Since(start)
	if len(msgs) != 0 {
		t.Errorf("messages %v; want none (the run never started)", msgs)
	}
	want := timeout - serverless.FunctionURLMargin - api.StreamDeadlineMargin
	if took < want-500*time.Millisecond || took > timeout-serverless.FunctionURLMargin {
		t.Errorf("the stream ended after %v; want about %v", took, want)
	}
	if n := len(c.comments); n == 0 || !strings.Contains(c.comments[n-1], "Last-Event-ID") {
		t.Errorf("the stream's last comment %q; want one saying to reconnect with Last-Event-ID", c.comments)
	}
}

// TestAgentCardsStreaming: the stream function's agents stream; the api
// function's stream where STREAM_URL points, else not at all.
func TestAgentCardsStreaming(t *testing.T) {
	t.Parallel()
	type card struct {
		Capabilities struct {
			Streaming bool `json:"streaming"`
		} `json:"capabilities"`
		SupportedInterfaces []struct {
			URL string `json:"url"`
		} `json:"supportedInterfaces"`
	}
	for _, tc := range []struct {
		name      string
		o         stackOptions
		streaming bool
		urlPrefix string
	}{
		{"stream function", stackOptions{streaming: true, noPollers: true}, true, ""},
		{"api function with STREAM_URL", stackOptions{noPollers: true, config: func(c *serverless.Config) {
			c.StreamURL = "https://abc.lambda-url.eu-west-1.on.aws/"
		}}, true, "https://abc.lambda-url.eu-west-1.on.aws/a2a/"},
		{"api function alone", stackOptions{noPollers: true}, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStack(t, tc.o)
			var c card
			if st := s.do("GET", "/a2a/"+loop.Name+"/.well-known/agent-card.json", nil, &c); st != http.StatusOK {
				t.Fatalf("agent card: %d", st)
			}
			if c.Capabilities.Streaming != tc.streaming {
				t.Errorf("card streaming = %t; want %t", c.Capabilities.Streaming, tc.streaming)
			}
			for _, i := range c.SupportedInterfaces {
				if !strings.HasPrefix(i.URL, cmpOr(tc.urlPrefix, s.url)) {
					t.Errorf("card interface URL %s; want it under %s", i.URL, cmpOr(tc.urlPrefix, s.url))
				}
			}
		})
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestConfigJWT: JWT_ISSUER needs JWT_AUDIENCE, and a stack with an
// issuer refuses requests without a token it accepts.
func TestConfigJWT(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		serverless.EnvTable: "t", serverless.EnvTickQueue: "https://q/ticks.fifo", serverless.EnvNodeQueue: "https://q/nodes",
		serverless.EnvJWTIssuer: "https://issuer.example",
	}
	if _, err := serverless.ConfigFromEnv(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), serverless.EnvJWTAudience) {
		t.Errorf("JWT_ISSUER without JWT_AUDIENCE: %v; want an error naming %s", err, serverless.EnvJWTAudience)
	}
	env[serverless.EnvJWTAudience] = " app, other ,"
	cfg, err := serverless.ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil || strings.Join(cfg.JWTAudience, "|") != "app|other" {
		t.Errorf("ConfigFromEnv = %+v, %v; want audiences app and other", cfg.JWTAudience, err)
	}
	s := newStack(t, stackOptions{streaming: true, noPollers: true, config: func(c *serverless.Config) {
		c.JWTIssuer, c.JWTAudience = "http://127.0.0.1:1", []string{"app"}
	}})
	for path, want := range map[string]int{
		"/v1/graphs": http.StatusUnauthorized,
		"/healthz":   http.StatusOK,
		"/a2a/" + loop.Name + "/.well-known/agent-card.json": http.StatusOK,
	} {
		if st := s.do("GET", path, nil, nil); st != want {
			t.Errorf("GET %s without a token: %d; want %d", path, st, want)
		}
	}
	// The A2A HTTP+JSON binding's paths answer the JWT check's refusal in
	// the binding's error object, which A2A clients read.
	var refused struct {
		Error struct {
			Code    int    `json:"code"`
			Status  string `json:"status"`
			Details []struct {
				Reason string `json:"reason"`
			} `json:"details"`
		} `json:"error"`
	}
	if st := s.do("GET", "/a2a/"+loop.Name+"/tasks", nil, &refused); st != http.StatusUnauthorized || refused.Error.Status != "UNAUTHENTICATED" || len(refused.Error.Details) == 0 || refused.Error.Details[0].Reason != "UNAUTHENTICATED" {
		t.Errorf("GET /a2a/%s/tasks without a token: %d %+v; want 401 UNAUTHENTICATED in the binding's error object", loop.Name, st, refused)
	}
}

// TestWatchedRunsOnly checks the default, RUN_EVENTS=watched: a run
// nobody streams leaves no event in the table and its stream is its end
// alone; a stream opened while a run goes marks it watched, and the
// supersteps started after that are in the stream.
func TestWatchedRunsOnly(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	started := make(chan struct{}, 8)
	s := newStack(t, stackOptions{streaming: true, work: func(ctx context.Context) {
		if info, _ := pregel.TaskFrom(ctx); strings.HasPrefix(info.RunID, "watched") {
			started <- struct{}{}
			<-gate
		}
	}})
	s.create("remote-fanout", "alone", map[string]any{})
	s.waitStatus("alone", pregel.RunInterrupted)
	if n := eventItems(t, s, "alone"); n != 0 {
		t.Errorf("the unwatched run has %d event items; want none", n)
	}
	msgs := s.openStream("/v1/runs/alone/stream?mode=events").untilEnd(t, 0)
	if end := endEvent(t, msgs); len(msgs) != 1 || end.Status != pregel.RunInterrupted {
		t.Errorf("stream of the unwatched run: %d messages, end %+v; want the end alone, interrupted", len(msgs), end)
	}

	s.create("remote-fanout", "watched", map[string]any{})
	<-started // the run is in its fan-out step
	c := s.openStream("/v1/runs/watched/stream?mode=events")
	close(gate)
	msgs = c.untilEnd(t, 0)
	if end := endEvent(t, msgs); end.Status != pregel.RunInterrupted {
		t.Fatalf("end = %+v; want interrupted", end)
	}
	evs := streamEvents(t, msgs)
	kinds := map[pregel.EventType]int{}
	for i, ev := range evs {
		if i > 0 && ev.ID != evs[i-1].ID+1 {
			t.Fatalf("ids %d then %d", evs[i-1].ID, ev.ID)
		}
		kinds[ev.Type]++
	}
	// The approve step started after the stream: its node's start,
	// finish (interrupted), the interrupt and the run's stop.
	for _, k := range []pregel.EventType{pregel.EventNodeStarted, pregel.EventNodeFinished, pregel.EventInterrupted, pregel.EventRunFinished} {
		if kinds[k] == 0 {
			t.Errorf("the watched run's stream has no %s event: %v", k, kinds)
		}
	}
	r, err := s.app.Service.Get(t.Context(), "watched")
	if err != nil || !r.WatchedUntil.After(time.Now()) {
		t.Errorf("run record watched until %v (%v); want a mark in the future", r.WatchedUntil, err)
	}
}

// eventItems counts the event items of a run in the table.
func eventItems(t *testing.T, s *stack, run string) int {
	t.Helper()
	out, err := s.ddb.Query(t.Context(), &dynamodb.QueryInput{
		TableName:              aws.String(s.cfg.Table),
		KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :e)"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
			":pk": &ddbtypes.AttributeValueMemberS{Value: "RUN#" + run},
			":e":  &ddbtypes.AttributeValueMemberS{Value: "EVT#"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Items)
}

// TestStreamBufferedThroughAPIGateway: the api function behind API
// Gateway (HandleHTTP, buffered) answers a stream of a finished run with
// the whole replay and its end (a buffered response without a Flush used
// to end the stream after its first line).
func TestStreamBufferedThroughAPIGateway(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{config: func(c *serverless.Config) { c.Events = serverless.EventsOn }})
	s.create(loop.Name, "buf1", map[string]any{"limit": 2})
	s.waitStatus("buf1", pregel.RunCompleted)
	ev := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RawPath: "/v1/runs/buf1/stream", RawQueryString: "mode=events",
		RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET", Path: "/v1/runs/buf1/stream"}},
	}
	resp := s.app.HandleHTTP(t.Context(), ev)
	if resp.StatusCode != 200 || resp.Headers["Content-Type"] != "text/event-stream" {
		t.Fatalf("%d %v", resp.StatusCode, resp.Headers)
	}
	// run_started, 2 × (step_started, node_started, node_finished,
	// state_updated, step_finished), run_finished; then end.
	if n := strings.Count(resp.Body, "\nid: ") + strings.Count(resp.Body[:min(len(resp.Body), 4)], "id: "); n != 12 || !strings.Contains(resp.Body, "event: end\ndata: {\"run_id\":\"buf1\",\"status\":\"completed\"") {
		t.Errorf("buffered stream with %d ids:\n%s", n, resp.Body)
	}
}

// TestA2AStreamOverFunctionURL: A2A message/stream on the stream function
// (function URL, lambdaurl) streams a serverless run: status updates with
// the progress of its nodes ("step N: count started"), then the final
// completed status.
func TestA2AStreamOverFunctionURL(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{streaming: true})
	body := `{"jsonrpc": "2.0", "id": 1, "method": "message/stream", "params": {"message": {"role": "user", "messageId": "m1", "kind": "message",
		"parts": [{"kind": "data", "data": {"limit": 5, "delay_ms": 200}}]}}}`
	req, err := http.NewRequestWithContext(t.Context(), "POST", s.url+"/a2a/"+loop.Name, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("message/stream: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var progress []string
	final := ""
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var m struct {
			Result struct {
				Kind   string `json:"kind"`
				Final  bool   `json:"final"`
				Status struct {
					State   string `json:"state"`
					Message *struct {
						Parts []struct {
							Text string `json:"text"`
						} `json:"parts"`
					} `json:"message"`
				} `json:"status"`
			} `json:"result"`
		}
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatalf("stream message %s: %v", data, err)
		}
		if msg := m.Result.Status.Message; msg != nil && m.Result.Status.State == "working" {
			for _, p := range msg.Parts {
				progress = append(progress, p.Text)
			}
		}
		if m.Result.Final {
			final = m.Result.Status.State
			break
		}
	}
	if final != "completed" {
		t.Fatalf("final state %q; want completed (progress %v)", final, progress)
	}
	if !slices.ContainsFunc(progress, func(p string) bool { return strings.Contains(p, "count completed") }) {
		t.Errorf("progress %v; want the node's steps", progress)
	}
}
