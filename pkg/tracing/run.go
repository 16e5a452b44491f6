package tracing

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// Options returns the options that trace one call of Graph.Run or
// Graph.Resume made with ctx: an invoke_workflow span over the run, a
// superstep span per step inside it and a node span per task inside its
// step. Each node runs with its span in its context, so spans it starts
// and records it logs (see [NewLogHandler]) belong to its task.
//
//	res, err := g.Run(ctx, input, tr.Options(ctx)...)
//
// A nil Tracer returns no options.
func (t *Tracer) Options(ctx context.Context) []pregel.RunOption {
	if t == nil {
		return nil
	}
	return t.options(&runTrace{t: t, parent: ctx, own: true})
}

// RunOptions implements [runs.Tracer]: the options that trace one
// execution of run r. Its superstep spans join the trace r was created in
// (r.Trace, see [Tracer.StartRun]), so that a run resumed later continues
// its trace; a run created without tracing gets an invoke_workflow span
// of its own per execution.
func (t *Tracer) RunOptions(ctx context.Context, r runs.Run) []pregel.RunOption {
	if t == nil {
		return nil
	}
	rt := &runTrace{t: t, parent: ctx, own: true, thread: r.ContextID}
	if root := t.rootContext(ctx, r); root != nil {
		rt.parent, rt.own = root, false
	}
	return t.options(rt)
}

func (t *Tracer) options(rt *runTrace) []pregel.RunOption {
	return []pregel.RunOption{pregel.WithObserver(rt.observe), pregel.WithTaskContext(rt.task)}
}

// StartRun implements [runs.Tracer]: it starts the invoke_workflow span of
// a run being created and records its context in r.Trace, for the
// runtimes that execute the run later, elsewhere, to continue the trace.
func (t *Tracer) StartRun(ctx context.Context, r *runs.Run) (context.Context, func(error)) {
	if t == nil {
		return ctx, func(error) {}
	}
	attrs := runAttrs(r.Graph, r.ID, r.ContextID)
	if v := r.GraphVersion; v != nil {
		attrs = append(attrs, AttrGraphVersion.String(v.Label()))
	}
	ctx, span := t.tracer.Start(ctx, SpanRun+" "+r.Graph, trace.WithAttributes(attrs...))
	carrier := propagation.MapCarrier{}
	t.prop.Inject(ctx, carrier)
	r.Trace = carrier
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, "the run could not be created")
		}
		span.End()
	}
}

// rootContext returns ctx holding the run's root span context, from its
// record, or nil when the record holds none.
func (t *Tracer) rootContext(ctx context.Context, r runs.Run) context.Context {
	if len(r.Trace) == 0 {
		return nil
	}
	root := t.prop.Extract(ctx, propagation.MapCarrier(r.Trace))
	if !trace.SpanContextFromContext(root).IsValid() {
		return nil
	}
	return root
}

// runAttrs are the attributes of a run's root span.
func runAttrs(graph, runID, thread string) []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameInvokeWorkflow,
		semconv.GenAIWorkflowName(graph),
		AttrGraph.String(graph),
		AttrRunID.String(runID),
	}
	if thread != "" {
		attrs = append(attrs, AttrThreadID.String(thread), semconv.GenAIConversationID(thread))
	}
	return attrs
}

// baseAttrs are the attributes every superstep and node span carries.
func baseAttrs(graph, runID, thread string, step int, extra int) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 4+extra)
	attrs = append(attrs, AttrGraph.String(graph), AttrRunID.String(runID), AttrStep.Int(step))
	if thread != "" {
		attrs = append(attrs, AttrThreadID.String(thread))
	}
	return attrs
}

// runTrace turns the events of one engine run into spans. The engine
// calls observe one event at a time, and task from the goroutines that
// execute a step's tasks.
type runTrace struct {
	t      *Tracer
	parent context.Context
	own    bool // start an invoke_workflow span over the run
	thread string

	mu       sync.Mutex
	graph    string
	runCtx   context.Context
	runSpan  trace.Span
	stepCtx  context.Context
	stepSpan trace.Span
}

func (rt *runTrace) observe(ev pregel.Event) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	switch ev.Type {
	case pregel.EventRunStarted:
		rt.graph = ev.Graph
		rt.runCtx = rt.parent
		if rt.own {
			rt.runCtx, rt.runSpan = rt.t.tracer.Start(rt.parent, SpanRun+" "+ev.Graph, trace.WithTimestamp(ev.Time), trace.WithAttributes(runAttrs(ev.Graph, ev.RunID, rt.thread)...))
		}
	case pregel.EventStepStarted:
		attrs := append(baseAttrs(ev.Graph, ev.RunID, rt.thread, ev.Step, 1), AttrTasks.Int(ev.Tasks))
		rt.stepCtx, rt.stepSpan = rt.t.tracer.Start(rt.runContext(), SpanStep, trace.WithTimestamp(ev.Time), trace.WithAttributes(attrs...))
	case pregel.EventStepFinished:
		rt.endStep("committed", ev)
	case pregel.EventInterrupted:
		rt.endStep("interrupted", ev)
	case pregel.EventRunFinished:
		rt.endStep(string(ev.RunStatus), ev)
		if rt.runSpan != nil {
			rt.runSpan.SetAttributes(AttrRunStatus.String(string(ev.RunStatus)))
			if ev.Reason != "" {
				rt.runSpan.SetAttributes(AttrDrain.String(ev.Reason))
			}
			if ev.RunStatus == pregel.RunFailed {
				rt.runSpan.SetStatus(codes.Error, ev.Error)
			}
			rt.runSpan.End(trace.WithTimestamp(ev.Time))
			rt.runSpan = nil
		}
	}
}

