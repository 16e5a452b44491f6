package agent_test

import (
	"context"
	"fmt"

	"github.com/superstep/superstep/pkg/agent"
	"github.com/superstep/superstep/pkg/pregel"
)

// An agent with one tool, run with a scripted model (use the Bedrock
// adapter, pkg/agent/bedrock, for a real one): the model asks for the
// tool, the tool runs as its own task, and the model answers.
func ExampleNew() {
	type orderIn struct {
		OrderID string `json:"order_id" jsonschema:"the order's id"`
	}
	lookup, err := agent.NewTool("lookup_order", "Looks up an order's status", func(_ context.Context, in orderIn) (string, error) {
		return in.OrderID + " shipped on Monday", nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	model := agent.ScriptedTurns(
		agent.Response{Message: agent.Message{Content: []agent.Block{{ToolCall: &agent.ToolCall{ID: "c1", Name: "lookup_order", Input: []byte(`{"order_id":"A-1002"}`)}}}}},
		agent.Response{Message: agent.AssistantText("Your order A-1002 shipped on Monday.")},
	)
	g, err := agent.New(agent.Config{Model: model, Tools: []agent.Tool{lookup}})
	if err != nil {
		fmt.Println(err)
		return
	}
	run, err := pregel.NewRunnable[agent.State](g)
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := run.Invoke(context.Background(), agent.State{Messages: []agent.Message{agent.UserText("Where is my order A-1002?")}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Status, len(res.State.Messages), "messages")
	fmt.Println(agent.Answer(res.Result))
	// Output:
	// completed 4 messages
	// Your order A-1002 shipped on Monday.
}
