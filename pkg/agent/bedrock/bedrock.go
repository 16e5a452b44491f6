// Package bedrock is the Amazon Bedrock adapter of [agent.ChatModel]: the
// Converse and ConverseStream APIs of bedrockruntime, which speak to every
// model Bedrock serves (Anthropic Claude, Amazon Nova, Meta Llama, Mistral
// and more) in one format.
package bedrock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go"

	"github.com/superstep/superstep/pkg/agent"
)

// Client is the part of *bedrockruntime.Client the adapter uses.
type Client interface {
	Converse(ctx context.Context, in *bedrockruntime.ConverseInput, opts ...func(*bedrockruntime.Options)) (*bedrockruntime.ConverseOutput, error)
	ConverseStream(ctx context.Context, in *bedrockruntime.ConverseStreamInput, opts ...func(*bedrockruntime.Options)) (*bedrockruntime.ConverseStreamOutput, error)
}

// Model is a Bedrock model as an [agent.ChatModel]. It is safe for
// concurrent use.
type Model struct {
	client  Client
	modelID string
}

// New returns the model modelID (a model id such as
// "anthropic.claude-3-5-haiku-20241022-v1:0", an inference profile such as
// "us.amazon.nova-lite-v1:0", or an ARN) served by client.
//
// Errors are [agent.ModelError]s: throttling and a service briefly
// unavailable are marked retryable, so that pregel.RetryPolicy{RetryIf:
// agent.IsRetryable} retries them; validation, access and unknown-model
// errors are not. The SDK retries throttling on its own first (3 attempts
// by default; set the client's RetryMaxAttempts to change it).
func New(client Client, modelID string) *Model { return &Model{client: client, modelID: modelID} }

// Generate implements [agent.ChatModel] with Converse.
func (m *Model) Generate(ctx context.Context, req *agent.Request) (*agent.Response, error) {
	msgs, system, tools, inf, err := convertRequest(req)
	if err != nil {
		return nil, err
	}
	out, err := m.client.Converse(ctx, &bedrockruntime.ConverseInput{
		ModelId: aws.String(m.modelID), Messages: msgs, System: system, ToolConfig: tools, InferenceConfig: inf,
	})
	if err != nil {
		return nil, mapError(ctx, err)
	}
	resp := &agent.Response{StopReason: agent.StopReason(out.StopReason), Usage: usage(out.Usage)}
	msg, ok := out.Output.(*types.ConverseOutputMemberMessage)
	if !ok {
		return nil, &agent.ModelError{Code: "UnexpectedOutput", Message: "the answer holds no message"}
	}
	resp.Message.Role = agent.RoleAssistant
	for _, c := range msg.Value.Content {
		switch c := c.(type) {
		case *types.ContentBlockMemberText:
			resp.Message.Content = append(resp.Message.Content, agent.Block{Text: c.Value})
		case *types.ContentBlockMemberToolUse:
			input := json.RawMessage("{}")
			if c.Value.Input != nil {
				b, err := c.Value.Input.MarshalSmithyDocument()
				if err != nil {
					return nil, &agent.ModelError{Code: "UnexpectedOutput", Message: fmt.Sprintf("tool call %s: its input is not JSON", aws.ToString(c.Value.ToolUseId)), Err: err}
				}
				input = b
			}
			resp.Message.Content = append(resp.Message.Content, agent.Block{ToolCall: &agent.ToolCall{
				ID: aws.ToString(c.Value.ToolUseId), Name: aws.ToString(c.Value.Name), Input: input,
			}})
		}
	}
	return resp, nil
}

