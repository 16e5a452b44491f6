// Package tracing traces superstep runs with OpenTelemetry: a trace per
// run, a span per superstep and per node task, in every runtime (the
// engine's Graph.Run, the embedded scheduler, the tick and node handlers
// of the serverless runtime), and the trace context carried across the
// queues and stored with the run record so that the spans of one run,
// from the api, tick and node functions, join one trace.
//
// Tracing is off unless the standard OTEL_* environment variables turn it
// on (see [FromEnv]); a nil *Tracer traces nothing, and runtimes given no
// Tracer pay nothing. README.md beside this file lists the spans, their
// attributes and how to export them from Lambda.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/contrib/propagators/autoprop"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/superstep/superstep/pkg/pregel"
)

// ScopeName is the instrumentation scope of superstep's spans.
const ScopeName = "github.com/superstep/superstep/pkg/tracing"

// Tracer makes superstep's spans. Create it with [New] or [FromEnv]; it is
// safe for concurrent use. Every method of a nil *Tracer is a no-op.
type Tracer struct {
	tp     trace.TracerProvider
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
	// lookup finds graphs by name (WithGraphs), to tell agents apart.
	lookup func(name string) (*pregel.Graph, bool)
	// flush and shutdown are set when the Tracer owns an SDK provider.
	flush    func(context.Context) error
	shutdown func(context.Context) error
}

// Option configures [New].
type Option func(*Tracer)

// WithPropagator sets how trace context is written into and read from
// queue messages and run records (default: W3C trace context and
// baggage).
func WithPropagator(p propagation.TextMapPropagator) Option {
	return func(t *Tracer) { t.prop = p }
}

// New returns a Tracer making spans with tp.
func New(tp trace.TracerProvider, opts ...Option) *Tracer {
	t := &Tracer{tp: tp, tracer: tp.Tracer(ScopeName)}
	for _, o := range opts {
		o(t)
	}
	if t.prop == nil {
		t.prop = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	}
	if f, ok := tp.(interface{ ForceFlush(context.Context) error }); ok {
		t.flush = f.ForceFlush
	}
	return t
}

