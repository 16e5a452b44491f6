package pregel

// NodeStatus says what happened to one node execution.
type NodeStatus string

// Node statuses.
const (
	NodePending   NodeStatus = "pending"
	NodeRunning   NodeStatus = "running"
	NodeCompleted NodeStatus = "completed"
	// NodeSkipped: the node was bypassed (ShouldExecute or a hook said
	// so). It wrote nothing; its edges and routers still fire.
	NodeSkipped NodeStatus = "skipped"
	// NodeCancelled: a hook cancelled the node. Its branch ends there.
	NodeCancelled NodeStatus = "cancelled"
	// NodeFailed: the node failed after its retry policy was exhausted.
	NodeFailed NodeStatus = "failed"
	// NodeInterrupted: the node called Interrupt and waits for a value.
	NodeInterrupted NodeStatus = "interrupted"
)

// RunStatus says where a run stands.
type RunStatus string

// Run statuses.
const (
	RunPending     RunStatus = "pending"
	RunRunning     RunStatus = "running"
	RunInterrupted RunStatus = "interrupted"
	// RunDrained: the run stopped at a superstep boundary on request and
	// can be resumed from its last checkpoint.
	RunDrained   RunStatus = "drained"
	RunCompleted RunStatus = "completed"
	RunFailed    RunStatus = "failed"
	RunCancelled RunStatus = "cancelled"
)

// Terminal reports whether a run in this status can no longer change.
func (s RunStatus) Terminal() bool {
	return s == RunCompleted || s == RunFailed || s == RunCancelled
}

// Resumable reports whether a run in this status can be resumed.
func (s RunStatus) Resumable() bool {
	return s == RunInterrupted || s == RunDrained
}
