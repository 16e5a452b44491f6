package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	core "github.com/a2aproject/a2a-go/v2/a2a"

	agentpkg "github.com/superstep/superstep/pkg/agent"
	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/internal/jsonin"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// Conventions shared by the server and the remote-agent node.
const (
	// AuthRequiredKey in an interrupt payload object, set to true, makes
	// the task auth-required instead of input-required.
	AuthRequiredKey = "auth_required"
	// InterruptIDKey in a message's metadata names the interrupt a resume
	// answers; without it the value answers every pending interrupt.
	InterruptIDKey = "interrupt_id"
	// MetadataKey holds superstep's details in task and message metadata:
	// the graph, the run status, the step, the pending interrupts.
	MetadataKey = "superstep"
	// ArtifactID is the id (and name) of a completed task's artifact.
	ArtifactID = "state"
)

// question returns the text of an interrupt payload object: its first
// non-empty string field among question, message, prompt and text.
func question(v map[string]any) string {
	for _, k := range []string{"question", "message", "prompt", "text"} {
		if q, ok := v[k].(string); ok && q != "" {
			return q
		}
	}
	return ""
}

// status maps a run record to a task state and an agent status message.
func status(r runs.Run) (core.TaskState, *core.Message) {
	switch r.Status {
	case pregel.RunPending:
		if r.Version <= 1 {
			return core.TaskStateSubmitted, nil
		}
		if r.CancelRequested {
			return core.TaskStateWorking, agentText(r, "cancel requested; the task stops shortly")
		}
		return core.TaskStateWorking, agentText(r, "queued; it continues shortly")
	case pregel.RunRunning:
		if r.CancelRequested {
			return core.TaskStateWorking, agentText(r, "cancel requested; the task stops shortly")
		}
		return core.TaskStateWorking, nil
	case pregel.RunDrained:
		reason := r.DrainReason
		if reason == "" {
			reason = "no reason given"
		}
		return core.TaskStateWorking, agentText(r, fmt.Sprintf("paused: the run was drained (%s) after step %d; send a message with this task id to continue it", reason, r.Step))
	case pregel.RunInterrupted:
		return interruptStatus(r)
	case pregel.RunCompleted:
		return core.TaskStateCompleted, nil
	case pregel.RunFailed:
		if r.Rejected {
			return core.TaskStateRejected, agentText(r, r.Error)
		}
		return core.TaskStateFailed, agentText(r, "the task failed")
	case pregel.RunCancelled:
		if r.SupersededBy != "" {
			// Ended for good: a newer task on its context took over.
			return core.TaskStateCanceled, agentText(r, fmt.Sprintf("superseded by task %s on its context; this task cannot be continued", r.SupersededBy))
		}
		return core.TaskStateCanceled, agentText(r, "the task was canceled")
	}
	return core.TaskStateUnspecified, nil
}

// interruptStatus turns pending interrupts into the question of an
// input-required (or auth-required) task: a text part for a string
// payload or an object's "question" (or message, prompt, text), and a data
// part for any other payload, one per interrupt; when the node asks again
// because it could not use an answer, a text part saying why comes first.
func interruptStatus(r runs.Run) (core.TaskState, *core.Message) {
	state := core.TaskStateInputRequired
	var parts core.ContentParts
	pending := make([]any, 0, len(r.Interrupts))
	for _, in := range r.Interrupts {
		entry := map[string]any{"id": in.ID, "node": in.Node}
		if in.Error != "" {
			// The node asks again: an answer it could not use came first.
			entry["error"] = in.Error
			parts = append(parts, core.NewTextPart("Your last answer was not accepted: "+in.Error+". Please answer again."))
		}
		pending = append(pending, entry)
		if len(in.Value) > api.MaxInlineValueBytes || jsonin.Depth(in.Value, jsonin.MaxDepth) > jsonin.MaxDepth {
			parts = append(parts, core.NewTextPart(fmt.Sprintf("the question of node %q is too large to show here; GET %s gives it", in.Node, api.InterruptHref(r.ID, in.ID))))
			continue
		}
		v, err := decodeJSON(in.Value)
		if err != nil || v == nil {
			continue
		}
		switch v := v.(type) {
		case string:
			parts = append(parts, core.NewTextPart(v))
		case map[string]any:
			if b, _ := v[AuthRequiredKey].(bool); b {
				state = core.TaskStateAuthRequired
			}
			if q := question(v); q != "" {
				parts = append(parts, core.NewTextPart(q))
			}
			parts = append(parts, core.NewDataPart(v))
		default:
			parts = append(parts, core.NewDataPart(v))
		}
	}
	if len(parts) == 0 {
		parts = core.ContentParts{core.NewTextPart("the task waits for input; send a message with this task id")}
	}
	msg := agentMessage(r, parts...)
	msg.Metadata = map[string]any{MetadataKey: map[string]any{"interrupts": pending}}
	return state, msg
}

