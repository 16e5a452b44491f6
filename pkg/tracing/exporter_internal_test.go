package tracing

import (
	"strings"
	"testing"
)

// TestSpanExporterChoice: OTEL_TRACES_EXPORTER and the OTLP protocol pick
// the exporter; an unknown one is an error naming the variable.
func TestSpanExporterChoice(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		wantErr string
	}{
		{"default otlp http", map[string]string{}, ""},
		{"otlp grpc", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, ""},
		{"traces protocol wins", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "smoke", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, ""},
		{"console", map[string]string{"OTEL_TRACES_EXPORTER": "console"}, ""},
		{"none", map[string]string{"OTEL_TRACES_EXPORTER": "none"}, ""},
		{"bad protocol", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{"bad exporter", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exp, err := spanExporter(t.Context(), func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			_ = exp.Shutdown(t.Context())
		})
	}
}
