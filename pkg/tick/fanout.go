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
		n, err := c.CountSettled(ctx, cp.RunID, step)
		return n, false, err
	}
	won := stored.Status == pregel.NodeCompleted
	n, s, err := sc.CountSettledSucceeded(ctx, cp.RunID, step, won)
	return n, won && s >= minimum, err
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
