package bedrock_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"

	"github.com/superstep/superstep/pkg/agent"
	"github.com/superstep/superstep/pkg/agent/bedrock"
	"github.com/superstep/superstep/pkg/pregel"
)

const modelID = "us.anthropic.claude-3-5-haiku-20241022-v1:0"

// reply is one scripted answer of the fake Bedrock: either a JSON body
// (Converse or an error) or event-stream frames (ConverseStream).
type reply struct {
	status  int
	errType string // X-Amzn-ErrorType of an error answer
	body    string
	frames  []eventstream.Message
	corrupt bool          // flip a byte of the last frame
	pause   chan struct{} // wait on it after the first frame
}

// fakeBedrock is an HTTP server speaking the Converse wire formats; it
// answers each call with the next reply and keeps the request bodies.
type fakeBedrock struct {
	t       *testing.T
	mu      sync.Mutex
	replies []reply
	paths   []string
	bodies  []map[string]any
}

func (f *fakeBedrock) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req map[string]any
	_ = json.Unmarshal(body, &req)
	f.mu.Lock()
	f.paths = append(f.paths, r.URL.EscapedPath())
	f.bodies = append(f.bodies, req)
	if len(f.replies) == 0 {
		f.mu.Unlock()
		f.t.Errorf("unexpected call %s", r.URL.Path)
		http.Error(w, `{"message":"no reply scripted"}`, http.StatusInternalServerError)
		return
	}
	rep := f.replies[0]
	f.replies = f.replies[1:]
	f.mu.Unlock()
	// Answering within microseconds of the request, as only a loopback
	// server can, races the SDK's HTTP/1.1 client: about one stream in 50
	// then fails with "use of closed network connection" (the family of
	// aws/aws-sdk-go-v2#1825). The adapter reports that as a retryable
	// RequestFailed; the wait keeps these tests about the wire format.
	time.Sleep(5 * time.Millisecond)
	if rep.errType != "" {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Amzn-ErrorType", rep.errType+":http://internal.amazon.com/coral/com.amazon.bedrock/")
		w.WriteHeader(rep.status)
		fmt.Fprintf(w, `{"message":%q}`, rep.body)
		return
	}
	if rep.frames == nil {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, rep.body)
		return
	}
	w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
	w.WriteHeader(http.StatusOK)
	enc := eventstream.NewEncoder()
	for i, m := range rep.frames {
		var buf bytes.Buffer
		if err := enc.Encode(&buf, m); err != nil {
			f.t.Errorf("encode frame: %v", err)
			return
		}
		b := buf.Bytes()
		if rep.corrupt && i == len(rep.frames)-1 {
			b[len(b)-6] ^= 0xff // the payload no longer matches its CRC
		}
		w.Write(b)
		w.(http.Flusher).Flush()
		if i == 0 && rep.pause != nil {
			select {
			case <-rep.pause:
			case <-time.After(5 * time.Second):
				f.t.Errorf("the client did not see the first delta before the stream ended")
			}
		}
	}
}

func event(typ, payload string) eventstream.Message {
	var h eventstream.Headers
	h.Set(":message-type", eventstream.StringValue("event"))
	h.Set(":event-type", eventstream.StringValue(typ))
	h.Set(":content-type", eventstream.StringValue("application/json"))
	return eventstream.Message{Headers: h, Payload: []byte(payload)}
}

func exception(typ, msg string) eventstream.Message {
	var h eventstream.Headers
	h.Set(":message-type", eventstream.StringValue("exception"))
	h.Set(":exception-type", eventstream.StringValue(typ))
	h.Set(":content-type", eventstream.StringValue("application/json"))
	return eventstream.Message{Headers: h, Payload: fmt.Appendf(nil, `{"message":%q}`, msg)}
}

func textDelta(i int, s string) eventstream.Message {
	return event("contentBlockDelta", fmt.Sprintf(`{"contentBlockIndex":%d,"delta":{"text":%q}}`, i, s))
}

