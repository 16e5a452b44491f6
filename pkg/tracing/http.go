package tracing

import (
	"net/http"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// HTTPHandler returns h with a server span per request (through otelhttp,
// following the HTTP semantic conventions), named after the route the
// request matched ("GET /v1/runs/{run_id}"), or after its method alone
// when it matched none. The trace context of the request's headers
// (traceparent, or what OTEL_PROPAGATORS names; see [FromEnv]) is the
// span's remote parent, so a run created by a traced client joins the
// client's trace. With a nil Tracer it returns h itself: untraced servers
// pay nothing.
func (t *Tracer) HTTPHandler(h http.Handler) http.Handler {
	if t == nil {
		return h
	}
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		// The API's ServeMux has set the route by now.
		if route := routeOf(r); route != "" {
			trace.SpanFromContext(r.Context()).SetAttributes(semconv.HTTPRoute(route))
		}
	})
	return otelhttp.NewHandler(inner, "http",
		otelhttp.WithTracerProvider(t.tp),
		otelhttp.WithPropagators(t.prop),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			if route := routeOf(r); route != "" {
				return r.Method + " " + route
			}
			return r.Method
		}),
	)
}

// routeOf is the path pattern of the route r matched, without the method
// a ServeMux pattern may start with.
func routeOf(r *http.Request) string {
	p := r.Pattern
	if i := strings.IndexByte(p, ' '); i >= 0 {
		p = strings.TrimLeft(p[i:], " ")
	}
	return p
}
