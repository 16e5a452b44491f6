package assistant_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	core "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"

	"github.com/superstep/superstep/examples/assistant"
	"github.com/superstep/superstep/internal/nodetest"
	"github.com/superstep/superstep/pkg/agent"
	"github.com/superstep/superstep/pkg/pregel"
)

const refundRequest = "Hi! Where are my orders A-1001 and A-1002? And please refund A-1001, the teapot arrived broken."

// a2aClient is an a2a-go client of the assistant speaking version ("1.0"
// or "0.3").
func (s *server) a2aClient(version string) *a2aclient.Client {
	s.t.Helper()
	ctx := context.Background()
	card, err := agentcard.DefaultResolver.Resolve(ctx, s.url+"/a2a/"+assistant.Name)
	if err != nil {
		s.t.Fatalf("resolve the card: %v", err)
	}
	var ifaces []*core.AgentInterface
	for _, in := range card.SupportedInterfaces {
		if string(in.ProtocolVersion) == version {
			ifaces = append(ifaces, in)
		}
	}
	card.SupportedInterfaces = ifaces
	c, err := a2aclient.NewFromCard(ctx, card, a2av0.WithJSONRPCTransport(a2av0.JSONRPCTransportConfig{}))
	if err != nil {
		s.t.Fatalf("client: %v", err)
	}
	s.t.Cleanup(func() { _ = c.Destroy() })
	return c
}

// sendA2A sends msg (blocking) and returns the task.
func sendA2A(t *testing.T, c *a2aclient.Client, msg *core.Message) *core.Task {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := c.SendMessage(ctx, &core.SendMessageRequest{Message: msg})
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	task, ok := res.(*core.Task)
	if !ok {
		t.Fatalf("SendMessage returned %T, want a task", res)
	}
	return task
}

// question returns the texts and the data of a task's status message.
func question(task *core.Task) (string, []any) {
	if task.Status.Message == nil {
		return "", nil
	}
	var texts []string
	var data []any
	for _, p := range task.Status.Message.Parts {
		if d := p.Data(); d != nil {
			data = append(data, d)
		} else {
			texts = append(texts, p.Text())
		}
	}
	return strings.Join(texts, "\n"), data
}

// finalMessages reads the conversation from a completed task's artifact.
func finalMessages(t *testing.T, task *core.Task) []agent.Message {
	t.Helper()
	if len(task.Artifacts) != 1 || len(task.Artifacts[0].Parts) != 1 {
		t.Fatalf("artifacts %+v, want the final state", task.Artifacts)
	}
	state, _ := task.Artifacts[0].Parts[0].Data().(map[string]any)
	raw, err := json.Marshal(state[agent.MessagesChannel])
	if err != nil {
		t.Fatal(err)
	}
	var msgs []agent.Message
	if err := json.Unmarshal(raw, &msgs); err != nil {
		t.Fatalf("messages %s: %v", raw, err)
	}
	return msgs
}

// refundResult finds the result of the refund call.
func refundResult(msgs []agent.Message) *agent.ToolResult {
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.ToolResult != nil && b.ToolResult.ToolCallID == "refund-0" {
				return b.ToolResult
			}
		}
	}
	return nil
}

// askRefund starts the conversation over A2A (plain text) and checks that
// the task waits for the refund's approval, showing the call.
func askRefund(t *testing.T, s *server, c *a2aclient.Client) *core.Task {
	t.Helper()
	task := sendA2A(t, c, core.NewMessage(core.MessageRoleUser, core.NewTextPart(refundRequest)))
	if task.Status.State != core.TaskStateInputRequired {
		t.Fatalf("task %s is %s, want input-required", task.ID, task.Status.State)
	}
	text, data := question(task)
	if !strings.Contains(text, `Approve the call of tool refund with arguments {"order_id":"A-1001","cents":4500,"reason":"customer request"}?`) || !strings.Contains(text, `"decision":"edit"`) {
		t.Fatalf("the question %q does not show the call and how to answer", text)
	}
	if len(data) != 1 || data[0].(map[string]any)["kind"] != "tool_approval" {
		t.Fatalf("the question's data %v, want the approval request", data)
	}
	if s.refunded() != 0 {
		t.Fatal("refunded before the approval")
	}
	return task
}

