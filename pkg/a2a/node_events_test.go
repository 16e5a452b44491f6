package a2a_test

import (
	"context"
	"strings"
	"testing"
	"time"

	core "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/superstep/superstep/pkg/a2a"
	"github.com/superstep/superstep/pkg/pregel"
)

// talkGraph's node emits a progress event and a reply token by token.
func talkGraph(t testing.TB) *pregel.Graph {
	t.Helper()
	b := pregel.NewGraph[ChatState]("talk")
	b.AddFunc("answer", func(ctx context.Context, s ChatState) (ChatState, error) {
		_ = pregel.Emit(ctx, "progress", map[string]int{"pct": 50})
		for _, tok := range []string{"Hel", "lo"} {
			_ = pregel.Emit(ctx, pregel.MessageToken, map[string]string{"text": tok})
		}
		return ChatState{Reply: "Hello"}, nil
	})
	b.AddEdge(pregel.Start, "answer").AddEdge("answer", pregel.End)
	g, err := b.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestStreamingNodeEvents checks that message/stream carries the events a
// node emits, in order, as working status updates: the tokens' text, and
// custom events with their payload in the metadata; on both protocols.
func TestStreamingNodeEvents(t *testing.T) {
	e := newEnv(t, envConfig{events: true, graphs: []*pregel.Graph{talkGraph(t)}})
	for _, version := range protocols {
		t.Run(version, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			evs := collect(t, e.client(t, "talk", version).SendStreamingMessage(ctx, &core.SendMessageRequest{Message: text("hi")}))
			if got := lastStatus(t, evs); got != core.TaskStateCompleted {
				t.Fatalf("stream ended with %s", got)
			}
			var texts []string
			var progress map[string]any
			for _, ev := range evs {
				up, ok := ev.(*core.TaskStatusUpdateEvent)
				if !ok || up.Status.Message == nil {
					continue
				}
				meta, _ := up.Status.Message.Metadata[a2a.MetadataKey].(map[string]any)
				if meta["event"] != string(pregel.EventCustom) {
					continue
				}
				texts = append(texts, up.Status.Message.Parts[0].Text())
				if meta["name"] == "progress" {
					progress, _ = meta["payload"].(map[string]any)
				}
			}
			if len(texts) != 3 || !strings.Contains(texts[0], "answer progress") || texts[1] != "Hel" || texts[2] != "lo" {
				t.Errorf("node events streamed as %q; want the progress event, then Hel, lo", texts)
			}
			if progress["pct"] != float64(50) {
				t.Errorf("progress payload in the metadata = %v; want pct 50", progress)
			}
		})
	}
}
