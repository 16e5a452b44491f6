package dynamo

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// Stop markers fold the drain and cancel check of a chained superstep into
// its commit. A PutItem's condition sees only its own item, so a request
// to stop a run (a run record written with a drain or cancel requested
// while the run is pending or running) also puts a marker item at the key
// of the step after the run's newest: STEP#(n+1) with attribute attrStop.
// The commit of that step puts its item over the marker (its condition is
// attribute_not_exists(sk) OR attribute_exists(stop)) and, from the old
// item PutItem returns, reports that a stop was asked for (CommitStop): a
// chain of supersteps then reads the run record before it goes on, and
// otherwise goes on without reading it.
//
// Steps commit in order, so a marker is always at the step after the
// newest committed one, and there is at most one: readers of step items
// skip it (it is not a committed step). A marker outlives its run only at
// the step after the run's last, where a resumed run's commit replaces it.

// attrStop marks a stop marker item.
const attrStop = "stop"

// markStopTries bounds the attempts to place a marker while the run's
// steps commit past it.
const markStopTries = 20

// isStopItem reports whether a step key's item is a stop marker.
func isStopItem(item map[string]types.AttributeValue) bool {
	_, ok := item[attrStop]
	return ok
}

// withoutStop drops stop markers from items read from a run's partition.
func withoutStop(items []map[string]types.AttributeValue) []map[string]types.AttributeValue {
	out := items[:0]
	for _, it := range items {
		if !isStopItem(it) {
			out = append(out, it)
		}
	}
	return out
}

// wantsStop reports whether a run record asks a running run to stop.
func wantsStop(r runs.Run) bool {
	return (r.DrainRequested || r.CancelRequested) &&
		(r.Status == pregel.RunPending || r.Status == pregel.RunRunning)
}

// markStop puts the stop marker of a run at the step after its newest
// (see the comment at the top of this file). A run with no step yet gets
// none: its first tick reads the record. If a step is committed at the
// key first, it tries the next one, up to markStopTries times.
func (s *Store) markStop(ctx context.Context, runID string) error {
	pk := runPK(runID)
	out, err := s.client.Query(ctx, &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		KeyConditionExpression:    aws.String("pk = :pk AND begins_with(sk, :prefix)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(pk), ":prefix": str(skStep)},
		ProjectionExpression:      aws.String("#sk, #stop"),
		ExpressionAttributeNames:  map[string]string{"#sk": attrSK, "#stop": attrStop},
		ScanIndexForward:          aws.Bool(false),
		Limit:                     aws.Int32(1),
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		return fmt.Errorf("dynamo: mark run %q stopping: newest step: %w", runID, err)
	}
	if len(out.Items) == 0 || isStopItem(out.Items[0]) {
		return nil // no step yet, or marked already
	}
	sk, _ := getS(out.Items[0], attrSK)
	newest, ok := parseStepSK(sk)
	if !ok {
		return fmt.Errorf("dynamo: mark run %q stopping: bad step key %q", runID, sk)
	}
	for step := newest + 1; step <= newest+markStopTries; step++ {
		item := key(pk, stepSK(step))
		item[attrStop] = &types.AttributeValueMemberBOOL{Value: true}
		_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
			TableName:                           aws.String(s.table),
			Item:                                item,
			ConditionExpression:                 aws.String("attribute_not_exists(sk)"),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		if err == nil {
			return nil
		}
		ccf, failed := isConditionFailed(err)
		if !failed {
			return fmt.Errorf("dynamo: mark run %q stopping at step %d: %w", runID, step, err)
		}
		if ccf.Item != nil && isStopItem(ccf.Item) {
			return nil
		}
		// Step committed meanwhile: the marker goes after it.
	}
	return fmt.Errorf("dynamo: mark run %q stopping: %d steps committed meanwhile", runID, markStopTries)
}

// CommitStop is Commit reporting whether the step's item replaced a stop
// marker: a drain or a cancel of the run was requested since the marker's
// step became the open one. It implements tick.StopCommitter.
//
// A request that returned before the commit started is reported by this
// commit or by an earlier one of the run (each puts its item over the
// marker if there is one), unless the request's marker could not be
// placed (an error its writer logged). When the commit's answer was lost
// and the SDK's retry found the item this commit wrote, whether it
// replaced a marker is unknown: stop is then true, and the caller reads
// the record.
func (s *Store) CommitStop(ctx context.Context, cp *pregel.Checkpoint) (stop bool, err error) {
	return s.commit(ctx, cp)
}

// stopOnCommit is the stop CommitStop reports: the old item a successful
// commit's PutItem returned (ReturnValues ALL_OLD) is a stop marker.
func stopOnCommit(old map[string]types.AttributeValue) bool {
	return old != nil && isStopItem(old)
}

// stepUnder reads the newest step item under a stop marker a descending
// Query found, with sort key low or above: none (nil) or one.
func (s *Store) stepUnder(ctx context.Context, runID, low string, marker map[string]types.AttributeValue) ([]map[string]types.AttributeValue, error) {
	sk, _ := getS(marker, attrSK)
	step, ok := parseStepSK(sk)
	if !ok || step == 0 || stepSK(step-1) < low {
		return nil, nil
	}
	out, err := s.client.Query(ctx, &dynamodb.QueryInput{
		TableName:              aws.String(s.table),
		KeyConditionExpression: aws.String("pk = :pk AND sk BETWEEN :low AND :high"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": str(runPK(runID)), ":low": str(low), ":high": str(stepSK(step - 1)),
		},
		ScanIndexForward: aws.Bool(false),
		Limit:            aws.Int32(1),
		ConsistentRead:   aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("dynamo: load run %q: Query under the stop marker: %w", runID, err)
	}
	return withoutStop(out.Items), nil
}
