package dynamo_test

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/runs/runstest"
	"github.com/superstep/superstep/pkg/store/dynamo"
)

func TestThreadStoreConformance(t *testing.T) {
	t.Parallel()
	s := newEnv(t).store()
	runstest.ThreadStores(t, func(*testing.T) runs.ThreadStore { return s })
}

func TestThreadStrategies(t *testing.T) {
	t.Parallel()
	runstest.Strategies(t, 50, func(t *testing.T) runstest.ThreadEnv {
		s := newEnv(t).store()
		return runstest.ThreadEnv{Runs: s, Threads: s, Checkpoints: s}
	})
}

// TestThreadRunsDoNotExpire checks that a finished run on a thread gets no
// expires_at: later runs of the thread start from its state.
func TestThreadRunsDoNotExpire(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEnv(t)
	s := e.store(dynamo.WithRetention(time.Hour))
	for _, tc := range []struct {
		thread string
		expire bool
	}{{"", true}, {"th", false}} {
		id := "run-on-" + tc.thread
		r, _, err := s.CreateRun(ctx, runs.Run{ID: id, Graph: "g", Status: pregel.RunPending, ThreadID: tc.thread, CreatedAt: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		r.Status = pregel.RunCompleted
		if _, err := s.UpdateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
		out, err := e.client.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: aws.String(e.table),
			Key: map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: "RUN#" + id},
				"sk": &types.AttributeValueMemberS{Value: "~RUN"},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := out.Item["expires_at"]; ok != tc.expire {
			t.Errorf("thread %q: finished run has expires_at %v, want %v", tc.thread, ok, tc.expire)
		}
	}
}
