package agent

import (
	"context"
	"encoding/json"
	"errors"
)

// ChatModel is a chat model: it answers a conversation, possibly with tool
// calls. Implementations must be safe for concurrent use.
type ChatModel interface {
	// Generate returns the model's whole answer.
	Generate(ctx context.Context, req *Request) (*Response, error)
	// Stream returns the same answer as Generate, calling onDelta with
	// each piece as it arrives, in order, before it returns.
	Stream(ctx context.Context, req *Request, onDelta func(Delta)) (*Response, error)
}

// Request is what a model is asked.
type Request struct {
	// System is the system prompt; empty for none.
	System   string
	Messages []Message
	// Tools are the tools the model may call.
	Tools []ToolSpec
	// MaxTokens bounds the answer; 0 leaves the model's default.
	MaxTokens int
	// Temperature, when set, overrides the model's default.
	Temperature *float64
	// StopSequences end the answer when generated.
	StopSequences []string
}

// ToolSpec describes a tool to a model.
type ToolSpec struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// InputSchema is the JSON Schema of the tool's arguments.
	InputSchema json.RawMessage `json:"input_schema"`
}

// Response is a model's answer.
type Response struct {
	// Message is the answer, with role assistant.
	Message    Message
	StopReason StopReason
	Usage      Usage
}

// StopReason says why a model stopped.
type StopReason string

// Stop reasons. Models may report others; they are passed through.
const (
	StopEndTurn             StopReason = "end_turn"
	StopToolUse             StopReason = "tool_use"
	StopMaxTokens           StopReason = "max_tokens"
	StopSequence            StopReason = "stop_sequence"
	StopGuardrailIntervened StopReason = "guardrail_intervened"
	StopContentFiltered     StopReason = "content_filtered"
)

// Delta is a piece of a streamed answer: text, or the start or a piece of
// the input of a tool call.
type Delta struct {
	// Block is the index of the content block the piece belongs to.
	Block int `json:"block"`
	// Text is a piece of the answer's text.
	Text string `json:"text,omitempty"`
	// ToolCallID and ToolName are set on the first delta of a tool call.
	ToolCallID string `json:"tool_call_id,omitempty"`
	ToolName   string `json:"tool_name,omitempty"`
	// InputJSON is a piece of a tool call's input, as JSON text.
	InputJSON string `json:"input_json,omitempty"`
}

// ModelError is an error a model service reported. Adapters return it so
// that retry policies can tell a throttled call from a bad request.
type ModelError struct {
	// Code is the service's name for the error, e.g.
	// "ThrottlingException".
	Code string
	// Message is the service's explanation.
	Message string
	// Retryable reports whether trying again may succeed.
	Retryable bool
	// Err is the underlying error, if any.
	Err error
}

// Error says what the service reported.
func (e *ModelError) Error() string {
	s := "model: " + e.Code
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Retryable {
		s += " (retryable)"
	}
	return s
}

// Unwrap returns the underlying error.
func (e *ModelError) Unwrap() error { return e.Err }

// IsRetryable reports whether err is worth retrying: a [ModelError]
// marked retryable (throttling, a service briefly unavailable). Use it as
// a node's pregel.RetryPolicy.RetryIf.
func IsRetryable(err error) bool {
	var me *ModelError
	return errors.As(err, &me) && me.Retryable
}
