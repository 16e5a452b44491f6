package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/superstep/superstep/pkg/internal/jsonin"
	"github.com/superstep/superstep/pkg/pregel"
)

// State is the state of the prebuilt agent: the conversation and the
// tokens it cost.
type State struct {
	Messages []Message   `json:"messages" reduce:"messages"`
	Usage    UsageTotals `json:"usage,omitzero" reduce:"usage"`
}

// Answer returns the text of the last assistant message of an agent's
// run: the agent's answer once the run completed. It is "" when the
// conversation holds no assistant message (a run that failed or was
// interrupted before the model answered) or res is not an agent's.
//
//	res, err := run.Invoke(ctx, agent.State{Messages: []agent.Message{agent.UserText("Where is A-1002?")}})
//	fmt.Println(agent.Answer(res.Result))
func Answer(res *pregel.Result) string {
	if res == nil {
		return ""
	}
	var s State
	if err := res.Decode(&s); err != nil {
		return ""
	}
	return s.Answer()
}

// Answer returns the text of the conversation's last assistant message,
// "" when there is none.
func (s State) Answer() string {
	for i := len(s.Messages) - 1; i >= 0; i-- {
		if s.Messages[i].Role == RoleAssistant {
			return s.Messages[i].Text()
		}
	}
	return ""
}

// Node names of the prebuilt agent.
const (
	ModelNode = "model"
	ToolsNode = "tools"
)

// Names of the events the agent's nodes send with pregel.Emit.
const (
	// EventMessageDelta carries a [MessageDelta]: a piece of the model's
	// answer, sent while the model node runs.
	EventMessageDelta = "message_delta"
	// EventToolCall carries a [ToolProgress]: a tool call starting or
	// finishing.
	EventToolCall = "tool_call"
)

// MessageDelta is the payload of an [EventMessageDelta] event: a piece of
// the answer that will be stored as the message MessageID.
type MessageDelta struct {
	MessageID string `json:"message_id"`
	Delta
}

// ToolProgress is the payload of an [EventToolCall] event.
type ToolProgress struct {
	ToolCallID string `json:"tool_call_id"`
	Name       string `json:"name"`
	// Status is "started", "finished" or "failed".
	Status string `json:"status"`
}

// ApprovalRequest is the value of the interrupt a tool call waits on when
// its tool needs approval (see [Config.Approve]).
type ApprovalRequest struct {
	// Kind is "tool_approval".
	Kind     string   `json:"kind"`
	ToolCall ToolCall `json:"tool_call"`
	// Question says, for a person, what is asked and how to answer (A2A
	// clients show it as the text of the input-required status).
	Question string `json:"question,omitempty"`
	// InputSchema is the tool's input schema (JSON Schema), against which
	// an approver can check edited arguments before sending them.
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
}

// approvalQuestion is the Question of call's ApprovalRequest.
func approvalQuestion(call ToolCall) string {
	return fmt.Sprintf("Approve the call of tool %s with arguments %s? Answer \"approve\"; \"reject\" or a reason to reject it "+
		`(or {"decision":"reject","message":"..."}); or {"decision":"edit","input":{...}} with the arguments to use instead.`, call.Name, call.Input)
}

// Decision is what an approver decided about a tool call.
type Decision string

// Decisions.
const (
	Approve Decision = "approve" // call the tool as the model asked
	Edit    Decision = "edit"    // call it with Approval.Input instead
	Reject  Decision = "reject"  // do not call it; tell the model Approval.Message
)

// Approval answers an [ApprovalRequest]: resume the run with it, as an
// object ({"decision":"approve"}, {"decision":"edit","input":{...}},
// {"decision":"reject","message":"..."}) or as plain text: "approve",
// "reject", or any other text, which rejects the call with that text as
// the message. An answer of another shape (an unknown decision or field,
// an edit without an object of arguments, a number, an empty text) is
// refused: the run asks again, saying why.
type Approval struct {
	Decision Decision `json:"decision"`
	// Input replaces the call's arguments when Decision is Edit.
	Input json.RawMessage `json:"input,omitempty"`
	// Message is told to the model when Decision is Reject.
	Message string `json:"message,omitempty"`
}

// approvalShapes is what an error about a refused answer tells the
// approver to send.
const approvalShapes = `answer "approve", "reject" or a reason to reject, or an object {"decision": "approve" | "reject" | "edit", "message": "why (reject)", "input": {the arguments (edit)}}`

