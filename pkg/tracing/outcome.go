package tracing

import (
	"context"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// SpanEnd names the span that says how an execution of a run stopped:
// "end <graph>", a child of the run's root, made when the run completes,
// fails, is cancelled or drained, or is interrupted (a run interrupted
// and resumed has one per stop). It is the same on every runtime, and it
// is where an SRE reads a run's outcome: the root span of a run created
// through the API covers only the request that created it.
const SpanEnd = "end"

// Attributes of the end span, beside superstep.run.status,
// superstep.drain.reason and error.type.
const (
	AttrError = attribute.Key("superstep.run.error")
	// AttrFailedNode names the node whose failure failed the run.
	AttrFailedNode = attribute.Key("superstep.run.failed_node")
	// AttrResumeStep is the step a run stood at when a request resumed
	// it: the superstep spans of that step link to the request.
	AttrResumeStep = attribute.Key("superstep.resume.step")
)

// resumeKey prefixes, in a run record's Trace, the trace context of the
// request that last resumed the run, and resumeStepKey the step it was
// at then.
const (
	resumePrefix  = "resume."
	resumeStepKey = "superstep.resume.step"
)

// WithGraphs returns a copy of t that looks graphs up by name with
// lookup (a runs.Registry's Get): a run of a graph that declares a usage
// channel (agent.Declare; the prebuilt agent) is an agent, and its root
// span is "invoke_agent <graph>" (gen_ai.operation.name=invoke_agent,
// gen_ai.agent.name) instead of "invoke_workflow <graph>".
func (t *Tracer) WithGraphs(lookup func(name string) (*pregel.Graph, bool)) *Tracer {
	if t == nil {
		return nil
	}
	c := *t
	c.lookup = lookup
	return &c
}

// isAgent reports whether graph is an agent graph (see WithGraphs).
func (t *Tracer) isAgent(graph string) bool {
	if t.lookup == nil {
		return false
	}
	g, ok := t.lookup(graph)
	return ok && g.UsageChannel() != ""
}

// rootName and rootAttrs are the name and attributes of a run's root
// span.
func (t *Tracer) root(graph, runID, thread string) (string, []attribute.KeyValue) {
	if !t.isAgent(graph) {
		return SpanRun + " " + graph, runAttrs(graph, runID, thread)
	}
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameInvokeAgent,
		semconv.GenAIAgentName(graph),
		AttrGraph.String(graph),
		AttrRunID.String(runID),
	}
	if thread != "" {
		attrs = append(attrs, AttrThreadID.String(thread), semconv.GenAIConversationID(thread))
	}
	return SpanAgent + " " + graph, attrs
}

// SpanAgent names the root span of an agent graph's run:
// "invoke_agent <graph>".
const SpanAgent = "invoke_agent"

// EndRun makes the end span of run r, which has just stopped (r.Status),
// in r's trace. The serverless tick handler calls it when a tick stops a
// run, and runs.Service when it cancels a paused run; executions traced
// by [Tracer.Options] and [Tracer.RunOptions] make theirs from the
// engine's run_finished event.
func (t *Tracer) EndRun(ctx context.Context, r runs.Run) {
	if t == nil {
		return
	}
	parent := ctx
	if root := t.rootContext(ctx, r); root != nil {
		parent = root
	}
	opts := []trace.SpanStartOption{trace.WithAttributes(baseAttrs(r.Graph, r.ID, r.ContextID, r.Step, 0)...)}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() && parent != ctx {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	t.endSpan(parent, r.Graph, r.Status, r.DrainReason, r.Error, r.FailedNode, time.Time{}, opts...)
}

// endSpan starts and ends an end span under parent.
func (t *Tracer) endSpan(parent context.Context, graph string, status pregel.RunStatus, reason, msg, node string, at time.Time, opts ...trace.SpanStartOption) {
	if !at.IsZero() {
		opts = append(opts, trace.WithTimestamp(at))
	}
	_, span := t.tracer.Start(parent, SpanEnd+" "+graph, opts...)
	span.SetAttributes(AttrRunStatus.String(string(status)))
	if reason != "" {
		span.SetAttributes(AttrDrain.String(reason))
	}
	if node != "" {
		span.SetAttributes(AttrFailedNode.String(node))
	}
	if status == pregel.RunFailed {
		span.SetAttributes(semconv.ErrorTypeKey.String(errorType(node)))
		if msg != "" {
			span.SetAttributes(AttrError.String(msg))
		}
		span.SetStatus(codes.Error, msg)
	}
	if at.IsZero() {
		span.End()
	} else {
		span.End(trace.WithTimestamp(at))
	}
}

// errorType is the error.type of a failed run: node_failed when a node
// failed it, run_failed otherwise (a step limit, a graph not deployed).
func errorType(node string) string {
	if node != "" {
		return "node_failed"
	}
	return "run_failed"
}

// LinkResume records in r.Trace the trace context of ctx (the request
// resuming r) and the step r is at, so that the superstep spans that
// continue the run link to the request: runs.Service.Resume calls it.
func (t *Tracer) LinkResume(ctx context.Context, r *runs.Run) {
	if t == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	carrier := propagation.MapCarrier{}
	t.prop.Inject(ctx, carrier)
	out := make(map[string]string, len(r.Trace)+len(carrier)+1)
	for k, v := range r.Trace {
		if len(k) < len(resumePrefix) || k[:len(resumePrefix)] != resumePrefix {
			out[k] = v
		}
	}
	for k, v := range carrier {
		out[resumePrefix+k] = v
	}
	out[resumeStepKey] = strconv.Itoa(r.Step)
	r.Trace = out
}

// resumeLink returns the link to the request that resumed r, if the
// step being traced is the first after the resume.
func (t *Tracer) resumeLink(ctx context.Context, r runs.Run, step int) (trace.Link, bool) {
	at, ok := r.Trace[resumeStepKey]
	if !ok {
		return trace.Link{}, false
	}
	n, err := strconv.Atoi(at)
	if err != nil || (step >= 0 && step != n+1) {
		return trace.Link{}, false
	}
	carrier := propagation.MapCarrier{}
	for k, v := range r.Trace {
		if len(k) > len(resumePrefix) && k[:len(resumePrefix)] == resumePrefix {
			carrier[k[len(resumePrefix):]] = v
		}
	}
	sc := trace.SpanContextFromContext(t.prop.Extract(context.WithoutCancel(ctx), carrier))
	if !sc.IsValid() {
		return trace.Link{}, false
	}
	return trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{AttrResumeStep.Int(n)}}, true
}
