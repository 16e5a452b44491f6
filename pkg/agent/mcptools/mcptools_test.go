package mcptools_test

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/agent"
	"github.com/superstep/superstep/pkg/agent/mcptools"
	"github.com/superstep/superstep/pkg/pregel"
)

// transports builds, for each way of reaching the test server, the
// Server that reaches one logging to logPath and blocking on blockPath.
var transports = map[string]func(t *testing.T, logPath, blockPath string) mcptools.Server{
	"stdio": func(t *testing.T, logPath, blockPath string) mcptools.Server {
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		return mcptools.Server{Name: "shop", Stdio: &mcptools.Stdio{Command: exe,
			Env: []string{"MCPTOOLS_TEST_SERVER=1", "MCPTOOLS_TEST_LOG=" + logPath, "MCPTOOLS_TEST_BLOCK=" + blockPath}}}
	},
	"http": func(t *testing.T, logPath, blockPath string) mcptools.Server {
		hs := serveHTTP(t, newTestServer(logPath, blockPath), "s3cret")
		return mcptools.Server{Name: "shop", HTTP: &mcptools.HTTP{URL: hs.URL, Headers: map[string]string{"Authorization": "Bearer s3cret"}}}
	},
}

func connect(t *testing.T, servers ...mcptools.Server) *mcptools.Toolset {
	t.Helper()
	ts, err := mcptools.Connect(t.Context(), servers...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ts.Close() })
	return ts
}

func call(id, name, input string) agent.Block {
	return agent.Block{ToolCall: &agent.ToolCall{ID: id, Name: name, Input: json.RawMessage(input)}}
}

func turn(blocks ...agent.Block) agent.Response {
	return agent.Response{Message: agent.Message{Role: agent.RoleAssistant, Content: blocks}}
}

func results(t *testing.T, res *pregel.Result) map[string]*agent.ToolResult {
	t.Helper()
	var st agent.State
	if err := res.Decode(&st); err != nil {
		t.Fatal(err)
	}
	out := map[string]*agent.ToolResult{}
	for _, m := range st.Messages {
		for _, b := range m.Content {
			if b.ToolResult != nil {
				out[b.ToolResult.ToolCallID] = b.ToolResult
			}
		}
	}
	return out
}

func TestToolsAreListedAndCalled(t *testing.T) {
	for name, srv := range transports {
		t.Run(name, func(t *testing.T) {
			logPath := filepath.Join(t.TempDir(), "calls")
			s := srv(t, logPath, "")
			s.Prefix = "shop_"
			ts := connect(t, s)
			specs := map[string]agent.ToolSpec{}
			for _, tool := range ts.Tools() {
				specs[tool.Spec().Name] = tool.Spec()
			}
			lookup, ok := specs["shop_lookup_order"]
			if !ok || len(specs) != 5 {
				t.Fatalf("tools %v", specs)
			}
			if lookup.Description != "Looks an order up by id" || !strings.Contains(string(lookup.InputSchema), `"order_id"`) ||
				!strings.Contains(string(lookup.InputSchema), "the order's id") {
				t.Fatalf("lookup_order's spec %+v, schema %s", lookup, lookup.InputSchema)
			}
			model := agent.ScriptedTurns(
				turn(call("t1", "shop_lookup_order", `{"order_id":"A-1"}`), call("t2", "shop_add", `{"a":2,"b":3}`)),
				turn(agent.Block{Text: "done"}))
			g, err := agent.New(agent.Config{Model: model, Tools: ts.Tools()})
			if err != nil {
				t.Fatal(err)
			}
			res, err := g.Run(t.Context(), agent.TextInput("where is A-1?"))
			if err != nil || res.Status != pregel.RunCompleted {
				t.Fatalf("run: %v %v", res, err)
			}
			got := results(t, res)
			if r := got["t1"]; r == nil || r.Error || r.Content != "order A-1 has shipped" {
				t.Fatalf("t1: %+v", r)
			}
			if r := got["t2"]; r == nil || r.Error || r.Content != "5" {
				t.Fatalf("t2: %+v", r)
			}
		})
	}
}

// crashAfter cancels the run once n tool results are recorded: the process
// "dies" with the rest of the step unrecorded.
type crashAfter struct {
	pregel.Checkpointer
	n       int32
	seen    atomic.Int32
	control *pregel.Control
}