// Approval over A2A with the a2a-go client: the refund's approval is an
// input-required task; a follow-up message with the task id answers it, as
// a text part or a data part, and the run goes on accordingly.
func TestApprovalOverA2A(t *testing.T) {
	for _, tc := range []struct {
		name     string
		version  string
		answer   *core.Part
		refunded int
		reply    string // in the model's final answer
		edited   string
	}{
		{"approve as text", "1.0", core.NewTextPart("approve"), 4500, "Done: refunded 45.00 on order A-1001 (customer request).", ""},
		{"approve as data", "0.3", core.NewDataPart(map[string]any{"decision": "approve"}), 4500, "Done: refunded 45.00 on order A-1001 (customer request).", ""},
		{"edit as data", "1.0", core.NewDataPart(map[string]any{"decision": "edit", "input": map[string]any{"order_id": "A-1001", "cents": 1000, "reason": "partial"}}),
			1000, "Done: refunded 10.00 on order A-1001 (partial).", `{"cents":1000,"order_id":"A-1001","reason":"partial"}`},
		{"reject as data", "0.3", core.NewDataPart(map[string]any{"decision": "reject", "message": "ask for a photo first"}), 0,
			"The refund did not go through (the user rejected this call: ask for a photo first).", ""},
		{"reject as text", "1.0", core.NewTextPart("not without a photo"), 0,
			"The refund did not go through (the user rejected this call: not without a photo).", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := serve(t)
			c := s.a2aClient(tc.version)
			task := askRefund(t, s, c)
			done := sendA2A(t, c, core.NewMessageForTask(core.MessageRoleUser, task, tc.answer))
			if done.ID != task.ID || done.Status.State != core.TaskStateCompleted {
				t.Fatalf("answer: task %s is %s, want %s completed", done.ID, done.Status.State, task.ID)
			}
			if got := s.refunded(); got != tc.refunded {
				t.Errorf("refunded %d cents, want %d", got, tc.refunded)
			}
			msgs := finalMessages(t, done)
			if a := msgs[len(msgs)-1]; a.Role != agent.RoleAssistant || !strings.Contains(a.Text(), tc.reply) {
				t.Errorf("final answer %q lacks %q", a.Text(), tc.reply)
			}
			switch r := refundResult(msgs); {
			case r == nil:
				t.Fatal("no result for the refund call")
			case r.Error != (tc.refunded == 0):
				t.Errorf("refund result %+v: error %v, want %v", r, r.Error, tc.refunded == 0)
			case string(r.EditedInput) != tc.edited:
				t.Errorf("refund result records edited input %s, want %q", r.EditedInput, tc.edited)
			}
		})
	}
}

