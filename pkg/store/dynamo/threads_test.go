package dynamo_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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

// TestThreadsLinearizable checks concurrent clients' histories on threads
// against the sequential model of a thread (runstest.Linearizable);
// SUPERSTEP_LINEARIZABLE_OPS makes it a long run (pkg/runs/README.md).
func TestThreadsLinearizable(t *testing.T) {
	t.Parallel()
	threads, clients, ops := runstest.LinearizableSize()
	runstest.Linearizable(t, threads, clients, ops, func(t *testing.T) runstest.ThreadEnv {
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

// TestCommitFromStoresNoInheritedValue checks that runs continuing a thread
// write only what their input changed, and that a Store that has cached
// nothing reads inherited values, inline or in blobs, from the partition
// of the run that wrote them.
func TestCommitFromStoresNoInheritedValue(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEnv(t)
	s := e.store()
	small := json.RawMessage(`"` + strings.Repeat("s", 100_000) + `"`)
	large := json.RawMessage(`"` + strings.Repeat("l", 500_000) + `"`)
	first := &pregel.Checkpoint{RunID: "r1", Graph: "g", Step: 0,
		Values:   map[string]json.RawMessage{"small": small, "large": large, "n": json.RawMessage(`1`)},
		Versions: map[string]int{"small": 0, "large": 0, "n": 0}}
	if err := s.Commit(ctx, first); err != nil {
		t.Fatal(err)
	}
	prev := runs.StepRef{RunID: "r1", Step: 0}
	for i, id := range []string{"r2", "r3"} {
		cp := &pregel.Checkpoint{RunID: id, Graph: "g", Step: 0,
			Values:   map[string]json.RawMessage{"small": small, "large": large, "n": json.RawMessage(fmt.Sprint(i + 2))},
			Versions: map[string]int{"small": pregel.Inherited, "large": pregel.Inherited, "n": 0}}
		if err := s.CommitFrom(ctx, cp, prev); err != nil {
			t.Fatal(err)
		}
		if err := e.store().CommitFrom(ctx, cp, prev); !errors.Is(err, pregel.ErrStepConflict) {
			t.Errorf("second CommitFrom of %s step 0: %v, want ErrStepConflict", id, err)
		}
		prev = runs.StepRef{RunID: id, Step: 0}
	}
	step1 := &pregel.Checkpoint{RunID: "r3", Graph: "g", Step: 1,
		Values:   map[string]json.RawMessage{"small": small, "large": large, "n": json.RawMessage(`9`)},
		Versions: map[string]int{"small": pregel.Inherited, "large": pregel.Inherited, "n": 1}}
	if err := s.Commit(ctx, step1); err != nil {
		t.Fatal(err)
	}
	cold := e.store() // nothing cached
	for _, step := range []int{0, 1} {
		cp, err := cold.Load(ctx, "r3", step)
		if err != nil {
			t.Fatal(err)
		}
		for ch, want := range map[string]json.RawMessage{"small": small, "large": large} {
			if !bytes.Equal(cp.Values[ch], want) || cp.Versions[ch] != pregel.Inherited {
				t.Errorf("r3 step %d: %s of %d bytes at version %d, want the inherited value", step, ch, len(cp.Values[ch]), cp.Versions[ch])
			}
		}
	}
	// Nothing of r2 and r3 holds the values: their partitions are small.
	for _, id := range []string{"r2", "r3"} {
		out, err := e.client.Query(ctx, &dynamodb.QueryInput{
			TableName:                 aws.String(e.table),
			KeyConditionExpression:    aws.String("pk = :pk"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: "RUN#" + id}},
		})
		if err != nil {
			t.Fatal(err)
		}
		total := 0
		for _, it := range out.Items {
			total += dynamo.ItemSize(it)
		}
		if total > 4000 {
			t.Errorf("run %s stores %d bytes in %d items; the inherited values were copied", id, total, len(out.Items))
		}
	}
	if err := s.CommitFrom(ctx, &pregel.Checkpoint{RunID: "r4", Graph: "g", Values: map[string]json.RawMessage{}, Versions: map[string]int{}}, runs.StepRef{RunID: "nope", Step: 0}); !errors.Is(err, pregel.ErrNotFound) {
		t.Errorf("CommitFrom a missing step: %v, want ErrNotFound", err)
	}
}

// TestThreadRetention: with WithThreadRetention, a thread's item expires
// that long after its last change while the thread is idle, and has no
// expiry while a run holds or waits for it, while forks of it exist, or
// while its deletion is under way; without it, threads never expire.
func TestThreadRetention(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEnv(t)
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	for _, tc := range []struct {
		name      string
		retention time.Duration
		edit      func(*runs.Thread)
		want      bool
	}{
		{"idle", time.Hour, func(*runs.Thread) {}, true},
		{"active", time.Hour, func(t *runs.Thread) { t.Active = "r1" }, false},
		{"queued", time.Hour, func(t *runs.Thread) { t.Queue = []string{"r2"} }, false},
		{"forked", time.Hour, func(t *runs.Thread) { t.Forks = []string{"f"} }, false},
		{"deleting", time.Hour, func(t *runs.Thread) { t.Deleting = true }, false},
		{"no retention", 0, func(*runs.Thread) {}, false},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			s := e.store(dynamo.WithThreadRetention(tc.retention), dynamo.WithClock(clock))
			id := "ttl-" + strings.ReplaceAll(tc.name, " ", "-")
			th, _, err := s.CreateThread(ctx, runs.Thread{ID: id, CreatedAt: now.Add(-time.Minute)})
			if err != nil {
				t.Fatal(err)
			}
			tc.edit(&th)
			if _, err := s.UpdateThread(ctx, th); err != nil {
				t.Fatal(err)
			}
			out, err := e.client.GetItem(ctx, &dynamodb.GetItemInput{
				TableName: aws.String(e.table),
				Key: map[string]types.AttributeValue{
					"pk": &types.AttributeValueMemberS{Value: "THREAD#" + id},
					"sk": &types.AttributeValueMemberS{Value: "~THREAD"},
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			exp, ok := out.Item["expires_at"].(*types.AttributeValueMemberN)
			if ok != tc.want {
				t.Fatalf("expires_at %v, want one: %v", out.Item["expires_at"], tc.want)
			}
			if ok && exp.Value != fmt.Sprint(now.Add(time.Hour).Unix()) {
				t.Errorf("expires_at %s, want an hour after the update (%d)", exp.Value, now.Add(time.Hour).Unix())
			}
		})
	}
}
