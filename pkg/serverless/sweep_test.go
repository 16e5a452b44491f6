package serverless_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/superstep/superstep/pkg/pregel"
)

// partition returns the sort keys of a run's items.
func (s *stack) partition(runID string) []string {
	s.t.Helper()
	out, err := s.ddb.Query(s.t.Context(), &dynamodb.QueryInput{
		TableName:                 aws.String(s.cfg.Table),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: "RUN#" + runID}},
	})
	if err != nil {
		s.t.Fatal(err)
	}
	var sks []string
	for _, it := range out.Items {
		sks = append(sks, it["sk"].(*types.AttributeValueMemberS).Value)
	}
	return sks
}

// removal is the stream record of the deletion of an item by TTL.
func removal(seq string, keys map[string]events.DynamoDBAttributeValue) events.DynamoDBEventRecord {
	return events.DynamoDBEventRecord{
		EventID:   "ev-" + seq,
		EventName: "REMOVE",
		Change:    events.DynamoDBStreamRecord{Keys: keys, SequenceNumber: seq, StreamViewType: "KEYS_ONLY"},
		UserIdentity: &events.DynamoDBUserIdentity{
			Type:        "Service",
			PrincipalID: "dynamodb.amazonaws.com",
		},
	}
}

func runKeys(pk, sk string) map[string]events.DynamoDBAttributeValue {
	return map[string]events.DynamoDBAttributeValue{
		"pk": events.NewStringAttribute(pk),
		"sk": events.NewStringAttribute(sk),
	}
}

// When a finished run's record expires, the sweep handler deletes the
// rest of its partition (steps, task results, claims), and nothing else:
// not other runs, not a run whose record exists, not on stream records
// that are not a run record's removal.
func TestExpiredRunsArePurged(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	ctx := t.Context()
	s.create("counter", "old", map[string]any{"limit": 3})
	s.create("remote-fanout", "old-remote", nil)
	s.create("counter", "live", map[string]any{"limit": 2})
	s.waitStatus("old", pregel.RunCompleted)
	s.waitStatus("old-remote", pregel.RunInterrupted)
	if st := s.do("POST", "/v1/runs/old-remote/cancel", nil, nil); st != http.StatusOK {
		t.Fatalf("cancel: status %d", st)
	}
	s.waitStatus("old-remote", pregel.RunCancelled)
	s.waitStatus("live", pregel.RunCompleted)
	s.waitIdle()

	for _, id := range []string{"old", "old-remote"} {
		if n := len(s.partition(id)); n < 3 {
			t.Fatalf("run %s has %d items; want its record and steps", id, n)
		}
		// What DynamoDB's TTL does when the record expires.
		if _, err := s.ddb.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName: aws.String(s.cfg.Table),
			Key: map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: "RUN#" + id},
				"sk": &types.AttributeValueMemberS{Value: "~RUN"},
			},
		}); err != nil {
			t.Fatal(err)
		}
	}
	liveBefore := s.partition("live")

	insert := removal("100", runKeys("RUN#old", "~RUN"))
	insert.EventName = "INSERT"
	numeric := removal("101", map[string]events.DynamoDBAttributeValue{"pk": events.NewNumberAttribute("1"), "sk": events.NewStringAttribute("~RUN")})
	ev := events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		insert,
		numeric,
		removal("102", map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute("RUN#old")}),
		removal("103", runKeys("RUN#old", "STEP#0000000001")),
		removal("104", runKeys("RUN#old", "~RUN")),
		removal("105", runKeys("RUN#old-remote", "~RUN")),
		// The record of live exists: it is not purged.
		removal("106", runKeys("RUN#live", "~RUN")),
	}}
	resp, err := s.app.HandleStream(ctx, ev)
	if err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("HandleStream: %+v, %v", resp, err)
	}
	for _, id := range []string{"old", "old-remote"} {
		if left := s.partition(id); len(left) > 0 {
			t.Errorf("run %s keeps %v after its expiry", id, left)
		}
	}
	if after := s.partition("live"); len(after) != len(liveBefore) {
		t.Errorf("run live had %v, has %v after the sweep", liveBefore, after)
	}
	if r := s.get("live"); r.Status != pregel.RunCompleted {
		t.Errorf("run live is %s after the sweep", r.Status)
	}

	// Purging again is harmless: the sample event's run has nothing left.
	var ev0 events.DynamoDBEvent
	if err := json.Unmarshal(sample(t, "dynamodb-run-expired.json"), &ev0); err != nil {
		t.Fatal(err)
	}
	if resp, err := s.app.HandleStream(ctx, ev0); err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("HandleStream(dynamodb-run-expired.json): %+v, %v", resp, err)
	}
	if resp, err := s.app.HandleStream(ctx, ev); err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("HandleStream again: %+v, %v", resp, err)
	}

	// A purge that fails is reported with its sequence number, and the
	// records after it wait for the retry.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	resp, err = s.app.HandleStream(cancelled, events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		removal("200", runKeys("RUN#old", "STEP#0000000001")),
		removal("201", runKeys("RUN#old", "~RUN")),
		removal("202", runKeys("RUN#old-remote", "~RUN")),
	}})
	if err != nil || len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "201" {
		t.Errorf("HandleStream with a failing purge: %+v, %v; want record 201 reported", resp, err)
	}
}
