// Package mcptools gives the prebuilt agent (package agent) the tools of
// MCP servers, through the official Go SDK
// (github.com/modelcontextprotocol/go-sdk). [Connect] lists the tools of
// each server (names, descriptions, input schemas) over stdio or
// streamable HTTP; each becomes an [agent.Tool], so each call is a task of
// the agent's tool node like a Go tool's: recorded on its own, retried by
// Config.ToolRetry, held for approval by Config.Approve, and not called
// again when a run resumes after a crash once its result is recorded.
//
// A server that is down, too slow (Server.Timeout) or answers with an
// error gives the model a failed tool result, never a hung run.
package mcptools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/superstep/superstep/pkg/agent"
)

// Server says how to reach one MCP server. Set Stdio, HTTP or both: a
// process started by the Lambda runtime (AWS_LAMBDA_RUNTIME_API is set)
// uses HTTP, as Lambda functions should not start tool servers as child
// processes; elsewhere Stdio is used when set. So one configuration
// serves `superstep dev` (stdio) and the deployment (HTTP).
type Server struct {
	// Name names the server in errors and in each tool's Origin.
	Name string
	// Stdio starts the server as a child process talking over its
	// standard input and output.
	Stdio *Stdio
	// HTTP reaches the server over streamable HTTP.
	HTTP *HTTP
	// Prefix is put before each tool's name (e.g. "github_"), to keep
	// names of different servers apart.
	Prefix string
	// Tools, when set, keeps only the server's tools of these names
	// (before Prefix); a name the server does not have is an error.
	Tools []string
	// Timeout bounds each tool call (default 60s); a call that takes
	// longer is cancelled and fails.
	Timeout time.Duration
	// ConnectTimeout bounds connecting and listing the tools (default
	// 20s).
	ConnectTimeout time.Duration
}

// Stdio is a server run as a child process.
type Stdio struct {
	Command string
	Args    []string
	// Env is added to the process's environment (KEY=value).
	Env []string
	// Dir is the process's working directory.
	Dir string
}

// HTTP is a server reached over streamable HTTP.
type HTTP struct {
	// URL is the server's MCP endpoint, like https://example.com/mcp.
	URL string
	// Headers are sent with every request: an API key or an
	// "Authorization: Bearer ..." header (read them from the environment
	// or a secret store, not from source).
	Headers map[string]string
	// Client is the HTTP client (default: one without a timeout of its
	// own; Server.Timeout bounds the calls).
	Client *http.Client
}

// onLambda reports whether the Lambda runtime started the process.
func onLambda() bool { return os.Getenv("AWS_LAMBDA_RUNTIME_API") != "" }

// Toolset holds the connections to MCP servers and their tools.
type Toolset struct {
	conns []*conn
	tools []agent.Tool
}

// Connect connects to the servers and lists their tools. It fails, saying
// which server and why, when a server cannot be reached or two tools
// (also of different servers) share a name. Close the Toolset when the
// program ends.
func Connect(ctx context.Context, servers ...Server) (*Toolset, error) {
	ts := &Toolset{}
	seen := map[string]string{}
	for i, s := range servers {
		if s.Name == "" {
			s.Name = fmt.Sprintf("server %d", i+1)
		}
		c, err := newConn(s)
		if err != nil {
			ts.Close()
			return nil, err
		}
		ts.conns = append(ts.conns, c)
		tools, err := c.listTools(ctx)
		if err != nil {
			ts.Close()
			return nil, err
		}
		for _, t := range tools {
			name := t.Spec().Name
			if other, ok := seen[name]; ok {
				ts.Close()
				return nil, fmt.Errorf("mcptools: MCP servers %q and %q both have a tool named %q; set Server.Prefix or Server.Tools", other, s.Name, name)
			}
			seen[name] = s.Name
			ts.tools = append(ts.tools, t)
		}
	}
	return ts, nil
}

// Tools returns the servers' tools, for agent.Config.Tools (after the Go
// tools: agent.New refuses a name given twice).
func (ts *Toolset) Tools() []agent.Tool { return slices.Clone(ts.tools) }

// Close ends the connections (and the stdio servers' processes).
func (ts *Toolset) Close() error {
	var errs []error
	for _, c := range ts.conns {
		errs = append(errs, c.close())
	}
	return errors.Join(errs...)
}

// conn is one server's client session, reopened when it breaks.
type conn struct {
	srv    Server
	client *mcp.Client

	mu      sync.Mutex
	session *mcp.ClientSession
}

