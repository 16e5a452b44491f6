package bedrocktest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/superstep/superstep/pkg/agent"
	"github.com/superstep/superstep/pkg/agent/bedrock"
	"github.com/superstep/superstep/pkg/agent/bedrock/bedrocktest"
	"github.com/superstep/superstep/pkg/pregel"
)

// TestAgentOnTheFake: the prebuilt agent on the real adapter and SDK
// client, against the fake, streaming and not.
func TestAgentOnTheFake(t *testing.T) {
	for _, generate := range []bool{false, true} {
		srv := bedrocktest.New(bedrocktest.Tool("t1", "lookup_order", `{"order_id":"A-1"}`), bedrocktest.Text("A-1 has shipped."))
		defer srv.Close()
		lookup := agent.MustTool("lookup_order", "Looks an order up", func(_ context.Context, in struct {
			OrderID string `json:"order_id"`
		}) (string, error) {
			return "order " + in.OrderID + ": shipped", nil
		})
		g, err := agent.New(agent.Config{Model: bedrock.New(srv.Client(), "us.amazon.nova-lite-v1:0"), Tools: []agent.Tool{lookup}, Generate: generate})
		if err != nil {
			t.Fatal(err)
		}
		res, err := g.Run(t.Context(), agent.TextInput("where is A-1?"))
		if err != nil || res.Status != pregel.RunCompleted {
			t.Fatalf("generate=%v: %v %v", generate, res, err)
		}
		var st agent.State
		if err := res.Decode(&st); err != nil {
			t.Fatal(err)
		}
		if last := st.Messages[len(st.Messages)-1]; last.Text() != "A-1 has shipped." || st.Usage.Total.TotalTokens != 30 {
			t.Fatalf("generate=%v: last %q, usage %+v", generate, last.Text(), st.Usage)
		}
		reqs := srv.Requests()
		if len(reqs) != 2 || reqs[0].Stream == generate || reqs[0].ModelID != "us.amazon.nova-lite-v1:0" {
			t.Fatalf("generate=%v: requests %+v", generate, reqs)
		}
		// The second request carries the tool's result back.
		if msgs, _ := reqs[1].Body["messages"].([]any); len(msgs) != 3 {
			t.Fatalf("second request's messages: %v", reqs[1].Body["messages"])
		}
	}
}

func TestErrorsAndTheEndOfTheScript(t *testing.T) {
	srv := bedrocktest.New(bedrocktest.Error(429, "ThrottlingException", "slow down"))
	defer srv.Close()
	m := bedrock.New(srv.Client(), "m")
	_, err := m.Generate(t.Context(), &agent.Request{Messages: []agent.Message{agent.UserText("hi")}})
	if !agent.IsRetryable(err) {
		t.Fatalf("throttling: %v, want a retryable error", err)
	}
	_, err = m.Stream(t.Context(), &agent.Request{Messages: []agent.Message{agent.UserText("hi")}}, nil)
	var me *agent.ModelError
	if !errors.As(err, &me) || agent.IsRetryable(err) {
		t.Fatalf("past the script: %v, want a validation error", err)
	}
}