// UnmarshalJSON reads an Approval from its object or from plain text, and
// refuses answers of any other shape with a message that says what to
// send.
func (a *Approval) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return fmt.Errorf("the answer is empty; %s", approvalShapes)
	}
	switch b[0] {
	case '"':
		var text string
		if err := json.Unmarshal(b, &text); err != nil {
			return err
		}
		switch d := Decision(strings.ToLower(strings.TrimSpace(text))); d {
		case Approve, Reject:
			*a = Approval{Decision: d}
		case Edit:
			return fmt.Errorf(`an edit needs the new arguments: answer {"decision": "edit", "input": {...}}`)
		case "":
			return fmt.Errorf("the answer is empty; %s", approvalShapes)
		default:
			*a = Approval{Decision: Reject, Message: strings.TrimSpace(text)}
		}
		return nil
	case '{':
	default:
		kind := "a number"
		switch b[0] {
		case '[':
			kind = "an array"
		case 't', 'f':
			kind = "a boolean"
		case 'n':
			kind = "null"
		}
		return fmt.Errorf("the answer is %s, not text or an object; %s", kind, approvalShapes)
	}
	type plain Approval
	var p plain
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		// In words for the approver: which field, what it must be; never
		// Go's names for the types.
		why := strings.TrimPrefix(jsonin.Explain(err), "json: ")
		return fmt.Errorf("the answer does not fit (%s); %s", why, approvalShapes)
	}
	p.Decision = Decision(strings.ToLower(strings.TrimSpace(string(p.Decision))))
	switch p.Decision {
	case Approve, Reject:
	case Edit:
		if in := bytes.TrimSpace(p.Input); len(in) == 0 || in[0] != '{' {
			return fmt.Errorf(`an edit needs "input": an object of the tool's arguments, e.g. {"decision": "edit", "input": {...}}`)
		}
	case "":
		return fmt.Errorf(`the answer has no "decision"; %s`, approvalShapes)
	default:
		return fmt.Errorf(`the decision %q is not approve, edit or reject; %s`, p.Decision, approvalShapes)
	}
	*a = Approval(p)
	return nil
}

// Config configures the prebuilt agent.
type Config struct {
	// Name is the graph's name (default "agent").
	Name        string
	Description string
	// Model answers; required.
	Model ChatModel
	// System is the system prompt.
	System string
	// Tools the model may call.
	Tools []Tool
	// Approve names tools whose every call waits for an [Approval]: the
	// run is interrupted with an [ApprovalRequest] before the call.
	Approve []string
	// MaxTokens and Temperature are passed to the model.
	MaxTokens   int
	Temperature *float64
	// MaxTurns bounds the model turns of a run (default 25); a run that
	// reaches it fails with pregel.ErrStepLimit.
	MaxTurns int
	// ModelRetry is the model node's retry policy (default: 4 attempts,
	// retrying the errors [IsRetryable] accepts).
	ModelRetry *pregel.RetryPolicy
	// ToolRetry is each tool call's retry policy (default: one attempt).
	// Once its attempts are spent, the tool's error goes to the model as
	// a failed tool result; the run goes on.
	ToolRetry pregel.RetryPolicy
	// Generate, when set, calls the model without streaming: no
	// [EventMessageDelta] events are sent.
	Generate bool
	// Concurrency bounds the tool calls that run at once (default 16).
	Concurrency int
	// RemoteTools marks the tool node remote (pregel.Remote): on the
	// serverless runtime each tool call is a message to the node function
	// (a Lambda invocation of its own, with its own timeout), not a task
	// of the tick function; for slow tools. The embedded runtime runs
	// them in process either way.
	RemoteTools bool
}

