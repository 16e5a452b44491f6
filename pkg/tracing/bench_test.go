package tracing_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/superstep/superstep/pkg/agent"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/tracing"
)

// BenchmarkAgentRunTracing runs the prebuilt agent for one conversation
// of five tasks (a model turn calling two tools, both tools, the answering
// turn, with a scripted model) with tracing off (no options: what every
// runtime does unless OTEL_* turns tracing on) and on (an SDK provider
// whose batcher discards the spans: the cost of making them). Off must
// cost what an untraced run costs: compare its allocs/op with
// BenchmarkAgentTurn's and pregel's benchmarks before and after a change.
func BenchmarkAgentRunTracing(b *testing.B) {
	model := agent.ScriptedTurns(
		agent.Response{Message: agent.Message{Role: agent.RoleAssistant, Content: []agent.Block{
			{ToolCall: &agent.ToolCall{ID: "c1", Name: "lookup", Input: json.RawMessage(`{"order":"A-1"}`)}},
			{ToolCall: &agent.ToolCall{ID: "c2", Name: "lookup", Input: json.RawMessage(`{"order":"A-2"}`)}},
		}}, StopReason: agent.StopToolUse, Usage: agent.Usage{InputTokens: 10, OutputTokens: 5}},
		agent.Response{Message: agent.AssistantText("Both shipped."), StopReason: agent.StopEndTurn, Usage: agent.Usage{InputTokens: 20, OutputTokens: 3}},
	)
	lookup := agent.MustTool("lookup", "Looks an order up", func(_ context.Context, in struct {
		Order string `json:"order"`
	}) (string, error) {
		return "order " + in.Order + " shipped", nil
	})
	g, err := agent.New(agent.Config{Model: model, Tools: []agent.Tool{lookup}, Generate: true})
	if err != nil {
		b.Fatal(err)
	}
	in := agent.State{Messages: []agent.Message{agent.UserText("where are A-1 and A-2?")}}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	for _, tc := range []struct {
		name string
		tr   *tracing.Tracer
	}{{"off", nil}, {"on", tracing.New(tp)}} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				res, err := g.Run(ctx, in, tc.tr.Options(ctx)...)
				if err != nil || res.Status != pregel.RunCompleted {
					b.Fatal(fmt.Sprint(res, err))
				}
			}
		})
	}
}
