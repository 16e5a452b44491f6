package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/superstep/superstep/pkg/runs"
)

// Push-notification config items (pkg/a2a): in the run's partition, so
// that PurgeRun deletes them with the run, under PUSH#<config id>, which
// sorts below the steps and is never in LoadRun's range.
const (
	skPush = "PUSH#"
	// attrConfig holds the binding's config as JSON (it may hold secrets).
	attrConfig = "config"
	// attrSeen and attrLast (shared with events.go) are the delivery
	// cursor.
	attrSeen = "seen"
	// attrCreated is CreatedAt in Unix nanoseconds.
	attrCreated = "created"
)

func pushSK(id string) string { return skPush + id }

// PutPushConfig stores a run's push config, replacing the one of the same
// ID (whose CreatedAt is kept), with one UpdateItem.
func (s *Store) PutPushConfig(ctx context.Context, c runs.PushConfig) error {
	if c.RunID == "" || c.ID == "" {
		return fmt.Errorf("dynamo: put push config: empty run id or config id: %w", runs.ErrInvalid)
	}
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:        aws.String(s.table),
		Key:              key(runPK(c.RunID), pushSK(c.ID)),
		UpdateExpression: aws.String("SET #c = :c, #s = :s, #l = :l, #t = if_not_exists(#t, :t)"),
		ExpressionAttributeNames: map[string]string{
			"#c": attrConfig, "#s": attrSeen, "#l": attrLast, "#t": attrCreated,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":c": bin(c.Config), ":s": num(int64(c.Seen)), ":l": str(c.Last), ":t": num(c.CreatedAt.UnixNano()),
		},
	})
	if err != nil {
		return fmt.Errorf("dynamo: put push config %q of run %q: %w", c.ID, c.RunID, err)
	}
	return nil
}

// decodePush reads a push config item.
func decodePush(runID string, it map[string]types.AttributeValue) (runs.PushConfig, error) {
	sk, _ := getS(it, attrSK)
	id, ok := splitPrefix(sk, skPush)
	if !ok {
		return runs.PushConfig{}, fmt.Errorf("dynamo: item %q of run %q is not a push config", sk, runID)
	}
	c := runs.PushConfig{RunID: runID, ID: id}
	c.Config, _ = getB(it, attrConfig)
	seen, _ := getN(it, attrSeen)
	c.Seen = int(seen)
	c.Last, _ = getS(it, attrLast)
	if n, ok := getN(it, attrCreated); ok {
		c.CreatedAt = time.Unix(0, n).UTC()
	}
	return c, nil
}

// GetPushConfig returns a run's push config, or an error wrapping
// runs.ErrNotFound.
func (s *Store) GetPushConfig(ctx context.Context, runID, id string) (runs.PushConfig, error) {
	it, err := s.getItem(ctx, runPK(runID), pushSK(id))
	if errors.Is(err, errItemNotFound) {
		err = runs.ErrNotFound
	}
	if err != nil {
		return runs.PushConfig{}, fmt.Errorf("dynamo: get push config %q of run %q: %w", id, runID, err)
	}
	return decodePush(runID, it)
}

// ListPushConfigs returns a run's push configs, by ID: one Query of the
// PUSH# items of its partition.
func (s *Store) ListPushConfigs(ctx context.Context, runID string) ([]runs.PushConfig, error) {
	var out []runs.PushConfig
	var start map[string]types.AttributeValue
	for {
		page, err := s.client.Query(ctx, &dynamodb.QueryInput{
			TableName:                 aws.String(s.table),
			KeyConditionExpression:    aws.String("pk = :pk AND begins_with(sk, :p)"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(runPK(runID)), ":p": str(skPush)},
			ConsistentRead:            aws.Bool(true),
			ExclusiveStartKey:         start,
		})
		if err != nil {
			return nil, fmt.Errorf("dynamo: list push configs of run %q: %w", runID, err)
		}
		for _, it := range page.Items {
			c, err := decodePush(runID, it)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
		if start = page.LastEvaluatedKey; len(start) == 0 {
			return out, nil
		}
	}
}

// DeletePushConfig deletes a run's push config; one that is not there is
// not an error.
func (s *Store) DeletePushConfig(ctx context.Context, runID, id string) error {
	_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(s.table),
		Key:       key(runPK(runID), pushSK(id)),
	})
	if err != nil {
		return fmt.Errorf("dynamo: delete push config %q of run %q: %w", id, runID, err)
	}
	return nil
}

// AdvancePushConfig moves a push config's delivery cursor forward to seen
// and last, with an UpdateItem conditioned on the config existing with a
// cursor before seen; a cursor at or past seen is left alone. An unknown
// config is an error wrapping runs.ErrNotFound.
func (s *Store) AdvancePushConfig(ctx context.Context, runID, id string, seen int, last string) error {
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.table),
		Key:                                 key(runPK(runID), pushSK(id)),
		UpdateExpression:                    aws.String("SET #s = :s, #l = :l"),
		ConditionExpression:                 aws.String("attribute_exists(sk) AND #s < :s"),
		ExpressionAttributeNames:            map[string]string{"#s": attrSeen, "#l": attrLast},
		ExpressionAttributeValues:           map[string]types.AttributeValue{":s": num(int64(seen)), ":l": str(last)},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if ccf, ok := isConditionFailed(err); ok {
		if len(ccf.Item) == 0 {
			return fmt.Errorf("dynamo: advance push config %q of run %q: %w", id, runID, runs.ErrNotFound)
		}
		return nil // the cursor is already there
	}
	if err != nil {
		return fmt.Errorf("dynamo: advance push config %q of run %q to %d: %w", id, runID, seen, err)
	}
	return nil
}

// PushConfigKey reports whether a table key (pk and sk, as strings) is
// the key of a push config item, and returns the run id. A stream
// consumer uses it to deliver to a config as soon as it is stored.
func PushConfigKey(pk, sk string) (runID string, ok bool) {
	id, ok := strings.CutPrefix(pk, "RUN#")
	if !ok || id == "" || !strings.HasPrefix(sk, skPush) || len(sk) == len(skPush) {
		return "", false
	}
	return id, true
}