// Enabled reports whether the environment read through getenv turns
// tracing on: OTEL_TRACES_EXPORTER names an exporter other than "none",
// or an OTLP endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), and OTEL_SDK_DISABLED is not true.
func Enabled(getenv func(string) string) bool {
	get := func(k string) string { return strings.TrimSpace(getenv(k)) }
	if strings.EqualFold(get("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	if e := get("OTEL_TRACES_EXPORTER"); e != "" {
		return !strings.EqualFold(e, "none")
	}
	return get("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// FromEnv sets up tracing as the standard OTEL_* environment variables
// say, or returns nil (and no error) when they do not turn it on (see
// [Enabled]). The exporter is chosen by OTEL_TRACES_EXPORTER (otlp, the
// default once an endpoint is set; console; none) and configured by the
// OTEL_EXPORTER_OTLP_* variables; the sampler by OTEL_TRACES_SAMPLER; the
// resource by OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, with
// service.name defaulting to service; the propagation format (of HTTP
// headers, queue messages and run records) by OTEL_PROPAGATORS
// (tracecontext,baggage by default; b3, b3multi, jaeger, xray, ottrace
// too). The provider becomes the global one
// (otel.SetTracerProvider), so that spans nodes make with the otel API
// join their run's trace. Call [Tracer.Shutdown] before the process
// exits.
func FromEnv(ctx context.Context, service string) (*Tracer, error) {
	if !Enabled(os.Getenv) {
		return nil, nil
	}
	exp, err := spanExporter(ctx, os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("tracing: the exporter OTEL_* asks for: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(service)),
		resource.WithFromEnv(),
		resource.WithTelemetrySDK(),
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("tracing: resource from OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	prop, err := propagatorFromEnv()
	if err != nil {
		return nil, err
	}
	t := New(tp, WithPropagator(prop))
	t.shutdown = tp.Shutdown
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(t.prop)
	return t, nil
}

// spanExporter is the span exporter OTEL_TRACES_EXPORTER names (otlp when
// unset; console; none), an OTLP one over the protocol
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL names
// (http/protobuf when unset; grpc), as the OpenTelemetry specification's
// environment variables say. It is contrib's autoexport for spans alone:
// autoexport links the log and metric exporters too (Prometheus's among
// them), whose package initialisers every process, each Lambda cold start
// included, would pay for.
func spanExporter(ctx context.Context, getenv func(string) string) (sdktrace.SpanExporter, error) {
	switch name := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); name {
	case "", "otlp":
		proto := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
		if proto == "" {
			proto = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
		}
		switch proto {
		case "", "http/protobuf":
			return otlptracehttp.New(ctx)
		case "grpc":
			return otlptracegrpc.New(ctx)
		}
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: want http/protobuf or grpc", proto)
	case "console":
		return stdouttrace.New()
	case "none":
		return noopExporter{}, nil
	default:
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: want otlp, console or none", name)
	}
}

// noopExporter exports nothing (OTEL_TRACES_EXPORTER=none).
type noopExporter struct{}

func (noopExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (noopExporter) Shutdown(context.Context) error                             { return nil }

// propagatorFromEnv is the propagator OTEL_PROPAGATORS names: W3C trace
// context and baggage when it is unset.
func propagatorFromEnv() (propagation.TextMapPropagator, error) {
	v := strings.TrimSpace(os.Getenv("OTEL_PROPAGATORS"))
	if v == "" {
		return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}), nil
	}
	var names []string
	for n := range strings.SplitSeq(v, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	p, err := autoprop.TextMapPropagator(names...)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTEL_PROPAGATORS=%q: %w; known are tracecontext, baggage, b3, b3multi, jaeger, xray, ottrace and none", v, err)
	}
	return p, nil
}

// Flush exports the spans ended so far. A Lambda function calls it at the
// end of each invocation, before the runtime freezes the process.
func (t *Tracer) Flush(ctx context.Context) error {
	if t == nil || t.flush == nil {
		return nil
	}
	return t.flush(ctx)
}

// Shutdown flushes and stops the provider FromEnv set up.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil || t.shutdown == nil {
		return nil
	}
	return t.shutdown(ctx)
}

// Attribute keys of superstep's spans, beside the GenAI semantic
// conventions' gen_ai.operation.name, gen_ai.workflow.name and
// gen_ai.conversation.id.
const (
	AttrGraph = attribute.Key("superstep.graph")
	// AttrGraphVersion is the run's graph version when it was created:
	// "name (fingerprint)", or the fingerprint alone.
	AttrGraphVersion = attribute.Key("superstep.graph.version")
	AttrRunID        = attribute.Key("superstep.run.id")
	AttrThreadID     = attribute.Key("superstep.thread.id")
	AttrRunStatus    = attribute.Key("superstep.run.status")
	AttrStep         = attribute.Key("superstep.step")
	AttrTasks        = attribute.Key("superstep.step.tasks")
	AttrStepResult   = attribute.Key("superstep.step.outcome")
	AttrNode         = attribute.Key("superstep.node")
	AttrTaskID       = attribute.Key("superstep.task.id")
	AttrStatus       = attribute.Key("superstep.node.status")
	AttrAttempts     = attribute.Key("superstep.node.attempts")
	AttrReason       = attribute.Key("superstep.node.reason")
	AttrDrain        = attribute.Key("superstep.drain.reason")
)

// Span names.
const (
	// SpanRun names a run's root span: "invoke_workflow <graph>".
	SpanRun = "invoke_workflow"
	// SpanStep names the span of a superstep (one per tick in the
	// serverless runtime).
	SpanStep = "superstep"
	// SpanNode names a node task's span: "node <node>".
	SpanNode = "node"
)

// Tracer returns the OpenTelemetry tracer the spans are made with, for
// instrumentation that runs inside nodes (the agents package).
func (t *Tracer) Tracer() trace.Tracer {
	if t == nil {
		return noop.NewTracerProvider().Tracer(ScopeName)
	}
	return t.tracer
}