// New builds the prebuilt agent: a model node that answers the
// conversation and, while it asks for tools, a tool node that runs each
// tool call as its own task, back to the model, until the model stops.
func New(cfg Config) (*pregel.Graph, error) {
	if cfg.Model == nil {
		return nil, errors.New("agent: Config.Model is required")
	}
	if cfg.Name == "" {
		cfg.Name = "agent"
	}
	if cfg.MaxTurns <= 0 {
		cfg.MaxTurns = 25
	}
	modelRetry := pregel.RetryPolicy{MaxAttempts: 4, RetryIf: IsRetryable}
	if cfg.ModelRetry != nil {
		modelRetry = *cfg.ModelRetry
	}
	tools := make(map[string]Tool, len(cfg.Tools))
	specs := make([]ToolSpec, 0, len(cfg.Tools))
	for i, t := range cfg.Tools {
		if t == nil {
			return nil, fmt.Errorf("agent: Config.Tools[%d] is nil", i)
		}
		s := t.Spec()
		if !validToolName(s.Name) {
			return nil, fmt.Errorf("agent: tool name %q: use 1 to 64 letters, digits, _ or - (what models accept)", s.Name)
		}
		if prev := tools[s.Name]; prev != nil {
			return nil, fmt.Errorf("agent: two tools are named %q (%s and %s); rename one (an MCP server's tools take mcptools.Server.Prefix)", s.Name, toolOrigin(prev), toolOrigin(t))
		}
		tools[s.Name] = t
		specs = append(specs, s)
	}
	for _, name := range cfg.Approve {
		if tools[name] == nil {
			return nil, fmt.Errorf("agent: Config.Approve names %q, which is not among the tools", name)
		}
	}
	capture := captureContent()
	m := &modelNode{cfg: &cfg, specs: specs, capture: capture}
	tn := &toolNode{cfg: &cfg, tools: tools, capture: capture, schemas: make(map[string]*jsonschema.Resolved, len(cfg.Approve))}
	for _, name := range cfg.Approve {
		// Edited arguments are checked against the tool's schema when
		// the approver answers, so that a mistyped edit is asked again
		// rather than failing the call.
		r, err := resolveSchema(tools[name].Spec().InputSchema)
		if err != nil {
			return nil, fmt.Errorf("agent: tool %q: its input schema: %w", name, err)
		}
		tn.schemas[name] = r
	}
	b := Register(pregel.NewGraph[State](cfg.Name)).Describe(cfg.Description)
	b.AddNode(ModelNode, m, pregel.Writes("messages", "usage"), pregel.WithRetry(modelRetry),
		pregel.Describe("Model", "Answers the conversation, possibly asking for tools"))
	toolsDesc := "Runs one tool call of the model's last turn"
	if len(cfg.Approve) > 0 {
		toolsDesc += fmt.Sprintf(". A call of %s waits for a person's approval (the run is interrupted; over A2A the task is input-required): %s",
			strings.Join(cfg.Approve, ", "), approvalShapes)
	}
	toolOpts := []pregel.NodeOption{pregel.Writes("messages"), pregel.WithRetry(cfg.ToolRetry),
		pregel.Describe("Tools", toolsDesc)}
	if cfg.RemoteTools {
		toolOpts = append(toolOpts, pregel.Remote())
	}
	b.AddNode(ToolsNode, tn, toolOpts...)
	b.AddEdge(pregel.Start, ModelNode)
	// A turn without tool calls ends the run in its own superstep.
	b.AddFanOut(ModelNode, ToolsNode, pendingCalls, pregel.EmptyFanOutEnds())
	b.AddConditionalEdges(ToolsNode, afterTools, ModelNode, pregel.End)
	opts := []pregel.CompileOption{pregel.MaxSteps(2 * cfg.MaxTurns), Declare()}
	if cfg.Concurrency > 0 {
		opts = append(opts, pregel.Concurrency(cfg.Concurrency))
	}
	g, err := b.Compile(opts...)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	return g, nil
}

// toolOrigin says where a tool comes from: what its Origin method says
// (an MCP server's tools have one), or "a Go tool".
func toolOrigin(t Tool) string {
	if o, ok := t.(interface{ Origin() string }); ok {
		return o.Origin()
	}
	return "a Go tool"
}

// validToolName is what model services accept as a tool's name.
// It reports whether s is 1 to 64 bytes of ASCII letters,
// digits and "_" and "-". It is the regular expression ^[a-zA-Z0-9_-]{1,64}$ without one:
// compiling a counted repetition costs milliseconds at every process's
// start (a Lambda function's cold start among them).
func validToolName(s string) bool {
	if len(s) < 1 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("_-", c) >= 0) {
			return false
		}
	}
	return true
}

// pendingCalls lists the tool calls of the last message when the model
// wrote it: one tool task each.
func pendingCalls(_ context.Context, st State) ([]any, error) {
	if len(st.Messages) == 0 {
		return nil, nil
	}
	last := st.Messages[len(st.Messages)-1]
	if last.Role != RoleAssistant {
		return nil, nil
	}
	calls := last.ToolCalls()
	out := make([]any, len(calls))
	for i, c := range calls {
		out[i] = c
	}
	return out, nil
}

// afterTools goes back to the model when tool results wait for it.
func afterTools(_ context.Context, st State) ([]string, error) {
	if n := len(st.Messages); n > 0 && st.Messages[n-1].Role == RoleTool {
		return []string{ModelNode}, nil
	}
	return []string{pregel.End}, nil
}

type modelNode struct {
	cfg     *Config
	specs   []ToolSpec
	capture bool // CaptureContentEnv: message content on chat spans
}

