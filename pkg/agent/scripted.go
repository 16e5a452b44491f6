package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Scripted is a [ChatModel] whose answers a Go function computes from the
// request: for tests, examples and offline development. It holds no
// state, so a run resumed in another process gets the same answers.
type Scripted struct {
	// Reply answers a request.
	Reply func(ctx context.Context, req *Request) (*Response, error)
}

// ScriptedTurns returns a model that gives its n-th answer to a
// conversation holding n-1 assistant messages, and an error once the
// script is exhausted.
func ScriptedTurns(answers ...Response) *Scripted {
	return &Scripted{Reply: func(_ context.Context, req *Request) (*Response, error) {
		n := 0
		for _, m := range req.Messages {
			if m.Role == RoleAssistant {
				n++
			}
		}
		if n >= len(answers) {
			return nil, errors.New("scripted model: the script has no answer for this turn")
		}
		r := answers[n]
		r.Message.Content = append([]Block(nil), r.Message.Content...)
		return &r, nil
	}}
}

// Generate implements [ChatModel].
func (s *Scripted) Generate(ctx context.Context, req *Request) (*Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	resp, err := s.Reply(ctx, req)
	if err != nil {
		return nil, err
	}
	resp.Message.Role = RoleAssistant
	if resp.StopReason == "" {
		resp.StopReason = StopEndTurn
		if len(resp.Message.ToolCalls()) > 0 {
			resp.StopReason = StopToolUse
		}
	}
	return resp, nil
}

// Stream implements [ChatModel]: text comes word by word, each tool call
// as its start and then its input.
func (s *Scripted) Stream(ctx context.Context, req *Request, onDelta func(Delta)) (*Response, error) {
	resp, err := s.Generate(ctx, req)
	if err != nil {
		return nil, err
	}
	if onDelta == nil {
		onDelta = func(Delta) {}
	}
	for i, b := range resp.Message.Content {
		switch {
		case b.Text != "":
			for _, w := range strings.SplitAfter(b.Text, " ") {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				onDelta(Delta{Block: i, Text: w})
			}
		case b.ToolCall != nil:
			onDelta(Delta{Block: i, ToolCallID: b.ToolCall.ID, ToolName: b.ToolCall.Name})
			if len(b.ToolCall.Input) > 0 {
				onDelta(Delta{Block: i, InputJSON: string(b.ToolCall.Input)})
			}
		}
	}
	return resp, nil
}

// ScriptedConversation returns a model that scripts each user turn of a
// conversation on its own, for threads: the answers of turns[k] serve the
// conversation's (k+1)-th user message, the n-th of them once n-1
// assistant messages follow that message. So a thread's second run gets
// turns[1], whatever the first turn took (tool calls, approvals). A turn
// with no script, or a script exhausted, is an error that says which.
func ScriptedConversation(turns ...[]Response) *Scripted {
	return &Scripted{Reply: func(_ context.Context, req *Request) (*Response, error) {
		turn, n := 0, 0
		for _, m := range req.Messages {
			switch {
			case m.Role == RoleUser && !isToolResults(m):
				turn++
				n = 0
			case m.Role == RoleAssistant:
				n++
			}
		}
		if turn == 0 {
			return nil, errors.New("scripted model: the conversation has no user message")
		}
		if turn > len(turns) {
			return nil, fmt.Errorf("scripted model: user turn %d has no script (%d turns are scripted)", turn, len(turns))
		}
		answers := turns[turn-1]
		if n >= len(answers) {
			return nil, fmt.Errorf("scripted model: the script of user turn %d has no answer %d", turn, n+1)
		}
		r := answers[n]
		r.Message.Content = append([]Block(nil), r.Message.Content...)
		return &r, nil
	}}
}

// isToolResults reports whether m carries only tool results (a user turn
// some model services require for them).
func isToolResults(m Message) bool {
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
