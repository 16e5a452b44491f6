package a2a_test

import (
	"errors"
	"strings"
	"testing"

	legacy "github.com/a2aproject/a2a-go/a2a"
	legacyclient "github.com/a2aproject/a2a-go/a2aclient"
)

// TestLegacyClientDecodesErrors: an a2a-go v0.3.15 client (the version
// 0.3 agents use) reads the errors of the 0.3 binding: their code (as
// the SDK's error) and message. (It decodes data as an object, the 0.3
// transport of a2a-go v2 as an array: 0.3 errors carry none, and
// TestLifecycle checks the v2 client on the same errors.)
func TestLegacyClientDecodesErrors(t *testing.T) {
	e := newEnv(t, envConfig{threads: true, sqlite: true, opts: nil})
	ctx := t.Context()
	c, err := legacyclient.NewFromEndpoints(ctx, []legacy.AgentInterface{{URL: e.agentURL("chat"), Transport: legacy.TransportProtocolJSONRPC}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.GetTask(ctx, &legacy.TaskQueryParams{ID: "no-such-task"})
	if !errors.Is(err, legacy.ErrTaskNotFound) || !strings.Contains(err.Error(), "no-such-task") {
		t.Fatalf("GetTask of a missing task: %v, want ErrTaskNotFound naming the task", err)
	}

	// A task that waits for input, and a second message in its context
	// while the agent takes one task per context: an error with details.
	msg := func(id, text, task string) *legacy.MessageSendParams {
		m := legacy.NewMessage(legacy.MessageRoleUser, legacy.TextPart{Text: text})
		m.ID, m.ContextID = id, "ctx-1"
		if task != "" {
			m.TaskID = legacy.TaskID(task)
		}
		return &legacy.MessageSendParams{Message: m}
	}
	res, err := c.SendMessage(ctx, msg("m1", "ask", ""))
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*legacy.Task)
	if !ok || task.Status.State != legacy.TaskStateInputRequired {
		t.Fatalf("first message: %#v, want an input-required task", res)
	}
	_, err = c.SendMessage(ctx, msg("m2", "hello", ""))
	var ae *legacy.Error
	if !errors.As(err, &ae) || !errors.Is(err, legacy.ErrUnsupportedOperation) {
		t.Fatalf("second message: %v, want UnsupportedOperation with its details", err)
	}
	if !strings.Contains(ae.Message, string(task.ID)) {
		t.Fatalf("second message: %v, want the active task named", err)
	}
	if strings.Contains(err.Error(), "unmarshal") {
		t.Fatalf("the client could not decode the error: %v", err)
	}
}