func toolStart(i int, id, name string) eventstream.Message {
	return event("contentBlockStart", fmt.Sprintf(`{"contentBlockIndex":%d,"start":{"toolUse":{"toolUseId":%q,"name":%q}}}`, i, id, name))
}

func toolDelta(i int, input string) eventstream.Message {
	return event("contentBlockDelta", fmt.Sprintf(`{"contentBlockIndex":%d,"delta":{"toolUse":{"input":%q}}}`, i, input))
}

func stop(i int) eventstream.Message {
	return event("contentBlockStop", fmt.Sprintf(`{"contentBlockIndex":%d}`, i))
}

func messageStop(reason string) eventstream.Message {
	return event("messageStop", fmt.Sprintf(`{"stopReason":%q}`, reason))
}

func metadata(in, out int) eventstream.Message {
	return event("metadata", fmt.Sprintf(`{"usage":{"inputTokens":%d,"outputTokens":%d,"totalTokens":%d},"metrics":{"latencyMs":12}}`, in, out, in+out))
}

func start(t *testing.T, replies ...reply) (*fakeBedrock, *bedrock.Model) {
	t.Helper()
	f := &fakeBedrock{t: t, replies: replies}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	client := bedrockruntime.New(bedrockruntime.Options{
		Region:           "us-east-1",
		Credentials:      credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		BaseEndpoint:     aws.String(srv.URL),
		RetryMaxAttempts: 1, // retries are pregel's: see IsRetryable
	})
	return f, bedrock.New(client, modelID)
}

