package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/superstep/superstep/pkg/runs"
)

// ErrRunExists is returned by PurgeRun for a run whose record is still
// stored: only what is left of a run after its record expired is purged.
var ErrRunExists = errors.New("dynamo: the run record exists")

// RunRecordKey reports whether a table key (pk and sk, as strings) is the
// key of a run record, and returns the run id. A stream consumer uses it
// to recognise the expiry of a run.
func RunRecordKey(pk, sk string) (runID string, ok bool) {
	id, ok := strings.CutPrefix(pk, "RUN#")
	if !ok || id == "" || sk != skRun {
		return "", false
	}
	return id, true
}

// PurgeRun deletes every item left of a run whose record is gone: its
// steps, task results, claims and blobs. The run record carries the TTL
// of a finished run; when DynamoDB deletes it, the table's stream tells
// the sweep function, which calls PurgeRun. It returns the number of
// items deleted, and fails with ErrRunExists, deleting nothing, while
// the record exists. It reads the partition's keys a page at a time and
// deletes each page with BatchWriteItem, so a purge cut short is finished
// by calling it again.
func (s *Store) PurgeRun(ctx context.Context, runID string) (int, error) {
	if runID == "" {
		return 0, errors.New("dynamo: purge run: empty run id")
	}
	pk := runPK(runID)
	s.eventHeads.take(runID) // a run made again with this id streams from 1
	if _, err := s.getItem(ctx, pk, skRun); err == nil {
		return 0, fmt.Errorf("dynamo: purge run %q: %w", runID, ErrRunExists)
	} else if !errors.Is(err, errItemNotFound) {
		return 0, fmt.Errorf("dynamo: purge run %q: %w", runID, err)
	}
	p := dynamodb.NewQueryPaginator(s.client, &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(pk)},
		ProjectionExpression:      aws.String("pk, sk"),
		ConsistentRead:            aws.Bool(true),
	})
	deleted := 0
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return deleted, fmt.Errorf("dynamo: purge run %q: Query: %w", runID, err)
		}
		keys := make([]map[string]types.AttributeValue, 0, len(out.Items))
		for _, it := range out.Items {
			sk, _ := getS(it, attrSK)
			if sk == skRun {
				// Created again since the check: leave the run alone.
				return deleted, fmt.Errorf("dynamo: purge run %q: %w", runID, ErrRunExists)
			}
			keys = append(keys, key(pk, sk))
		}
		if err := s.batchWrite(ctx, nil, keys); err != nil {
			return deleted, fmt.Errorf("dynamo: purge run %q: %w", runID, err)
		}
		deleted += len(keys)
	}
	return deleted, nil
}

var _ runs.RunDeleter = (*Store)(nil)

// DeleteRun implements [runs.RunDeleter]: it deletes the items of the
// run's partition (steps, task results, claims, blobs) a page of keys at
// a time with BatchWriteItem, then its record, and forgets what this
// Store cached of it. Values other runs inherited from its steps go with
// them: runs.Service deletes a thread's runs together, and refuses while
// forks of the thread exist.
func (s *Store) DeleteRun(ctx context.Context, runID string) error {
	if runID == "" {
		return errors.New("dynamo: delete run: empty run id")
	}
	pk := runPK(runID)
	p := dynamodb.NewQueryPaginator(s.client, &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(pk)},
		ProjectionExpression:      aws.String("pk, sk, #shards"),
		ExpressionAttributeNames:  map[string]string{"#shards": attrShards},
		ConsistentRead:            aws.Bool(true),
	})
	record := false
	shards := 0 // of the open sharded steps' markers (shards.go)
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("dynamo: delete run %q: Query: %w", runID, err)
		}
		keys := make([]map[string]types.AttributeValue, 0, len(out.Items))
		for _, it := range out.Items {
			sk, _ := getS(it, attrSK)
			if sk == skRun {
				record = true // last
				continue
			}
			if info, ok := isMarker(it); ok {
				shards = max(shards, len(info.tasks))
			}
			keys = append(keys, key(pk, sk))
		}
		if err := s.batchWrite(ctx, nil, keys); err != nil {
			return fmt.Errorf("dynamo: delete run %q: %w", runID, err)
		}
	}
	for k := range shards {
		if err := s.deletePartition(ctx, shardPK(runID, k)); err != nil {
			return fmt.Errorf("dynamo: delete run %q: %w", runID, err)
		}
	}
	if record {
		if err := s.batchWrite(ctx, nil, []map[string]types.AttributeValue{key(pk, skRun)}); err != nil {
			return fmt.Errorf("dynamo: delete run %q: %w", runID, err)
		}
	}
	s.steps.removeIf(func(k stepKey) bool { return k.run == runID })
	s.tasks.removeIf(func(k stepKey) bool { return k.run == runID })
	s.shards.removeIf(func(k stepKey) bool { return k.run == runID })
	s.newest.take(runID)
	return nil
}

// deletePartition deletes every item of a partition key value (a shard of
// a run's open step: its results, leases and counter).
func (s *Store) deletePartition(ctx context.Context, pk string) error {
	p := dynamodb.NewQueryPaginator(s.client, &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(pk)},
		ProjectionExpression:      aws.String("pk, sk"),
		ConsistentRead:            aws.Bool(true),
	})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("query %s: %w", pk, err)
		}
		keys := make([]map[string]types.AttributeValue, 0, len(out.Items))
		for _, it := range out.Items {
			sk, _ := getS(it, attrSK)
			keys = append(keys, key(pk, sk))
		}
		if err := s.batchWrite(ctx, nil, keys); err != nil {
			return err
		}
	}
	return nil
}
