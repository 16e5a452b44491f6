package tick_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/tick"
	"github.com/superstep/superstep/pkg/tracing"
)

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// The handler's own lines about a tick (here: a duplicate of a tick
// whose step is done) carry the ids of the tick's span, with the
// trace-aware logger the Lambda functions install.
func TestTickLogLinesCarryIDs(t *testing.T) {
	e := newEnv(t, false)
	rec := tracetest.NewSpanRecorder()
	tr := tracing.New(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	var logs lockedBuf
	e.h.Tracer = tr
	e.h.Logger = slog.New(tracing.NewLogHandler(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	e.svc.Tracer = tr
	ctx := context.Background()
	if _, _, err := e.svc.Create(ctx, "tickgraph", runs.CreateRequest{RunID: "logged"}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ { // the second delivery is a duplicate
		if err := e.h.Tick(ctx, tick.Tick{RunID: "logged", Step: 1}); err != nil {
			t.Fatal(err)
		}
	}
	spans := map[string]bool{}
	for _, s := range rec.Ended() {
		if s.Name() == tracing.SpanStep {
			spans[s.SpanContext().SpanID().String()] = true
		}
	}
	found := false
	for line := range strings.SplitSeq(strings.TrimSpace(logs.b.String()), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if r["msg"] != "tick does not match the open step; no-op" {
			continue
		}
		found = true
		if id, _ := r["span_id"].(string); !spans[id] {
			t.Errorf("the handler's line %s carries no id of a tick span", line)
		}
	}
	if !found {
		t.Fatalf("no line about the duplicate tick:\n%s", logs.b.String())
	}
}
