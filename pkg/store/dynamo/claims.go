package dynamo

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// claimSK is the sort key of a task's lease.
func claimSK(step int, taskID string) string {
	return fmt.Sprintf("CLAIM#%010d#%s", step, taskID)
}

// Claim leases a task of a run's open step to owner until until, unless
// another owner holds a lease that has not expired at now: one conditional
// PutItem, in the run's partition or, for a sharded step, in the task's
// shard (shards.go). It implements tick.Claims. A lease item expires (TTL) a day
// after its lease.
func (s *Store) Claim(ctx context.Context, runID string, step int, taskID, owner string, now, until time.Time) (bool, string, error) {
	info, err := s.shardsOf(ctx, runID, step) // in the task's shard, if any
	if err != nil {
		return false, "", fmt.Errorf("dynamo: claim task %s of run %q: %w", taskID, runID, err)
	}
	out, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table),
		Item: map[string]types.AttributeValue{
			"pk":         &types.AttributeValueMemberS{Value: info.taskPKOf(runID, taskID)},
			"sk":         &types.AttributeValueMemberS{Value: claimSK(step, taskID)},
			"owner":      &types.AttributeValueMemberS{Value: owner},
			"until":      &types.AttributeValueMemberN{Value: strconv.FormatInt(until.UnixMilli(), 10)},
			"expires_at": &types.AttributeValueMemberN{Value: strconv.FormatInt(until.Add(24*time.Hour).Unix(), 10)},
		},
		ConditionExpression: aws.String("attribute_not_exists(pk) OR #owner = :owner OR #until <= :now"),
		ExpressionAttributeNames: map[string]string{
			"#owner": "owner",
			"#until": "until",
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":owner": &types.AttributeValueMemberS{Value: owner},
			":now":   &types.AttributeValueMemberN{Value: strconv.FormatInt(now.UnixMilli(), 10)},
		},
		ReturnValues: types.ReturnValueAllOld,
	})
	if _, failed := isConditionFailed(err); failed {
		return false, "", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("dynamo: claim task %s of run %q: %w", taskID, runID, err)
	}
	if prev, ok := out.Attributes["owner"].(*types.AttributeValueMemberS); ok && prev.Value != owner {
		return true, prev.Value, nil
	}
	return true, "", nil
}