func agentText(r runs.Run, text string) *core.Message {
	return agentMessage(r, core.NewTextPart(text))
}

func agentMessage(r runs.Run, parts ...*core.Part) *core.Message {
	return &core.Message{
		ID:        fmt.Sprintf("%s-status-%d", r.ID, r.Version),
		Role:      core.MessageRoleAgent,
		TaskID:    core.TaskID(r.ID),
		ContextID: contextOf(r),
		Parts:     parts,
	}
}

// contextOf is a run's A2A context id: its context id, or its own id for
// runs created without one (through the HTTP API, say).
func contextOf(r runs.Run) string {
	if r.ContextID != "" {
		return r.ContextID
	}
	return r.ID
}

// settled reports whether a run waits for no executor: it is finished or
// paused.
func settled(r runs.Run) bool {
	switch r.Status {
	case pregel.RunPending, pregel.RunRunning:
		return false
	}
	return true
}

// taskView says what a task includes.
type taskView struct {
	history   *int // nil: all
	artifacts bool
	// budget bounds the values embedded (nil: a budget of its own); a
	// listing shares one among its tasks.
	budget *api.ValueBudget
}

// task builds the A2A task of a run. The history holds the run's input
// as the user's first message; a completed task's artifact holds the
// final state.
func (s *Server) task(ctx context.Context, r runs.Run, v taskView) (*core.Task, error) {
	if v.budget == nil {
		v.budget = api.NewValueBudget()
	}
	state, msg := status(r)
	ts := r.UpdatedAt
	t := &core.Task{
		ID:        core.TaskID(r.ID),
		ContextID: contextOf(r),
		Status:    core.TaskStatus{State: state, Message: msg, Timestamp: &ts},
		Metadata:  map[string]any{MetadataKey: s.runMetadata(r)},
	}
	if v.history == nil || *v.history > 0 {
		h, err := s.conversation(ctx, r, v)
		if err != nil {
			return nil, err
		}
		if h == nil {
			h = s.history(r, v)
		}
		t.History = h
	}
	if v.artifacts && r.Status == pregel.RunCompleted {
		a, err := s.artifact(ctx, r, v.budget)
		if err != nil {
			return nil, err
		}
		t.Artifacts = []*core.Artifact{a}
	}
	return t, nil
}

// history is a task's history: the client's messages kept with the run
// (the first, then its answers; the newest ones when v.history bounds
// it), or, for runs created without a message (through /v1, say), its
// input as the user's first message.
func (s *Server) history(r runs.Run, v taskView) []*core.Message {
	if len(r.Messages) == 0 {
		return []*core.Message{s.inputMessage(r, v.budget)}
	}
	msgs := r.Messages
	if v.history != nil && *v.history < len(msgs) {
		msgs = msgs[len(msgs)-*v.history:]
	}
	out := make([]*core.Message, 0, len(msgs))
	for i, raw := range msgs {
		// The answer's budget bounds what is embedded, as for values.
		fitted, omitted := v.budget.Fit(map[string]json.RawMessage{"message": raw}, func(string) string { return "" })
		var m core.Message
		if len(omitted) > 0 || json.Unmarshal(fitted["message"], &m) != nil || len(m.Parts) == 0 {
			m = core.Message{
				ID:    fmt.Sprintf("%s-message-%d", r.ID, i),
				Role:  core.MessageRoleUser,
				Parts: core.ContentParts{core.NewTextPart("(this message is too large to show in the history)")},
			}
		}
		m.TaskID, m.ContextID = core.TaskID(r.ID), contextOf(r)
		out = append(out, &m)
	}
	return out
}

