package dynamo

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// LoadRunTask returns what a node handler starts from: the run record, its
// newest checkpoint (nil if none), the result recorded for task taskID of
// the step after it (none or one), and whether any result of that step is
// recorded. It implements tick.TaskLoader.
//
// Unlike LoadRun it never reads the other results of the step, so a node
// task of a step of a thousand tasks reads a few items, not a thousand:
// one Query (as LoadRun's first) when no result is recorded; otherwise
// also Load(Latest) (a Query that reads nothing when the Store has the
// newest step cached) and a GetItem of the task's result.
func (s *Store) LoadRunTask(ctx context.Context, runID, taskID string) (runs.Run, *pregel.Checkpoint, []pregel.TaskResult, bool, error) {
	if err := ctx.Err(); err != nil {
		return runs.Run{}, nil, nil, false, err
	}
	low := skStep
	cached, known, isCached := s.newestCached(runID)
	if isCached {
		low = stepSK(known + 1)
	}
	out, err := s.client.Query(ctx, &dynamodb.QueryInput{
		TableName:              aws.String(s.table),
		KeyConditionExpression: aws.String("pk = :pk AND sk BETWEEN :low AND :run"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": str(runPK(runID)), ":low": str(low), ":run": str(skRun),
		},
		ScanIndexForward: aws.Bool(false),
		Limit:            aws.Int32(2),
		ConsistentRead:   aws.Bool(true),
	})
	if err != nil {
		return runs.Run{}, nil, nil, false, fmt.Errorf("dynamo: load run %q: Query: %w", runID, err)
	}
	if len(out.Items) == 0 || !isRunItem(out.Items[0]) {
		return runs.Run{}, nil, nil, false, fmt.Errorf("run %q: %w", runID, runs.ErrNotFound)
	}
	rs, err := s.decodeRuns(ctx, out.Items[:1])
	if err != nil {
		return runs.Run{}, nil, nil, false, err
	}
	run := rs[0]
	if len(out.Items) == 2 && isStopItem(out.Items[1]) {
		// A drain or cancel marked the step after the newest (stop.go).
		under, err := s.stepUnder(ctx, runID, low, out.Items[1])
		if err != nil {
			return runs.Run{}, nil, nil, false, err
		}
		out.Items = append(out.Items[:1], under...)
	}
	if len(out.Items) == 1 {
		if isCached {
			cp, err := s.ensure(ctx, runID, cached.cp, nil)
			if err == nil && cp != nil {
				s.noteShards(runID, cp.Step+1, shardInfo{}) // no marker
			}
			return run, cp, nil, false, err
		}
		return run, nil, nil, false, nil
	}
	next := out.Items[1]
	sk, _ := getS(next, attrSK)
	top, isTask := parseTaskSK(sk)
	if !isTask {
		cp, err := s.checkpointOf(ctx, runID, next)
		if err != nil {
			return runs.Run{}, nil, nil, false, err
		}
		// No task item sorts above the step: the open step has no
		// marker (shards.go), and its items are in the run's partition.
		s.noteShards(runID, cp.Step+1, shardInfo{})
		return run, cp, nil, false, nil
	}
	// The first task item is the open step's marker if it is sharded
	// (a marker is written before any result of its step).
	info, _ := isMarker(next)
	// Results are stored: the first sorts last, so it is of the newest
	// step that has any. The newest step is read after it.
	cp, err := s.Load(ctx, runID, pregel.Latest)
	open := 1
	switch {
	case errors.Is(err, pregel.ErrNotFound):
		cp = nil
	case err != nil:
		return runs.Run{}, nil, nil, false, err
	default:
		open = cp.Step + 1
	}
	if top != open {
		// Only left overs of committed steps: the open step has none,
		// and no marker.
		if top < open {
			s.noteShards(runID, open, shardInfo{})
		}
		return run, cp, nil, false, nil
	}
	s.noteShards(runID, open, info) // not marked: its results are here
	item, err := s.getItem(ctx, info.taskPKOf(runID, taskID), taskSK(open, taskID))
	switch {
	case errors.Is(err, errItemNotFound):
		// A sharded step's marker says it was dispatched, not that a
		// result is recorded; it counts as started (a drain stops the
		// run after it).
		return run, cp, nil, true, nil
	case err != nil:
		return runs.Run{}, nil, nil, false, fmt.Errorf("dynamo: load run %q: task %s: %w", runID, taskID, err)
	}
	res, err := s.decodeTasks(ctx, []map[string]types.AttributeValue{item})
	if err != nil {
		return runs.Run{}, nil, nil, false, fmt.Errorf("dynamo: load run %q: %w", runID, err)
	}
	ref, _ := docRef(item, attrData)
	s.noteTasks(runID, open, map[string]*blobRef{taskID: ref})
	return run, cp, res, true, nil
}
