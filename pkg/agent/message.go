package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/superstep/superstep/pkg/pregel"
)

// Role says who wrote a message.
type Role string

// Message roles. The system prompt is not a message: it is
// [Request.System] (and [Config.System] for the prebuilt agent).
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	// RoleTool marks a message carrying tool results; models that know no
	// such role (Bedrock) receive it as a user message.
	RoleTool Role = "tool"
)

// Message is one turn of a conversation: a role and content blocks.
//
// ID identifies the message for the messages reducer: a message whose ID
// is already present replaces it; a message with Remove set deletes it.
// Messages without an ID are appended.
type Message struct {
	ID      string  `json:"id,omitempty"`
	Role    Role    `json:"role,omitempty"`
	Content []Block `json:"content,omitempty"`
	// Remove marks a removal: the reducer deletes the message with ID.
	Remove bool `json:"remove,omitempty"`
}

// Block is one piece of a message's content; exactly one field is set.
type Block struct {
	Text       string      `json:"text,omitempty"`
	ToolCall   *ToolCall   `json:"tool_call,omitempty"`
	ToolResult *ToolResult `json:"tool_result,omitempty"`
	Image      *Media      `json:"image,omitempty"`
	Document   *Media      `json:"document,omitempty"`
}

// ToolCall is a model's request to call a tool.
type ToolCall struct {
	// ID pairs the call with its [ToolResult].
	ID   string `json:"id"`
	Name string `json:"name"`
	// Input is the arguments, a JSON object.
	Input json.RawMessage `json:"input,omitempty"`
}

// ToolResult is the answer to a [ToolCall].
type ToolResult struct {
	ToolCallID string `json:"tool_call_id"`
	// Content is the tool's output as text (JSON for structured output).
	Content string `json:"content"`
	// Error marks a failed call: Content then says what went wrong, for
	// the model to correct itself.
	Error bool `json:"error,omitempty"`
	// EditedInput, when set, holds the arguments the call ran with
	// because an approver changed them (see [Edit]); the model's tool
	// call keeps the arguments it asked for.
	EditedInput json.RawMessage `json:"edited_input,omitempty"`
}

// Media is an image or a document, inline (Bytes) or in S3 (S3URI).
// Format is what Bedrock accepts: png, jpeg, gif or webp for images; pdf,
// csv, doc, docx, xls, xlsx, html, txt or md for documents. Name is a
// document's name, shown to the model.
type Media struct {
	Format string `json:"format"`
	Name   string `json:"name,omitempty"`
	Bytes  []byte `json:"bytes,omitempty"`
	S3URI  string `json:"s3_uri,omitempty"`
}

// UserText returns a user message holding text.
func UserText(text string) Message {
	return Message{Role: RoleUser, Content: []Block{{Text: text}}}
}

// AssistantText returns an assistant message holding text.
func AssistantText(text string) Message {
	return Message{Role: RoleAssistant, Content: []Block{{Text: text}}}
}

// RemoveMessage returns the marker that makes the messages reducer delete
// the message with id.
func RemoveMessage(id string) Message { return Message{ID: id, Remove: true} }

