package pregel

import (
	"context"
	"time"
)

// Node is the contract of a graph node over state S. Execute receives a
// snapshot of the state and returns the node's writes as a partial S: the
// fields it declares with [Writes], or, when it declares none, the fields
// it sets to a non-zero value. Execute must honour ctx: when the run is
// cancelled or the node times out, ctx is done.
//
// A node may also implement [Validator], [Conditional], [BeforeHook],
// [AfterHook], [FailureHook] and [Describer].
type Node[S any] interface {
	Execute(ctx context.Context, state S) (S, error)
}

// NodeFunc adapts a plain function to Node.
type NodeFunc[S any] func(ctx context.Context, state S) (S, error)

// Execute calls f.
func (f NodeFunc[S]) Execute(ctx context.Context, state S) (S, error) { return f(ctx, state) }

// Validator is implemented by nodes that check their input before running.
// Validate must be cheap and must not change anything; its error says what
// to fix. A validation error fails the node without retrying.
type Validator[S any] interface {
	Validate(ctx context.Context, state S) error
}

// Conditional is implemented by nodes that may be bypassed: when
// ShouldExecute returns false the node is skipped.
type Conditional[S any] interface {
	ShouldExecute(ctx context.Context, state S) bool
}

// BeforeHook is implemented by nodes that act before each attempt. An
// error counts as a failed attempt.
type BeforeHook[S any] interface {
	BeforeExecute(ctx context.Context, state S) error
}

// AfterHook is implemented by nodes that act after a successful attempt.
// An error counts as a failed attempt.
type AfterHook[S any] interface {
	AfterExecute(ctx context.Context, state S, update S) error
}

// FailureHook is implemented by nodes that act once when they have failed
// for good, after their retries.
type FailureHook[S any] interface {
	OnFailure(ctx context.Context, state S, err error)
}

// Describer is implemented by nodes that describe themselves.
type Describer interface {
	Describe() NodeInfo
}

// NodeInfo is a node's identity and declared data flow.
type NodeInfo struct {
	// ID is the node's name in the graph.
	ID          string            `json:"id"`
	Name        string            `json:"name,omitempty"`
	Description string            `json:"description,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	// Reads and Writes list the channels the node reads and writes.
	Reads  []string `json:"reads,omitempty"`
	Writes []string `json:"writes,omitempty"`
}

// NodeOption configures a node when it is added to a graph.
type NodeOption func(*nodeConfig)

type nodeConfig struct {
	info    NodeInfo
	retry   RetryPolicy
	timeout time.Duration
	onError string
}

// Reads declares the channels a node reads. The node, its hooks,
// ShouldExecute and Validate then see only those channels (every other
// field of the state is its zero value), and its routers and fan-outs see
// those and the channels it declares with [Writes], after its writes; this
// holds in every runtime, so that a serverless tick may load only what a
// step reads ([Graph.StepReads]). A node that declares no reads sees the
// whole state. [CheckReads] finds, in tests, nodes that read more than
// they declare.
func Reads(channels ...string) NodeOption {
	return func(c *nodeConfig) { c.info.Reads = append(c.info.Reads, channels...) }
}

// Writes declares the channels a node writes. A node that declares its
// writes writes exactly those channels, zero values included, and setting
// any other field is an error.
func Writes(channels ...string) NodeOption {
	return func(c *nodeConfig) { c.info.Writes = append(c.info.Writes, channels...) }
}

// Describe sets a node's display name and description.
func Describe(name, description string) NodeOption {
	return func(c *nodeConfig) { c.info.Name, c.info.Description = name, description }
}

// Metadata attaches a key/value pair to a node.
func Metadata(key, value string) NodeOption {
	return func(c *nodeConfig) {
		if c.info.Metadata == nil {
			c.info.Metadata = make(map[string]string)
		}
		c.info.Metadata[key] = value
	}
}

// WithRetry sets a node's retry policy.
func WithRetry(p RetryPolicy) NodeOption { return func(c *nodeConfig) { c.retry = p } }

// WithTimeout bounds each attempt of a node.
func WithTimeout(d time.Duration) NodeOption { return func(c *nodeConfig) { c.timeout = d } }

// OnError routes the node's failure to handler: instead of failing the run,
// the handler node runs in the next superstep and reads the failure with
// [FailureFrom].
func OnError(handler string) NodeOption { return func(c *nodeConfig) { c.onError = handler } }

// Action is a graph hook's decision about a node.
type Action int

// Hook actions.
const (
	Continue Action = iota // run the node
	Skip                   // bypass it: status skipped, downstream goes on
	Cancel                 // stop it: status cancelled, its branch ends
)

// Decision is what a BeforeNode hook returns.
type Decision struct {
	Action Action
	Reason string
}

// NodeReport is what an AfterNode hook is told about a finished node.
type NodeReport struct {
	Info     NodeInfo
	Status   NodeStatus
	Reason   string
	Attempts int
	Err      error
}

// PlacementKey is the metadata key that says where a node runs.
const PlacementKey = "placement"

// Remote marks a node to run outside the superstep's own process: in the
// serverless runtime, in the node Lambda rather than inline in the tick.
// Embedded runs ignore it.
func Remote() NodeOption { return Metadata(PlacementKey, "remote") }

// IsRemote reports whether the node was marked with Remote.
func (n NodeInfo) IsRemote() bool { return n.Metadata[PlacementKey] == "remote" }
