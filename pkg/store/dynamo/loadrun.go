package dynamo

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// LoadRun returns what a tick starts from: the run record, its newest
// checkpoint (nil if it has none) and the recorded results of the step
// after that one. It implements tick.RunLoader.
//
// It is one Query in the common case: the run record's sort key sorts
// after those of task results, and those after step items, so the first
// two items in descending order are the run record and, when no task
// result is stored, the newest step. A Store that has a step of the run
// cached reads only steps after it, usually none. Only when task results
// are stored (remote tasks, a step of several tasks, a resume) does it
// read them and the newest step with a Query each, deleting results left
// over from committed steps.
func (s *Store) LoadRun(ctx context.Context, runID string) (runs.Run, *pregel.Checkpoint, []pregel.TaskResult, error) {
	return s.loadRun(ctx, runID, nil)
}

// loadRun is LoadRun reading the values reads asks for (nil: all; see
// LoadRunReading).
func (s *Store) loadRun(ctx context.Context, runID string, reads Reads) (runs.Run, *pregel.Checkpoint, []pregel.TaskResult, error) {
	if err := ctx.Err(); err != nil {
		return runs.Run{}, nil, nil, err
	}
	pk := runPK(runID)
	low := skStep
	cached, known, isCached := s.newestCached(runID)
	if isCached {
		low = stepSK(known + 1)
	}
	out, err := s.client.Query(ctx, &dynamodb.QueryInput{
		TableName:              aws.String(s.table),
		KeyConditionExpression: aws.String("pk = :pk AND sk BETWEEN :low AND :run"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": str(pk), ":low": str(low), ":run": str(skRun),
		},
		ScanIndexForward: aws.Bool(false),
		Limit:            aws.Int32(2),
		ConsistentRead:   aws.Bool(true),
	})
	if err != nil {
		return runs.Run{}, nil, nil, fmt.Errorf("dynamo: load run %q: Query: %w", runID, err)
	}
	if len(out.Items) == 0 || !isRunItem(out.Items[0]) {
		return runs.Run{}, nil, nil, fmt.Errorf("run %q: %w", runID, runs.ErrNotFound)
	}
	rs, err := s.decodeRuns(ctx, out.Items[:1])
	if err != nil {
		return runs.Run{}, nil, nil, err
	}
	run := rs[0]
	if len(out.Items) == 2 && isStopItem(out.Items[1]) {
		// A drain or cancel marked the step after the newest (stop.go).
		under, err := s.stepUnder(ctx, runID, low, out.Items[1])
		if err != nil {
			return runs.Run{}, nil, nil, err
		}
		out.Items = append(out.Items[:1], under...)
	}
	if len(out.Items) == 1 {
		if isCached {
			cp, err := s.ensure(ctx, runID, cached.cp, reads)
			if err == nil && cp != nil {
				s.noteShards(runID, cp.Step+1, shardInfo{}) // no marker (shards.go)
			}
			return run, cp, nil, err
		}
		return run, nil, nil, nil
	}
	next := out.Items[1]
	if sk, _ := getS(next, attrSK); !isTaskSK(sk) {
		cp, err := s.checkpointReading(ctx, runID, next, reads)
		if err != nil {
			return runs.Run{}, nil, nil, err
		}
		s.noteShards(runID, cp.Step+1, shardInfo{}) // no marker (shards.go)
		return run, cp, nil, nil
	}
	cp, pending, err := s.loadWithTasks(ctx, runID, reads)
	if err != nil {
		return runs.Run{}, nil, nil, err
	}
	return run, cp, pending, nil
}

func isRunItem(item map[string]types.AttributeValue) bool {
	sk, _ := getS(item, attrSK)
	return sk == skRun
}

func isTaskSK(sk string) bool {
	_, ok := parseTaskSK(sk)
	return ok
}

// loadWithTasks reads every task result item of a run and then its newest
// step, with one Query in the common case (tasksDown). Results of the step
// after the newest are pending; those of committed steps are left overs,
// deleted. A Store that has a step of the run cached reads only the steps
// after it.
func (s *Store) loadWithTasks(ctx context.Context, runID string, reads Reads) (*pregel.Checkpoint, []pregel.TaskResult, error) {
	low := skStep
	cached, known, isCached := s.newestCached(runID)
	if isCached {
		low = stepSK(known + 1)
	}
	newest, byStep, err := s.tasksDown(ctx, runID, low, skTask+lastKey)
	if err != nil {
		return nil, nil, fmt.Errorf("dynamo: load run %q: task results: %w", runID, err)
	}
	var cp *pregel.Checkpoint
	open := 1
	switch {
	case newest != nil:
		if cp, err = s.checkpointReading(ctx, runID, newest, reads); err != nil {
			return nil, nil, err
		}
		open = cp.Step + 1
	case isCached:
		if cp, err = s.ensure(ctx, runID, cached.cp, reads); err != nil {
			return nil, nil, err
		}
		open = known + 1
	}
	if _, ok := s.shards.get(stepKey{runID, open}); !ok {
		s.noteShards(runID, open, shardInfo{}) // no marker read (shards.go)
	}
	var pending []pregel.TaskResult
	for _, step := range slices.Sorted(maps.Keys(byStep)) {
		if step > open {
			continue
		}
		res, err := s.openTasks(ctx, runID, step, byStep[step], step < open)
		if err != nil {
			return nil, nil, fmt.Errorf("dynamo: load run %q: task results of step %d: %w", runID, step, err)
		}
		if step == open {
			pending = res
		}
	}
	return cp, pending, nil
}
