// Package assistant is the "assistant" example graph: a customer-support
// agent built with the prebuilt agent of pkg/agent. It has two tools,
// lookup_order and refund; every refund waits for a person's approval.
//
// By default the model is scripted (see [ScriptedModel]): it runs offline,
// deterministically, and shows every part of the loop — several tool calls
// in one turn, an approval interrupt, token streaming. Setting
// SUPERSTEP_ASSISTANT_MODEL to a Bedrock model id (for example
// "us.amazon.nova-lite-v1:0" or "us.anthropic.claude-3-5-haiku-20241022-v1:0")
// uses that model through Amazon Bedrock, with the AWS credentials and
// region of the environment.
//
// With the CLI,
//
//	superstep run assistant --input @examples/assistant/input.json
//
// stops before the refund and shows the call; resuming with "approve",
// "reject", any text (a rejection the model is told), or
// {"decision":"edit","input":{"order_id":"A-1001","cents":1000,"reason":"..."}}
// finishes the run.
package assistant

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"

	"github.com/superstep/superstep/pkg/agent"
	"github.com/superstep/superstep/pkg/agent/bedrock"
	"github.com/superstep/superstep/pkg/pregel"
)

// Name is the name the graph is registered under.
const Name = "assistant"

// ModelEnv names the environment variable that selects a Bedrock model.
const ModelEnv = "SUPERSTEP_ASSISTANT_MODEL"

const system = `You are the support assistant of a small web shop. Look orders up
with lookup_order before answering about them. Refund only delivered or
damaged orders, never more than the order's total, with the refund tool.
Answer briefly.`

// Graph builds the assistant on the model SUPERSTEP_ASSISTANT_MODEL names,
// or on the scripted model when it is unset.
func Graph() (*pregel.Graph, error) {
	var model agent.ChatModel = ScriptedModel()
	if id := os.Getenv(ModelEnv); id != "" {
		cfg, err := config.LoadDefaultConfig(context.Background())
		if err != nil {
			return nil, fmt.Errorf("assistant: load the AWS configuration for Bedrock: %w", err)
		}
		model = bedrock.New(bedrockruntime.NewFromConfig(cfg), id)
	}
	return New(model, NewShop())
}

// New builds the assistant on model, with tools over shop.
func New(model agent.ChatModel, shop *Shop) (*pregel.Graph, error) {
	lookup, err := agent.NewTool("lookup_order", "Looks an order up by its id (like A-1001): status, item, total and refunds.", shop.Lookup)
	if err != nil {
		return nil, err
	}
	refund, err := agent.NewTool("refund", "Refunds part or all of an order. Needs a person's approval.", shop.Refund)
	if err != nil {
		return nil, err
	}
	return agent.New(agent.Config{
		Name:        Name,
		Description: "A support assistant with an order lookup and refunds that a person approves; send it plain text or {\"messages\": [...]}.",
		Model:       model,
		System:      system,
		Tools:       []agent.Tool{lookup, refund},
		Approve:     []string{"refund"},
		MaxTurns:    8,
		MaxTokens:   1024,
	})
}

// Order is an order of the shop.
type Order struct {
	ID            string `json:"order_id"`
	Customer      string `json:"customer"`
	Item          string `json:"item"`
	Status        string `json:"status"`
	TotalCents    int    `json:"total_cents"`
	RefundedCents int    `json:"refunded_cents"`
}

// Shop is an in-memory order table: the tools' backend.
type Shop struct {
	mu     sync.Mutex
	orders map[string]*Order
}

// NewShop returns a shop with three orders: A-1001 (delivered), A-1002
// (shipped) and A-1003 (processing).
func NewShop() *Shop {
	return &Shop{orders: map[string]*Order{
		"A-1001": {ID: "A-1001", Customer: "Ana", Item: "ceramic teapot", Status: "delivered", TotalCents: 4500},
		"A-1002": {ID: "A-1002", Customer: "Ben", Item: "walnut tray", Status: "shipped", TotalCents: 3200},
		"A-1003": {ID: "A-1003", Customer: "Chloé", Item: "linen apron", Status: "processing", TotalCents: 2100},
	}}
}

// LookupInput is lookup_order's argument.
type LookupInput struct {
	OrderID string `json:"order_id" jsonschema:"the order's id, like A-1001"`
}

// Lookup returns the order.
func (s *Shop) Lookup(_ context.Context, in LookupInput) (Order, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[strings.ToUpper(strings.TrimSpace(in.OrderID))]
	if !ok {
		return Order{}, fmt.Errorf("no order %q", in.OrderID)
	}
	return *o, nil
}

// RefundInput is refund's argument.
type RefundInput struct {
	OrderID string `json:"order_id" jsonschema:"the order's id, like A-1001"`
	Cents   int    `json:"cents" jsonschema:"the amount to refund, in cents"`
	Reason  string `json:"reason" jsonschema:"why, in a few words"`
}

