package dynamo_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/store/dynamo"
)

func TestRunRecordKey(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		pk, sk string
		id     string
		ok     bool
	}{
		{"RUN#abc", "~RUN", "abc", true},
		{"RUN#a#b", "~RUN", "a#b", true},
		{"RUN#abc", "STEP#0000000001", "", false},
		{"RUN#abc", "RUN", "", false},
		{"RUN#", "~RUN", "", false},
		{"abc", "~RUN", "", false},
		{"", "", "", false},
	} {
		id, ok := dynamo.RunRecordKey(tt.pk, tt.sk)
		if id != tt.id || ok != tt.ok {
			t.Errorf("RunRecordKey(%q, %q) = %q, %t; want %q, %t", tt.pk, tt.sk, id, ok, tt.id, tt.ok)
		}
	}
}

// TestPurgeRun purges a run with steps, a value in a blob, task results
// and a claim once its record is gone, and nothing of another run.
func TestPurgeRun(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEnv(t)
	s := e.store()
	for _, id := range []string{"doomed", "kept"} {
		if _, _, err := s.CreateRun(ctx, runs.Run{ID: id, Graph: "g", Status: pregel.RunCompleted, CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		cps := checkpoints(id, 3)
		cps[1].Values["a"] = json.RawMessage(strconv.Quote(piece(1, 500_000)))
		for _, cp := range cps {
			if err := s.Commit(ctx, cp); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.RecordTask(ctx, id, 3, pregel.TaskResult{TaskID: "t", Node: "n", Status: pregel.NodeCompleted}); err != nil {
			t.Fatal(err)
		}
		if ok, _, err := s.Claim(ctx, id, 3, "t.0", "me", time.Now(), time.Now().Add(time.Minute)); err != nil || !ok {
			t.Fatalf("Claim: %t, %v", ok, err)
		}
		// The run's stream, with an event too large for an item.
		if _, err := s.AppendEvents(ctx, id, []pregel.Event{
			{Type: pregel.EventRunStarted, RunID: id},
			{Type: pregel.EventCustom, RunID: id, Name: "big", Payload: json.RawMessage(strconv.Quote(piece(2, 500_000)))},
		}); err != nil {
			t.Fatal(err)
		}
	}
	all := len(partitionKeys(t, e, "doomed"))
	kept := len(partitionKeys(t, e, "kept"))
	if all < 9 {
		t.Fatalf("the run has %d items; want a record, 3 steps, blob chunks, a task result, a claim and events", all)
	}

	if n, err := s.PurgeRun(ctx, "doomed"); !errors.Is(err, dynamo.ErrRunExists) || n != 0 {
		t.Fatalf("PurgeRun of a run with a record: %d, %v; want 0, ErrRunExists", n, err)
	}
	if got := len(partitionKeys(t, e, "doomed")); got != all {
		t.Fatalf("a refused purge left %d of %d items", got, all)
	}

	if _, err := e.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(e.table),
		Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "RUN#doomed"},
			"sk": &types.AttributeValueMemberS{Value: "~RUN"},
		},
	}); err != nil {
		t.Fatal(err)
	}
	n, err := e.store().PurgeRun(ctx, "doomed")
	if err != nil || n != all-1 {
		t.Fatalf("PurgeRun = %d, %v; want %d items deleted", n, err, all-1)
	}
	if left := partitionKeys(t, e, "doomed"); len(left) != 0 {
		t.Errorf("after PurgeRun the run keeps %v", left)
	}
	if page, err := s.EventsSince(ctx, "doomed", 0, 0); err != nil || len(page.Events) != 0 || page.Last != 0 {
		t.Errorf("the purged run's stream: %d events, last %d, %v; want none", len(page.Events), page.Last, err)
	}
	if got := len(partitionKeys(t, e, "kept")); got != kept {
		t.Errorf("the other run has %d items after the purge, had %d", got, kept)
	}
	if n, err := s.PurgeRun(ctx, "doomed"); err != nil || n != 0 {
		t.Errorf("PurgeRun again = %d, %v; want 0, nil", n, err)
	}
}

// partitionKeys returns the sort keys of every item of a run's partition.
func partitionKeys(t *testing.T, e *env, run string) []string {
	t.Helper()
	p := dynamodb.NewQueryPaginator(e.client, &dynamodb.QueryInput{
		TableName:                 aws.String(e.table),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: "RUN#" + run}},
	})
	var sks []string
	for p.HasMorePages() {
		out, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range out.Items {
			sks = append(sks, it["sk"].(*types.AttributeValueMemberS).Value)
		}
	}
	return sks
}
