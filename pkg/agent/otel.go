package agent

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// The agent's spans follow the OpenTelemetry GenAI semantic conventions:
// a chat span per model call ("chat <model>", kind client) and an
// execute_tool span per tool call ("execute_tool <tool>"). They are made
// only inside a recording span (a node span of pkg/tracing, or any span
// a caller started), with that span's provider: without tracing, the
// agent starts no span and pays one context lookup per call.

// ScopeName is the instrumentation scope of the agent's spans.
const ScopeName = "github.com/superstep/superstep/pkg/agent"

// CaptureContentEnv is the GenAI semantic conventions' opt-in variable:
// when it is "true" as the graph is built ([New]), chat spans carry the
// messages sent and received (gen_ai.system_instructions,
// gen_ai.input.messages, gen_ai.output.messages) and execute_tool spans
// the call's arguments and result (gen_ai.tool.call.arguments,
// gen_ai.tool.call.result). Off by default: conversations stay out of
// traces.
const CaptureContentEnv = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

// ModelDescriber is implemented by models that name, for traces, the
// GenAI provider (gen_ai.provider.name, e.g. "aws.bedrock") and the model
// they call (gen_ai.request.model). The Bedrock adapter does.
type ModelDescriber interface {
	GenAIModel() (provider, model string)
}

// AttrApproval is the attribute of an execute_tool span saying how a
// call that waited for a person's approval was answered: approve or
// edit (a rejected call executes nothing; its node span carries the
// event superstep.tool.rejected).
const AttrApproval = attribute.Key("superstep.tool.approval")

// captureContent reads [CaptureContentEnv].
func captureContent() bool {
	v, _ := strconv.ParseBool(strings.TrimSpace(os.Getenv(CaptureContentEnv)))
	return v
}

// tracerFrom returns the tracer of ctx's span's provider when that span
// records, or nil.
func tracerFrom(ctx context.Context) trace.Tracer {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return nil
	}
	return parent.TracerProvider().Tracer(ScopeName)
}

