// Package mcpserver serves every graph of a [runs.Service] as a tool of
// an MCP server (Model Context Protocol, streamable HTTP), through the
// official Go SDK (github.com/modelcontextprotocol/go-sdk). `superstep
// dev`, a user's binary and the api Lambda mount it at /mcp behind the
// API's bearer token.
//
// Calling a graph's tool starts a run and waits for it: the result is the
// last assistant message for agents (graphs taking text into a messages
// channel), the final state as JSON otherwise. While it runs, a client
// that sent a progress token gets a progress notification per step. A
// run that stops on an interrupt asks the client through an elicitation
// when the client supports it, and resumes with the answer; otherwise (or
// when the client declines) the result says what is asked and how to
// answer with the answer_run tool.
package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// Pattern is where servers mount the handler.
const Pattern = "/mcp"

// AnswerTool is the name of the tool that answers a waiting run or waits
// for a run that outlived a call.
const AnswerTool = "answer_run"

// Config configures the handler.
type Config struct {
	// Service runs the graphs. Required.
	Service *runs.Service
	// Stateless serves each request on its own, without sessions: for
	// servers whose requests may reach different instances (the api
	// Lambda). Elicitation needs a session, so a stateless server always
	// answers interrupts with a result saying how to answer.
	Stateless bool
	// Wait bounds how long a call waits for its run (default 5 minutes);
	// after it the result says the run goes on and how to wait for it.
	Wait time.Duration
	// Poll is how often a waiting call reads the run (default 200ms).
	Poll time.Duration
	// MaxElicitations bounds the questions asked within one call (default
	// 5), so that a client answering with the wrong shape again and again
	// cannot keep a call open.
	MaxElicitations int
	// Logger receives errors (default slog.Default()).
	Logger *slog.Logger
	// Version is the server's version in its MCP implementation info.
	Version string
}

// New returns the MCP handler for cfg's graphs.
func New(cfg Config) (http.Handler, error) {
	if cfg.Service == nil || cfg.Service.Graphs == nil {
		return nil, errors.New("mcpserver: Config.Service with its Graphs is required")
	}
	if cfg.Wait <= 0 {
		cfg.Wait = 5 * time.Minute
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 200 * time.Millisecond
	}
	if cfg.MaxElicitations <= 0 {
		cfg.MaxElicitations = 5
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	// The tools' schemas are built on the first request, not here: a
	// Lambda function that may never serve /mcp does not pay for them in
	// its cold start.
	s := &server{cfg: cfg}
	l := &lazyHandler{}
	l.build = func() http.Handler {
		srv := mcp.NewServer(&mcp.Implementation{Name: "superstep", Version: cfg.Version}, &mcp.ServerOptions{
			Instructions: "Each tool runs a graph (a durable workflow or agent) to its end and returns its answer. " +
				"When a run waits for a person's answer and no question could be asked, the result says so; answer with " + AnswerTool + ".",
		})
		for _, g := range cfg.Service.Graphs.List() {
			if !validToolName(g.Name()) || g.Name() == AnswerTool {
				cfg.Logger.Warn("mcp: graph not served as a tool: its name is not a valid MCP tool name", "graph", g.Name())
				continue
			}
			srv.AddTool(&mcp.Tool{Name: g.Name(), Title: g.Name(), Description: describe(g), InputSchema: inputSchema(g)}, s.runGraph(g))
		}
		srv.AddTool(&mcp.Tool{Name: AnswerTool, Title: "Answer or wait for a run",
			Description: "Answers the question a run started by another tool waits on (answer), or waits for a run that outlived its call (no answer), and returns its result.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"run_id":{"type":"string","description":"the run's id, from an earlier result"},` +
				`"answer":{"description":"the answer: text, or the JSON value the question asks for"}},"required":["run_id"],"additionalProperties":false}`)},
			s.answerRun)
		return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
			&mcp.StreamableHTTPOptions{Stateless: cfg.Stateless, JSONResponse: cfg.Stateless, Logger: cfg.Logger})
	}
	return l, nil
}

// lazyHandler is the handler build returns, built on the first request.
type lazyHandler struct {
	once  sync.Once
	build func() http.Handler
	h     http.Handler
}

func (l *lazyHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.once.Do(func() { l.h = l.build() })
	l.h.ServeHTTP(w, r)
}