// runContext is the parent of the run's superstep spans.
func (rt *runTrace) runContext() context.Context {
	if rt.runCtx != nil {
		return rt.runCtx
	}
	return rt.parent
}

// endStep ends the open superstep span, if any, saying how it ended.
func (rt *runTrace) endStep(outcome string, ev pregel.Event) {
	if rt.stepSpan == nil {
		return
	}
	rt.stepSpan.SetAttributes(AttrStepResult.String(outcome))
	if ev.RunStatus == pregel.RunFailed {
		rt.stepSpan.SetStatus(codes.Error, ev.Error)
	}
	rt.stepSpan.End(trace.WithTimestamp(ev.Time))
	rt.stepSpan, rt.stepCtx = nil, nil
}

// task starts a node span inside the open superstep span; the node runs
// with ctx (the run's, which it must honour) holding that span.
func (rt *runTrace) task(ctx context.Context, t pregel.Task) (context.Context, func(pregel.TaskResult)) {
	rt.mu.Lock()
	parent, graph := rt.stepCtx, rt.graph
	if parent == nil {
		parent = rt.runContext()
	}
	rt.mu.Unlock()
	return rt.t.startTask(ctx, parent, graph, rt.thread, t)
}

// startTask starts the span of task t as a child of the span in parent,
// and returns ctx holding it.
func (t *Tracer) startTask(ctx, parent context.Context, graph, thread string, task pregel.Task) (context.Context, func(pregel.TaskResult)) {
	attrs := append(baseAttrs(graph, task.RunID, thread, task.Step, 2), AttrNode.String(task.Node()), AttrTaskID.String(task.ID))
	_, span := t.tracer.Start(parent, SpanNode+" "+task.Node(), trace.WithAttributes(attrs...))
	return trace.ContextWithSpan(ctx, span), func(res pregel.TaskResult) { endTask(span, res) }
}

// endTask records a task's result on its span and ends it.
func endTask(span trace.Span, res pregel.TaskResult) {
	span.SetAttributes(AttrStatus.String(string(res.Status)), AttrAttempts.Int(res.Attempts))
	if res.Reason != "" {
		span.SetAttributes(AttrReason.String(res.Reason))
	}
	switch res.Status {
	case pregel.NodeFailed:
		span.SetStatus(codes.Error, res.Error)
	case pregel.NodeInterrupted:
		ids := make([]string, len(res.Interrupts))
		for i, in := range res.Interrupts {
			ids[i] = in.ID
		}
		span.SetAttributes(attribute.StringSlice("superstep.interrupts", ids))
	}
	span.End()
}

// StartTick implements [tick.Tracer]: the superstep span of one tick of
// run. Its parent is the run's root span (from the record) so that every
// tick of a run is a child of the run, linked to the span that sent the
// tick message (ctx's, see [Tracer.FromMessage]); without a root on the
// record, the sender's span is the parent.
func (t *Tracer) StartTick(ctx context.Context, run runs.Run, step int) (context.Context, func(error)) {
	if t == nil {
		return ctx, func(error) {}
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(baseAttrs(run.Graph, run.ID, run.ContextID, step, 0)...)}
	parent := ctx
	if root := t.rootContext(ctx, run); root != nil {
		parent = root
		if sender := trace.SpanContextFromContext(ctx); sender.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sender}))
		}
	}
	ctx, span := t.tracer.Start(parent, SpanStep, opts...)
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, "the tick failed; it is retried")
		}
		span.End()
	}
}

// StartTask implements [tick.Tracer]: the node span of a task executed by
// a tick (a child of the tick's span) or by a node function (a child of
// the tick span that sent it, carried by the message; of the run's root
// when the message carried none).
func (t *Tracer) StartTask(ctx context.Context, run runs.Run, task pregel.Task) (context.Context, func(pregel.TaskResult)) {
	if t == nil {
		return ctx, func(pregel.TaskResult) {}
	}
	parent := ctx
	if !trace.SpanContextFromContext(ctx).IsValid() {
		if root := t.rootContext(ctx, run); root != nil {
			parent = root
		}
	}
	return t.startTask(ctx, parent, run.Graph, run.ContextID, task)
}
