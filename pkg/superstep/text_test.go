//go:build !superstep.lambda

package superstep

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/superstep/superstep/pkg/pregel"
)

// TestRunTakesText: plain text starts an agent through `run`, as --text or
// as a JSON string given to --input; a graph that takes no text says what
// to give instead.
func TestRunTakesText(t *testing.T) {
	h := newHarness(t)
	for _, args := range [][]string{
		{"--text", "Where is my order A-1002?"},
		{"--input", `"Where is my order A-1002?"`},
	} {
		res := decodeResult(t, h.local(append([]string{"run", "assistant", "--answer", "approve", "--json", "-q"}, args...)...).want(t, ExitOK))
		if res.Status != pregel.RunCompleted {
			t.Fatalf("%v: status %s", args, res.Status)
		}
		var msgs []struct {
			Role    string `json:"role"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		if err := json.Unmarshal(res.Values["messages"], &msgs); err != nil || len(msgs) < 2 {
			t.Fatalf("%v: messages %s: %v", args, res.Values["messages"], err)
		}
		if msgs[0].Role != "user" || len(msgs[0].Content) != 1 || msgs[0].Content[0].Text != "Where is my order A-1002?" {
			t.Fatalf("%v: the first message is %+v, want the text as a user message", args, msgs[0])
		}
	}
	r := h.local("run", "counter", "--text", "hello").want(t, ExitUsage)
	if !strings.Contains(r.stderr, `graph "counter" takes no text input: give --input as a JSON object of channel values (channels: limit`) {
		t.Errorf("counter --text: %s", r.stderr)
	}
	r = h.local("run", "assistant", "--text", "a", "--input", `{"messages": []}`).want(t, ExitUsage)
	if !strings.Contains(r.stderr, "give --input or --text, not both") {
		t.Errorf("both: %s", r.stderr)
	}
}
