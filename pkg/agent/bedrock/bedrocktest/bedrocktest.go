// Package bedrocktest is a fake of Amazon Bedrock's Converse and
// ConverseStream APIs for tests: an HTTP server speaking their wire
// formats (JSON, and the AWS event stream written with the SDK's own
// encoder) that answers each call with the next scripted [Reply]. Point a
// real bedrockruntime client at it (Server.Client, or BaseEndpoint set to
// Server.URL) and the adapter in package bedrock runs unchanged, offline.
//
//	srv := bedrocktest.New(bedrocktest.ToolUse("t1", "lookup_order", `{"order_id":"A-1"}`),
//		bedrocktest.Text("A-1 has shipped."))
//	defer srv.Close()
//	model := bedrock.New(srv.Client(), "us.amazon.nova-lite-v1:0")
package bedrocktest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
)

// Reply is one scripted answer: an assistant message (text and tool
// uses), or an error of the service.
type Reply struct {
	// Text is the answer's text.
	Text string
	// ToolUses are the tools the model asks for, after the text.
	ToolUses []ToolUse
	// StopReason defaults to "tool_use" with tool uses, "end_turn"
	// otherwise.
	StopReason string
	// InputTokens and OutputTokens are the usage reported.
	InputTokens, OutputTokens int
	// ErrorType, when set, makes the call fail with this Bedrock error
	// (ThrottlingException, ValidationException, ...) and HTTP Status
	// (default 400); Text is its message.
	ErrorType string
	Status    int
	// FirstTokenAfter, in a streamed answer (ConverseStream), is the
	// model's time to first token: the pause between the request and the
	// first piece of text. TokenInterval is the pause before each later
	// piece (a word each).
	FirstTokenAfter, TokenInterval time.Duration
}

// ToolUse is a tool call in a Reply.
type ToolUse struct {
	ID, Name string
	// Input is the arguments as JSON (an object).
	Input string
}

// Text is a reply with a text answer.
func Text(s string) Reply { return Reply{Text: s, InputTokens: 10, OutputTokens: 5} }

// Tool is a reply asking for one tool.
func Tool(id, name, input string) Reply {
	return Reply{ToolUses: []ToolUse{{ID: id, Name: name, Input: input}}, InputTokens: 10, OutputTokens: 5}
}

// Error is a reply failing with a Bedrock error, like
// Error(429, "ThrottlingException", "slow down").
func Error(status int, errType, message string) Reply {
	return Reply{Status: status, ErrorType: errType, Text: message}
}

// Request is a call the server received.
type Request struct {
	// Stream is true for ConverseStream.
	Stream bool
	// ModelID is the model id of the path.
	ModelID string
	// Body is the request body, decoded.
	Body map[string]any
}

// Server is the fake. Create it with [New].
type Server struct {
	// URL is the server's base URL (the client's BaseEndpoint).
	URL string
	srv *httptest.Server

	mu       sync.Mutex
	replies  []Reply
	requests []Request
	// Func, when set, answers the calls the script does not.
	fn func(Request) Reply
}

// New starts a server answering with replies in order. A call beyond the
// script gets a ValidationException saying so.
func New(replies ...Reply) *Server {
	s := &Server{replies: replies}
	s.srv = httptest.NewServer(s)
	s.URL = s.srv.URL
	return s
}