// validToolName reports whether s is 1 to 128 bytes of ASCII letters,
// digits and "_", "." and "-". It is the regular expression ^[A-Za-z0-9_.-]{1,128}$ without one:
// compiling a counted repetition costs milliseconds at every process's
// start (a Lambda function's cold start among them).
func validToolName(s string) bool {
	if len(s) < 1 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("_.-", c) >= 0) {
			return false
		}
	}
	return true
}

type server struct{ cfg Config }

func describe(g *pregel.Graph) string {
	d := g.Description()
	if d == "" {
		d = "Runs the graph " + g.Name() + "."
	}
	if g.TextChannel() != "" {
		d += " Send a message as text; give thread_id to continue a conversation."
	}
	return d
}

// inputSchema is the tool's input: the graph's channels as properties
// (each typed by the JSON schema of its Go type, derived from the graph's
// state struct; any JSON value when it has none), text when the graph
// takes text, and thread_id for graphs that keep conversations.
func inputSchema(g *pregel.Graph) json.RawMessage {
	typed := channelSchemas(g.StateType())
	props := map[string]any{}
	for _, ch := range g.Channels() {
		desc := "a value for the graph's channel " + ch + " (written through its reducer)"
		cs, ok := typed[ch]
		if !ok {
			props[ch] = map[string]any{"description": desc}
			continue
		}
		if cs.Description == "" {
			cs.Description = desc
		}
		props[ch] = cs
	}
	if g.TextChannel() != "" {
		if _, taken := props["text"]; !taken {
			props["text"] = map[string]any{"type": "string", "description": "a message to start the run with (plain text)"}
		}
	}
	if _, taken := props["thread_id"]; !taken {
		props["thread_id"] = map[string]any{"type": "string", "description": "continue this thread (a conversation): the run starts from its latest state; a new id starts one"}
	}
	b, _ := json.Marshal(map[string]any{"type": "object", "properties": props, "additionalProperties": false})
	return b
}

// toolError is a result the model reads as a failed call.
func toolError(format string, a ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, a...)}}}
}

func (s *server) runGraph(g *pregel.Graph) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args := map[string]json.RawMessage{}
		if raw := bytes.TrimSpace(req.Params.Arguments); len(raw) > 0 && string(raw) != "null" {
			if err := json.Unmarshal(raw, &args); err != nil {
				return toolError("the arguments must be a JSON object of the graph's channels: %v", err), nil
			}
		}
		var thread string
		if t, ok := args["thread_id"]; ok && !slicesContains(g.Channels(), "thread_id") {
			if err := json.Unmarshal(t, &thread); err != nil {
				return toolError("thread_id must be a string"), nil
			}
			delete(args, "thread_id")
		}
		var input json.RawMessage
		if t, ok := args["text"]; ok && g.TextChannel() != "" && !slicesContains(g.Channels(), "text") {
			var text string
			if err := json.Unmarshal(t, &text); err != nil {
				return toolError("text must be a string"), nil
			}
			if len(args) > 1 {
				return toolError("give either text or channel values, not both"), nil
			}
			in, err := g.InputFromText(text)
			if err != nil {
				return toolError("the graph could not take this text: %v", err), nil
			}
			input = in
		} else {
			for k := range args {
				if !slicesContains(g.Channels(), k) {
					return toolError("%q is not a channel of graph %s; its channels are %s", k, g.Name(), strings.Join(g.Channels(), ", ")), nil
				}
			}
			input, _ = json.Marshal(args)
		}
		var (
			r   runs.Run
			err error
		)
		if thread != "" {
			if _, _, err := s.cfg.Service.CreateThread(ctx, runs.CreateThreadRequest{ThreadID: thread}); err != nil {
				return s.serviceError(ctx, err), nil
			}
			r, _, err = s.cfg.Service.CreateOnThread(ctx, thread, runs.ThreadRunRequest{Graph: g.Name(), Input: input})
		} else {
			r, _, err = s.cfg.Service.Create(ctx, g.Name(), runs.CreateRequest{Input: input})
		}
		if err != nil {
			return s.serviceError(ctx, err), nil
		}
		return s.follow(ctx, req, r.ID), nil
	}
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// serviceError turns an error of the service into a tool error: the
// caller's mistakes say what to fix; others are logged and not shown.
func (s *server) serviceError(ctx context.Context, err error) *mcp.CallToolResult {
	switch {
	case errors.Is(err, runs.ErrInvalid), errors.Is(err, runs.ErrConflict), errors.Is(err, runs.ErrNotFound):
		return toolError("%v", err)
	}
	s.cfg.Logger.ErrorContext(ctx, "mcp: run request failed", "error", err)
	return toolError("the server could not carry out the request; try again later")
}

