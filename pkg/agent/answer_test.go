package agent_test

import (
	"context"
	"errors"
	"testing"

	"github.com/superstep/superstep/pkg/agent"
	"github.com/superstep/superstep/pkg/pregel"
)

// TestAnswer: after a tool call and the model's final turn, Answer is the
// final assistant text (not the tool call's turn, not the tool's result),
// through a Result and through a Runnable's typed state; a conversation
// without an assistant message answers "".
func TestAnswer(t *testing.T) {
	var c calls
	model := agent.ScriptedTurns(
		answer(agent.Block{Text: "Let me look."}, toolCall("t1", "lookup_order", `{"order_id":"A-1"}`)),
		answer(agent.Block{Text: "A-1 has "}, agent.Block{Text: "shipped."}),
	)
	g, err := agent.New(agent.Config{Model: model, Tools: []agent.Tool{lookupTool(t, &c, nil)}})
	if err != nil {
		t.Fatal(err)
	}
	run, err := pregel.NewRunnable[agent.State](g)
	if err != nil {
		t.Fatal(err)
	}
	res, err := run.Invoke(context.Background(), agent.State{Messages: []agent.Message{agent.UserText("where is A-1?")}})
	if err != nil || res.Status != pregel.RunCompleted {
		t.Fatalf("run: %v %v", res, err)
	}
	if got := agent.Answer(res.Result); got != "A-1 has shipped." {
		t.Errorf("Answer(res) = %q; want the last assistant message", got)
	}
	if got := res.State.Answer(); got != "A-1 has shipped." {
		t.Errorf("State.Answer() = %q", got)
	}

	failing := &agent.Scripted{Reply: func(context.Context, *agent.Request) (*agent.Response, error) {
		return nil, errors.New("throttled")
	}}
	g, err = agent.New(agent.Config{Model: failing})
	if err != nil {
		t.Fatal(err)
	}
	failed, err := g.Run(context.Background(), agent.TextInput("hello"))
	if err == nil || failed == nil {
		t.Fatalf("a failing model: %v, %v; want a failed run", failed, err)
	}
	if got := agent.Answer(failed); got != "" {
		t.Errorf("Answer of a run the model never answered = %q; want empty", got)
	}
	if got := agent.Answer(nil); got != "" {
		t.Errorf("Answer(nil) = %q", got)
	}
}