// conversation is the history of a task on a thread whose graph keeps a
// messages channel (agent.MessagesChannel): the conversation so far, as
// the run's latest step holds it (the thread's earlier turns, this task's
// message and the answers so far), the newest v.history of them. A user
// message is a user message; the assistant's messages and tool results
// are the agent's. Text blocks become text parts, tool calls, tool
// results and media data parts ({"tool_call": ...}). It is nil for other
// tasks, and for a task that has no step yet (queued behind another).
func (s *Server) conversation(ctx context.Context, r runs.Run, v taskView) ([]*core.Message, error) {
	a := s.agents[r.Graph]
	if r.ThreadID == "" || a == nil || a.messages == "" {
		return nil, nil
	}
	cp, err := s.svc.Checkpoint(ctx, r.ID, pregel.Latest)
	if errors.Is(err, pregel.ErrNotFound) || errors.Is(err, runs.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, s.internal(ctx, "load the conversation", r.ID, err)
	}
	var msgs []agentpkg.Message
	if raw := cp.Values[a.messages]; len(raw) == 0 || json.Unmarshal(raw, &msgs) != nil {
		return nil, nil
	}
	first := 0
	if v.history != nil && *v.history < len(msgs) {
		first = len(msgs) - *v.history
	}
	out := make([]*core.Message, 0, len(msgs)-first)
	for i := first; i < len(msgs); i++ {
		m := msgs[i]
		role := core.MessageRoleAgent
		if m.Role == agentpkg.RoleUser {
			role = core.MessageRoleUser
		}
		id := m.ID
		if id == "" {
			id = fmt.Sprintf("%s-message-%d", r.ThreadID, i)
		}
		var parts core.ContentParts
		for _, b := range m.Content {
			text := b.ToolCall == nil && b.ToolResult == nil && b.Image == nil && b.Document == nil
			if text && b.Text == "" {
				continue
			}
			raw, _ := json.Marshal(b) // cannot fail: plain values and RawMessages read from JSON
			// The answer's budget bounds what is embedded, as for values.
			fitted, omitted := v.budget.Fit(map[string]json.RawMessage{"block": raw}, func(string) string { return "" })
			var block map[string]any
			if len(omitted) > 0 || json.Unmarshal(fitted["block"], &block) != nil {
				parts = append(parts, core.NewTextPart("(this part is too large to show in the history)"))
				continue
			}
			if text {
				parts = append(parts, core.NewTextPart(b.Text))
			} else {
				parts = append(parts, core.NewDataPart(block))
			}
		}
		if len(parts) == 0 {
			continue
		}
		out = append(out, &core.Message{ID: id, Role: role, TaskID: core.TaskID(r.ID), ContextID: contextOf(r), Parts: parts})
	}
	return out, nil
}

// inputMessage is a run's input as the user's first message. Input
// values too large or too deep to embed are left out with a marker (see
// api.ValueBudget).
func (s *Server) inputMessage(r runs.Run, budget *api.ValueBudget) *core.Message {
	raw, omitted := budget.FitInput(r.ID, r.Input)
	in, err := decodeJSON(raw)
	if err != nil || in == nil {
		in = map[string]any{}
	}
	first := &core.Message{
		ID:        r.ID + "-input",
		Role:      core.MessageRoleUser,
		TaskID:    core.TaskID(r.ID),
		ContextID: contextOf(r),
		Parts:     core.ContentParts{core.NewDataPart(s.hrefs(in, omitted))},
	}
	if len(omitted) > 0 {
		first.Metadata = map[string]any{MetadataKey: map[string]any{"omitted_input": omitted}}
	}
	return first
}

func (s *Server) runMetadata(r runs.Run) map[string]any {
	m := map[string]any{"graph": r.Graph, "run_status": string(r.Status), "step": r.Step}
	if r.DrainRequested {
		m["drain_reason"] = r.DrainReason
	}
	if v := r.GraphVersion; v != nil {
		m["graph_fingerprint"] = v.Fingerprint
		if v.Version != "" {
			m["graph_version"] = v.Version
		}
	}
	return m
}

// artifact is a completed run's final state, as one data part. Values
// too large or too deep to embed are left out with a marker (see
// api.ValueBudget) and named in the artifact's metadata.
func (s *Server) artifact(ctx context.Context, r runs.Run, budget *api.ValueBudget) (*core.Artifact, error) {
	cp, err := s.svc.Checkpoint(ctx, r.ID, pregel.Latest)
	if err != nil {
		return nil, s.internal(ctx, "load final state", r.ID, err)
	}
	if budget == nil {
		budget = api.NewValueBudget()
	}
	fitted, omitted := budget.Fit(cp.Values, func(ch string) string {
		return s.baseURL + api.ValueHref(r.ID, strconv.Itoa(cp.Step), ch)
	})
	values := make(map[string]any, len(fitted))
	for ch, raw := range fitted {
		v, err := decodeJSON(raw)
		if err != nil {
			return nil, s.internal(ctx, "decode final state", r.ID, err)
		}
		values[ch] = v
	}
	a := &core.Artifact{
		ID:          ArtifactID,
		Name:        ArtifactID,
		Description: fmt.Sprintf("the final state of run %s: its channel values", r.ID),
		Parts:       core.ContentParts{core.NewDataPart(values)},
	}
	if len(omitted) > 0 {
		a.Metadata = map[string]any{MetadataKey: map[string]any{"omitted_values": omitted}}
	}
	return a, nil
}

