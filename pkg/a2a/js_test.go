package a2a_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/superstep/superstep/internal/nodetest"
	"github.com/superstep/superstep/pkg/a2a"
	"github.com/superstep/superstep/pkg/runs"
)

// jsDir is the test-only Node project: @a2a-js/sdk as a third-party client
// (client.mjs) and server (agent.mjs).
const jsDir = "testdata/js"

// nodeProject returns the Node project's directory, installed with npm ci
// unless node_modules already matches package-lock.json (internal/nodetest).
func nodeProject(t *testing.T) string { return nodetest.Project(t, jsDir) }

// jsEvent is one event of a stream, as client.mjs reports it.
type jsEvent struct {
	Kind  string         `json:"kind"`
	ID    string         `json:"id"`
	State string         `json:"state"`
	Text  string         `json:"text"`
	Data  map[string]any `json:"data"`
}

// jsTask is a task (or an error) as client.mjs reports it.
type jsTask struct {
	jsEvent
	ContextID string `json:"contextId"`
	Error     string `json:"error"`
	Message   string `json:"message"`
}

// TestJSClient drives our server with @a2a-js/sdk's client.
func TestJSClient(t *testing.T) {
	dir := nodeProject(t)
	e := newEnv(t, envConfig{events: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "client.mjs", e.url)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("node client.mjs: %v\nstderr: %s\nstdout: %s", err, stderr.String(), stdout)
	}
	var out struct {
		Protocol string `json:"protocol"`
		Steps    struct {
			Send, Get, CancelFinished, GetUnknown jsTask
			Rejected, GetRejected, CancelRejected jsTask
			MessageToFinished                     jsTask
			ResubscribeFinished                   struct {
				Events         []jsEvent
				Error, Message string
			}
			ListTotal struct {
				Count, TotalSize int
				Error            string
			}
			InputRequired       struct{ Asked, Answered jsTask }
			NonBlockingCancel   struct{ Started, Canceled jsTask }
			Stream, Resubscribe struct {
				Events []jsEvent
				Error  string
			}
			List struct {
				Count  int
				States []string
				Error  string
			}
			Legacy struct {
				Protocol  string
				Sent, Got jsTask
				Error     string
			}
		} `json:"steps"`
	}
	if err := json.Unmarshal(stdout, &out); err != nil {
		t.Fatalf("client.mjs output: %v\n%s", err, stdout)
	}
	t.Logf("client.mjs: %s", stdout)
	s := out.Steps
	check := func(what string, ok bool) {
		t.Helper()
		if !ok {
			t.Errorf("%s: unexpected result (see the output above)", what)
		}
	}
	check("protocol", out.Protocol == "1.0")
	check("send", s.Send.State == "TASK_STATE_COMPLETED" && s.Send.Data["reply"] == "HI")
	check("get", s.Get.ID == s.Send.ID && s.Get.State == "TASK_STATE_COMPLETED" && s.Get.Data["reply"] == "HI")
	check("input-required", s.InputRequired.Asked.State == "TASK_STATE_INPUT_REQUIRED" && s.InputRequired.Asked.Text == "what is your name?")
	check("resume", s.InputRequired.Answered.ID == s.InputRequired.Asked.ID && s.InputRequired.Answered.State == "TASK_STATE_COMPLETED" && s.InputRequired.Answered.Data["reply"] == "hello carol")
	check("non-blocking send", s.NonBlockingCancel.Started.State == "TASK_STATE_SUBMITTED" || s.NonBlockingCancel.Started.State == "TASK_STATE_WORKING")
	check("cancel", s.NonBlockingCancel.Canceled.State == "TASK_STATE_CANCELED")
	check("cancel a finished task", strings.Contains(s.CancelFinished.Error, "TaskNotCancelable"))
	check("unknown task", strings.Contains(s.GetUnknown.Error, "TaskNotFound"))
	check("stream", len(s.Stream.Events) >= 3 && s.Stream.Events[0].Kind == "task" &&
		hasEvent(s.Stream.Events, func(e jsEvent) bool { return e.Kind == "artifactUpdate" && e.Data["reply"] == "STREAM ME" }) &&
		hasEvent(s.Stream.Events, func(e jsEvent) bool { return e.Kind == "statusUpdate" && strings.Contains(e.Text, "answer completed") }) &&
		lastJS(s.Stream.Events).State == "TASK_STATE_COMPLETED")
	check("resubscribe", len(s.Resubscribe.Events) >= 2 && s.Resubscribe.Events[0].Kind == "task" && s.Resubscribe.Events[0].State == "TASK_STATE_WORKING" &&
		lastJS(s.Resubscribe.Events).State == "TASK_STATE_CANCELED")
	check("list", s.List.Count == 2)
	check("rejected", s.Rejected.State == "TASK_STATE_REJECTED" && strings.Contains(s.Rejected.Text, `must not be "invalid"`))
	check("get a rejected task", s.GetRejected.ID == s.Rejected.ID && s.GetRejected.State == "TASK_STATE_REJECTED")
	check("cancel a rejected task", strings.Contains(s.CancelRejected.Error, "TaskNotCancelable"))
	check("message to a finished task", strings.Contains(s.MessageToFinished.Error, "UnsupportedOperation"))
	// The SDK reports an error in an SSE stream as a plain Error with the
	// code and reason in its message.
	check("resubscribe to a finished task", strings.Contains(s.ResubscribeFinished.Message, "(Code: -32004)") && strings.Contains(s.ResubscribeFinished.Message, "UNSUPPORTED_OPERATION"))
	check("list totalSize", s.ListTotal.Count == 1 && s.ListTotal.TotalSize == 3)
	check("0.3 client", s.Legacy.Protocol == "0.3" && s.Legacy.Sent.State == "TASK_STATE_COMPLETED" && s.Legacy.Sent.Data["reply"] == "OLD CLIENT" && s.Legacy.Got.ID == s.Legacy.Sent.ID)
}