func (m *modelNode) Execute(ctx context.Context, st State) (State, error) {
	if len(st.Messages) == 0 {
		return State{}, errors.New("the conversation is empty: start the run with at least one user message")
	}
	req := &Request{System: m.cfg.System, Messages: st.Messages, Tools: m.specs, MaxTokens: m.cfg.MaxTokens, Temperature: m.cfg.Temperature}
	info, _ := pregel.TaskFrom(ctx)
	id := "msg-" + info.TaskID
	var (
		resp *Response
		err  error
	)
	callCtx, span := m.startChat(ctx, req)
	if m.cfg.Generate {
		resp, err = m.cfg.Model.Generate(callCtx, req)
	} else {
		resp, err = m.cfg.Model.Stream(callCtx, req, func(d Delta) {
			_ = pregel.Emit(ctx, EventMessageDelta, MessageDelta{MessageID: id, Delta: d})
		})
	}
	m.endChat(span, resp, err)
	if err != nil {
		return State{}, err
	}
	if resp == nil || resp.Message.empty() {
		reason := StopReason("")
		if resp != nil {
			reason = resp.StopReason
		}
		return State{}, fmt.Errorf("the model returned an empty answer (stop reason %q); check the model id, the prompt and MaxTokens", reason)
	}
	msg := resp.Message
	msg.ID, msg.Role = id, RoleAssistant
	msg.Content = slices.Clone(msg.Content)
	for i, b := range msg.Content {
		// Arguments that are not JSON are kept as a JSON string: the
		// tool's validation then tells the model what is wrong.
		if c := b.ToolCall; c != nil && len(c.Input) > 0 && !json.Valid(c.Input) {
			fixed := *c
			fixed.Input, _ = json.Marshal(string(c.Input))
			msg.Content[i].ToolCall = &fixed
		}
	}
	return State{Messages: []Message{msg}, Usage: NodeUsage(info.Node, resp.Usage)}, nil
}

type toolNode struct {
	cfg     *Config
	tools   map[string]Tool
	capture bool // CaptureContentEnv: arguments and results on execute_tool spans
	// schemas are the input schemas of the tools whose calls wait for an
	// approval (nil for a tool without one).
	schemas map[string]*jsonschema.Resolved
}

func (t *toolNode) Execute(ctx context.Context, _ State) (State, error) {
	call, err := pregel.Arg[ToolCall](ctx)
	if err != nil {
		return State{}, err
	}
	var edited json.RawMessage
	result := func(content string, isErr bool) (State, error) {
		status := "finished"
		if isErr {
			status = "failed"
		}
		_ = pregel.Emit(ctx, EventToolCall, ToolProgress{ToolCallID: call.ID, Name: call.Name, Status: status})
		return State{Messages: []Message{{
			ID:      "tool-" + call.ID,
			Role:    RoleTool,
			Content: []Block{{ToolResult: &ToolResult{ToolCallID: call.ID, Content: content, Error: isErr, EditedInput: edited}}},
		}}}, nil
	}
	tool := t.tools[call.Name]
	if tool == nil {
		names := slices.Sorted(func(yield func(string) bool) {
			for n := range t.tools {
				if !yield(n) {
					return
				}
			}
		})
		return result(fmt.Sprintf("there is no tool named %q; the tools are: %s", call.Name, strings.Join(names, ", ")), true)
	}
	input := call.Input
	var approval Decision
	if slices.Contains(t.cfg.Approve, call.Name) {
		ans, err := pregel.InterruptValid(ctx, ApprovalRequest{Kind: "tool_approval", ToolCall: call, Question: approvalQuestion(call), InputSchema: tool.Spec().InputSchema}, func(a Approval) error {
			if a.Decision != Edit {
				return nil
			}
			return checkArguments(t.schemas[call.Name], call.Name, a.Input)
		})
		if err != nil {
			return State{}, err
		}
		approval = ans.Decision
		switch ans.Decision {
		case Approve:
		case Edit:
			input, edited = ans.Input, ans.Input
			if !json.Valid(edited) {
				edited, _ = json.Marshal(string(ans.Input)) // stored as text; validation reports it
			}
		case Reject:
			msg := "the user rejected this call"
			if ans.Message != "" {
				msg += ": " + ans.Message
			}
			rejectedEvent(ctx, call)
			return result(msg, true)
		default:
			slog.WarnContext(ctx, "agent: unknown approval decision", "decision", ans.Decision, "tool", call.Name)
			return result(fmt.Sprintf("the call was not approved: the approver's answer %q is not approve, edit or reject", ans.Decision), true)
		}
	}
	_ = pregel.Emit(ctx, EventToolCall, ToolProgress{ToolCallID: call.ID, Name: call.Name, Status: "started"})
	callCtx, span := t.startTool(ctx, tool, call, input, approval)
	out, err := tool.Call(callCtx, input)
	t.endTool(span, out, err)
	switch {
	case err == nil:
		return result(out, false)
	case errors.Is(err, ErrInvalidArguments):
		return result(fmt.Sprintf("tool %q: %v; call it again with arguments that fit its input schema", call.Name, err), true)
	case ctx.Err() != nil:
		return State{}, err
	}
	info, _ := pregel.TaskFrom(ctx)
	p := t.cfg.ToolRetry
	if info.Attempt < p.MaxAttempts && (p.RetryIf == nil || p.RetryIf(err)) {
		return State{}, err // pregel retries the call
	}
	return result(fmt.Sprintf("tool %q failed: %v", call.Name, err), true)
}
