package agent_test

import (
	"context"
	"strings"
	"testing"

	"github.com/superstep/superstep/pkg/agent"
	"github.com/superstep/superstep/pkg/pregel"
)

// TestScriptedConversationServesLaterTurns: the second user turn of a
// conversation gets its own script, after a first turn with a tool call.
func TestScriptedConversationServesLaterTurns(t *testing.T) {
	var c calls
	model := agent.ScriptedConversation(
		[]agent.Response{
			answer(toolCall("t1", "lookup_order", `{"order_id":"A-1"}`)),
			answer(agent.Block{Text: "A-1 has shipped."}),
		},
		[]agent.Response{answer(agent.Block{Text: "You are welcome."})},
	)
	g, err := agent.New(agent.Config{Model: model, Tools: []agent.Tool{lookupTool(t, &c, nil)}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := g.Run(ctx, agent.TextInput("where is A-1?"))
	if err != nil || res.Status != pregel.RunCompleted {
		t.Fatalf("turn 1: %v %v", res, err)
	}
	st := decode(t, res)
	// The second turn: the conversation so far plus a new user message, as
	// a run on a thread starts.
	st.Messages = append(st.Messages, agent.UserText("thanks"))
	res, err = g.Run(ctx, agent.State{Messages: st.Messages})
	if err != nil || res.Status != pregel.RunCompleted {
		t.Fatalf("turn 2: %v %v", res, err)
	}
	st = decode(t, res)
	if last := st.Messages[len(st.Messages)-1]; last.Text() != "You are welcome." {
		t.Fatalf("turn 2 answered %q", last.Text())
	}
	// A third turn has no script: the error says so.
	st.Messages = append(st.Messages, agent.UserText("bye"))
	_, err = model.Generate(ctx, &agent.Request{Messages: st.Messages})
	if err == nil || !strings.Contains(err.Error(), "user turn 3 has no script (2 turns are scripted)") {
		t.Fatalf("turn 3: %v", err)
	}
}
