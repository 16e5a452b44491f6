//go:build !superstep.lambda

package superstep

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// startDev serves dev in-process with token tok and returns its URL; the
// server stops (SIGTERM) when the test ends.
func startDev(t *testing.T, extra ...string) string {
	t.Helper()
	var out, errb syncBuffer
	env, sigs := serverEnv(&out, &errb)
	code := make(chan int, 1)
	args := append([]string{"dev", "--addr", "127.0.0.1:0", "--dir", t.TempDir(), "--token", "tok", "--grace", "2s"}, extra...)
	go func() { code <- Run(context.Background(), env, args, testGraphs(env.Getenv)) }()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("dev's log:\n%s", errb.String())
		}
		stopServer(t, sigs, code, &errb)
	})
	return waitServing(t, &out, &errb, code)
}

// threadShown is the --json output of threads show.
type threadShown struct {
	ThreadID    string `json:"thread_id"`
	Status      string `json:"status"`
	ActiveRunID string `json:"active_run_id"`
	State       struct {
		RunID  string `json:"run_id"`
		Step   int    `json:"step"`
		Values struct {
			Messages []struct {
				Role    string `json:"role"`
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"messages"`
		} `json:"values"`
	} `json:"state"`
}

// texts lists the thread's messages as "role: text" (text blocks only).
func (s threadShown) texts() []string {
	var out []string
	for _, m := range s.State.Values.Messages {
		var b strings.Builder
		for _, c := range m.Content {
			b.WriteString(c.Text)
		}
		if b.Len() > 0 {
			out = append(out, m.Role+": "+b.String())
		}
	}
	return out
}

func (h *harness) showThread(t *testing.T, id string) threadShown {
	t.Helper()
	r := h.run("threads", "show", id, "--json").want(t, ExitOK)
	var s threadShown
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatalf("threads show --json: %v\n%s", err, r.stdout)
	}
	return s
}

// runIDOf reads the run id of a "run X of G created on thread T: ..." line.
func runIDOf(t *testing.T, stdout string) string {
	t.Helper()
	rest, ok := strings.CutPrefix(stdout, "run ")
	if !ok {
		t.Fatalf("no run in %q", stdout)
	}
	return strings.Fields(rest)[0]
}

func wantOut(t *testing.T, r result, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(r.stdout+r.stderr, s) {
			t.Errorf("output lacks %q:\nstdout:\n%s\nstderr:\n%s", s, r.stdout, r.stderr)
		}
	}
}

// TestThreadsCommands holds a conversation with the assistant through
// 'superstep threads' against a dev server: each run continues the
// thread; busy threads, forks, state updates and deletion behave as
// documented, and A2A messages in the thread's context continue it too.
func TestThreadsCommands(t *testing.T) {
	h := newHarness(t)
	h.env[ServerEnv] = startDev(t)
	h.env[TokenEnv] = "tok"

	wantOut(t, h.run("threads", "create", "--id", "chat-1", "--metadata", `{"user": "ana"}`).want(t, ExitOK), "thread chat-1 created")
	h.run("threads", "create", "--id", "chat-1", "--metadata", `{"user": "ana"}`).want(t, ExitOK) // idempotent
	wantOut(t, h.run("threads", "create", "--id", "chat-1", "--metadata", `{"user": "bob"}`).want(t, ExitUsage), "already exists with other metadata")

	// Two turns: the second run starts from the first one's state.
	r := h.run("threads", "run", "chat-1", "assistant", "--text", "Where is my order A-1002?", "--wait").want(t, ExitOK)
	wantOut(t, r, "created on thread chat-1: completed")
	first := runIDOf(t, r.stdout)
	r = h.run("threads", "run", "chat-1", "assistant", "--input", `{"messages": [{"role": "user", "content": [{"text": "And A-1003?"}]}]}`, "--wait").want(t, ExitOK)
	second := runIDOf(t, r.stdout)
	s := h.showThread(t, "chat-1")
	want := []string{
		"user: Where is my order A-1002?", "assistant: Let me look that up.", "assistant: Here is what I found. A-1002, your walnut tray, is shipped.",
		"user: And A-1003?", "assistant: Let me look that up.", "assistant: Here is what I found. A-1003, your linen apron, is processing.",
	}
	if got := s.texts(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the thread's conversation:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if s.Status != "idle" || s.State.RunID != second {
		t.Errorf("thread: %+v; want idle at run %s", s, second)
	}
	r = h.run("threads", "show", "chat-1").want(t, ExitOK)
	if !regexpMatch(`(?m)^Thread:\s+chat-1\nStatus:\s+idle\n`, r.stdout) || !regexpMatch(`(?m)^At:\s+step \d+ of run `+second+`$`, r.stdout) {
		t.Errorf("threads show:\n%s", r.stdout)
	}
	wantOut(t, r, `Metadata:  {"user":"ana"}`, "\nState:\n{")
	// What the thread stores with its two runs, segments (the messages) among it.
	if !regexpMatch(`(?m)^Stored:\s+[\d.]+ KB \(checkpoints [\d.]+ K?B, segments [\d.]+ K?B, events [\d.]+ K?B, records [\d.]+ K?B\) in 2 runs$`, r.stdout) {
		t.Errorf("threads show: no Stored line for 2 runs:\n%s", r.stdout)
	}
	r = h.run("threads", "runs", "chat-1").want(t, ExitOK)
	// RUN ID, GRAPH, VERSION (the graph's fingerprint), STATUS.
	if !regexpMatch(`(?m)^`+second+`\s+assistant\s+[0-9a-f]{16}\s+completed`, r.stdout) || !regexpMatch(`(?m)^`+first+`\s+assistant\s+[0-9a-f]{16}\s+completed`, r.stdout) {
		t.Errorf("threads runs:\n%s", r.stdout)
	}
	r = h.run("threads", "history", "chat-1", "--limit", "3").want(t, ExitOK)
	if !regexpMatch(`(?m)^RUN ID\s+STEP\s+GRAPH\s+NODES`, r.stdout) || !regexpMatch(`(?m)^`+second+`\s+\d+\s+assistant\s+model:completed`, r.stdout) || strings.Count(r.stdout, "\n") != 4 {
		t.Errorf("threads history --limit 3:\n%s", r.stdout)
	}
	// The steps before: the token the command gave, on stderr.
	tok := regexp.MustCompile(`more steps \(older\): add --page-token (\S+)`).FindStringSubmatch(r.stderr)
	if tok == nil {
		t.Fatalf("threads history --limit 3 does not say how to list the older steps:\n%s", r.stderr)
	}
	older := h.run("threads", "history", "chat-1", "--limit", "3", "--page-token", tok[1]).want(t, ExitOK)
	if strings.Count(older.stdout, "\n") < 2 || older.stdout == r.stdout {
		t.Errorf("threads history --page-token: the steps before:\n%s", older.stdout)
	}
	var hist struct {
		Steps []struct {
			RunID string `json:"run_id"`
			Step  int    `json:"step"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(h.run("threads", "history", "chat-1", "--json", "--limit", "100").want(t, ExitOK).stdout), &hist); err != nil {
		t.Fatal(err)
	}
	runsSeen := map[string]bool{}
	for _, st := range hist.Steps {
		runsSeen[st.RunID] = true
	}
	if !runsSeen[first] || !runsSeen[second] || hist.Steps[0].RunID != second {
		t.Errorf("history --json: %+v; want the steps of %s then %s", hist.Steps, second, first)
	}
	wantOut(t, h.run("threads", "list").want(t, ExitOK), "chat-1", "idle")

	// A run that waits for approval holds the thread.
	r = h.run("threads", "run", "chat-1", "assistant", "--text", "Please refund A-1001", "--wait").want(t, ExitInterrupted)
	held := runIDOf(t, r.stdout)
	wantOut(t, h.run("threads", "run", "chat-1", "assistant", "--text", "hello?").want(t, ExitUsage), `thread "chat-1" is busy with run "`+held+`"`, "strategy enqueue, interrupt or rollback")
	wantOut(t, h.run("threads", "update-state", "chat-1", "--as-node", "model", "--values", `{"messages": []}`).want(t, ExitUsage), "is busy")
	wantOut(t, h.run("threads", "delete", "chat-1").want(t, ExitUsage), "cancel them before deleting")
	// rollback: the waiting run is cancelled and its turn discarded.
	rb := runIDOf(t, h.run("threads", "run", "chat-1", "assistant", "--text", "Never mind. Where is A-1001?", "--strategy", "rollback", "--wait").want(t, ExitOK).stdout)
	wantOut(t, h.run("runs", "show", held).want(t, ExitOK), "cancelled", "Superseded:", "superseded by run "+rb+" (rolled back: its steps were discarded)")
	got := strings.Join(h.showThread(t, "chat-1").texts(), "\n")
	if strings.Contains(got, "Please refund") || !strings.Contains(got, "Never mind") || !strings.Contains(got, "A-1002, your walnut tray") {
		t.Errorf("after rollback the conversation is:\n%s", got)
	}

	// Fork at the end of the first run; update the fork's state.
	wantOut(t, h.run("threads", "fork", "chat-1", "--run", first, "--id", "chat-2").want(t, ExitOK), "thread chat-2 forked from chat-1 at "+first+"@")
	if got := h.showThread(t, "chat-2").texts(); len(got) != 3 || got[0] != "user: Where is my order A-1002?" {
		t.Errorf("the fork's conversation: %q", got)
	}
	wantOut(t, h.run("threads", "update-state", "chat-2", "--as-node", "model", "--values", `{"messages": [{"role": "assistant", "content": [{"text": "A note from support."}]}]}`).want(t, ExitOK),
		"thread chat-2 updated as model of assistant")
	if got := h.showThread(t, "chat-2").texts(); len(got) != 4 || got[3] != "assistant: A note from support." {
		t.Errorf("after update-state: %q", got)
	}
	if got := h.showThread(t, "chat-1").texts(); len(got) != 9 {
		t.Errorf("the fork changed its source: %d messages, want 9", len(got))
	}

	// A2A: a message whose contextId is the thread continues it.
	body := `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"messageId": "m-1", "role": "ROLE_USER", "contextId": "chat-2", "parts": [{"text": "And A-1003?"}]}}}`
	req, _ := http.NewRequest(http.MethodPost, h.env[ServerEnv]+"/a2a/assistant", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer tok")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var rpc struct {
		Result struct {
			Task struct {
				ID        string `json:"id"`
				ContextID string `json:"contextId"`
				History   []struct {
					Role string `json:"role"`
				} `json:"history"`
			} `json:"task"`
		} `json:"result"`
	}
	if err := json.Unmarshal(raw, &rpc); err != nil || rpc.Result.Task.ContextID != "chat-2" {
		t.Fatalf("A2A SendMessage in context chat-2: %v\n%s", err, raw)
	}
	if n := len(rpc.Result.Task.History); n < 6 {
		t.Errorf("the A2A task's history has %d messages; want the thread's conversation (6 or more): %s", n, raw)
	}
	wantOut(t, h.run("threads", "runs", "chat-2").want(t, ExitOK), rpc.Result.Task.ID)
	if got := h.showThread(t, "chat-2").texts(); len(got) < 6 || got[4] != "user: And A-1003?" {
		t.Errorf("after the A2A message: %q", got)
	}

	wantOut(t, h.run("threads", "delete", "chat-2").want(t, ExitOK), "thread chat-2 deleted")
	wantOut(t, h.run("threads", "show", "chat-2").want(t, ExitUsage), `thread "chat-2" does not exist`)
}

// TestThreadsBadInput: each mistake is a usage error that says what to
// fix, and changes nothing.
func TestThreadsBadInput(t *testing.T) {
	h := newHarness(t)
	h.env[ServerEnv] = startDev(t)
	h.env[TokenEnv] = "tok"
	h.run("threads", "create", "--id", "t1").want(t, ExitOK)
	tests := []struct {
		name string
		args []string
		msg  string
	}{
		{"unknown strategy", []string{"threads", "run", "t1", "assistant", "--text", "hi", "--strategy", "later"}, `--strategy "later": want reject, enqueue, interrupt or rollback`},
		{"input and text", []string{"threads", "run", "t1", "assistant", "--text", "hi", "--input", "{}"}, "give --input or --text, not both"},
		{"unknown thread", []string{"threads", "run", "nope", "assistant", "--text", "hi"}, `thread "nope" does not exist; create it first`},
		{"thread id not an id", []string{"threads", "create", "--id", "a b"}, `thread id "a b" must be 1 to 128 letters`},
		{"run on a bad thread id", []string{"threads", "run", "a b", "assistant", "--text", "hi"}, `thread id "a b" must be`},
		{"unknown graph", []string{"threads", "run", "t1", "nope", "--input", "{}"}, `graph "nope" is not registered`},
		{"input the graph refuses", []string{"threads", "run", "t1", "counter", "--input", `{"limit": 0}`}, "limit must be between 1 and 1000"},
		{"metadata not an object", []string{"threads", "create", "--id", "t2", "--metadata", "[1]"}, "--metadata must be a JSON object"},
		{"fork step without run", []string{"threads", "fork", "t1", "--step", "1"}, "--step needs --run"},
		{"fork of a run not in the thread", []string{"threads", "fork", "t1", "--run", "nope"}, `thread "t1" has no run "nope"`},
		{"update without node", []string{"threads", "update-state", "t1", "--values", "{}"}, "--as-node is required"},
		{"update of a thread without runs", []string{"threads", "update-state", "t1", "--as-node", "model", "--values", `{"messages": []}`}, `thread "t1" has no run yet: give --graph`},
		{"update naming an unknown node", []string{"threads", "update-state", "t1", "--graph", "assistant", "--as-node", "nope", "--values", `{"messages": []}`}, `graph "assistant" has no node "nope"`},
		{"update naming an unknown channel", []string{"threads", "update-state", "t1", "--graph", "assistant", "--as-node", "model", "--values", `{"nope": 1}`}, `"nope" is not a channel`},
		{"history limit", []string{"threads", "history", "t1", "--limit", "100000"}, "limit"},
		{"threads group", []string{"threads", "bogus"}, `unknown command "bogus" for "superstep threads"`},
		{"show without id", []string{"threads", "show"}, "missing THREAD_ID"},
		{"run without graph", []string{"threads", "run", "t1"}, "missing GRAPH"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.run(tt.args...).want(t, ExitUsage)
			if !strings.Contains(r.stderr, tt.msg) {
				t.Errorf("stderr does not say %q:\n%s", tt.msg, r.stderr)
			}
		})
	}
	// Nothing was stored: t1 is the only thread, with no run.
	var list struct {
		Threads []struct {
			ThreadID string `json:"thread_id"`
			Head     any    `json:"head"`
		} `json:"threads"`
	}
	if err := json.Unmarshal([]byte(h.run("threads", "list", "--json").want(t, ExitOK).stdout), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Threads) != 1 || list.Threads[0].ThreadID != "t1" || list.Threads[0].Head != nil {
		t.Errorf("threads after bad input: %+v; want t1 alone, without a step", list.Threads)
	}
	wantOut(t, h.run("threads", "runs", "t1").want(t, ExitOK), "RUN ID")
	if r := h.run("threads", "runs", "t1", "--json").want(t, ExitOK); !strings.Contains(r.stdout, `"runs": []`) {
		t.Errorf("runs of t1 after bad input:\n%s", r.stdout)
	}
	// dev refuses an unknown A2A strategy before it serves.
	h2 := newHarness(t)
	r := h2.run("dev", "--addr", "127.0.0.1:0", "--dir", t.TempDir(), "--a2a-strategy", "later").want(t, ExitUsage)
	if !strings.Contains(r.stderr, `--a2a-strategy "later": want reject, enqueue, interrupt, rollback or parallel`) {
		t.Errorf("dev --a2a-strategy later:\n%s", r.stderr)
	}
}