func (c *crashAfter) RecordTask(ctx context.Context, runID string, step int, r pregel.TaskResult) (pregel.TaskResult, error) {
	stored, err := c.Checkpointer.RecordTask(ctx, runID, step, r)
	if err == nil && r.Node == agent.ToolsNode && r.Final() && c.seen.Add(1) == c.n {
		c.control.Cancel()
	}
	return stored, err
}

func TestCrashAfterSecondOfThreeCallsCallsOnlyTheThirdAgain(t *testing.T) {
	for name, srv := range transports {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			logPath, blockPath := filepath.Join(dir, "calls"), filepath.Join(dir, "block")
			// C-3 waits, in the first process, until the process dies.
			if err := os.WriteFile(blockPath, []byte("C-3"), 0o600); err != nil {
				t.Fatal(err)
			}
			ts := connect(t, srv(t, logPath, blockPath))
			model := agent.ScriptedTurns(
				turn(call("t1", "lookup_order", `{"order_id":"A-1"}`), call("t2", "lookup_order", `{"order_id":"B-2"}`), call("t3", "lookup_order", `{"order_id":"C-3"}`)),
				turn(agent.Block{Text: "All three have shipped."}))
			g, err := agent.New(agent.Config{Model: model, Tools: ts.Tools()})
			if err != nil {
				t.Fatal(err)
			}
			store := pregel.NewMemoryStore()
			ctl := &pregel.Control{}
			res, err := g.Run(t.Context(), agent.TextInput("check my orders"),
				pregel.WithRunID("r1"), pregel.WithStore(&crashAfter{Checkpointer: store, n: 2, control: ctl}), pregel.WithControl(ctl))
			if err != nil || res.Status != pregel.RunCancelled {
				t.Fatalf("first process: %v %v, want cancelled", res.Status, err)
			}
			if n := calls(t, logPath); n["A-1"] != 1 || n["B-2"] != 1 || n["C-3"] != 0 {
				t.Fatalf("before the crash: %v", n)
			}
			// The process dies: its connections (and a stdio server) go
			// with it, so no late call of its own reaches a server.
			ts.Close()
			if err := os.Remove(blockPath); err != nil {
				t.Fatal(err)
			}
			// A new process: new connections, the same store.
			ts2 := connect(t, srv(t, logPath, blockPath))
			g2, err := agent.New(agent.Config{Model: model, Tools: ts2.Tools()})
			if err != nil {
				t.Fatal(err)
			}
			res, err = g2.Resume(t.Context(), "r1", pregel.WithStore(store))
			if err != nil || res.Status != pregel.RunCompleted {
				t.Fatalf("resume: %v %v", res.Status, err)
			}
			if n := calls(t, logPath); n["A-1"] != 1 || n["B-2"] != 1 || n["C-3"] != 1 {
				t.Fatalf("after the resume: %v, want each order looked up once", n)
			}
			if got := results(t, res); len(got) != 3 || got["t3"].Error {
				t.Fatalf("results %+v", got)
			}
		})
	}
}

func TestApprovalBeforeAnMCPTool(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "calls")
	ts := connect(t, transports["http"](t, logPath, ""))
	model := agent.ScriptedTurns(turn(call("t1", "lookup_order", `{"order_id":"A-1"}`)), turn(agent.Block{Text: "ok"}))
	g, err := agent.New(agent.Config{Model: model, Tools: ts.Tools(), Approve: []string{"lookup_order"}})
	if err != nil {
		t.Fatal(err)
	}
	store := pregel.NewMemoryStore()
	res, err := g.Run(t.Context(), agent.TextInput("A-1?"), pregel.WithRunID("r"), pregel.WithStore(store))
	if err != nil || res.Status != pregel.RunInterrupted || calls(t, logPath)["A-1"] != 0 {
		t.Fatalf("run: %v %v, calls %v", res.Status, err, calls(t, logPath))
	}
	res, err = g.Resume(t.Context(), "r", pregel.WithStore(store), pregel.WithResume(agent.Approval{Decision: agent.Edit, Input: json.RawMessage(`{"order_id":"B-2"}`)}))
	if err != nil || res.Status != pregel.RunCompleted {
		t.Fatalf("resume: %v %v", res.Status, err)
	}
	if n := calls(t, logPath); n["A-1"] != 0 || n["B-2"] != 1 {
		t.Fatalf("calls %v, want the edited call only", n)
	}
}