// startChat starts the chat span of one model call, or returns a nil
// span when ctx holds no recording span.
func (m *modelNode) startChat(ctx context.Context, req *Request) (context.Context, trace.Span) {
	tr := tracerFrom(ctx)
	if tr == nil {
		return ctx, nil
	}
	provider, model := "_OTHER", ""
	if d, ok := m.cfg.Model.(ModelDescriber); ok {
		provider, model = d.GenAIModel()
	}
	attrs := []attribute.KeyValue{semconv.GenAIOperationNameChat, semconv.GenAIProviderNameKey.String(provider), semconv.GenAIRequestStream(!m.cfg.Generate)}
	name := "chat"
	if model != "" {
		attrs = append(attrs, semconv.GenAIRequestModel(model))
		name += " " + model
	}
	if req.MaxTokens > 0 {
		attrs = append(attrs, semconv.GenAIRequestMaxTokens(req.MaxTokens))
	}
	if req.Temperature != nil {
		attrs = append(attrs, semconv.GenAIRequestTemperature(*req.Temperature))
	}
	attrs = append(attrs, semconv.GenAIAgentName(m.cfg.Name))
	if m.capture {
		if req.System != "" {
			attrs = append(attrs, attribute.String("gen_ai.system_instructions", jsonString([]part{{Type: "text", Content: req.System}})))
		}
		attrs = append(attrs, attribute.String("gen_ai.input.messages", jsonString(convMessages(req.Messages))))
	}
	return tr.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endChat records the model's answer (or error) on span and ends it.
func (m *modelNode) endChat(span trace.Span, resp *Response, err error) {
	if span == nil {
		return
	}
	if resp != nil {
		if resp.StopReason != "" {
			span.SetAttributes(semconv.GenAIResponseFinishReasons(string(resp.StopReason)))
		}
		span.SetAttributes(semconv.GenAIUsageInputTokens(resp.Usage.InputTokens), semconv.GenAIUsageOutputTokens(resp.Usage.OutputTokens))
		if resp.Usage.CacheReadTokens > 0 {
			span.SetAttributes(semconv.GenAIUsageCacheReadInputTokens(resp.Usage.CacheReadTokens))
		}
		if resp.Usage.CacheWriteTokens > 0 {
			span.SetAttributes(semconv.GenAIUsageCacheCreationInputTokens(resp.Usage.CacheWriteTokens))
		}
		if m.capture {
			out := convMessages([]Message{resp.Message})
			for i := range out {
				out[i].Role, out[i].FinishReason = string(RoleAssistant), string(resp.StopReason)
			}
			span.SetAttributes(attribute.String("gen_ai.output.messages", jsonString(out)))
		}
	}
	if err != nil {
		endError(span, err)
	}
	span.End()
}

// startTool starts the execute_tool span of one tool call, or returns a
// nil span when ctx holds no recording span.
func (t *toolNode) startTool(ctx context.Context, tool Tool, call ToolCall, input json.RawMessage, approval Decision) (context.Context, trace.Span) {
	tr := tracerFrom(ctx)
	if tr == nil {
		return ctx, nil
	}
	attrs := []attribute.KeyValue{semconv.GenAIOperationNameExecuteTool, semconv.GenAIToolName(call.Name), semconv.GenAIToolCallID(call.ID), semconv.GenAIToolType("function")}
	if d := tool.Spec().Description; d != "" {
		attrs = append(attrs, semconv.GenAIToolDescription(d))
	}
	if approval != "" {
		attrs = append(attrs, AttrApproval.String(string(approval)))
	}
	if t.capture {
		attrs = append(attrs, attribute.String("gen_ai.tool.call.arguments", string(input)))
	}
	return tr.Start(ctx, "execute_tool "+call.Name, trace.WithAttributes(attrs...))
}

// endTool records a tool call's result on span and ends it. A result the
// model gets as an error (the tool failed, its arguments did not fit)
// sets error.type; so does an error that stops the task.
func (t *toolNode) endTool(span trace.Span, out string, err error) {
	if span == nil {
		return
	}
	if err == nil && t.capture {
		span.SetAttributes(attribute.String("gen_ai.tool.call.result", out))
	}
	if err != nil {
		endError(span, err)
	}
	span.End()
}

// endError sets error.type (the model service's error code, or a
// description of the Go error's kind) and the span's status.
func endError(span trace.Span, err error) {
	kind := "_OTHER"
	var me *ModelError
	switch {
	case errors.As(err, &me) && me.Code != "":
		kind = me.Code
	case errors.Is(err, ErrInvalidArguments):
		kind = "invalid_arguments"
	case errors.Is(err, context.Canceled):
		kind = "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		kind = "timeout"
	}
	span.SetAttributes(semconv.ErrorTypeKey.String(kind))
	span.SetStatus(codes.Error, err.Error())
}

// part and convMessage are the conventions' JSON shapes of message
// content (gen_ai.input.messages and the like).
type part struct {
	Type      string          `json:"type"`
	Content   string          `json:"content,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Response  string          `json:"response,omitempty"`
}

type convMessage struct {
	Role         string `json:"role"`
	Parts        []part `json:"parts"`
	FinishReason string `json:"finish_reason,omitempty"`
}

func convMessages(msgs []Message) []convMessage {
	out := make([]convMessage, 0, len(msgs))
	for _, m := range msgs {
		cm := convMessage{Role: string(m.Role), Parts: []part{}}
		for _, b := range m.Content {
			switch {
			case b.Text != "":
				cm.Parts = append(cm.Parts, part{Type: "text", Content: b.Text})
			case b.ToolCall != nil:
				cm.Parts = append(cm.Parts, part{Type: "tool_call", ID: b.ToolCall.ID, Name: b.ToolCall.Name, Arguments: b.ToolCall.Input})
			case b.ToolResult != nil:
				cm.Parts = append(cm.Parts, part{Type: "tool_call_response", ID: b.ToolResult.ToolCallID, Response: b.ToolResult.Content})
			case b.Image != nil, b.Document != nil:
				cm.Parts = append(cm.Parts, part{Type: "blob"})
			}
		}
		out = append(out, cm)
	}
	return out
}

func jsonString(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

// rejectedEvent records on ctx's span (the tool node's) that a person
// rejected call: it was not executed.
func rejectedEvent(ctx context.Context, call ToolCall) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent("superstep.tool.rejected", trace.WithAttributes(semconv.GenAIToolName(call.Name), semconv.GenAIToolCallID(call.ID)))
	}
}