var lookupSpec = agent.ToolSpec{Name: "lookup_order", Description: "Looks up an order", InputSchema: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"]}`)}

func conversation() *agent.Request {
	return &agent.Request{
		System: "You are a support assistant.",
		Messages: []agent.Message{
			agent.UserText("where are A-1 and B-2?"),
			{Role: agent.RoleAssistant, Content: []agent.Block{{Text: "Looking."}, {ToolCall: &agent.ToolCall{ID: "t0", Name: "lookup_order", Input: json.RawMessage(`{"order_id":"Z-9"}`)}}}},
			{Role: agent.RoleTool, Content: []agent.Block{{ToolResult: &agent.ToolResult{ToolCallID: "t0", Content: "no such order", Error: true, EditedInput: json.RawMessage(`{"order_id":"Z-8"}`)}}}},
			{Role: agent.RoleTool, Content: []agent.Block{{Text: "and also this"}}},
		},
		Tools:     []agent.ToolSpec{lookupSpec},
		MaxTokens: 512,
	}
}

func TestConverse(t *testing.T) {
	f, m := start(t, reply{body: `{
		"output":{"message":{"role":"assistant","content":[
			{"text":"I will look both up."},
			{"toolUse":{"toolUseId":"t1","name":"lookup_order","input":{"order_id":"A-1"}}},
			{"toolUse":{"toolUseId":"t2","name":"lookup_order","input":{"order_id":"B-2"}}}]}},
		"stopReason":"tool_use",
		"usage":{"inputTokens":30,"outputTokens":20,"totalTokens":50,"cacheReadInputTokens":4},
		"metrics":{"latencyMs":100}}`})
	resp, err := m.Generate(context.Background(), conversation())
	if err != nil {
		t.Fatal(err)
	}
	if resp.StopReason != agent.StopToolUse || resp.Usage != (agent.Usage{InputTokens: 30, OutputTokens: 20, TotalTokens: 50, CacheReadTokens: 4}) {
		t.Fatalf("stop %q usage %+v", resp.StopReason, resp.Usage)
	}
	calls := resp.Message.ToolCalls()
	if resp.Message.Text() != "I will look both up." || len(calls) != 2 || calls[1].ID != "t2" || string(calls[1].Input) != `{"order_id":"B-2"}` {
		t.Fatalf("message %+v", resp.Message)
	}
	if want := "/model/" + strings.ReplaceAll(modelID, ":", "%3A") + "/converse"; f.paths[0] != want {
		t.Fatalf("path %s, want %s", f.paths[0], want)
	}
	checkRequest(t, f.bodies[0])
}

// checkRequest checks what the adapter sent for conversation().
func checkRequest(t *testing.T, req map[string]any) {
	t.Helper()
	raw, _ := json.Marshal(req)
	var got struct {
		Messages []struct {
			Role    string           `json:"role"`
			Content []map[string]any `json:"content"`
		} `json:"messages"`
		System     []map[string]string `json:"system"`
		ToolConfig struct {
			Tools []struct {
				ToolSpec struct {
					Name        string `json:"name"`
					InputSchema struct {
						JSON map[string]any `json:"json"`
					} `json:"inputSchema"`
				} `json:"toolSpec"`
			} `json:"tools"`
		} `json:"toolConfig"`
		InferenceConfig struct {
			MaxTokens int `json:"maxTokens"`
		} `json:"inferenceConfig"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	// The two tool-role messages become one user turn.
	if len(got.Messages) != 3 || got.Messages[2].Role != "user" || len(got.Messages[2].Content) != 2 {
		t.Fatalf("messages %s", raw)
	}
	tr, _ := got.Messages[2].Content[0]["toolResult"].(map[string]any)
	note, _ := json.Marshal(tr["content"])
	if tr["toolUseId"] != "t0" || tr["status"] != "error" || !strings.Contains(string(note), `changed its arguments to {\"order_id\":\"Z-8\"}`) {
		t.Fatalf("tool result %v", got.Messages[2].Content[0])
	}
	tu, _ := got.Messages[1].Content[1]["toolUse"].(map[string]any)
	if in, _ := tu["input"].(map[string]any); in["order_id"] != "Z-9" {
		t.Fatalf("tool use %v", got.Messages[1].Content[1])
	}
	if len(got.System) != 1 || got.System[0]["text"] != "You are a support assistant." || got.InferenceConfig.MaxTokens != 512 {
		t.Fatalf("system/inference %s", raw)
	}
	if ts := got.ToolConfig.Tools; len(ts) != 1 || ts[0].ToolSpec.Name != "lookup_order" || ts[0].ToolSpec.InputSchema.JSON["type"] != "object" {
		t.Fatalf("tool config %s", raw)
	}
}

func TestConverseStream(t *testing.T) {
	f, m := start(t, reply{frames: []eventstream.Message{
		event("messageStart", `{"role":"assistant"}`),
		textDelta(0, "Checking "), textDelta(0, "both."), stop(0),
		toolStart(1, "t1", "lookup_order"), toolDelta(1, `{"order_`), toolDelta(1, `id":"A-1"}`), stop(1),
		toolStart(2, "t2", "lookup_order"), toolDelta(2, `{"order_id":"B-2"}`), stop(2),
		messageStop("tool_use"), metadata(40, 25),
	}})
	var deltas []agent.Delta
	resp, err := m.Stream(context.Background(), conversation(), func(d agent.Delta) { deltas = append(deltas, d) })
	if err != nil {
		t.Fatal(err)
	}
	if resp.StopReason != agent.StopToolUse || resp.Usage != (agent.Usage{InputTokens: 40, OutputTokens: 25, TotalTokens: 65}) {
		t.Fatalf("stop %q usage %+v", resp.StopReason, resp.Usage)
	}
	calls := resp.Message.ToolCalls()
	if resp.Message.Text() != "Checking both." || len(calls) != 2 || string(calls[0].Input) != `{"order_id":"A-1"}` || calls[1].ID != "t2" {
		t.Fatalf("message %+v", resp.Message)
	}
	want := []agent.Delta{
		{Block: 0, Text: "Checking "}, {Block: 0, Text: "both."},
		{Block: 1, ToolCallID: "t1", ToolName: "lookup_order"}, {Block: 1, InputJSON: `{"order_`}, {Block: 1, InputJSON: `id":"A-1"}`},
		{Block: 2, ToolCallID: "t2", ToolName: "lookup_order"}, {Block: 2, InputJSON: `{"order_id":"B-2"}`},
	}
	if fmt.Sprint(deltas) != fmt.Sprint(want) {
		t.Fatalf("deltas %+v\nwant   %+v", deltas, want)
	}
	if !strings.HasSuffix(f.paths[0], "/converse-stream") {
		t.Fatalf("path %s", f.paths[0])
	}
	checkRequest(t, f.bodies[0])
}

func TestStopReasons(t *testing.T) {
	for _, reason := range []agent.StopReason{agent.StopEndTurn, agent.StopMaxTokens, agent.StopSequence, agent.StopGuardrailIntervened, agent.StopContentFiltered} {
		t.Run(string(reason), func(t *testing.T) {
			_, m := start(t,
				reply{body: fmt.Sprintf(`{"output":{"message":{"role":"assistant","content":[{"text":"x"}]}},"stopReason":%q,"usage":{"inputTokens":1,"outputTokens":1,"totalTokens":2}}`, reason)},
				reply{frames: []eventstream.Message{textDelta(0, "x"), messageStop(string(reason)), metadata(1, 1)}})
			r1, err := m.Generate(context.Background(), &agent.Request{Messages: []agent.Message{agent.UserText("hi")}})
			if err != nil || r1.StopReason != reason {
				t.Fatalf("Converse: %v %v", r1, err)
			}
			r2, err := m.Stream(context.Background(), &agent.Request{Messages: []agent.Message{agent.UserText("hi")}}, nil) // nil: no deltas wanted
			if err != nil || r2.StopReason != reason {
				t.Fatalf("ConverseStream: %v %v", r2, err)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	hi := &agent.Request{Messages: []agent.Message{agent.UserText("hi")}}
	tests := []struct {
		name      string
		reply     reply
		stream    bool
		code      string
		retryable bool
	}{
		{"throttling", reply{status: 429, errType: "ThrottlingException", body: "Too many requests, please wait before trying again."}, false, "ThrottlingException", true},
		{"throttling on stream", reply{status: 429, errType: "ThrottlingException", body: "slow down"}, true, "ThrottlingException", true},
		{"unavailable", reply{status: 503, errType: "ServiceUnavailableException", body: "try later"}, false, "ServiceUnavailableException", true},
		{"validation", reply{status: 400, errType: "ValidationException", body: "The model returned the following errors: messages: roles must alternate"}, false, "ValidationException", false},
		{"validation on stream", reply{status: 400, errType: "ValidationException", body: "bad"}, true, "ValidationException", false},
		{"access denied", reply{status: 403, errType: "AccessDeniedException", body: "You don't have access to the model"}, false, "AccessDeniedException", false},
		{"unknown model", reply{status: 404, errType: "ResourceNotFoundException", body: "no such model"}, true, "ResourceNotFoundException", false},
		{"exception inside the stream", reply{frames: []eventstream.Message{textDelta(0, "x"), exception("throttlingException", "slow down")}}, true, "ThrottlingException", true},
		{"malformed frame", reply{frames: []eventstream.Message{textDelta(0, "x"), textDelta(0, "y")}, corrupt: true}, true, "RequestFailed", true},
		{"stream cut before messageStop", reply{frames: []eventstream.Message{textDelta(0, "x")}}, true, "IncompleteStream", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, m := start(t, tt.reply)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var err error
			if tt.stream {
				_, err = m.Stream(ctx, hi, func(agent.Delta) {})
			} else {
				_, err = m.Generate(ctx, hi)
			}
			t.Log(err)
			var me *agent.ModelError
			if !errors.As(err, &me) || me.Code != tt.code || agent.IsRetryable(err) != tt.retryable {
				t.Fatalf("got %v (%T), want code %s retryable=%v", err, err, tt.code, tt.retryable)
			}
			if tt.reply.body != "" && me.Message != tt.reply.body {
				t.Fatalf("message %q, want %q", me.Message, tt.reply.body)
			}
		})
	}
}

// The agent on Bedrock: throttled once (retried by pregel), then a turn
// with a tool call, then the answer, streamed: the first delta reaches the
// observer while the server still holds the rest of the stream.
func TestAgentOnBedrock(t *testing.T) {
	seen := make(chan struct{})
	f, m := start(t,
		reply{status: 429, errType: "ThrottlingException", body: "slow down"},
		reply{frames: []eventstream.Message{toolStart(0, "t1", "lookup_order"), toolDelta(0, `{"order_id":"A-1"}`), stop(0), messageStop("tool_use"), metadata(10, 5)}},
		reply{pause: seen, frames: []eventstream.Message{textDelta(0, "A-1 "), textDelta(0, "has shipped."), stop(0), messageStop("end_turn"), metadata(20, 6)}},
	)
	lookup := agent.MustTool("lookup_order", "Looks up an order", func(ctx context.Context, in struct {
		OrderID string `json:"order_id"`
	}) (string, error) {
		return in.OrderID + ": shipped", nil
	})
	g, err := agent.New(agent.Config{Model: m, Tools: []agent.Tool{lookup},
		ModelRetry: &pregel.RetryPolicy{MaxAttempts: 3, InitialInterval: time.Millisecond, RetryIf: agent.IsRetryable}})
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	var text strings.Builder
	res, err := g.Run(context.Background(), agent.State{Messages: []agent.Message{agent.UserText("where is A-1?")}},
		pregel.WithObserver(func(e pregel.Event) {
			if e.Type == pregel.EventCustom && e.Name == agent.EventMessageDelta {
				var d agent.MessageDelta
				_ = json.Unmarshal(e.Payload, &d)
				if d.Text != "" {
					text.WriteString(d.Text)
					once.Do(func() { close(seen) })
				}
			}
		}))
	if err != nil || res.Status != pregel.RunCompleted {
		t.Fatalf("run: %v %v", res.Status, err)
	}
	var st agent.State
	if err := res.Decode(&st); err != nil {
		t.Fatal(err)
	}
	last := st.Messages[len(st.Messages)-1]
	if last.Text() != "A-1 has shipped." || text.String() != "A-1 has shipped." {
		t.Fatalf("answer %q, deltas %q", last.Text(), text.String())
	}
	if st.Usage.Total != (agent.Usage{InputTokens: 30, OutputTokens: 11, TotalTokens: 41}) {
		t.Fatalf("usage %+v", st.Usage)
	}
	if len(f.paths) != 3 {
		t.Fatalf("%d calls to Bedrock, want 3", len(f.paths))
	}
	// The third call carries the tool's result as a user turn.
	raw, _ := json.Marshal(f.bodies[2]["messages"])
	if !strings.Contains(string(raw), `"toolResult"`) || !strings.Contains(string(raw), "A-1: shipped") {
		t.Fatalf("third request %s", raw)
	}
}

// A stream that keeps breaking fails the run, after the model node's
// retries, with a message that says what happened: no panic, no hang.
func TestAgentOnBrokenStream(t *testing.T) {
	broken := reply{frames: []eventstream.Message{textDelta(0, "x"), textDelta(0, "y")}, corrupt: true}
	f, m := start(t, broken, broken)
	g, err := agent.New(agent.Config{Model: m, ModelRetry: &pregel.RetryPolicy{MaxAttempts: 2, InitialInterval: time.Millisecond, RetryIf: agent.IsRetryable}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := g.Run(ctx, agent.TextInput("hi"))
	if err == nil || res.Status != pregel.RunFailed || !strings.Contains(err.Error(), "no valid answer from Bedrock: decode event: message checksum mismatch") {
		t.Fatalf("got %v: %v", res.Status, err)
	}
	t.Log(err)
	if len(f.paths) != 2 {
		t.Fatalf("%d calls, want 2 (one retry)", len(f.paths))
	}
}

// Bad output from the model, on the wire: the run goes on (the model is
// told what was wrong) or fails with a message saying what happened;
// never a panic or a hung run.
func TestAgentOnBadModelOutput(t *testing.T) {
	lookups := 0
	lookup := agent.MustTool("lookup_order", "Looks up an order", func(ctx context.Context, in struct {
		OrderID string `json:"order_id"`
	}) (string, error) {
		lookups++
		return in.OrderID + ": shipped", nil
	})
	answer := reply{frames: []eventstream.Message{textDelta(0, "Sorry about that."), stop(0), messageStop("end_turn"), metadata(20, 4)}}
	tests := []struct {
		name    string
		replies []reply
		calls   int
		err     string // the run's error; "" when it completes
		check   func(t *testing.T, f *fakeBedrock, st agent.State)
	}{
		{
			name:    "a malformed frame, then a good stream",
			replies: []reply{{frames: []eventstream.Message{textDelta(0, "x"), textDelta(0, "y")}, corrupt: true}, answer},
			calls:   2,
		},
		{
			name:    "an empty answer",
			replies: []reply{{frames: []eventstream.Message{messageStop("end_turn"), metadata(10, 0)}}},
			calls:   1,
			err:     `the model returned an empty answer (stop reason "end_turn")`,
		},
		{
			name:    "a blank answer",
			replies: []reply{{frames: []eventstream.Message{textDelta(0, "  \n"), stop(0), messageStop("max_tokens"), metadata(10, 1)}}},
			calls:   1,
			err:     `the model returned an empty answer (stop reason "max_tokens")`,
		},
		{
			name: "an unknown tool, an argument of the wrong type and arguments cut short",
			replies: []reply{{frames: []eventstream.Message{
				toolStart(0, "t1", "cancel_order"), toolDelta(0, `{"order_id":"A-1"}`), stop(0),
				toolStart(1, "t2", "lookup_order"), toolDelta(1, `{"order_id":42}`), stop(1),
				toolStart(2, "t3", "lookup_order"), toolDelta(2, `{"order_id":"A`),
				messageStop("max_tokens"), metadata(10, 30),
			}}, answer},
			calls: 2,
			check: func(t *testing.T, f *fakeBedrock, st agent.State) {
				if lookups != 0 {
					t.Errorf("the lookup ran %d times with bad arguments", lookups)
				}
				// The second request replays the calls with object inputs
				// (what Bedrock accepts) and an error result for each.
				msgs, _ := f.bodies[1]["messages"].([]any)
				if len(msgs) != 3 {
					t.Fatalf("second request: %d messages, want user, assistant, tool results", len(msgs))
				}
				raw, _ := json.Marshal(msgs[1])
				for _, want := range []string{`"input":{"order_id":"A-1"}`, `"input":{"order_id":42}`, `"input":{}`} {
					if !strings.Contains(string(raw), want) {
						t.Errorf("the replayed calls %s lack %s", raw, want)
					}
				}
				raw, _ = json.Marshal(msgs[2])
				if n := strings.Count(string(raw), `"status":"error"`); n != 3 {
					t.Errorf("%d error results in %s, want 3", n, raw)
				}
				for _, want := range []string{`there is no tool named \"cancel_order\"`, "invalid arguments"} {
					if !strings.Contains(string(raw), want) {
						t.Errorf("the results %s do not tell the model %q", raw, want)
					}
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lookups = 0
			f, m := start(t, tt.replies...)
			g, err := agent.New(agent.Config{Model: m, Tools: []agent.Tool{lookup},
				ModelRetry: &pregel.RetryPolicy{MaxAttempts: 2, InitialInterval: time.Millisecond, RetryIf: agent.IsRetryable}})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			res, err := g.Run(ctx, agent.TextInput("cancel A-1"))
			if tt.err != "" {
				if err == nil || res.Status != pregel.RunFailed || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got %v: %v; want a failed run saying %q", res.Status, err, tt.err)
				}
			} else {
				if err != nil || res.Status != pregel.RunCompleted {
					t.Fatalf("got %v: %v; want the run completed", res.Status, err)
				}
				var st agent.State
				if err := res.Decode(&st); err != nil {
					t.Fatal(err)
				}
				if last := st.Messages[len(st.Messages)-1]; last.Text() != "Sorry about that." {
					t.Errorf("last message %+v", last)
				}
				if tt.check != nil {
					tt.check(t, f, st)
				}
			}
			if len(f.paths) != tt.calls {
				t.Errorf("%d calls to Bedrock, want %d", len(f.paths), tt.calls)
			}
		})
	}
}