// TestBadCallsReachTheModel: each bad call ends as a failed tool result
// that says what happened, and the run goes on to the model's answer.
func TestBadCallsReachTheModel(t *testing.T) {
	for name, srv := range transports {
		t.Run(name, func(t *testing.T) {
			s := srv(t, "", "")
			s.Timeout = 300 * time.Millisecond
			ts := connect(t, s)
			model := agent.ScriptedTurns(
				turn(call("slow", "sleep", `{"seconds":3}`),
					call("err", "fail", `{}`),
					call("schema", "add", `{"a":"two","b":3}`),
					call("missing", "add", `{"a":2}`),
					call("notjson", "add", `{"a":`)),
				turn(agent.Block{Text: "sorry"}))
			g, err := agent.New(agent.Config{Model: model, Tools: ts.Tools()})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			res, err := g.Run(t.Context(), agent.TextInput("go"))
			if err != nil || res.Status != pregel.RunCompleted {
				t.Fatalf("run: %v %v", res, err)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Fatalf("the run took %v", d)
			}
			got := results(t, res)
			want := map[string]string{
				"slow":    `MCP server "shop" did not answer within 300ms`,
				"err":     "the warehouse is closed",
				"schema":  "fit its input schema",
				"missing": `"b"`,
				"notjson": "JSON object",
			}
			for id, w := range want {
				if r := got[id]; r == nil || !r.Error || !strings.Contains(r.Content, w) {
					t.Errorf("%s: %+v, want an error saying %q", id, r, w)
				}
			}
		})
	}
}

func TestServerDown(t *testing.T) {
	// Nothing listens on a port just closed.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String() + "/mcp"
	l.Close()
	_, err = mcptools.Connect(t.Context(), mcptools.Server{Name: "crm", HTTP: &mcptools.HTTP{URL: url}})
	if err == nil || !strings.Contains(err.Error(), `MCP server "crm" cannot be reached`) {
		t.Fatalf("connect to a closed port: %v", err)
	}
	_, err = mcptools.Connect(t.Context(), mcptools.Server{Name: "crm", Stdio: &mcptools.Stdio{Command: filepath.Join(t.TempDir(), "no-such-server")}})
	if err == nil || !strings.Contains(err.Error(), `MCP server "crm" cannot be reached`) {
		t.Fatalf("start a missing command: %v", err)
	}
	// A wrong token: the server says 401.
	hs := serveHTTP(t, newTestServer("", ""), "s3cret")
	_, err = mcptools.Connect(t.Context(), mcptools.Server{Name: "crm", HTTP: &mcptools.HTTP{URL: hs.URL, Headers: map[string]string{"Authorization": "Bearer wrong"}}})
	if err == nil || !strings.Contains(err.Error(), `MCP server "crm" cannot be reached`) || !strings.Contains(err.Error(), "Unauthorized") {
		t.Fatalf("a wrong token: %v", err)
	}
}

// TestServerGoesDownMidRun: calls to a server that went away fail as tool
// results; a stdio server that exited is started again for the next call.
func TestServerGoesDownMidRun(t *testing.T) {
	t.Run("http", func(t *testing.T) {
		hs := serveHTTP(t, newTestServer("", ""), "")
		ts := connect(t, mcptools.Server{Name: "shop", HTTP: &mcptools.HTTP{URL: hs.URL}})
		hs.Close()
		model := agent.ScriptedTurns(turn(call("t1", "add", `{"a":1,"b":2}`)), turn(agent.Block{Text: "sorry"}))
		g, err := agent.New(agent.Config{Model: model, Tools: ts.Tools()})
		if err != nil {
			t.Fatal(err)
		}
		res, err := g.Run(t.Context(), agent.TextInput("go"))
		if err != nil || res.Status != pregel.RunCompleted {
			t.Fatalf("run: %v %v", res, err)
		}
		if r := results(t, res)["t1"]; r == nil || !r.Error || !strings.Contains(r.Content, `MCP server "shop"`) {
			t.Fatalf("t1: %+v", r)
		}
	})
	t.Run("stdio", func(t *testing.T) {
		ts := connect(t, transports["stdio"](t, "", ""))
		model := agent.ScriptedTurns(turn(call("t1", "exit", `{}`)), turn(call("t2", "add", `{"a":1,"b":2}`)), turn(agent.Block{Text: "3"}))
		g, err := agent.New(agent.Config{Model: model, Tools: ts.Tools()})
		if err != nil {
			t.Fatal(err)
		}
		res, err := g.Run(t.Context(), agent.TextInput("go"))
		if err != nil || res.Status != pregel.RunCompleted {
			t.Fatalf("run: %v %v", res, err)
		}
		got := results(t, res)
		if r := got["t1"]; r == nil || !r.Error {
			t.Fatalf("t1: %+v", r)
		}
		if r := got["t2"]; r == nil || r.Error || r.Content != "3" {
			t.Fatalf("t2 (on a restarted server): %+v", r)
		}
	})
}