// Stream implements [agent.ChatModel] with ConverseStream.
func (m *Model) Stream(ctx context.Context, req *agent.Request, onDelta func(agent.Delta)) (*agent.Response, error) {
	msgs, system, tools, inf, err := convertRequest(req)
	if err != nil {
		return nil, err
	}
	out, err := m.client.ConverseStream(ctx, &bedrockruntime.ConverseStreamInput{
		ModelId: aws.String(m.modelID), Messages: msgs, System: system, ToolConfig: tools, InferenceConfig: inf,
	})
	if err != nil {
		return nil, mapError(ctx, err)
	}
	if onDelta == nil {
		onDelta = func(agent.Delta) {}
	}
	stream := out.GetStream()
	defer stream.Close()
	type block struct {
		text      strings.Builder
		call      *agent.ToolCall
		input     strings.Builder
		populated bool
	}
	blocks := map[int]*block{}
	get := func(i *int32) (int, *block) {
		k := int(aws.ToInt32(i))
		if blocks[k] == nil {
			blocks[k] = &block{}
		}
		return k, blocks[k]
	}
	resp := &agent.Response{Message: agent.Message{Role: agent.RoleAssistant}}
	for ev := range stream.Events() {
		switch ev := ev.(type) {
		case *types.ConverseStreamOutputMemberContentBlockStart:
			k, b := get(ev.Value.ContentBlockIndex)
			if tu, ok := ev.Value.Start.(*types.ContentBlockStartMemberToolUse); ok {
				b.call = &agent.ToolCall{ID: aws.ToString(tu.Value.ToolUseId), Name: aws.ToString(tu.Value.Name)}
				b.populated = true
				onDelta(agent.Delta{Block: k, ToolCallID: b.call.ID, ToolName: b.call.Name})
			}
		case *types.ConverseStreamOutputMemberContentBlockDelta:
			k, b := get(ev.Value.ContentBlockIndex)
			switch d := ev.Value.Delta.(type) {
			case *types.ContentBlockDeltaMemberText:
				b.text.WriteString(d.Value)
				b.populated = true
				onDelta(agent.Delta{Block: k, Text: d.Value})
			case *types.ContentBlockDeltaMemberToolUse:
				if b.call == nil {
					return nil, &agent.ModelError{Code: "UnexpectedOutput", Message: fmt.Sprintf("tool input for content block %d, which started no tool call", k)}
				}
				in := aws.ToString(d.Value.Input)
				b.input.WriteString(in)
				onDelta(agent.Delta{Block: k, InputJSON: in})
			}
		case *types.ConverseStreamOutputMemberMessageStop:
			resp.StopReason = agent.StopReason(ev.Value.StopReason)
		case *types.ConverseStreamOutputMemberMetadata:
			resp.Usage = usage(ev.Value.Usage)
		}
	}
	if err := stream.Err(); err != nil {
		return nil, mapError(ctx, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if resp.StopReason == "" {
		return nil, &agent.ModelError{Code: "IncompleteStream", Message: "the answer's stream ended before the message stopped", Retryable: true}
	}
	for _, k := range slices.Sorted(maps.Keys(blocks)) {
		b := blocks[k]
		switch {
		case b.call != nil:
			b.call.Input = json.RawMessage(b.input.String())
			if strings.TrimSpace(b.input.String()) == "" {
				b.call.Input = json.RawMessage("{}")
			}
			resp.Message.Content = append(resp.Message.Content, agent.Block{ToolCall: b.call})
		case b.populated:
			resp.Message.Content = append(resp.Message.Content, agent.Block{Text: b.text.String()})
		}
	}
	return resp, nil
}

func usage(u *types.TokenUsage) agent.Usage {
	if u == nil {
		return agent.Usage{}
	}
	return agent.Usage{
		InputTokens:      int(aws.ToInt32(u.InputTokens)),
		OutputTokens:     int(aws.ToInt32(u.OutputTokens)),
		TotalTokens:      int(aws.ToInt32(u.TotalTokens)),
		CacheReadTokens:  int(aws.ToInt32(u.CacheReadInputTokens)),
		CacheWriteTokens: int(aws.ToInt32(u.CacheWriteInputTokens)),
	}
}

// retryable lists the Bedrock errors worth trying again.
var retryable = map[string]bool{
	"ThrottlingException":         true,
	"ServiceUnavailableException": true,
	"InternalServerException":     true,
	"ModelNotReadyException":      true,
	"ModelTimeoutException":       true,
	"ModelStreamErrorException":   true,
}

// mapError turns an SDK error into an [agent.ModelError]; a cancelled
// context stays as it is.
func mapError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return &agent.ModelError{Code: ae.ErrorCode(), Message: ae.ErrorMessage(), Retryable: retryable[ae.ErrorCode()], Err: err}
	}
	// No answer from the service (a connection dropped, a frame of the
	// stream that does not decode): worth another try.
	return &agent.ModelError{Code: "RequestFailed", Message: "no valid answer from Bedrock: " + err.Error(), Retryable: true, Err: err}
}

