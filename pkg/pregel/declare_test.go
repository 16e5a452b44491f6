package pregel_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/superstep/superstep/pkg/pregel"
)

type chatState struct {
	Lines []string           `json:"lines" reduce:"append"`
	Usage pregel.UsageTotals `json:"usage"`
}

func declChatGraph(t *testing.T, opts ...pregel.CompileOption) (*pregel.Graph, error) {
	t.Helper()
	b := pregel.NewGraph[chatState]("chat")
	b.AddFunc("echo", func(_ context.Context, st chatState) (chatState, error) {
		u := pregel.TokenUsage{InputTokens: 3, OutputTokens: 2, TotalTokens: 5}
		return chatState{Lines: []string{"echo: " + st.Lines[0]}, Usage: pregel.UsageTotals{Total: u, ByNode: map[string]pregel.TokenUsage{"echo": u}}}, nil
	})
	b.AddEdge(pregel.Start, "echo").AddEdge("echo", pregel.End)
	return b.Compile(opts...)
}

func TestTextInputAndUsage(t *testing.T) {
	g, err := declChatGraph(t, pregel.TextInput("lines", func(text string) any { return []string{text} }), pregel.UsageChannel("usage"))
	if err != nil {
		t.Fatal(err)
	}
	if g.TextChannel() != "lines" || g.UsageChannel() != "usage" {
		t.Fatalf("declared channels: text %q, usage %q", g.TextChannel(), g.UsageChannel())
	}
	in, err := g.InputFromText(`hello "you"`)
	if err != nil {
		t.Fatal(err)
	}
	if string(in) != `{"lines":["hello \"you\""]}` {
		t.Fatalf("input from text = %s", in)
	}
	res, err := g.Run(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	u, err := g.Usage(res.Values)
	if err != nil {
		t.Fatal(err)
	}
	if u == nil || u.Total.TotalTokens != 5 || u.ByNode["echo"].InputTokens != 3 {
		t.Fatalf("usage = %+v", u)
	}
	if u, err := g.Usage(map[string]json.RawMessage{"lines": []byte(`[]`)}); u != nil || err != nil {
		t.Fatalf("usage of values without the channel = %+v, %v; want nil, nil", u, err)
	}
	if _, err := g.Usage(map[string]json.RawMessage{"usage": []byte(`[1]`)}); err == nil {
		t.Fatal("usage of a channel that does not hold usage: no error")
	}
}

func TestNoDeclarations(t *testing.T) {
	g, err := declChatGraph(t)
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.InputFromText("hi")
	if !errors.Is(err, pregel.ErrNoTextInput) || !strings.Contains(err.Error(), "JSON object") {
		t.Fatalf("InputFromText of a graph without TextInput: %v", err)
	}
	if u, err := g.Usage(map[string]json.RawMessage{"usage": []byte(`{"total":{"total_tokens":1}}`)}); u != nil || err != nil {
		t.Fatalf("usage of a graph that declares none = %+v, %v; want nil", u, err)
	}
}

func TestDeclarationsNameChannels(t *testing.T) {
	for _, tc := range []struct {
		opt  pregel.CompileOption
		want string
	}{
		{pregel.UsageChannel("tokens"), `UsageChannel names channel "tokens"`},
		{pregel.TextInput("messages", func(s string) any { return s }), `TextInput names channel "messages"`},
		{pregel.TextInput("lines", nil), "needs a function"},
	} {
		_, err := declChatGraph(t, tc.opt)
		if !errors.Is(err, pregel.ErrInvalidGraph) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("compile: %v; want an error saying %q", err, tc.want)
		}
	}
}