func TestNameCollisions(t *testing.T) {
	ts := connect(t, transports["http"](t, "", ""))
	goAdd := agent.MustTool("add", "Adds", func(_ context.Context, in struct{ A, B int }) (int, error) { return in.A + in.B, nil })
	_, err := agent.New(agent.Config{Model: agent.ScriptedTurns(), Tools: append([]agent.Tool{goAdd}, ts.Tools()...)})
	if err == nil || !strings.Contains(err.Error(), `two tools are named "add" (a Go tool and MCP server shop)`) {
		t.Fatalf("a Go tool and an MCP tool named add: %v", err)
	}
	s1, s2 := transports["http"](t, "", ""), transports["http"](t, "", "")
	s2.Name = "warehouse"
	if _, err := mcptools.Connect(t.Context(), s1, s2); err == nil || !strings.Contains(err.Error(), `MCP servers "shop" and "warehouse" both have a tool named`) {
		t.Fatalf("two servers with the same tools: %v", err)
	}
	s2.Prefix = "wh_"
	ts2 := connect(t, s1, s2)
	if n := len(ts2.Tools()); n != 10 {
		t.Fatalf("%d tools, want 10", n)
	}
	s1.Tools = []string{"add", "nope"}
	if _, err := mcptools.Connect(t.Context(), s1); err == nil || !strings.Contains(err.Error(), `has no tool named "nope"`) {
		t.Fatalf("Tools naming a missing tool: %v", err)
	}
}

// TestLambdaUsesHTTP: one configuration, stdio locally and HTTP when the
// Lambda runtime started the process.
func TestLambdaUsesHTTP(t *testing.T) {
	s := transports["http"](t, "", "")
	s.Stdio = &mcptools.Stdio{Command: filepath.Join(t.TempDir(), "not-on-lambda")}
	if _, err := mcptools.Connect(t.Context(), s); err == nil {
		t.Fatal("locally the stdio command is used, and it does not exist")
	}
	t.Setenv("AWS_LAMBDA_RUNTIME_API", "127.0.0.1:9001")
	if ts, err := mcptools.Connect(t.Context(), s); err != nil || len(ts.Tools()) != 5 {
		t.Fatalf("on Lambda: %v", err)
	} else {
		ts.Close()
	}
	_, err := mcptools.Connect(t.Context(), mcptools.Server{Name: "local", Stdio: s.Stdio})
	if err == nil || !strings.Contains(err.Error(), "on Lambda a server is reached over HTTP") {
		t.Fatalf("stdio only, on Lambda: %v", err)
	}
}

// TestTimedOutCallIsCancelled: a call that outlives Server.Timeout ends
// with a timeout error at once, and the server is told to stop it
// (notifications/cancelled): its handler's context is cancelled.
func TestTimedOutCallIsCancelled(t *testing.T) {
	for name, srv := range transports {
		t.Run(name, func(t *testing.T) {
			logPath := filepath.Join(t.TempDir(), "calls")
			s := srv(t, logPath, "")
			s.Timeout = 300 * time.Millisecond
			ts := connect(t, s)
			var sleep agent.Tool
			for _, tl := range ts.Tools() {
				if tl.Spec().Name == "sleep" {
					sleep = tl
				}
			}
			if sleep == nil {
				t.Fatal("no sleep tool")
			}
			start := time.Now()
			_, err := sleep.Call(t.Context(), json.RawMessage(`{"seconds":20}`))
			if err == nil || !strings.Contains(err.Error(), "did not answer within 300ms") {
				t.Fatalf("call: %v; want the timeout", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("the timed-out call returned after %v", d)
			}
			deadline := time.Now().Add(10 * time.Second)
			for calls(t, logPath)["sleep-cancelled"] == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("the server's handler was not cancelled within 10s of the timeout (calls %v)", calls(t, logPath))
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}