// Refund refunds part of an order, up to what is left of its total.
func (s *Shop) Refund(_ context.Context, in RefundInput) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[strings.ToUpper(strings.TrimSpace(in.OrderID))]
	switch {
	case !ok:
		return "", fmt.Errorf("no order %q", in.OrderID)
	case in.Cents <= 0:
		return "", fmt.Errorf("the amount must be positive, not %d", in.Cents)
	case o.RefundedCents+in.Cents > o.TotalCents:
		return "", fmt.Errorf("order %s has %d cents left to refund, not %d", o.ID, o.TotalCents-o.RefundedCents, in.Cents)
	}
	o.RefundedCents += in.Cents
	return fmt.Sprintf("refunded %d.%02d on order %s (%s)", in.Cents/100, in.Cents%100, o.ID, in.Reason), nil
}

var orderID = regexp.MustCompile(`\b[A-Z]-\d+\b`)

// ScriptedModel is the offline model of the example. From the last user
// message it picks the order ids (like A-1001); it looks them all up in one
// turn, then, when the message asks for a refund, refunds the first order
// in full, and finally sums up what the tools said. Its tool call ids are
// unique in the conversation (lookup-0 in the first turn, lookup-0-turn2
// in the second...): a thread holds many turns, and the messages reducer
// replaces a tool result whose id repeats.
func ScriptedModel() *agent.Scripted {
	return &agent.Scripted{Reply: func(_ context.Context, req *agent.Request) (*agent.Response, error) {
		last := -1
		for i, m := range req.Messages {
			if m.Role == agent.RoleUser {
				last = i
			}
		}
		if last < 0 {
			return nil, fmt.Errorf("scripted model: the conversation has no user message")
		}
		ask := req.Messages[last].Text()
		turn := 0 // user messages before the last
		for _, m := range req.Messages[:last] {
			if m.Role == agent.RoleUser && m.Text() != "" {
				turn++
			}
		}
		callID := func(name string, i int) string {
			if turn == 0 {
				return fmt.Sprintf("%s-%d", name, i)
			}
			return fmt.Sprintf("%s-%d-turn%d", name, i, turn+1)
		}
		var ids []string
		for _, id := range orderID.FindAllString(strings.ToUpper(ask), -1) {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		results := map[string]agent.ToolResult{}
		var names []string
		for _, m := range req.Messages[last+1:] {
			for _, b := range m.Content {
				if b.ToolCall != nil {
					names = append(names, b.ToolCall.Name)
				}
				if b.ToolResult != nil {
					results[b.ToolResult.ToolCallID] = *b.ToolResult
				}
			}
		}
		usage := agent.Usage{InputTokens: 40 * len(req.Messages), OutputTokens: 20, TotalTokens: 40*len(req.Messages) + 20}
		reply := func(blocks ...agent.Block) (*agent.Response, error) {
			return &agent.Response{Message: agent.Message{Role: agent.RoleAssistant, Content: blocks}, Usage: usage}, nil
		}
		switch {
		case len(ids) == 0:
			return reply(agent.Block{Text: "I can look up your orders and refund them. Which order is it? Its id looks like A-1001."})
		case len(names) == 0:
			blocks := []agent.Block{{Text: "Let me look that up."}}
			for i, id := range ids {
				blocks = append(blocks, agent.Block{ToolCall: &agent.ToolCall{ID: callID("lookup", i), Name: "lookup_order", Input: fmt.Appendf(nil, `{"order_id":%q}`, id)}})
			}
			return reply(blocks...)
		case strings.Contains(strings.ToLower(ask), "refund") && !slices.Contains(names, "refund"):
			first := results[callID("lookup", 0)]
			if first.Error {
				return reply(agent.Block{Text: "I could not find that order: " + first.Content})
			}
			total := totalOf(first.Content)
			return reply(agent.Block{Text: "I will refund it in full."}, agent.Block{ToolCall: &agent.ToolCall{
				ID: callID("refund", 0), Name: "refund", Input: fmt.Appendf(nil, `{"order_id":%q,"cents":%d,"reason":"customer request"}`, ids[0], total),
			}})
		}
		var b strings.Builder
		b.WriteString("Here is what I found. ")
		for i := range ids {
			r := results[callID("lookup", i)]
			var o Order
			if r.Error || json.Unmarshal([]byte(r.Content), &o) != nil {
				fmt.Fprintf(&b, "%s: %s. ", ids[i], r.Content)
				continue
			}
			fmt.Fprintf(&b, "%s, your %s, is %s. ", o.ID, o.Item, o.Status)
		}
		if r, ok := results[callID("refund", 0)]; ok {
			if r.Error {
				fmt.Fprintf(&b, "The refund did not go through (%s).", r.Content)
			} else {
				fmt.Fprintf(&b, "Done: %s.", r.Content)
			}
		}
		return reply(agent.Block{Text: strings.TrimSpace(b.String())})
	}}
}

// totalOf reads what is left to refund from a lookup_order result.
func totalOf(result string) int {
	var o Order
	if err := json.Unmarshal([]byte(result), &o); err != nil {
		return 0
	}
	return o.TotalCents - o.RefundedCents
}