type answerArgs struct {
	RunID  string          `json:"run_id"`
	Answer json.RawMessage `json:"answer"`
}

func (s *server) answerRun(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a answerArgs
	dec := json.NewDecoder(bytes.NewReader(req.Params.Arguments))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil || a.RunID == "" {
		return toolError(`give {"run_id": "...", "answer": ...}`), nil
	}
	r, err := s.cfg.Service.Get(ctx, a.RunID)
	if err != nil {
		return s.serviceError(ctx, err), nil
	}
	if len(bytes.TrimSpace(a.Answer)) > 0 {
		if r.Status != pregel.RunInterrupted {
			return toolError("run %s waits for no answer (it is %s)", r.ID, r.Status), nil
		}
		if _, err := s.cfg.Service.Resume(ctx, r.ID, runs.ResumeRequest{Value: a.Answer}); err != nil {
			return s.serviceError(ctx, err), nil
		}
	}
	return s.follow(ctx, req, r.ID), nil
}

// follow waits for the run, reporting progress, asking its questions, and
// returns its result.
func (s *server) follow(ctx context.Context, req *mcp.CallToolRequest, id string) *mcp.CallToolResult {
	deadline := time.Now().Add(s.cfg.Wait)
	token := req.Params.GetProgressToken()
	lastStep, asked := -1, 0
	for {
		r, err := s.cfg.Service.Get(ctx, id)
		if err != nil {
			return s.serviceError(ctx, err)
		}
		if token != nil && r.Step != lastStep && req.Session != nil {
			lastStep = r.Step
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(r.Step),
				Message: fmt.Sprintf("run %s: step %d, %s", r.ID, r.Step, r.Status)})
		}
		switch r.Status {
		case pregel.RunPending, pregel.RunRunning:
		case pregel.RunInterrupted:
			if r.Resume != nil { // answered, not yet taken
				break
			}
			if asked >= s.cfg.MaxElicitations || !s.canElicit(req) {
				return s.howToAnswer(r, "")
			}
			asked++
			answer, why := s.elicit(ctx, req, r)
			if answer == nil {
				return s.howToAnswer(r, why)
			}
			if _, err := s.cfg.Service.Resume(ctx, r.ID, runs.ResumeRequest{Value: answer}); err != nil {
				if errors.Is(err, runs.ErrInvalid) {
					return s.howToAnswer(r, err.Error())
				}
				return s.serviceError(ctx, err)
			}
			continue
		default:
			return s.result(ctx, r)
		}
		if time.Now().After(deadline) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(
				"Run %s is still %s (step %d). Call %s with {\"run_id\": %q} to wait for its result.", r.ID, r.Status, r.Step, AnswerTool, r.ID)}},
				StructuredContent: map[string]any{"run_id": r.ID, "status": r.Status}}
		}
		select {
		case <-ctx.Done():
			return toolError("the call was cancelled; run %s goes on", id)
		case <-time.After(s.cfg.Poll):
		}
	}
}

func (s *server) canElicit(req *mcp.CallToolRequest) bool {
	if s.cfg.Stateless || req.Session == nil {
		return false
	}
	p := req.Session.InitializeParams()
	return p != nil && p.Capabilities != nil && p.Capabilities.Elicitation != nil
}

// question is what an interrupt asks, in words.
func question(in pregel.InterruptInfo) string {
	var v struct {
		Question string `json:"question"`
	}
	if json.Unmarshal(in.Value, &v) == nil && v.Question != "" {
		return v.Question
	}
	var text string
	if json.Unmarshal(in.Value, &text) == nil && text != "" {
		return text
	}
	return "The run asks: " + string(in.Value)
}