// Text returns the message's text blocks joined together.
func (m Message) Text() string {
	var b strings.Builder
	for _, c := range m.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// ToolCalls returns the message's tool calls, in order.
func (m Message) ToolCalls() []ToolCall {
	var out []ToolCall
	for _, c := range m.Content {
		if c.ToolCall != nil {
			out = append(out, *c.ToolCall)
		}
	}
	return out
}

// empty reports whether the message says nothing: no block with text, a
// tool call, a result or media.
func (m Message) empty() bool {
	for _, c := range m.Content {
		if strings.TrimSpace(c.Text) != "" || c.ToolCall != nil || c.ToolResult != nil || c.Image != nil || c.Document != nil {
			return false
		}
	}
	return true
}

// Reducer names under which [Register] adds the reducers of this package,
// for a state field's `reduce` tag.
const (
	ReduceMessages = "messages"
	ReduceUsage    = "usage"
)

// AddMessages is the messages reducer: it returns cur with update applied
// in order. A message whose ID is present in the list replaces it in
// place; a removal marker ([RemoveMessage]) deletes the message with its
// ID (and is dropped when there is none); any other message is appended.
// It does not modify cur.
func AddMessages(cur, update []Message) []Message {
	if len(update) == 0 {
		return cur
	}
	out := make([]Message, len(cur), len(cur)+len(update))
	copy(out, cur)
	index := func(id string) int {
		if id == "" {
			return -1
		}
		for i := len(out) - 1; i >= 0; i-- {
			if out[i].ID == id {
				return i
			}
		}
		return -1
	}
	for _, m := range update {
		i := index(m.ID)
		switch {
		case m.Remove:
			if i >= 0 {
				out = append(out[:i], out[i+1:]...)
			}
		case i >= 0:
			out[i] = m
		default:
			out = append(out, m)
		}
	}
	return out
}

// MessagesReducer is [AddMessages] as a [pregel.Reducer]. When the update
// only appends (no removal, no id already present), it appends the
// update's JSON to the list without decoding the messages' content.
func MessagesReducer() pregel.Reducer {
	full := pregel.ReducerOf(AddMessages)
	return func(cur, update json.RawMessage) (json.RawMessage, error) {
		var upd []struct {
			ID     string `json:"id"`
			Remove bool   `json:"remove"`
		}
		if err := json.Unmarshal(update, &upd); err != nil {
			return nil, fmt.Errorf("messages: the update is not a list of messages: %w", err)
		}
		if len(upd) == 0 {
			return cur, nil
		}
		ids := make(map[string]bool, len(upd))
		for _, m := range upd {
			if m.Remove || ids[m.ID] {
				return full(cur, update)
			}
			if m.ID != "" {
				ids[m.ID] = true
			}
		}
		cur = bytes.TrimSpace(cur)
		if len(cur) == 0 || string(cur) == "null" {
			return full(cur, update) // the first write: normalise it
		}
		if len(ids) > 0 {
			var have []struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal(cur, &have); err != nil {
				return nil, fmt.Errorf("messages: the current value is not a list of messages: %w", err)
			}
			for _, m := range have {
				if ids[m.ID] {
					return full(cur, update)
				}
			}
		}
		if cur[len(cur)-1] != ']' {
			return nil, fmt.Errorf("messages: the current value is not a list")
		}
		update = bytes.TrimSpace(update)
		out := make([]byte, 0, len(cur)+len(update))
		out = append(out, cur[:len(cur)-1]...)
		if len(bytes.TrimSpace(cur[1:len(cur)-1])) > 0 {
			out = append(out, ',')
		}
		return append(out, update[1:]...), nil
	}
}

// Usage counts the tokens of model calls: pregel's [pregel.TokenUsage],
// which servers show with the run.
type Usage = pregel.TokenUsage

// UsageTotals is the token usage of a run, in total and per node:
// pregel's [pregel.UsageTotals]. The prebuilt agent declares its usage
// channel with [pregel.UsageChannel], so the run record, the API and the
// CLI show it.
type UsageTotals = pregel.UsageTotals

// NodeUsage returns the usage of one call by node, as a write for a
// [UsageTotals] channel.
func NodeUsage(node string, u Usage) UsageTotals {
	return UsageTotals{Total: u, ByNode: map[string]Usage{node: u}}
}

// AddUsage is the usage reducer: it sums totals and per-node counts.
func AddUsage(cur, update UsageTotals) UsageTotals {
	out := UsageTotals{Total: cur.Total.Add(update.Total)}
	if len(cur.ByNode)+len(update.ByNode) > 0 {
		out.ByNode = make(map[string]Usage, len(cur.ByNode)+len(update.ByNode))
		for n, u := range cur.ByNode {
			out.ByNode[n] = u
		}
		for n, u := range update.ByNode {
			out.ByNode[n] = out.ByNode[n].Add(u)
		}
	}
	return out
}

// UsageReducer is [AddUsage] as a [pregel.Reducer].
func UsageReducer() pregel.Reducer { return pregel.ReducerOf(AddUsage) }

// Register adds the "messages" and "usage" reducers to b, so that the
// fields of its state can name them:
//
//	type State struct {
//		Messages []agent.Message  `json:"messages" reduce:"messages"`
//		Usage    agent.UsageTotals `json:"usage" reduce:"usage"`
//	}
//	b := agent.Register(pregel.NewGraph[State]("chat"))
//
// The messages reducer is registered with [pregel.Builder.AppendReducer]:
// stores keep the conversation in segments, and a step stores only the
// messages it added (or the recent part it replaced or removed), not the
// whole conversation again.
//
// Reducers are registered per builder; pregel has no global registry.
func Register[S any](b *pregel.Builder[S]) *pregel.Builder[S] {
	return b.AppendReducer(ReduceMessages, MessagesReducer()).Reducer(ReduceUsage, UsageReducer())
}

// MessagesChannel is the channel name under which graphs built on this
// package keep their conversation (the json tag of [State.Messages]).
const MessagesChannel = "messages"

// TextInput returns the input of a run that starts a conversation with
// text as a user message: {"messages": [{"role": "user", ...}]}. Servers
// use it to pass plain text to a graph that has a [MessagesChannel].
func TextInput(text string) json.RawMessage {
	raw, _ := json.Marshal(map[string][]Message{MessagesChannel: {UserText(text)}}) // cannot fail: plain strings
	return raw
}

// UsageChannel is the channel name under which graphs built on this
// package keep their token usage (the json tag of [State.Usage]).
const UsageChannel = "usage"

// TextMessages declares, for the servers that run a graph, that plain text
// sent to it (over /v1 or A2A) starts the run with one user message in its
// [MessagesChannel] (see [pregel.TextInput]).
func TextMessages() pregel.CompileOption {
	return pregel.TextInput(MessagesChannel, func(text string) any { return []Message{UserText(text)} })
}

// Declare declares a graph's messages channel ([TextMessages]) and its
// usage channel ([pregel.UsageChannel] of [UsageChannel]), so that servers
// take plain text as a user message and show the run's token usage. The
// prebuilt agent declares both; a custom graph over a state with both
// channels adds it when it compiles:
//
//	g, err := agent.Register(pregel.NewGraph[State]("chat")).
//		AddNode(...).
//		Compile(agent.Declare())
func Declare() pregel.CompileOption {
	text, usage := TextMessages(), pregel.UsageChannel(UsageChannel)
	return func(g *pregel.Graph) { text(g); usage(g) }
}