// hrefs makes the markers of omitted input values point at this
// server's base URL, when one is set.
func (s *Server) hrefs(in any, omitted []string) any {
	m, ok := in.(map[string]any)
	if !ok || s.baseURL == "" {
		return in
	}
	for _, ch := range omitted {
		if marker, ok := m[ch].(map[string]any); ok {
			if o, ok := marker["omitted"].(map[string]any); ok {
				if h, ok := o["href"].(string); ok {
					o["href"] = s.baseURL + h
				}
			}
		}
	}
	return m
}

// internal logs an internal error and returns the generic error callers
// see.
func (s *Server) internal(ctx context.Context, what, runID string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", what, ctx.Err())
	}
	s.log.ErrorContext(ctx, "a2a: "+what, "run_id", runID, "error", err)
	return core.ErrInternalError
}

// decodeJSON decodes a JSON value keeping numbers exact.
func decodeJSON(raw json.RawMessage) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// content is what a message carries, by kind of part.
type content struct {
	texts []string
	data  []any
}

// readParts sorts a message's parts. Null parts and parts the graph
// cannot take (files, raw bytes) are refused with a message naming them.
func readParts(parts core.ContentParts) (content, error) {
	var c content
	if len(parts) == 0 {
		return c, core.NewError(core.ErrInvalidParams, "the message has no parts; send a text part or a data part")
	}
	for i, p := range parts {
		if p == nil || p.Content == nil {
			return c, core.NewError(core.ErrInvalidParams, fmt.Sprintf("part %d of the message is empty; each part needs text or data", i))
		}
		switch v := p.Content.(type) {
		case core.Text:
			c.texts = append(c.texts, string(v))
		case core.Data:
			c.data = append(c.data, v.Value)
		default:
			return c, core.NewError(core.ErrUnsupportedContentType, fmt.Sprintf("part %d is a file; this agent takes text and data parts only", i))
		}
	}
	return c, nil
}

// input builds a new run's input from a message: each data part must be a
// JSON object of channel values (merged in order), and the text parts,
// joined by newlines, go to the agent's text channel (as the graph's
// pregel.TextInput makes them, when it declares one). A message the graph
// cannot take gives a reason to reject the task.
func (a *agent) input(c content, messageID string) (json.RawMessage, string) {
	in := make(map[string]any)
	if len(c.texts) > 0 && a.declared {
		raw, err := a.graph.InputFromText(strings.Join(c.texts, "\n"))
		if err == nil {
			err = json.Unmarshal(raw, &in)
		}
		if err != nil {
			return nil, fmt.Sprintf("graph %q cannot make its input from this text: %v", a.graph.Name(), err)
		}
		a.keepMessageID(in, messageID)
	} else if len(c.texts) > 0 {
		in[a.text] = strings.Join(c.texts, "\n")
	}
	for i, d := range c.data {
		obj, ok := d.(map[string]any)
		if !ok {
			return nil, fmt.Sprintf("data part %d is not a JSON object; the input of graph %q is an object of channel values (channels: %s)", i, a.graph.Name(), strings.Join(a.graph.Channels(), ", "))
		}
		for k, v := range obj {
			in[k] = v
		}
	}
	raw, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Sprintf("the input cannot be encoded as JSON: %v", err)
	}
	return raw, ""
}

// keepMessageID gives the user's message that a conversation graph made
// of a client's text (in its messages channel) the client's messageId,
// so that the task's history shows the message as the client sent it.
func (a *agent) keepMessageID(in map[string]any, messageID string) {
	if a.messages == "" || messageID == "" {
		return
	}
	msgs, _ := in[a.messages].([]any)
	if len(msgs) != 1 {
		return
	}
	if m, ok := msgs[0].(map[string]any); ok && m["role"] == string(agentpkg.RoleUser) {
		if id, _ := m["id"].(string); id == "" {
			m["id"] = messageID
		}
	}
}

// resumeValue is the value a message gives an interrupted run: its one
// data part, several data parts as an array, or else its text.
func resumeValue(c content) (json.RawMessage, error) {
	var v any
	switch {
	case len(c.data) == 1:
		v = c.data[0]
	case len(c.data) > 1:
		v = c.data
	default:
		v = strings.Join(c.texts, "\n")
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, core.NewError(core.ErrInvalidParams, fmt.Sprintf("the answer cannot be encoded as JSON: %v", err))
	}
	return raw, nil
}