func hasEvent(evs []jsEvent, f func(jsEvent) bool) bool {
	for _, e := range evs {
		if f(e) {
			return true
		}
	}
	return false
}

func lastJS(evs []jsEvent) jsEvent {
	if len(evs) == 0 {
		return jsEvent{}
	}
	return evs[len(evs)-1]
}

// startJSAgents starts agent.mjs on a free loopback port and returns its
// base URL; the process ends with the test.
func startJSAgents(t *testing.T, dir string) string {
	t.Helper()
	cmd := exec.Command("node", "agent.mjs", "0")
	cmd.Dir = dir
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = stdin.Close() // agent.mjs exits when its stdin closes
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	line := make(chan string, 1)
	go func() {
		r := bufio.NewReader(stdout)
		l, _ := r.ReadString('\n')
		line <- l
		_, _ = io.Copy(io.Discard, r)
	}()
	select {
	case l := <-line:
		var hello struct{ URL string }
		if err := json.Unmarshal([]byte(l), &hello); err != nil || hello.URL == "" {
			t.Fatalf("agent.mjs did not start: %q %v\nstderr: %s", l, err, stderr.String())
		}
		return hello.URL
	case <-time.After(30 * time.Second):
		t.Fatalf("agent.mjs did not start in 30s\nstderr: %s", stderr.String())
	}
	return ""
}

// TestRemoteAgentJS calls agents served by @a2a-js/sdk's own server from
// our remote-agent node, over A2A 1.0 and 0.3.
func TestRemoteAgentJS(t *testing.T) {
	dir := nodeProject(t)
	base := startJSAgents(t, dir)
	for _, tc := range []struct {
		name, path string
		listable   bool
	}{{"1.0", "/v1", true}, {"0.3", "/v03", false}} {
		t.Run(tc.name, func(t *testing.T) {
			runRemoteCases(t, remoteCases{
				cardURL:  base + tc.path,
				complete: "hello there", wantComplete: "echo: hello there",
				fail: "fail", wantFailure: "out of cheese",
				question: "ask", wantQuestion: "what is your name?",
				answer: "dave", wantAnswer: "hello dave",
				auth: true, listable: tc.listable,
			})
		})
	}
}

// TestJSThreadConversation holds a two-turn conversation with
// @a2a-js/sdk's client (threads.mjs): the second message, in the first
// task's context, starts a task that sees the first one's state.
func TestJSThreadConversation(t *testing.T) {
	dir := nodeProject(t)
	e := threadEnv(t, true, a2a.WithThreadStrategy(runs.StrategyReject)) // the busy step wants a refusal
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "threads.mjs", e.url)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("node threads.mjs: %v\nstderr: %s\nstdout: %s", err, stderr.String(), stdout)
	}
	type summary struct {
		ID, ContextID, State, Reply string
		History                     []string
		Error, Message              string
	}
	var out struct {
		Steps struct {
			First, Second, Get, BadContext summary
			Busy                           struct {
				Slow     string
				Refused  summary
				Canceled string
				Error    string
			}
		} `json:"steps"`
	}
	if err := json.Unmarshal(stdout, &out); err != nil {
		t.Fatalf("threads.mjs output: %v\n%s", err, stdout)
	}
	t.Logf("threads.mjs: %s", stdout)
	s := out.Steps
	check := func(what string, ok bool) {
		t.Helper()
		if !ok {
			t.Errorf("%s: unexpected result (see the output above)", what)
		}
	}
	turn1 := `you said "my name is Ana"; before that: nothing`
	turn2 := `you said "what is my name?"; before that: "my name is Ana"`
	check("first turn", s.First.State == "TASK_STATE_COMPLETED" && s.First.ContextID != "" && s.First.Reply == turn1)
	check("second turn sees the first", s.Second.State == "TASK_STATE_COMPLETED" && s.Second.ContextID == s.First.ContextID && s.Second.ID != s.First.ID && s.Second.Reply == turn2)
	check("history is the conversation", strings.Join(s.Second.History, " | ") == "user: my name is Ana | agent: "+turn1+" | user: what is my name? | agent: "+turn2)
	check("historyLength", strings.Join(s.Get.History, " | ") == "user: what is my name? | agent: "+turn2)
	check("busy context refused", s.Busy.Error == "" && strings.Contains(s.Busy.Refused.Message, s.Busy.Slow) && strings.Contains(s.Busy.Refused.Message, "one task per context") &&
		strings.Contains(s.Busy.Refused.Error, "UnsupportedOperation"))
	check("busy task goes on", s.Busy.Canceled == "TASK_STATE_CANCELED")
	check("bad contextId", s.BadContext.Error != "" && strings.Contains(s.BadContext.Message, `contextId "not an id!"`) && s.BadContext.ID == "")
	// Nothing was stored for the refused message: the context has the
	// two turns and the cancelled task.
	page, err := e.svc.List(ctx, runs.Filter{ContextID: s.First.ContextID})
	if err != nil || len(page.Runs) != 3 {
		t.Errorf("context %s holds %d tasks (%v), want 3", s.First.ContextID, len(page.Runs), err)
	}
}