// elicit asks the client the run's first question. It returns the answer
// as the JSON value to resume with, or nil and why not.
func (s *server) elicit(ctx context.Context, req *mcp.CallToolRequest, r runs.Run) (json.RawMessage, string) {
	in := r.Interrupts[0]
	msg := question(in)
	if in.Error != "" {
		msg = in.Error + "\n\n" + msg
	}
	res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: msg, RequestedSchema: map[string]any{
		"type": "object",
		"properties": map[string]any{"answer": map[string]any{"type": "string", "title": "Answer",
			"description": "plain text, or JSON when the question asks for a value"}},
		"required": []string{"answer"},
	}})
	if err != nil {
		return nil, "the question could not be asked: " + err.Error()
	}
	if res.Action != "accept" {
		return nil, "the question was " + res.Action + "d"
	}
	text, ok := res.Content["answer"].(string)
	if !ok {
		return nil, `the answer was not {"answer": "text"}`
	}
	return answerValue(text, in.Type), ""
}

// answerValue is text as the value an interrupt wants: parsed as JSON
// when it is JSON of the type asked for (or of any type but a string when
// no type is asked), a JSON string otherwise.
func answerValue(text, want string) json.RawMessage {
	t := strings.TrimSpace(text)
	if want != "string" && json.Valid([]byte(t)) && t != "" && t[0] != '"' {
		return json.RawMessage(t)
	}
	b, _ := json.Marshal(text)
	return b
}

func (s *server) howToAnswer(r runs.Run, why string) *mcp.CallToolResult {
	var b strings.Builder
	fmt.Fprintf(&b, "Run %s waits for an answer.", r.ID)
	if why != "" {
		fmt.Fprintf(&b, " (%s)", why)
	}
	for _, in := range r.Interrupts {
		b.WriteString("\n\n" + question(in))
		if in.Error != "" {
			b.WriteString("\nThe last answer was refused: " + in.Error)
		}
	}
	fmt.Fprintf(&b, "\n\nAnswer with the tool %s: {\"run_id\": %q, \"answer\": ...}.", AnswerTool, r.ID)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: b.String()}},
		StructuredContent: map[string]any{"run_id": r.ID, "status": r.Status, "interrupts": r.Interrupts}}
}

// result is a finished run's result: its error when it failed, the last
// assistant message for agents, the final state otherwise.
func (s *server) result(ctx context.Context, r runs.Run) *mcp.CallToolResult {
	if r.Status != pregel.RunCompleted {
		msg := fmt.Sprintf("run %s %s", r.ID, r.Status)
		if r.Error != "" {
			msg += ": " + r.Error
		}
		return toolError("%s", msg)
	}
	cp, err := s.cfg.Service.Checkpoint(ctx, r.ID, r.Step)
	if err != nil {
		return s.serviceError(ctx, err)
	}
	state := map[string]json.RawMessage{}
	for k, v := range cp.Values {
		state[k] = v
	}
	structured := map[string]any{"run_id": r.ID, "status": r.Status, "state": state}
	if r.ThreadID != "" {
		structured["thread_id"] = r.ThreadID
	}
	if g, ok := s.cfg.Service.Graphs.Get(r.Graph); ok && g.TextChannel() != "" {
		if text, ok := lastAssistant(state[g.TextChannel()]); ok {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: structured}
		}
	}
	b, _ := json.Marshal(state)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: structured}
}

// lastAssistant is the text of the last assistant message of a messages
// channel.
func lastAssistant(raw json.RawMessage) (string, bool) {
	var msgs []struct {
		Role    string `json:"role"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal(raw, &msgs) != nil {
		return "", false
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != "assistant" {
			continue
		}
		var parts []string
		for _, c := range msgs[i].Content {
			if c.Text != "" {
				parts = append(parts, c.Text)
			}
		}
		if len(parts) > 0 {
			return strings.Join(parts, "\n"), true
		}
	}
	return "", false
}

// channelSchemas derives the JSON schema of each channel from the graph's
// state struct (its fields are the channels, by their JSON names). A type
// JSON schema cannot describe (a func, a map with other keys) is left
// out: such a channel takes any JSON value.
func channelSchemas(state reflect.Type) map[string]*jsonschema.Schema {
	for state != nil && state.Kind() == reflect.Pointer {
		state = state.Elem()
	}
	if state == nil || state.Kind() != reflect.Struct {
		return nil
	}
	s, err := jsonschema.ForType(state, &jsonschema.ForOptions{IgnoreInvalidTypes: true})
	if err != nil {
		return nil
	}
	return s.Properties
}
