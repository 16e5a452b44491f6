// Package otlptest is an OTLP/HTTP trace receiver for tests: it takes
// what the SDK's otlptracehttp exporter (OTEL_EXPORTER_OTLP_ENDPOINT)
// sends and keeps the spans, so that a test checks what a process
// exported, not what an in-memory recorder saw.
package otlptest

import (
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	collector "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one span received, flattened.
type Span struct {
	Name     string
	TraceID  string
	SpanID   string
	ParentID string
	Kind     tracepb.Span_SpanKind
	Attrs    map[string]string
	Links    []string // span ids
	Status   tracepb.Status_StatusCode
}

// Receiver is a running OTLP/HTTP receiver.
type Receiver struct {
	// URL is the endpoint to set as OTEL_EXPORTER_OTLP_ENDPOINT.
	URL string

	mu    sync.Mutex
	spans []Span
}

// Start starts a receiver on 127.0.0.1, stopped when t ends.
func Start(t testing.TB) *Receiver {
	r := &Receiver{}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.Error(w, "want POST /v1/traces", http.StatusNotFound)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = gz
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg collector.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	for _, rs := range msg.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				r.spans = append(r.spans, flatten(s))
			}
		}
	}
	r.mu.Unlock()
	out, _ := proto.Marshal(&collector.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func flatten(s *tracepb.Span) Span {
	out := Span{
		Name: s.Name, TraceID: hex.EncodeToString(s.TraceId), SpanID: hex.EncodeToString(s.SpanId),
		ParentID: hex.EncodeToString(s.ParentSpanId), Kind: s.Kind, Attrs: map[string]string{},
	}
	if s.Status != nil {
		out.Status = s.Status.Code
	}
	for _, kv := range s.Attributes {
		switch v := kv.Value.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			out.Attrs[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			out.Attrs[kv.Key] = strconv.FormatInt(v.IntValue, 10)
		case *commonpb.AnyValue_BoolValue:
			out.Attrs[kv.Key] = strconv.FormatBool(v.BoolValue)
		default:
			out.Attrs[kv.Key] = kv.Value.String()
		}
	}
	for _, l := range s.Links {
		out.Links = append(out.Links, hex.EncodeToString(l.SpanId))
	}
	return out
}

// Spans returns the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Env is the environment (NAME=VALUE) that makes a process export its
// spans to r over OTLP/HTTP, only when it flushes (the batch's own delay
// is ten minutes, longer than any test).
func (r *Receiver) Env() []string {
	return []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + r.URL,
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_BSP_SCHEDULE_DELAY=600000",
	}
}
