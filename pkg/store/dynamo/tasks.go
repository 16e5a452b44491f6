package dynamo

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// lastKey sorts after every sort key that starts with a given prefix: the
// largest Unicode code point, as DynamoDB compares UTF-8 bytes.
const lastKey = "\U0010FFFF"

// tasksPageLimit bounds a page of tasksDown: a page may read items past
// the step item the scan stops at, and each costs its read units.
const tasksPageLimit = 100

// tasksDown reads, newest first with strongly consistent reads, the items
// of a run's partition from sort key high down to low: task results
// (which sort after step items) and then step items. It stops at the first
// step item, the newest in the range, and returns it (nil if the range has
// none) with the task result items read, by step. One Query, unless the
// results fill more than a page.
//
// The results of a sharded step (shards.go) are read from its shards,
// one Query per shard, after its marker is read.
//
// Task results are read before the step item, as a Load(Latest) after a
// query of the results would: results of a step that is open once the
// step item is read were recorded while it was open.
func (s *Store) tasksDown(ctx context.Context, runID, low, high string) (map[string]types.AttributeValue, map[int][]map[string]types.AttributeValue, error) {
	in := &dynamodb.QueryInput{
		TableName:              aws.String(s.table),
		KeyConditionExpression: aws.String("pk = :pk AND sk BETWEEN :low AND :high"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": str(runPK(runID)), ":low": str(low), ":high": str(high),
		},
		ScanIndexForward: aws.Bool(false),
		Limit:            aws.Int32(tasksPageLimit),
		ConsistentRead:   aws.Bool(true),
	}
	byStep := map[int][]map[string]types.AttributeValue{}
	markers := map[int]shardInfo{}
	// done adds the results of the sharded steps whose markers were read.
	done := func(newest map[string]types.AttributeValue) (map[string]types.AttributeValue, map[int][]map[string]types.AttributeValue, error) {
		for step, info := range markers {
			s.noteShards(runID, step, info)
			items, err := s.readShards(ctx, runID, step, info)
			if err != nil {
				return nil, nil, err
			}
			byStep[step] = append(byStep[step], items...)
		}
		return newest, byStep, nil
	}
	p := dynamodb.NewQueryPaginator(s.client, in)
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("query: %w", err)
		}
		for _, it := range out.Items {
			sk, _ := getS(it, attrSK)
			if isStopItem(it) {
				continue // not a step (stop.go)
			}
			if _, ok := parseStepSK(sk); ok {
				return done(it)
			}
			if step, ok := parseTaskSK(sk); ok {
				if info, ok := isMarker(it); ok {
					// A sharded step: its results are in its shards.
					markers[step] = info
					continue
				}
				byStep[step] = append(byStep[step], it)
			}
		}
	}
	return done(nil)
}
