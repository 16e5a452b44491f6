// Package a2a makes every registered graph an A2A agent, and lets a node
// call a remote A2A agent.
//
// # Serving graphs
//
// [New] returns an [http.Handler] that serves, for each graph of a
// [runs.Service]'s registry:
//
//	GET  /a2a/{graph}/.well-known/agent-card.json   the agent card
//	POST /a2a/{graph}                               JSON-RPC, A2A 1.0 and 0.3
//	/a2a/{graph}/message:send, /tasks/{id}, ...     HTTP+JSON, A2A 1.0
//	/a2a/{graph}/v1/message:send, /v1/tasks/{id}, ... HTTP+JSON, A2A 0.3
//
// Tasks are runs of the durable engine: the task id is the run id, the
// context id groups runs, and every request reads or changes the run record
// through the Service, so a task survives restarts and is served by
// whichever process (or Lambda invocation) receives the next request. The
// SDK's in-memory task execution is not used.
//
//	srv, err := a2a.New(svc, a2a.WithEvents(sched), a2a.WithStreaming(true))
//	if err != nil {
//		return err
//	}
//	apiHandler.Handle(a2a.Pattern, srv)
//
// Run statuses map to task states as DESIGN section 5 says: pending is
// submitted, running and drained are working (a drained task's status
// message says so and why), interrupted is input-required (auth-required
// when an interrupt payload has "auth_required": true), completed carries
// the final state as an artifact, failed gives a generic message, cancelled
// is canceled, and input the graph refuses is rejected. README.md documents
// the conventions: how a message becomes the graph's input or a resume
// value, how interrupts become questions, and the artifacts.
//
// # Calling remote agents
//
// [RemoteAgent] returns a pregel node that sends a message built from the
// state to a remote agent (found by its card URL, A2A 1.0 or 0.3) and maps
// the remote task back: completed gives the node's writes, failed, canceled
// and rejected fail the node, input-required and auth-required interrupt the
// run, and resuming the run answers the remote task.
package a2a
