package mcptools_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The test binary is also the MCP server the stdio tests start: run with
// MCPTOOLS_TEST_SERVER=1 it serves testServer over stdin and stdout.
func TestMain(m *testing.M) {
	if os.Getenv("MCPTOOLS_TEST_SERVER") == "1" {
		srv := newTestServer(os.Getenv("MCPTOOLS_TEST_LOG"), os.Getenv("MCPTOOLS_TEST_BLOCK"))
		if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil && !errors.Is(err, context.Canceled) {
			fmt.Fprintln(os.Stderr, "test server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type orderIn struct {
	OrderID string `json:"order_id" jsonschema:"the order's id, like A-1001"`
}

type addIn struct {
	A int `json:"a"`
	B int `json:"b"`
}

type sleepIn struct {
	Seconds float64 `json:"seconds"`
}

var logMu sync.Mutex

// newTestServer is a small MCP server: lookup_order (each completed call
// appended to logPath; an order id that is also the content of the file
// blockPath waits while that file exists), add, sleep, fail and exit.
func newTestServer(logPath, blockPath string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "shop", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "lookup_order", Description: "Looks an order up by id"},
		func(ctx context.Context, _ *mcp.CallToolRequest, in orderIn) (*mcp.CallToolResult, any, error) {
			// A blocked call never completes: it stands for a call in
			// flight when the agent's process died.
			for blocked := false; blockPath != ""; blocked = true {
				b, err := os.ReadFile(blockPath)
				if err != nil || strings.TrimSpace(string(b)) != in.OrderID {
					if blocked {
						return nil, nil, errors.New("interrupted")
					}
					break
				}
				select {
				case <-ctx.Done():
					return nil, nil, ctx.Err()
				case <-time.After(10 * time.Millisecond):
				}
			}
			if logPath != "" {
				logMu.Lock()
				f, err := os.OpenFile(logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
				if err == nil {
					fmt.Fprintln(f, in.OrderID)
					f.Close()
				}
				logMu.Unlock()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "order " + in.OrderID + " has shipped"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Adds two integers"},
		func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(in.A + in.B)}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "sleep", Description: "Sleeps"},
		func(ctx context.Context, _ *mcp.CallToolRequest, in sleepIn) (*mcp.CallToolResult, any, error) {
			select {
			case <-ctx.Done():
				// The client cancelled the call (notifications/cancelled).
				logLine(logPath, "sleep-cancelled")
				return nil, nil, ctx.Err()
			case <-time.After(time.Duration(in.Seconds * float64(time.Second))):
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "slept"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always fails"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return nil, nil, errors.New("the warehouse is closed")
		})
	mcp.AddTool(s, &mcp.Tool{Name: "exit", Description: "Ends the server's process"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			if os.Getenv("MCPTOOLS_TEST_SERVER") == "1" {
				os.Exit(3)
			}
			return nil, nil, errors.New("not a process of its own")
		})
	return s
}

// serveHTTP serves s over streamable HTTP; with token set, requests
// without "Authorization: Bearer <token>" get 401.
func serveHTTP(t *testing.T, s *mcp.Server, token string) *httptest.Server {
	t.Helper()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs
}

// calls reads the orders logged at logPath, counted.
func calls(t *testing.T, logPath string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(logPath)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, l := range strings.Fields(string(b)) {
		n[l]++
	}
	return n
}

// logLine appends line to the call log at logPath (if set).
func logLine(logPath, line string) {
	if logPath == "" {
		return
	}
	logMu.Lock()
	defer logMu.Unlock()
	f, err := os.OpenFile(logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err == nil {
		fmt.Fprintln(f, line)
		f.Close()
	}
}
