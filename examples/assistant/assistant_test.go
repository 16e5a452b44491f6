package assistant_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/superstep/superstep/examples/assistant"
	"github.com/superstep/superstep/pkg/agent"
	"github.com/superstep/superstep/pkg/pregel"
)

func run(t *testing.T, answer any) (agent.State, *assistant.Shop) {
	t.Helper()
	in, err := os.ReadFile("input.json")
	if err != nil {
		t.Fatal(err)
	}
	shop := assistant.NewShop()
	g, err := assistant.New(assistant.ScriptedModel(), shop)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	store := pregel.NewMemoryStore()
	res, err := g.Run(ctx, json.RawMessage(in), pregel.WithRunID("r"), pregel.WithStore(store))
	if err != nil || res.Status != pregel.RunInterrupted {
		t.Fatalf("run: %v %v, want interrupted before the refund", res.Status, err)
	}
	var req agent.ApprovalRequest
	if err := json.Unmarshal(res.Interrupts[0].Value, &req); err != nil || req.ToolCall.Name != "refund" || string(req.ToolCall.Input) != `{"order_id":"A-1001","cents":4500,"reason":"customer request"}` {
		t.Fatalf("interrupt %s (%v)", res.Interrupts[0].Value, err)
	}
	res, err = g.Resume(ctx, "r", pregel.WithStore(store), pregel.WithResume(answer))
	if err != nil || res.Status != pregel.RunCompleted {
		t.Fatalf("resume: %v %v", res.Status, err)
	}
	var st agent.State
	if err := res.Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st, shop
}

func TestAssistantRefundApproved(t *testing.T) {
	st, shop := run(t, "approve")
	// user, lookups (one turn, two calls), two results, refund call,
	// its result, the answer.
	if len(st.Messages) != 7 || len(st.Messages[1].ToolCalls()) != 2 {
		t.Fatalf("conversation: %+v", st.Messages)
	}
	answer := st.Messages[len(st.Messages)-1].Text()
	for _, want := range []string{"A-1001, your ceramic teapot, is delivered.", "A-1002, your walnut tray, is shipped.", "Done: refunded 45.00 on order A-1001"} {
		if !strings.Contains(answer, want) {
			t.Errorf("answer %q lacks %q", answer, want)
		}
	}
	if o, _ := shop.Lookup(context.Background(), assistant.LookupInput{OrderID: "A-1001"}); o.RefundedCents != 4500 {
		t.Errorf("refunded %d cents, want 4500", o.RefundedCents)
	}
	if st.Usage.Total.TotalTokens == 0 || st.Usage.ByNode[agent.ModelNode] != st.Usage.Total {
		t.Errorf("usage %+v", st.Usage)
	}
}

func TestAssistantRefundEditedAndRejected(t *testing.T) {
	st, shop := run(t, agent.Approval{Decision: agent.Edit, Input: json.RawMessage(`{"order_id":"A-1001","cents":1000,"reason":"partial"}`)})
	if a := st.Messages[len(st.Messages)-1].Text(); !strings.Contains(a, "refunded 10.00 on order A-1001 (partial)") {
		t.Errorf("edited: %q", a)
	}
	if o, _ := shop.Lookup(context.Background(), assistant.LookupInput{OrderID: "A-1001"}); o.RefundedCents != 1000 {
		t.Errorf("refunded %d cents, want 1000", o.RefundedCents)
	}
	st, shop = run(t, "ask for a photo first")
	if a := st.Messages[len(st.Messages)-1].Text(); !strings.Contains(a, "did not go through (the user rejected this call: ask for a photo first)") {
		t.Errorf("rejected: %q", a)
	}
	if o, _ := shop.Lookup(context.Background(), assistant.LookupInput{OrderID: "A-1001"}); o.RefundedCents != 0 {
		t.Errorf("refunded %d cents after a rejection", o.RefundedCents)
	}
}

func TestRefundLimits(t *testing.T) {
	shop := assistant.NewShop()
	ctx := context.Background()
	for _, in := range []assistant.RefundInput{{OrderID: "Z-1", Cents: 1}, {OrderID: "A-1001", Cents: 0}, {OrderID: "A-1001", Cents: 4501}} {
		if _, err := shop.Refund(ctx, in); err == nil {
			t.Errorf("refund %+v accepted", in)
		}
	}
}
