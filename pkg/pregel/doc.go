// Package pregel defines and runs durable agent graphs, one superstep at a
// time.
//
// A graph is built over a state struct S whose exported fields are channels
// (named by their json tag; a `reduce` tag picks how writes combine:
// append, merge, sum, last or a custom reducer). Nodes receive a snapshot
// of the state and return a partial S: their writes. An empty update (a
// nil slice to append, a nil map to merge, null to sum) leaves a channel
// that has no value yet without one, so a fan-out whose tasks all find
// nothing still leaves a decodable state.
//
//	g := pregel.NewGraph[State]("triage")
//	g.AddFunc("classify", classify, pregel.Writes("category"))
//	g.AddEdge(pregel.Start, "classify")
//	g.AddConditionalEdges("classify", route, "answer", "escalate")
//	graph, err := g.Compile()
//	res, err := graph.Run(ctx, State{Question: "..."})
//
// Edges: AddEdge (static), AddJoin (wait for several predecessors),
// AddConditionalEdges (a router picks the next nodes), AddFanOut (one task
// per item, map/reduce; AddFanOutOver for fixed items), loops (edges back,
// bounded by MaxSteps), Subgraph (a compiled graph as a node) and OnError
// (route a failure to a handler). A fan-out may have a completion policy:
// [ToleratedFailures] or [ToleratedFailurePercent] let items fail without
// failing the run, [MinSuccesses] completes it once enough items succeeded
// (the rest are cancelled), and [FanOutOutcomes] gives the join one
// [ItemOutcome] per item; see fanpolicy.go.
//
// [Builder.Compile] checks the graph: unknown or duplicate nodes, nodes
// unreachable from Start or unable to reach End, and channels without a
// reducer that two nodes may write in one superstep. That last check is
// judged from the writes nodes declare with [Writes]; a node that declares
// none is not checked at compile time, and a conflicting write of it fails
// the run when it happens, with an error wrapping [ErrWriteConflict].
//
// Nodes implement [Node] and optionally [Validator], [Conditional]
// (ShouldExecute; false skips the node), [BeforeHook], [AfterHook],
// [FailureHook] and [Describer]; [Builder.BeforeNode] hooks may skip or
// cancel any node. A skipped node counts as finished (its edges and
// routers fire, joins count it); a cancelled node ends its branch.
//
// A superstep is three functions over plain data, so that separate
// processes can run them: [Graph.Plan] lists the tasks of the next step
// with deterministic ids, [Graph.Execute] runs one task, and [Graph.Apply]
// folds the results, in plan order, into the next [Checkpoint].
// [Graph.Run] and [Graph.Resume] drive them in-process against a
// [Checkpointer], with a [Control] to drain or cancel the run and an
// [Observer] for events. Nodes may pause the run with [Interrupt] and ask
// for a drain with [RequestDrain].
//
// A graph may declare, for the servers that run it, two of its channels:
// [TextInput] says how plain text becomes its input (a server given text,
// over /v1 or A2A, calls [Graph.InputFromText]), and [UsageChannel] names
// the channel holding its token usage ([UsageTotals]), which servers show
// with the run ([Graph.Usage]).
//
// Checkpoints are stored as deltas: a store writes only the channels a step
// changed. A channel whose reducer is append, or was registered with
// [Builder.AppendReducer] (a conversation's messages), is moreover stored
// in segments, so a step that appends to it stores only what it appended,
// not the whole array again; stores turn a checkpoint into that form with
// [PackSegments] and back with [UnpackSegments], and a run that continues
// another ([Graph.ContinueFrom]) inherits the segments. The rule that keeps
// the segments few, and its costs, are in segments.go.
package pregel