// convertRequest builds the parts of a Converse request. Bedrock wants
// user and assistant turns to alternate, so consecutive messages of one
// role (tool results are user turns) are merged.
func convertRequest(req *agent.Request) ([]types.Message, []types.SystemContentBlock, *types.ToolConfiguration, *types.InferenceConfiguration, error) {
	var msgs []types.Message
	for i, m := range req.Messages {
		role := types.ConversationRoleUser
		switch m.Role {
		case agent.RoleAssistant:
			role = types.ConversationRoleAssistant
		case agent.RoleUser, agent.RoleTool:
		default:
			return nil, nil, nil, nil, fmt.Errorf("bedrock: message %d has role %q; use user, assistant or tool", i, m.Role)
		}
		blocks, err := convertBlocks(m.Content)
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("bedrock: message %d: %w", i, err)
		}
		if len(blocks) == 0 {
			continue
		}
		if n := len(msgs); n > 0 && msgs[n-1].Role == role {
			msgs[n-1].Content = append(msgs[n-1].Content, blocks...)
			continue
		}
		msgs = append(msgs, types.Message{Role: role, Content: blocks})
	}
	var system []types.SystemContentBlock
	if req.System != "" {
		system = []types.SystemContentBlock{&types.SystemContentBlockMemberText{Value: req.System}}
	}
	var tools *types.ToolConfiguration
	if len(req.Tools) > 0 {
		tools = &types.ToolConfiguration{}
		for _, t := range req.Tools {
			var schema any
			if err := json.Unmarshal(t.InputSchema, &schema); err != nil {
				return nil, nil, nil, nil, fmt.Errorf("bedrock: tool %q: its input schema is not JSON: %w", t.Name, err)
			}
			spec := types.ToolSpecification{Name: aws.String(t.Name), InputSchema: &types.ToolInputSchemaMemberJson{Value: document.NewLazyDocument(schema)}}
			if t.Description != "" {
				spec.Description = aws.String(t.Description)
			}
			tools.Tools = append(tools.Tools, &types.ToolMemberToolSpec{Value: spec})
		}
	}
	var inf *types.InferenceConfiguration
	if req.MaxTokens > 0 || req.Temperature != nil || len(req.StopSequences) > 0 {
		inf = &types.InferenceConfiguration{StopSequences: req.StopSequences}
		if req.MaxTokens > 0 {
			inf.MaxTokens = aws.Int32(int32(min(req.MaxTokens, 1<<31-1)))
		}
		if req.Temperature != nil {
			inf.Temperature = aws.Float32(float32(*req.Temperature))
		}
	}
	return msgs, system, tools, inf, nil
}

func convertBlocks(content []agent.Block) ([]types.ContentBlock, error) {
	var out []types.ContentBlock
	for _, b := range content {
		switch {
		case b.ToolCall != nil:
			var input any = map[string]any{}
			if len(b.ToolCall.Input) > 0 {
				if err := json.Unmarshal(b.ToolCall.Input, &input); err != nil {
					return nil, fmt.Errorf("tool call %s: its input is not JSON: %w", b.ToolCall.ID, err)
				}
			}
			if _, ok := input.(map[string]any); !ok {
				// Bedrock takes only an object here. A call whose
				// arguments were not one (a stream cut mid-arguments,
				// kept as a JSON string) is replayed without them; its
				// tool result says they were invalid.
				input = map[string]any{}
			}
			out = append(out, &types.ContentBlockMemberToolUse{Value: types.ToolUseBlock{
				ToolUseId: aws.String(b.ToolCall.ID), Name: aws.String(b.ToolCall.Name), Input: document.NewLazyDocument(input),
			}})
		case b.ToolResult != nil:
			status := types.ToolResultStatusSuccess
			if b.ToolResult.Error {
				status = types.ToolResultStatusError
			}
			content := b.ToolResult.Content
			if strings.TrimSpace(content) == "" {
				content = "(no output)" // Bedrock refuses blank text
			}
			out = append(out, &types.ContentBlockMemberToolResult{Value: types.ToolResultBlock{
				ToolUseId: aws.String(b.ToolResult.ToolCallID),
				Content:   resultContent(content, b.ToolResult.EditedInput),
				Status:    status,
			}})
		case b.Image != nil:
			src, err := source(b.Image)
			if err != nil {
				return nil, err
			}
			out = append(out, &types.ContentBlockMemberImage{Value: types.ImageBlock{Format: types.ImageFormat(b.Image.Format), Source: src}})
		case b.Document != nil:
			src, err := source(b.Document)
			if err != nil {
				return nil, err
			}
			name := b.Document.Name
			if name == "" {
				name = "document"
			}
			var ds types.DocumentSource
			switch s := src.(type) {
			case *types.ImageSourceMemberBytes:
				ds = &types.DocumentSourceMemberBytes{Value: s.Value}
			case *types.ImageSourceMemberS3Location:
				ds = &types.DocumentSourceMemberS3Location{Value: s.Value}
			}
			out = append(out, &types.ContentBlockMemberDocument{Value: types.DocumentBlock{Format: types.DocumentFormat(b.Document.Format), Name: aws.String(name), Source: ds}})
		case b.Text != "":
			out = append(out, &types.ContentBlockMemberText{Value: b.Text})
		}
	}
	return out, nil
}

// resultContent is a tool result's content, with a note telling the model
// when an approver changed the arguments it asked for.
func resultContent(content string, edited json.RawMessage) []types.ToolResultContentBlock {
	out := []types.ToolResultContentBlock{&types.ToolResultContentBlockMemberText{Value: content}}
	if len(edited) > 0 {
		out = append(out, &types.ToolResultContentBlockMemberText{Value: "Note: a person reviewing this call changed its arguments to " + string(edited)})
	}
	return out
}

func source(m *agent.Media) (types.ImageSource, error) {
	switch {
	case len(m.Bytes) > 0:
		return &types.ImageSourceMemberBytes{Value: m.Bytes}, nil
	case m.S3URI != "":
		return &types.ImageSourceMemberS3Location{Value: types.S3Location{Uri: aws.String(m.S3URI)}}, nil
	}
	return nil, fmt.Errorf("media of format %q has neither bytes nor an S3 URI", m.Format)
}
