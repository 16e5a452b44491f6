//go:build !superstep.lambda

package superstep

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/superstep/superstep/pkg/agent"
)

// conversationChannel is the channel the agents package keeps a
// conversation in.
const conversationChannel = "messages"

// conversation reads the messages of an agent's state, or reports false
// when values hold no conversation (not an agent, or no messages yet).
func conversation(values map[string]json.RawMessage) ([]agent.Message, bool) {
	raw, ok := values[conversationChannel]
	if !ok {
		return nil, false
	}
	var msgs []agent.Message
	if err := json.Unmarshal(raw, &msgs); err != nil || len(msgs) == 0 {
		return nil, false
	}
	for _, m := range msgs {
		if m.Role == "" {
			return nil, false // not agent messages
		}
	}
	return msgs, true
}

// writeAnswer prints, for an agent's state, the tool calls of its last
// turn (since the last user message), one line each with its result, and
// the answer: the text of the last assistant message. It reports whether
// values held a conversation.
func writeAnswer(w io.Writer, values map[string]json.RawMessage) bool {
	msgs, ok := conversation(values)
	if !ok {
		return false
	}
	turn := 0
	for i, m := range msgs {
		if m.Role == agent.RoleUser && !isToolResults(m) {
			turn = i
		}
	}
	results := make(map[string]*agent.ToolResult)
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.ToolResult != nil {
				results[b.ToolResult.ToolCallID] = b.ToolResult
			}
		}
	}
	var calls []string
	answer := ""
	for _, m := range msgs[turn:] {
		if m.Role != agent.RoleAssistant {
			continue
		}
		var text []string
		for _, b := range m.Content {
			switch {
			case b.ToolCall != nil:
				calls = append(calls, toolCallLine(*b.ToolCall, results[b.ToolCall.ID]))
			case b.Text != "":
				text = append(text, b.Text)
			}
		}
		if len(text) > 0 {
			answer = strings.Join(text, "\n")
		}
	}
	if len(calls) > 0 {
		fmt.Fprintln(w, "\nTool calls:")
		for _, c := range calls {
			fmt.Fprintln(w, "  "+c)
		}
	}
	if answer != "" {
		fmt.Fprintf(w, "\nAnswer:\n%s\n", answer)
	}
	return true
}

// isToolResults reports whether m only carries tool results (a user
// message to models that know no tool role).
func isToolResults(m agent.Message) bool {
	if len(m.Content) == 0 {
		return false
	}
	for _, b := range m.Content {
		if b.ToolResult == nil {
			return false
		}
	}
	return true
}

// callText is a tool call on a line: its name and compact arguments.
func callText(call agent.ToolCall) string {
	args := oneLine(string(call.Input), 80)
	if args == "" {
		args = "{}"
	}
	return call.Name + " " + args
}

// toolCallLine is one tool call and its result on a line:
// name {"args"} -> result (error, edited arguments and missing results
// said as such).
func toolCallLine(call agent.ToolCall, res *agent.ToolResult) string {
	line := callText(call)
	switch {
	case res == nil:
		return line + " -> (no result yet)"
	case len(res.EditedInput) > 0:
		line += " -> edited to " + oneLine(string(res.EditedInput), 60)
	}
	if res.Error {
		return line + " -> error: " + oneLine(res.Content, 100)
	}
	return line + " -> " + oneLine(res.Content, 100)
}

// approvalCall reads the tool call of an agent's approval request (the
// value of its interrupt), or reports false for any other question.
func approvalCall(value json.RawMessage) (agent.ToolCall, bool) {
	var req agent.ApprovalRequest
	if json.Unmarshal(value, &req) != nil || req.Kind != "tool_approval" || req.ToolCall.Name == "" {
		return agent.ToolCall{}, false
	}
	return req.ToolCall, true
}
