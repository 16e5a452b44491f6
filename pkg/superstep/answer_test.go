//go:build !superstep.lambda

package superstep

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestAgentRunsShowTheAnswer holds a conversation with the assistant
// through the runs commands: --wait and runs show print the tool calls
// and the answer rather than the state, say why an answer was refused,
// and --json keeps the whole state.
func TestAgentRunsShowTheAnswer(t *testing.T) {
	h := newHarness(t)
	h.env[ServerEnv] = startDev(t)
	h.env[TokenEnv] = "tok"

	h.run("threads", "create", "--id", "chat-cli").want(t, ExitOK)
	r := h.run("threads", "run", "chat-cli", "assistant", "--text", "Please refund order A-1001, it arrived broken.", "--wait").want(t, ExitInterrupted)
	id := runIDOf(t, r.stdout)
	wantOut(t, r,
		"Tool calls:\n  lookup_order {\"order_id\":\"A-1001\"} -> ",
		"refund {\"order_id\":\"A-1001\",\"cents\":4500,\"reason\":\"customer request\"} -> (no result yet)",
		"Waiting for an answer (superstep runs resume "+id+" --answer VALUE):")
	if strings.Contains(r.stdout, "State:") || strings.Contains(r.stdout, "refused") {
		t.Errorf("an agent's run shows its state or a refusal nobody made:\n%s", r.stdout)
	}

	// An answer the tool's approval cannot use: the run waits again,
	// and both resume --wait and show say why.
	r = h.run("runs", "resume", id, "--answer", `{"decision": "maybe"}`, "--wait").want(t, ExitInterrupted)
	wantOut(t, r, `The last answer was refused: `, `the decision "maybe" is not approve, edit or reject`)
	r = h.run("runs", "show", id).want(t, ExitOK)
	wantOut(t, r, `The last answer was refused: `, `the decision "maybe" is not approve, edit or reject`, "Tool calls:")

	r = h.run("runs", "resume", id, "--answer", "approve", "--wait").want(t, ExitOK)
	wantOut(t, r,
		"refund {\"order_id\":\"A-1001\",\"cents\":4500,\"reason\":\"customer request\"} -> refunded 45.00 on order A-1001 (customer request)",
		"\nAnswer:\n")
	if strings.Contains(r.stdout, "refused") || strings.Contains(r.stdout, "Waiting for an answer") {
		t.Errorf("a completed run still shows a question:\n%s", r.stdout)
	}
	r = h.run("runs", "show", id).want(t, ExitOK)
	wantOut(t, r, "Answer:\n", "Status:   completed")
	if strings.Contains(r.stdout, "State:") {
		t.Errorf("runs show prints an agent's whole state:\n%s", r.stdout)
	}

	// --json: the whole state.
	r = h.run("runs", "show", id, "--json").want(t, ExitOK)
	var d struct {
		Values struct {
			Messages []json.RawMessage `json:"messages"`
		} `json:"values"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil || len(d.Values.Messages) < 5 {
		t.Fatalf("runs show --json: %v, %d messages\n%s", err, len(d.Values.Messages), r.stdout)
	}
}

// TestProgramName checks that a user's binary calls itself by its own
// name in help and in the hints it prints.
func TestProgramName(t *testing.T) {
	for _, tc := range []struct{ arg0, want string }{
		{"/usr/local/bin/shop", "shop"},
		{`shop.exe`, "shop"},
		{"/tmp/go-build123/b001/exe/orders", "orders"},
		{"", "superstep"},
	} {
		if got := programName(tc.arg0); got != tc.want {
			t.Errorf("programName(%q) = %q, want %q", tc.arg0, got, tc.want)
		}
	}

	h := newHarness(t)
	h.opts = append(h.opts, WithName("shop"))
	r := h.run("run", "--help").want(t, ExitOK)
	wantOut(t, r, "shop run GRAPH", "  shop run counter --input")
	if strings.Contains(r.stdout, "superstep run") || strings.Contains(r.stdout, "superstep resume") {
		t.Errorf("help of a binary named shop says superstep:\n%s", r.stdout)
	}
	r = h.local("run", "support-triage", "--input", triageInput(t)).want(t, ExitInterrupted)
	wantOut(t, r, "answer and resume it with:\n  shop resume ")
	r = h.local("run", "nope").want(t, ExitUsage)
	wantOut(t, r, "(see 'shop graph list')")
}