// NewFunc starts a server answering each call with fn's reply.
func NewFunc(fn func(Request) Reply) *Server {
	s := New()
	s.fn = fn
	return s
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// Client returns a bedrockruntime client of the server: fixed test
// credentials, region us-east-1, no SDK retries (the agent's retry
// policy retries).
func (s *Server) Client() *bedrockruntime.Client { return client(s.URL) }

// client returns a bedrockruntime client of the fake server at url.
func client(url string) *bedrockruntime.Client {
	return bedrockruntime.New(bedrockruntime.Options{
		Region:           "us-east-1",
		Credentials:      credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		BaseEndpoint:     aws.String(url),
		RetryMaxAttempts: 1,
	})
}

// Requests returns the calls received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// ServeHTTP implements [http.Handler]: POST /model/{id}/converse and
// /model/{id}/converse-stream.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, "/model/")
	var req Request
	switch {
	case strings.HasSuffix(path, "/converse-stream"):
		req.Stream, req.ModelID = true, strings.TrimSuffix(path, "/converse-stream")
	case strings.HasSuffix(path, "/converse"):
		req.ModelID = strings.TrimSuffix(path, "/converse")
	default:
		writeError(w, Error(404, "ResourceNotFoundException", "bedrocktest serves /model/{id}/converse and /converse-stream, not "+r.URL.Path))
		return
	}
	body, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(body, &req.Body)
	s.mu.Lock()
	s.requests = append(s.requests, req)
	var rep Reply
	switch {
	case len(s.replies) > 0:
		rep, s.replies = s.replies[0], s.replies[1:]
	case s.fn != nil:
		s.mu.Unlock()
		rep = s.fn(req)
		s.mu.Lock()
	default:
		rep = Error(400, "ValidationException", fmt.Sprintf("bedrocktest: no reply scripted for call %d", len(s.requests)))
	}
	s.mu.Unlock()
	// An answer within microseconds of the request, as only a loopback
	// server gives, races the SDK's HTTP/1.1 client (about one stream in
	// 50 fails with "use of closed network connection"); a short wait
	// keeps users' tests deterministic.
	time.Sleep(5 * time.Millisecond)
	if rep.ErrorType != "" {
		writeError(w, rep)
		return
	}
	if rep.StopReason == "" {
		rep.StopReason = "end_turn"
		if len(rep.ToolUses) > 0 {
			rep.StopReason = "tool_use"
		}
	}
	if req.Stream {
		writeStream(w, rep)
		return
	}
	var content []any
	if rep.Text != "" {
		content = append(content, map[string]any{"text": rep.Text})
	}
	for _, tu := range rep.ToolUses {
		content = append(content, map[string]any{"toolUse": map[string]any{"toolUseId": tu.ID, "name": tu.Name, "input": json.RawMessage(orEmpty(tu.Input))}})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"output":     map[string]any{"message": map[string]any{"role": "assistant", "content": content}},
		"stopReason": rep.StopReason,
		"usage":      usage(rep),
		"metrics":    map[string]any{"latencyMs": 1},
	})
}

func orEmpty(s string) string {
	if strings.TrimSpace(s) == "" {
		return "{}"
	}
	return s
}

func usage(r Reply) map[string]int {
	return map[string]int{"inputTokens": r.InputTokens, "outputTokens": r.OutputTokens, "totalTokens": r.InputTokens + r.OutputTokens}
}

func writeError(w http.ResponseWriter, r Reply) {
	if r.Status == 0 {
		r.Status = http.StatusBadRequest
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-ErrorType", r.ErrorType)
	w.WriteHeader(r.Status)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": r.Text})
}

func event(typ string, payload any) eventstream.Message {
	b, _ := json.Marshal(payload)
	var h eventstream.Headers
	h.Set(":message-type", eventstream.StringValue("event"))
	h.Set(":event-type", eventstream.StringValue(typ))
	h.Set(":content-type", eventstream.StringValue("application/json"))
	return eventstream.Message{Headers: h, Payload: b}
}

// writeStream writes rep as ConverseStream events: the text word by word,
// each tool use as its start and its input.
func writeStream(w http.ResponseWriter, rep Reply) {
	frames := []eventstream.Message{event("messageStart", map[string]any{"role": "assistant"})}
	i := 0
	if rep.Text != "" {
		for _, word := range strings.SplitAfter(rep.Text, " ") {
			frames = append(frames, event("contentBlockDelta", map[string]any{"contentBlockIndex": i, "delta": map[string]any{"text": word}}))
		}
		frames = append(frames, event("contentBlockStop", map[string]any{"contentBlockIndex": i}))
		i++
	}
	for _, tu := range rep.ToolUses {
		frames = append(frames,
			event("contentBlockStart", map[string]any{"contentBlockIndex": i, "start": map[string]any{"toolUse": map[string]any{"toolUseId": tu.ID, "name": tu.Name}}}),
			event("contentBlockDelta", map[string]any{"contentBlockIndex": i, "delta": map[string]any{"toolUse": map[string]any{"input": orEmpty(tu.Input)}}}),
			event("contentBlockStop", map[string]any{"contentBlockIndex": i}))
		i++
	}
	frames = append(frames, event("messageStop", map[string]any{"stopReason": rep.StopReason}),
		event("metadata", map[string]any{"usage": usage(rep), "metrics": map[string]any{"latencyMs": 1}}))
	w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
	w.WriteHeader(http.StatusOK)
	enc := eventstream.NewEncoder()
	words := 0 // frames[1:1+words] are the text's pieces
	if rep.Text != "" {
		words = len(strings.SplitAfter(rep.Text, " "))
	}
	for k, m := range frames {
		switch {
		case k == 1 && words > 0:
			time.Sleep(rep.FirstTokenAfter)
		case k > 1 && k <= words:
			time.Sleep(rep.TokenInterval)
		}
		var buf bytes.Buffer
		if err := enc.Encode(&buf, m); err != nil {
			return
		}
		_, _ = w.Write(buf.Bytes())
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
}
