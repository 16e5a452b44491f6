package pregel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/superstep/superstep/pkg/pregel"
)

type chat struct {
	Messages []string `json:"messages" reduce:"append"`
	Topic    string   `json:"topic"`
	Turns    int      `json:"turns"`
}

func chatGraph(t *testing.T) *pregel.Graph {
	t.Helper()
	g := pregel.NewGraph[chat]("chat")
	g.AddFunc("reply", func(_ context.Context, s chat) (chat, error) {
		return chat{Messages: []string{fmt.Sprintf("reply %d to %s", s.Turns+1, s.Messages[len(s.Messages)-1])}, Turns: s.Turns + 1}, nil
	})
	g.AddEdge(pregel.Start, "reply").AddEdge("reply", pregel.End)
	return compile2(t, g)
}

func compile2(t *testing.T, b *pregel.Builder[chat]) *pregel.Graph {
	t.Helper()
	g, err := b.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestContinue(t *testing.T) {
	ctx := context.Background()
	g := chatGraph(t)
	store := pregel.NewMemoryStore()
	first, err := g.Run(ctx, chat{Messages: []string{"hi"}, Topic: "a"}, pregel.WithRunID("r1"), pregel.WithStore(store))
	if err != nil {
		t.Fatal(err)
	}

	cp, err := g.Continue(ctx, "r2", first.Values, json.RawMessage(`{"messages":["again"],"topic":"b"}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int{"messages": 0, "topic": 0, "turns": pregel.Inherited}; !reflect.DeepEqual(cp.Versions, want) {
		t.Errorf("versions = %v, want %v (the input's channels at 0, the others inherited)", cp.Versions, want)
	}
	if got := cp.Changed(); !reflect.DeepEqual(got, []string{"messages", "topic"}) {
		t.Errorf("Changed = %v, want the input's channels only", got)
	}
	if len(cp.Next) != 1 || cp.Next[0].Node != "reply" {
		t.Errorf("Next = %v, want reply (the edge from Start)", cp.Next)
	}
	if err := store.Commit(ctx, cp); err != nil {
		t.Fatal(err)
	}
	res, err := g.Resume(ctx, "r2", pregel.WithStore(store))
	if err != nil {
		t.Fatal(err)
	}
	var got chat
	if err := res.Decode(&got); err != nil {
		t.Fatal(err)
	}
	want := chat{Messages: []string{"hi", "reply 1 to hi", "again", "reply 2 to again"}, Topic: "b", Turns: 2}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("second run's state = %+v, want %+v (messages appended, topic replaced, turns carried)", got, want)
	}
	if res.Values["turns"] == nil {
		t.Fatal("no turns")
	}
}

func TestContinueEmptyStateIsStart(t *testing.T) {
	ctx := context.Background()
	g := chatGraph(t)
	in := json.RawMessage(`{"messages":["hi"]}`)
	a, err := g.Start(ctx, "r", in)
	if err != nil {
		t.Fatal(err)
	}
	b, err := g.Continue(ctx, "r", nil, in)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("Continue from no state = %+v, want Start's %+v", b, a)
	}
}

func TestContinueRejectsBadInput(t *testing.T) {
	ctx := context.Background()
	g := chatGraph(t)
	state := map[string]json.RawMessage{"messages": json.RawMessage(`["hi"]`)}
	for _, tc := range []struct{ name, input string }{
		{"unknown channel", `{"nope": 1}`},
		{"not an object", `[1]`},
		{"wrong type", `{"messages": 3}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := g.Continue(ctx, "r", state, json.RawMessage(tc.input))
			if !errors.Is(err, pregel.ErrInvalidInput) {
				t.Errorf("err = %v, want ErrInvalidInput", err)
			}
		})
	}
	if _, err := g.Continue(ctx, "", state, nil); !errors.Is(err, pregel.ErrInvalidInput) {
		t.Errorf("empty run id: err = %v, want ErrInvalidInput", err)
	}
}

// TestContinueValidatesWhatWasSent is issue 22 item 5: a graph whose input
// check refuses its output channels (as examples/loop's counter does) runs
// a second time on a thread: the check sees the input the caller sent, not
// the state it continues, which holds the first run's outputs.
func TestContinueValidatesWhatWasSent(t *testing.T) {
	ctx := context.Background()
	b := pregel.NewGraph[chat]("chat")
	b.ValidateInput(func(s chat) error {
		if s.Turns != 0 {
			return errors.New("turns is an output; give only messages")
		}
		if len(s.Messages) != 1 {
			return fmt.Errorf("give exactly one message, got %d", len(s.Messages))
		}
		return nil
	})
	b.AddFunc("reply", func(_ context.Context, s chat) (chat, error) {
		return chat{Messages: []string{"re"}, Turns: s.Turns + 1}, nil
	})
	b.AddEdge(pregel.Start, "reply").AddEdge("reply", pregel.End)
	g := compile2(t, b)
	state := map[string]json.RawMessage{"messages": json.RawMessage(`["hi","re"]`), "turns": json.RawMessage(`1`)}
	cp, err := g.Continue(ctx, "second", state, json.RawMessage(`{"messages":["again"]}`))
	if err != nil {
		t.Fatalf("second run on a thread refused: %v", err)
	}
	if got := string(cp.Values["messages"]); got != `["hi","re","again"]` {
		t.Errorf("step 0 messages %s, want the thread's and the input's", got)
	}
	// What the caller sent is still checked.
	for _, in := range []string{`{"turns":3,"messages":["x"]}`, `{"messages":["a","b"]}`} {
		if _, err := g.Continue(ctx, "third", state, json.RawMessage(in)); !errors.Is(err, pregel.ErrInvalidInput) {
			t.Errorf("input %s: %v, want ErrInvalidInput", in, err)
		}
	}
}