func newConn(s Server) (*conn, error) {
	switch {
	case s.Stdio == nil && s.HTTP == nil:
		return nil, fmt.Errorf("mcptools: MCP server %q: set Stdio or HTTP", s.Name)
	case onLambda() && s.HTTP == nil:
		return nil, fmt.Errorf("mcptools: MCP server %q: on Lambda a server is reached over HTTP; set Server.HTTP (Stdio is for local runs)", s.Name)
	case s.HTTP != nil && s.HTTP.URL == "":
		return nil, fmt.Errorf("mcptools: MCP server %q: HTTP.URL is empty", s.Name)
	case s.Stdio != nil && s.Stdio.Command == "" && (s.HTTP == nil || !onLambda()):
		return nil, fmt.Errorf("mcptools: MCP server %q: Stdio.Command is empty", s.Name)
	}
	if s.Timeout <= 0 {
		s.Timeout = 60 * time.Second
	}
	if s.ConnectTimeout <= 0 {
		s.ConnectTimeout = 20 * time.Second
	}
	return &conn{srv: s, client: mcp.NewClient(&mcp.Implementation{Name: "superstep", Version: "1"}, nil)}, nil
}

func (c *conn) transport() mcp.Transport {
	if c.srv.HTTP != nil && (c.srv.Stdio == nil || onLambda()) {
		h := c.srv.HTTP
		hc := h.Client
		if hc == nil {
			hc = &http.Client{}
		}
		if len(h.Headers) > 0 {
			hc2 := *hc
			base := hc.Transport
			if base == nil {
				base = http.DefaultTransport
			}
			hc2.Transport = headerTransport{base: base, headers: h.Headers}
			hc = &hc2
		}
		return &mcp.StreamableClientTransport{Endpoint: h.URL, HTTPClient: hc, DisableStandaloneSSE: true, MaxRetries: -1}
	}
	cmd := exec.Command(c.srv.Stdio.Command, c.srv.Stdio.Args...)
	cmd.Env = append(os.Environ(), c.srv.Stdio.Env...)
	cmd.Dir = c.srv.Stdio.Dir
	return &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
}

// headerTransport adds the configured headers to each request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.headers {
		r.Header.Set(k, v)
	}
	return t.base.RoundTrip(r)
}

// sessionFor returns the open session, connecting when there is none.
func (c *conn) sessionFor(ctx context.Context) (*mcp.ClientSession, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session != nil {
		return c.session, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.srv.ConnectTimeout)
	defer cancel()
	s, err := c.client.Connect(ctx, c.transport(), nil)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("MCP server %q did not answer within %v", c.srv.Name, c.srv.ConnectTimeout)
		}
		return nil, fmt.Errorf("MCP server %q cannot be reached: %w", c.srv.Name, err)
	}
	c.session = s
	return s, nil
}

// drop forgets s when it is still the open session, so the next call
// reconnects.
func (c *conn) drop(s *mcp.ClientSession) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session == s {
		c.session = nil
		_ = s.Close()
	}
}

func (c *conn) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session == nil {
		return nil
	}
	err := c.session.Close()
	c.session = nil
	return err
}

func (c *conn) listTools(ctx context.Context) ([]agent.Tool, error) {
	s, err := c.sessionFor(ctx)
	if err != nil {
		return nil, fmt.Errorf("mcptools: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.srv.ConnectTimeout)
	defer cancel()
	var listed []*mcp.Tool
	for t, err := range s.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("mcptools: MCP server %q: list its tools: %w", c.srv.Name, err)
		}
		listed = append(listed, t)
	}
	byName := map[string]*mcp.Tool{}
	for _, t := range listed {
		byName[t.Name] = t
	}
	if len(c.srv.Tools) > 0 {
		var keep []*mcp.Tool
		for _, n := range c.srv.Tools {
			t := byName[n]
			if t == nil {
				return nil, fmt.Errorf("mcptools: MCP server %q has no tool named %q (Server.Tools)", c.srv.Name, n)
			}
			keep = append(keep, t)
		}
		listed = keep
	}
	out := make([]agent.Tool, 0, len(listed))
	for _, t := range listed {
		mt, err := c.newTool(t)
		if err != nil {
			return nil, err
		}
		out = append(out, mt)
	}
	return out, nil
}

// Tool is an MCP server's tool as an [agent.Tool].
type Tool struct {
	conn     *conn
	remote   string // the name on the server
	spec     agent.ToolSpec
	resolved *jsonschema.Resolved // nil when the schema is beyond the validator
}

