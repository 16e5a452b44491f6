package tracing_test

import (
	"context"
	"testing"

	"github.com/superstep/superstep/pkg/tracing"
)

func TestEnabled(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want bool
	}{
		{"nothing set: off", nil, false},
		{"exporter otlp", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true},
		{"exporter none", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:4318"}, false},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:4318"}, true},
		{"traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://localhost:4318/v1/traces"}, true},
		{"sdk disabled", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "console"}, false},
		{"service name only", map[string]string{"OTEL_SERVICE_NAME": "x"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tracing.Enabled(func(k string) string { return tc.env[k] }); got != tc.want {
				t.Errorf("Enabled = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestFromEnv(t *testing.T) {
	for _, k := range []string{"OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED"} {
		t.Setenv(k, "")
	}
	tr, err := tracing.FromEnv(context.Background(), "test")
	if err != nil || tr != nil {
		t.Fatalf("FromEnv with nothing set = %v, %v; want nil, nil (off by default)", tr, err)
	}
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	tr, err = tracing.FromEnv(context.Background(), "test")
	if err != nil || tr == nil {
		t.Fatalf("FromEnv with an OTLP endpoint = %v, %v", tr, err)
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Logf("shutdown with nothing listening: %v", err)
	}
	t.Setenv("OTEL_TRACES_EXPORTER", "carrier-pigeon")
	if _, err := tracing.FromEnv(context.Background(), "test"); err == nil {
		t.Error("FromEnv accepted an unknown exporter")
	}
}
