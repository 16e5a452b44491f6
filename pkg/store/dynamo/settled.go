package dynamo

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// skSettled prefixes the counter item of a step's settled remote results.
// It sorts below skStep, so no Query of LoadRun, LoadRunTask or
// PendingTasks reads it.
const skSettled = "SETTLED#"

// attrCount is the counter of a SETTLED# item; attrSucceeded counts the
// successes among the results it counts (CountSettledSucceeded).
const (
	attrCount     = "n"
	attrSucceeded = "s"
)

// counterNote is the key under which a Store notes, among the task results
// of a step (taskNote), that it counted results of the step: its commit
// deletes the counter item with the results. No task id is empty.
const counterNote = ""

func settledSK(step int) string { return fmt.Sprintf("%s%010d", skSettled, step) }

// CountSettled adds one to the count of remote task results settled in
// step of a run, and returns the count after the addition. It implements
// tick.SettleCounter: one UpdateItem (ADD) of the item SETTLED#<step>,
// 1 WRU, whatever the number of tasks of the step, so that the node
// handler of a step of n tasks learns that it may be the last one in
// without reading the n results.
//
// The count is a hint, not a fence: a node task delivered again after its
// result was recorded may count it again (it cannot know whether the first
// delivery did), so the count may exceed the number of results settled;
// the handler that sees the count reach the number of remote tasks reads
// the results (PendingTasks) and commits only if all are settled. The
// commit of the step deletes the item, if this Store counted.
func (s *Store) CountSettled(ctx context.Context, runID string, step int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	out, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       key(runPK(runID), settledSK(step)),
		UpdateExpression:          aws.String("ADD #n :one"),
		ExpressionAttributeNames:  map[string]string{"#n": attrCount},
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": num(1)},
		ReturnValues:              types.ReturnValueUpdatedNew,
	})
	if err != nil {
		return 0, fmt.Errorf("dynamo: count settled results of run %q step %d: %w", runID, step, err)
	}
	n, ok := getN(out.Attributes, attrCount)
	if !ok {
		return 0, fmt.Errorf("dynamo: count settled results of run %q step %d: no count returned", runID, step)
	}
	s.noteTasks(runID, step, map[string]*blobRef{counterNote: nil})
	return int(n), nil
}

// CountSettledSucceeded is CountSettled that also adds one to the step's
// count of successes when success is set, in the same UpdateItem (1 WRU),
// and returns both counts. It implements tick.SuccessCounter, for the
// fan-outs with a minimum of successes (pregel.MinSuccesses): the node
// handler whose count of successes reaches the minimum reads the results.
func (s *Store) CountSettledSucceeded(ctx context.Context, runID string, step int, success bool) (int, int, error) {
	if !success {
		n, err := s.CountSettled(ctx, runID, step)
		return n, 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	out, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       key(runPK(runID), settledSK(step)),
		UpdateExpression:          aws.String("ADD #n :one, #s :one"),
		ExpressionAttributeNames:  map[string]string{"#n": attrCount, "#s": attrSucceeded},
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": num(1)},
		ReturnValues:              types.ReturnValueUpdatedNew,
	})
	if err != nil {
		return 0, 0, fmt.Errorf("dynamo: count settled results of run %q step %d: %w", runID, step, err)
	}
	n, ok := getN(out.Attributes, attrCount)
	won, ok2 := getN(out.Attributes, attrSucceeded)
	if !ok || !ok2 {
		return 0, 0, fmt.Errorf("dynamo: count settled results of run %q step %d: no count returned", runID, step)
	}
	s.noteTasks(runID, step, map[string]*blobRef{counterNote: nil})
	return int(n), int(won), nil
}

// noteKeys returns the keys of the items a task note names: the task
// results, their blobs, and the step's counter; with a sharded step's
// layout, in their shards, and the step's marker and shard counters.
func noteKeys(runID string, step int, note taskNote, info shardInfo) []map[string]types.AttributeValue {
	keys := make([]map[string]types.AttributeValue, 0, len(note))
	pk := runPK(runID)
	for id, ref := range note {
		if id == counterNote {
			if !info.sharded() { // else in shardKeysOf: a batch refuses a key twice
				keys = append(keys, key(pk, settledSK(step)))
			}
			continue
		}
		tpk := info.taskPKOf(runID, id)
		keys = append(keys, key(tpk, taskSK(step, id)))
		if ref != nil {
			keys = append(keys, ref.chunkKeys(tpk)...)
		}
	}
	if info.sharded() {
		keys = append(keys, shardKeysOf(runID, step, info)...)
	}
	return keys
}
