package tracing

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

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
	if l, ok := t.resumeLink(ctx, r, -1); ok {
		rt.link = &l // the execution continues a resumed run
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
	name, attrs := t.root(r.Graph, r.ID, r.ContextID)
	if v := r.GraphVersion; v != nil {
		attrs = append(attrs, AttrGraphVersion.String(v.Label()))
	}
	ctx, span := t.tracer.Start(ctx, name, trace.WithAttributes(attrs...))
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
	link   *trace.Link // to the request that resumed the run: on the first step span

	mu       sync.Mutex
	graph    string
	runCtx   context.Context
	runSpan  trace.Span
	stepCtx  context.Context
	stepSpan trace.Span
	failed   string // the node whose task failed last
}

func (rt *runTrace) observe(ev pregel.Event) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	switch ev.Type {
	case pregel.EventRunStarted:
		rt.graph = ev.Graph
		rt.runCtx = rt.parent
		if rt.own {
			name, attrs := rt.t.root(ev.Graph, ev.RunID, rt.thread)
			rt.runCtx, rt.runSpan = rt.t.tracer.Start(rt.parent, name, trace.WithTimestamp(ev.Time), trace.WithAttributes(attrs...))
		}
	case pregel.EventStepStarted:
		attrs := append(baseAttrs(ev.Graph, ev.RunID, rt.thread, ev.Step, 1), AttrTasks.Int(ev.Tasks))
		opts := []trace.SpanStartOption{trace.WithTimestamp(ev.Time), trace.WithAttributes(attrs...)}
		if rt.link != nil {
			opts = append(opts, trace.WithLinks(*rt.link))
			rt.link = nil
		}
		rt.stepCtx, rt.stepSpan = rt.t.tracer.Start(rt.runContext(), SpanStep, opts...)
	case pregel.EventStepFinished:
		rt.endStep("committed", ev)
	case pregel.EventInterrupted:
		rt.endStep("interrupted", ev)
	case pregel.EventRunFinished:
		if ev.RunStatus == pregel.RunFailed && ev.Node == "" {
			ev.Node = rt.failed
		}
		rt.endStep(string(ev.RunStatus), ev)
		rt.t.endSpan(rt.runContext(), ev.Graph, ev.RunStatus, ev.Reason, ev.Error, ev.Node, ev.Time,
			trace.WithAttributes(baseAttrs(ev.Graph, ev.RunID, rt.thread, ev.Step, 0)...))
		if rt.runSpan != nil {
			rt.runSpan.SetAttributes(AttrRunStatus.String(string(ev.RunStatus)))
			if ev.Reason != "" {
				rt.runSpan.SetAttributes(AttrDrain.String(ev.Reason))
			}
			if ev.RunStatus == pregel.RunFailed {
				rt.runSpan.SetAttributes(semconv.ErrorTypeKey.String(errorType(ev.Node)))
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
		rt.stepSpan.SetAttributes(semconv.ErrorTypeKey.String(errorType(ev.Node)))
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
	ctx, end := rt.t.startTask(ctx, parent, graph, rt.thread, t)
	return ctx, func(res pregel.TaskResult) {
		if res.Status == pregel.NodeFailed {
			rt.mu.Lock()
			rt.failed = t.Node()
			rt.mu.Unlock()
		}
		end(res)
	}
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
		span.SetAttributes(semconv.ErrorTypeKey.String("node_failed"))
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
func (t *Tracer) StartTick(ctx context.Context, run runs.Run, step int, start time.Time) (context.Context, func(error)) {
	if t == nil {
		return ctx, func(error) {}
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(baseAttrs(run.Graph, run.ID, run.ContextID, step, 0)...)}
	if !start.IsZero() {
		opts = append(opts, trace.WithTimestamp(start))
	}
	parent := ctx
	sender := trace.SpanContextFromContext(ctx)
	if root := t.rootContext(ctx, run); root != nil {
		parent = root
		if sender.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sender}))
		}
	}
	if l, ok := t.resumeLink(ctx, run, step); ok && l.SpanContext.SpanID() != sender.SpanID() {
		opts = append(opts, trace.WithLinks(l))
	}
	opts = append(opts, trace.WithAttributes(messagingAttrs(ctx)...))
	ctx, span := t.tracer.Start(parent, SpanStep, opts...)
	ctx = context.WithValue(ctx, tickKey{}, &tickSpan{span: span})
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

// tickKey holds, in a context, the span of the tick working in it
// (StartTick), for Annotate.
type tickKey struct{}

// tickSpan is a tick's span and whether its outcome is set.
type tickSpan struct {
	span    trace.Span
	outcome atomic.Bool
}

// Annotate implements [tick.Tracer]: it records on the span of the tick
// in ctx the tasks of its step and how the tick's work ended
// (superstep.step.tasks, superstep.step.outcome); a failed run's outcome
// sets error.type and status Error. A context holding no tick's span
// (a node handler's) is left alone.
func (t *Tracer) Annotate(ctx context.Context, tasks int, outcome string) {
	if t == nil {
		return
	}
	ts, _ := ctx.Value(tickKey{}).(*tickSpan)
	if ts == nil {
		return
	}
	span := ts.span
	if tasks > 0 {
		span.SetAttributes(AttrTasks.Int(tasks))
	}
	// The first outcome says what the tick did with its step: a tick that
	// commits a step and then finds the run done says committed (the
	// run's end span says completed).
	if outcome != "" && ts.outcome.CompareAndSwap(false, true) {
		span.SetAttributes(AttrStepResult.String(outcome))
		if outcome == string(pregel.RunFailed) {
			span.SetAttributes(semconv.ErrorTypeKey.String("run_failed"))
			span.SetStatus(codes.Error, "the run failed")
		}
	}
}
