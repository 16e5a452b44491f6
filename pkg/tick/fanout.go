package tick

import (
	"context"
	"fmt"

	"github.com/superstep/superstep/pkg/pregel"
)

// Fan-out completion policies on the serverless path (see
// pkg/pregel/fanpolicy.go). The tick protocol needs three things of them:
//
//   - A step may commit before every task has a result, once a fan-out's
//     minimum of successes (pregel.MinSuccesses) is reached:
//     pregel.Graph.StepSettled replaces "every task settled" where the
//     tick and node handlers decide to commit, and Apply cancels the tasks
//     left without a result, with the fan-out named as the reason.
//   - With a SettleCounter (a wide step), the node handler whose success
//     may reach the minimum must read the results although not all are
//     in: a SuccessCounter counts the step's successes in the same write
//     as its settled results, and a handler whose count of successes
//     reaches the minimum of its task's fan-out reads them.
//   - A node task still running when its step commits records its result
//     into a committed step: the store refuses it (ErrStepConflict) and
//     the handler drops it; the step keeps the task cancelled. Lambdas
//     are not interrupted: such a task runs to its end, and its message
//     is deleted.

// SuccessCounter is a SettleCounter that also counts the successes
// (completed results) of a step's remote tasks, in the same write, for
// fan-outs with a minimum of successes. CountSettledSucceeded adds one to
// the count of settled results of step, and to its count of successes
// when success is set, and returns both counts after the addition. Like
// the settled count, the count of successes is at least the number of
// successes recorded and may be more: it is a hint to read the results.
type SuccessCounter interface {
	CountSettledSucceeded(ctx context.Context, runID string, step int, success bool) (settled, successes int, err error)
}

// countSettled counts the settled result stored of a task of a wide step
// and reports the settled count, and whether the step may commit before
// it reaches the number of remote tasks: the task belongs to a fan-out
// with a minimum of successes that the step's count of successes reaches.
func (h *Handler) countSettled(ctx context.Context, c SettleCounter, g *pregel.Graph, cp *pregel.Checkpoint, tasks []pregel.Task, stored pregel.TaskResult) (int, bool, error) {
	step := cp.Step + 1
	minimum := 0
	for _, t := range tasks {
		if t.ID == stored.TaskID {
			minimum = g.FanOutMinimum(t)
			break
		}
	}
	sc, ok := c.(SuccessCounter)
	if minimum == 0 || !ok {
		if tc, ok := c.(TaskSettleCounter); ok {
			// The count may be spread over shards: the store says
			// whether this handler reads the results.
			all, err := tc.SettledAll(ctx, cp.RunID, step, stored.TaskID, h.remoteTasks(g, tasks))
			return 0, all, err
		}
		n, err := c.CountSettled(ctx, cp.RunID, step)
		return n, false, err
	}
	won := stored.Status == pregel.NodeCompleted
	n, s, err := sc.CountSettledSucceeded(ctx, cp.RunID, step, won)
	return n, won && s >= minimum, err
}

// TaskSettleCounter is a SettleCounter that counts a settled result with
// its task's id, so that it can spread the count of a wide step over
// several items (dynamo.Store: one per shard of the step's task items,
// see TaskSharder). SettledAll counts the settled result of task taskID
// of step, and reports whether the step's remote tasks, remote of them,
// may all have settled: then the handler reads the results and commits if
// they have. As with CountSettled, of the handlers recording the results
// the one whose count comes last must see true.
type TaskSettleCounter interface {
	SettledAll(ctx context.Context, runID string, step int, taskID string, remote int) (bool, error)
}

// TaskSharder is a Checkpointer that spreads the items of a wide step's
// tasks (results, leases, counts) over several partitions, to stay under
// a store's per-partition limits (dynamo.Store: DynamoDB serves about
// 1,000 write units a second to one partition key value). ShardTasks fixes
// the layout of step from the ids of all its remote tasks before any of
// them is sent; it is called only when the step has no result recorded,
// and keeps the layout of a step that has one. The handlers call it for
// steps of at least CountSettledFrom remote tasks, whose handlers count
// (SettleCounter), unless a task of the step belongs to a fan-out with a
// minimum of successes (their counts stay on one item, SuccessCounter).
type TaskSharder interface {
	ShardTasks(ctx context.Context, runID string, step int, taskIDs []string) error
}

// UnshardedNoter is a TaskSharder that can be told that a step's task
// items are not sharded, so that the step's first lease need not read its
// layout. The handlers tell it of the steps they chain (one remote task:
// fewer than CountSettledFrom, which shardStep never shards).
type UnshardedNoter interface {
	NoteUnsharded(runID string, step int)
}

// shardStep fixes the layout of a wide step's task items before its node
// tasks are sent (TaskSharder), when the Checkpointer can.
func (h *Handler) shardStep(ctx context.Context, g *pregel.Graph, runID string, step int, tasks []pregel.Task) error {
	sh, ok := h.Checkpoints.(TaskSharder)
	if !ok || !h.counting(g, tasks) {
		return nil
	}
	ids := make([]string, 0, len(tasks))
	for _, t := range tasks {
		if g.FanOutMinimum(t) > 0 {
			// Its handlers count successes on one item
			// (SuccessCounter), which the settled count must share.
			return nil
		}
		if info, _ := g.Node(t.Node()); info.IsRemote() {
			ids = append(ids, t.ID)
		}
	}
	if err := sh.ShardTasks(ctx, runID, step, ids); err != nil {
		return fmt.Errorf("shard the tasks of step %d: %w", step, err)
	}
	return nil
}

// TaskBatchSender is a Queue that sends many node tasks in few requests
// (sqsqueue.Queue: SendMessageBatch, 10 a request). The handlers send a
// step's node tasks through it when the Queue implements it.
type TaskBatchSender interface {
	SendTasks(ctx context.Context, ts []NodeTask) error
}

// sendTasks sends node tasks, in batches when the Queue can.
func (h *Handler) sendTasks(ctx context.Context, ts []NodeTask) error {
	if len(ts) == 0 {
		return nil
	}
	if b, ok := h.Queue.(TaskBatchSender); ok && len(ts) > 1 {
		if err := b.SendTasks(ctx, ts); err != nil {
			return fmt.Errorf("send %d node tasks: %w", len(ts), err)
		}
		return nil
	}
	for _, t := range ts {
		if err := h.Queue.SendTask(ctx, t); err != nil {
			return fmt.Errorf("send task %s: %w", t.TaskID, err)
		}
	}
	return nil
}
