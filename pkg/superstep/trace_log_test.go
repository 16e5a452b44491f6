//go:build !superstep.lambda

package superstep

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/superstep/superstep/internal/graphs"
	"github.com/superstep/superstep/internal/mototest"
	"github.com/superstep/superstep/internal/otlptest"
)

// TestNodeLogsCarryTraceIDs: with tracing on, a line a graph's own node
// logs with slog.InfoContext(ctx, …) (through the process's default
// logger, as user code does) carries the trace_id and span_id of the
// node's span, in `dev` and in `dev --aws`, with the logger those
// commands install; and the ids are those of the node span exported.
func TestNodeLogsCarryTraceIDs(t *testing.T) {
	for _, tc := range []struct {
		name string
		args func(t *testing.T) []string
	}{
		{"dev", func(t *testing.T) []string {
			return []string{"dev", "--addr", "127.0.0.1:0", "--dir", t.TempDir(), "--token", "tok"}
		}},
		{"dev --aws", func(t *testing.T) []string {
			srv := mototest.Start(t)
			var b [3]byte
			rand.Read(b[:])
			return []string{"dev", "--aws", "--endpoint", srv.URL, "--create", "--prefix", "tracelog-" + hex.EncodeToString(b[:]),
				"--addr", "127.0.0.1:0", "--token", "tok", "--wait-time", "0", "--grace", "2s"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prev := slog.Default()
			t.Cleanup(func() { slog.SetDefault(prev) })
			rcv := otlptest.Start(t)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL)
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
			execLog := filepath.Join(t.TempDir(), "exec.log")
			vars := map[string]string{graphs.ExecLogEnv: execLog}
			getenv := func(k string) string { return vars[k] }
			var out, errb syncBuffer
			env, sigs := serverEnv(&out, &errb)
			env.Getenv = getenv
			code := make(chan int, 1)
			go func() { code <- Run(context.Background(), env, tc.args(t), testGraphs(getenv)) }()
			url := waitServing(t, &out, &errb, code)
			post(t, url+"/v1/graphs/"+graphs.ExecLogGraph+"/runs", `{"input": {"rounds": 1}, "run_id": "logged"}`)
			deadline := time.Now().Add(30 * time.Second)
			for !strings.Contains(get(t, url+"/v1/runs/logged"), `"status":"completed"`) {
				if time.Now().After(deadline) {
					t.Fatalf("run logged did not complete:\n%s", errb.String())
				}
				time.Sleep(50 * time.Millisecond)
			}
			sigs <- syscall.SIGTERM
			select {
			case <-code:
			case <-time.After(15 * time.Second):
				t.Fatalf("dev did not stop:\n%s", errb.String())
			}
			line := regexp.MustCompile(`msg="` + regexp.QuoteMeta(graphs.ExecLogLine) + `"[^\n]*`)
			lines := line.FindAllString(errb.String(), -1)
			if len(lines) == 0 {
				t.Fatalf("no line of the node's own log in dev's output:\n%s", errb.String())
			}
			ids := regexp.MustCompile(`trace_id=([0-9a-f]{32}) span_id=([0-9a-f]{16})`)
			spans := map[string]otlptest.Span{}
			for _, s := range rcv.Spans() {
				spans[s.SpanID] = s
			}
			for _, l := range lines {
				m := ids.FindStringSubmatch(l)
				if m == nil {
					t.Errorf("the node's log line carries no trace_id and span_id: %s", l)
					continue
				}
				s, ok := spans[m[2]]
				if !ok || s.TraceID != m[1] || !strings.HasPrefix(s.Name, "node ") {
					t.Errorf("log line %s: span %s is not an exported node span of trace %s (got %+v)", l, m[2], m[1], s)
				}
			}
		})
	}
}

func waitServing(t *testing.T, out, errb *syncBuffer, code chan int) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case c := <-code:
			t.Fatalf("dev exited with %d:\n%s", c, errb.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("dev did not serve:\n%s", errb.String())
		}
		if u, ok := strings.CutPrefix(strings.TrimSpace(out.String()), "superstep dev: serving "); ok {
			return u
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func post(t *testing.T, url, body string) string {
	t.Helper()
	return do(t, "POST", url, body)
}

func get(t *testing.T, url string) string {
	t.Helper()
	return do(t, "GET", url, "")
}

func do(t *testing.T, method, url, body string) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer tok")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	return string(b)
}