var _ agent.Tool = (*Tool)(nil)

func (c *conn) newTool(t *mcp.Tool) (*Tool, error) {
	schema, err := json.Marshal(t.InputSchema)
	if err != nil || t.InputSchema == nil || string(schema) == "null" {
		schema = []byte(`{"type":"object"}`)
	}
	desc := t.Description
	if desc == "" {
		desc = t.Title
	}
	mt := &Tool{conn: c, remote: t.Name, spec: agent.ToolSpec{Name: c.srv.Prefix + t.Name, Description: desc, InputSchema: schema}}
	var s jsonschema.Schema
	if json.Unmarshal(schema, &s) == nil {
		if r, err := s.Resolve(nil); err == nil {
			mt.resolved = r
		}
	}
	return mt, nil
}

// Spec implements [agent.Tool].
func (t *Tool) Spec() agent.ToolSpec { return t.spec }

// Origin names the MCP server the tool comes from.
func (t *Tool) Origin() string { return "MCP server " + t.conn.srv.Name }

// Call implements [agent.Tool]: it calls the tool on its server, within
// Server.Timeout. Arguments that fail the tool's input schema (checked
// here, and by the server) wrap [agent.ErrInvalidArguments]; a result the
// server marks as an error, a server that is down or too slow, give an
// error that says so.
func (t *Tool) Call(ctx context.Context, input json.RawMessage) (string, error) {
	if len(bytes.TrimSpace(input)) == 0 {
		input = json.RawMessage("{}")
	}
	var args any
	if err := json.Unmarshal(input, &args); err != nil {
		return "", fmt.Errorf("%w: not JSON: %v", agent.ErrInvalidArguments, err)
	}
	if _, ok := args.(map[string]any); !ok {
		return "", fmt.Errorf("%w: the arguments must be a JSON object", agent.ErrInvalidArguments)
	}
	if t.resolved != nil {
		if err := t.resolved.Validate(args); err != nil {
			return "", fmt.Errorf("%w: %v", agent.ErrInvalidArguments, err)
		}
	}
	srv := t.conn.srv
	cctx, cancel := context.WithTimeout(ctx, srv.Timeout)
	defer cancel()
	res, err := t.call(cctx, args, true)
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if cctx.Err() != nil {
			return "", fmt.Errorf("MCP server %q did not answer within %v", srv.Name, srv.Timeout)
		}
		var we *jsonrpc.Error
		if errors.As(err, &we) {
			if we.Code == jsonrpc2InvalidParams {
				return "", fmt.Errorf("%w: %s", agent.ErrInvalidArguments, we.Message)
			}
			return "", fmt.Errorf("MCP server %q: %s", srv.Name, we.Message)
		}
		return "", err
	}
	text := resultText(res)
	if res.IsError {
		if text == "" {
			text = "the tool reported an error without a message"
		}
		return "", errors.New(text)
	}
	return text, nil
}

// jsonrpc2InvalidParams is JSON-RPC's code for invalid parameters.
const jsonrpc2InvalidParams = -32602

// call calls the tool; when the connection has broken (a stdio server
// that exited, an HTTP session the server forgot), it reconnects once.
func (t *Tool) call(ctx context.Context, args any, retry bool) (*mcp.CallToolResult, error) {
	s, err := t.conn.sessionFor(ctx)
	if err != nil {
		return nil, err
	}
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: t.remote, Arguments: args})
	if err == nil {
		return res, nil
	}
	var we *jsonrpc.Error
	if errors.As(err, &we) || ctx.Err() != nil {
		return nil, err
	}
	// The connection failed: forget it, so this or the next call reconnects.
	t.conn.drop(s)
	if retry && (errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, mcp.ErrSessionMissing)) {
		return t.call(ctx, args, false)
	}
	return nil, fmt.Errorf("MCP server %q: %w", t.conn.srv.Name, err)
}

// resultText is a tool result as text for the model: its text blocks, a
// note for each other block, or the structured content as JSON.
func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
		case *mcp.ImageContent:
			parts = append(parts, fmt.Sprintf("[image %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *mcp.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource %s: %s]", c.Name, c.URI))
		case *mcp.EmbeddedResource:
			if c.Resource != nil && c.Resource.Text != "" {
				parts = append(parts, c.Resource.Text)
			} else if c.Resource != nil {
				parts = append(parts, fmt.Sprintf("[resource %s]", c.Resource.URI))
			}
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			return string(b)
		}
	}
	return strings.Join(parts, "\n")
}