// Answers of the wrong shape over A2A: the task stays input-required, the
// status message says why and asks again, nothing is called and nothing
// is lost; a good answer then finishes the run.
func TestApprovalBadAnswersOverA2A(t *testing.T) {
	s := serve(t)
	c := s.a2aClient("1.0")
	task := askRefund(t, s, c)
	first := s.await(string(task.ID), pregel.RunInterrupted).Interrupts
	for _, bad := range []struct {
		answer *core.Part
		reason string
	}{
		{core.NewDataPart(map[string]any{"decision": "maybe"}), `the decision "maybe" is not approve, edit or reject`},
		{core.NewTextPart("edit"), "an edit needs the new arguments"},
		{core.NewDataPart(map[string]any{"decision": "edit", "order_id": "A-1001"}), `unknown field "order_id"`},
		{core.NewDataPart(map[string]any{"decision": "edit"}), `an edit needs "input"`},
		{core.NewDataPart([]any{"approve"}), "the answer is an array, not text or an object"},
	} {
		again := sendA2A(t, c, core.NewMessageForTask(core.MessageRoleUser, task, bad.answer))
		text, data := question(again)
		if again.ID != task.ID || again.Status.State != core.TaskStateInputRequired {
			t.Fatalf("after %v: task %s is %s (%q), want %s input-required", bad.answer, again.ID, again.Status.State, text, task.ID)
		}
		if !strings.HasPrefix(text, "Your last answer was not accepted: ") || !strings.Contains(text, bad.reason) || !strings.Contains(text, "Approve the call of tool refund") {
			t.Errorf("after %v the status says %q; want the reason %q and the question again", bad.answer, text, bad.reason)
		}
		if len(data) != 1 {
			t.Errorf("after %v the status carries data %v, want the approval request", bad.answer, data)
		}
		if md, _ := again.Status.Message.Metadata["superstep"].(map[string]any); md == nil || !strings.Contains(mustJSON(t, md["interrupts"]), bad.reason[:10]) {
			t.Errorf("the status metadata %v does not carry the reason", again.Status.Message.Metadata)
		}
	}
	if got := s.await(string(task.ID), pregel.RunInterrupted).Interrupts; len(got) != 1 || got[0].ID != first[0].ID || string(got[0].Value) != string(first[0].Value) {
		t.Fatalf("the pending question changed: %+v, was %+v", got, first)
	}
	if s.refunded() != 0 {
		t.Fatalf("refunded %d cents on bad answers", s.refunded())
	}
	done := sendA2A(t, c, core.NewMessageForTask(core.MessageRoleUser, task, core.NewDataPart(map[string]any{"decision": "approve"})))
	if done.Status.State != core.TaskStateCompleted || s.refunded() != 4500 {
		t.Fatalf("after approving: %s, refunded %d", done.Status.State, s.refunded())
	}
	// The conversation is whole: the two lookups and the refund each have
	// one result, and the model answered three times.
	msgs := finalMessages(t, done)
	results, turns := 0, 0
	for _, m := range msgs {
		if m.Role == agent.RoleAssistant {
			turns++
		}
		for _, b := range m.Content {
			if b.ToolResult != nil {
				results++
			}
		}
	}
	if results != 3 || turns != 3 {
		t.Errorf("%d tool results and %d model turns, want 3 and 3: %+v", results, turns, msgs)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// jsTask is a task as testdata/js/approval.mjs reports it.
type jsTask struct {
	ID       string         `json:"id"`
	State    string         `json:"state"`
	Text     string         `json:"text"`
	Data     []any          `json:"data"`
	Artifact map[string]any `json:"artifact"`
}

// Approval over A2A with @a2a-js/sdk as the client (1.0, and its 0.3
// client): approve, edit and reject, as text or data parts, and answers
// of the wrong shape asked again with the reason before a good one.
func TestApprovalOverA2AWithJSClient(t *testing.T) {
	dir := nodetest.Project(t, "testdata/js")
	for _, tc := range []struct {
		name, protocol string
		answers        string // JSON array of parts
		asked          []string
		refunded       int
		reply          string
	}{
		{"approve as text", "1.0", `[{"text": "approve"}]`, nil, 4500, "Done: refunded 45.00 on order A-1001 (customer request)."},
		{"approve as data over 0.3", "0.3", `[{"data": {"decision": "approve"}}]`, nil, 4500, "Done: refunded 45.00 on order A-1001 (customer request)."},
		{"edit", "1.0", `[{"data": {"decision": "edit", "input": {"order_id": "A-1001", "cents": 1500, "reason": "chipped lid"}}}]`, nil,
			1500, "Done: refunded 15.00 on order A-1001 (chipped lid)."},
		{"reject with a message", "1.0", `[{"data": {"decision": "reject", "message": "ask for a photo first"}}]`, nil,
			0, "The refund did not go through (the user rejected this call: ask for a photo first)."},
		{"reject as text over 0.3", "0.3", `[{"text": "not without a photo"}]`, nil,
			0, "The refund did not go through (the user rejected this call: not without a photo)."},
		{"bad answers, then approve", "1.0", `[{"data": {"decision": "yes"}}, {"data": {"decision": "edit"}}, {"text": "edit"}, {"data": {"decision": "approve"}}]`,
			[]string{`the decision "yes" is not approve, edit or reject`, `an edit needs "input"`, "an edit needs the new arguments"},
			4500, "Done: refunded 45.00 on order A-1001 (customer request)."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := serve(t)
			raw := nodetest.Run(t, dir, time.Minute, "approval.mjs", s.url, tc.protocol, tc.answers)
			var out struct {
				Protocol string   `json:"protocol"`
				Steps    []jsTask `json:"steps"`
				Error    any      `json:"error"`
			}
			if err := json.Unmarshal(raw, &out); err != nil {
				t.Fatalf("approval.mjs printed %s: %v", raw, err)
			}
			if out.Error != nil || out.Protocol != tc.protocol || len(out.Steps) != len(tc.asked)+2 {
				t.Fatalf("approval.mjs: protocol %s, %d steps, error %v: %s", out.Protocol, len(out.Steps), out.Error, raw)
			}
			first := out.Steps[0]
			if first.State != "TASK_STATE_INPUT_REQUIRED" || !strings.Contains(first.Text, "Approve the call of tool refund") || len(first.Data) != 1 {
				t.Fatalf("the question: %+v", first)
			}
			for i, reason := range tc.asked {
				again := out.Steps[1+i]
				if again.ID != first.ID || again.State != "TASK_STATE_INPUT_REQUIRED" || !strings.Contains(again.Text, "Your last answer was not accepted: ") || !strings.Contains(again.Text, reason) {
					t.Errorf("after bad answer %d: %+v, want the question again with %q", i, again, reason)
				}
			}
			last := out.Steps[len(out.Steps)-1]
			if last.ID != first.ID || last.State != "TASK_STATE_COMPLETED" {
				t.Fatalf("after the answer: %+v", last)
			}
			if got := s.refunded(); got != tc.refunded {
				t.Errorf("refunded %d cents, want %d", got, tc.refunded)
			}
			if !strings.Contains(mustJSON(t, last.Artifact[agent.MessagesChannel]), tc.reply) {
				t.Errorf("the final state lacks %q: %v", tc.reply, last.Artifact[agent.MessagesChannel])
			}
		})
	}
}

// The card says the assistant takes text, and its tools skill says how to
// answer an approval.
func TestCardShowsApprovalAnswers(t *testing.T) {
	s := serve(t)
	var card struct {
		DefaultInputModes []string `json:"defaultInputModes"`
		Skills            []struct {
			ID          string `json:"id"`
			Description string `json:"description"`
		} `json:"skills"`
	}
	s.do("GET", "/a2a/"+assistant.Name+"/.well-known/agent-card.json", "", http.StatusOK, &card)
	if !slices.Contains(card.DefaultInputModes, "text/plain") {
		t.Errorf("input modes %v, want text/plain", card.DefaultInputModes)
	}
	for _, sk := range card.Skills {
		if sk.ID == assistant.Name+"."+agent.ToolsNode {
			if !strings.Contains(sk.Description, "A call of refund waits for a person's approval") || !strings.Contains(sk.Description, `"decision": "approve" | "reject" | "edit"`) {
				t.Errorf("the tools skill says %q; want how to answer an approval", sk.Description)
			}
			return
		}
	}
	t.Errorf("no skill for the tools node: %+v", card.Skills)
}
