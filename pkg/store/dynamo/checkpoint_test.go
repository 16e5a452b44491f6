package dynamo_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/pregel/checkpointtest"
	"github.com/superstep/superstep/pkg/store/dynamo"
)

// TestCheckpointerConformanceNoCache runs the conformance suite on Stores
// without a cache, as if every call ran in a new Lambda container.
func TestCheckpointerConformanceNoCache(t *testing.T) {
	t.Parallel()
	checkpointtest.Run(t, func(t *testing.T) pregel.Checkpointer {
		return newEnv(t).store(dynamo.WithCacheSize(0))
	})
}

// sortKeys returns the sort keys of the run's items that start with
// prefix.
func sortKeys(t *testing.T, e *env, run, prefix string) []string {
	t.Helper()
	var sks []string
	for _, it := range items(t, e, run, prefix) {
		sks = append(sks, it["sk"].(*types.AttributeValueMemberS).Value)
	}
	return sks
}

// items returns the run's items whose sort key starts with prefix.
func items(t *testing.T, e *env, run, prefix string) []map[string]types.AttributeValue {
	t.Helper()
	p := dynamodb.NewQueryPaginator(e.client, &dynamodb.QueryInput{
		TableName:              aws.String(e.table),
		KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :p)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": &types.AttributeValueMemberS{Value: "RUN#" + run},
			":p":  &types.AttributeValueMemberS{Value: prefix},
		},
	})
	var items []map[string]types.AttributeValue
	for p.HasMorePages() {
		out, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, out.Items...)
	}
	return items
}

// stepValues returns, for each step item of the run, the channels whose
// values it holds.
func stepValues(t *testing.T, e *env, run string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, it := range items(t, e, run, "STEP#") {
		sk := it["sk"].(*types.AttributeValueMemberS).Value
		out[sk] = []string{}
		if vals, ok := it["vals"].(*types.AttributeValueMemberM); ok {
			out[sk] = slices.Sorted(maps.Keys(vals.Value))
		}
	}
	return out
}

func equalValues(a, b map[string]json.RawMessage) bool {
	return maps.EqualFunc(a, b, func(x, y json.RawMessage) bool { return string(x) == string(y) })
}

// TestCommitWritesDeltas checks that a step item holds only the values of
// the channels its step changed, and counts the requests of Commit and
// Load.
func TestCommitWritesDeltas(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEnv(t)
	s := e.store()
	cps := checkpoints("deltas", 7)
	var commits, loads, coldLoads []usage
	for _, cp := range cps {
		commits = append(commits, e.measure(t, func() error { return s.Commit(ctx, cp) }))
		loads = append(loads, e.measure(t, func() error { _, err := s.Load(ctx, cp.RunID, pregel.Latest); return err }))
		coldLoads = append(coldLoads, e.measure(t, func() error { _, err := e.store().Load(ctx, cp.RunID, pregel.Latest); return err }))
	}
	// 5 values at step 0, then "a" at every step and "b" at 3 and 6: the
	// unchanged 2 KB values are cheaper to read from step 0 than to write
	// again, but the few bytes of "b" written at step 3 fit in the next
	// step items' first KB: carried along, they save reading item 3.
	want := map[string][]string{
		"STEP#0000000000": {"a", "b", "c", "d", "e"},
		"STEP#0000000001": {"a"},
		"STEP#0000000002": {"a"},
		"STEP#0000000003": {"a", "b"},
		"STEP#0000000004": {"a", "b"},
		"STEP#0000000005": {"a", "b"},
		"STEP#0000000006": {"a", "b"},
	}
	if got := stepValues(t, e, "deltas"); !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("values of the step items:\n\tgot  %v\n\twant %v", got, want)
	}
	// A step changing one small channel sends far less than the 10 KB of
	// unchanged values.
	if step1 := commits[1].calls.Op("PutItem"); step1.Requests != 1 || step1.RequestBytes > 2000 {
		t.Errorf("commit of step 1: %d PutItem, %d bytes; want 1 request well under the 10 KB of state", step1.Requests, step1.RequestBytes)
	}
	if step0 := commits[0].calls.Op("PutItem"); step0.RequestBytes < 10000 {
		t.Errorf("commit of step 0: %d bytes, want the whole state (over 10 KB)", step0.RequestBytes)
	}
	for i := range commits {
		t.Logf("step %d: Commit %s; Load(Latest) %s; by a new Store %s", i,
			opsString(commits[i].calls), opsString(loads[i].calls), opsString(coldLoads[i].calls))
	}
	// Commit: PutItem. Load(Latest): Query, the rest is cached. A new
	// Store reads the values of step 0 with a BatchGetItem.
	for i := 1; i < len(cps); i++ {
		if n := commits[i].calls.Total().Requests; n != 1 {
			t.Errorf("Commit(%d) made %d requests, want 1: %s", i, n, opsString(commits[i].calls))
		}
		if n := loads[i].calls.Total().Requests; n != 1 {
			t.Errorf("Load(Latest) after step %d made %d requests, want 1: %s", i, n, opsString(loads[i].calls))
		}
		if got := coldLoads[i].calls.Names(); !slices.Equal(got, []string{"BatchGetItem", "Query"}) {
			t.Errorf("Load(Latest) by a new Store after step %d: %s, want a Query and a BatchGetItem", i, opsString(coldLoads[i].calls))
		}
	}
	for _, fresh := range []bool{false, true} {
		for i, want := range cps {
			st := s
			if fresh {
				st = e.store()
			}
			got, err := st.Load(ctx, "deltas", i)
			if err != nil {
				t.Fatal(err)
			}
			if !equalValues(got.Values, want.Values) || !maps.Equal(got.Versions, want.Versions) {
				t.Errorf("Load(%d) = %v %v, want %v %v", i, got.Values, got.Versions, want.Values, want.Versions)
			}
		}
	}
}

// TestCommitCarriesSmallValues commits a run whose large channel changes
// at every step while small ones do not: the small values are stored again
// with the large one, so that a load reads one item rather than the large
// item of an earlier step too.
func TestCommitCarriesSmallValues(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEnv(t)
	s := e.store()
	const run = "carry"
	values := map[string]json.RawMessage{"route": json.RawMessage(`"billing"`), "user": json.RawMessage(`{"id":42}`)}
	versions := map[string]int{"route": 0, "user": 0}
	var cps []*pregel.Checkpoint
	for step := range 5 {
		values["messages"] = json.RawMessage(strconv.Quote(piece(step, 20_000+step*1000)))
		versions["messages"] = step
		if step == 3 {
			values["route"] = json.RawMessage(`"sales"`)
			versions["route"] = 3
		}
		cp := &pregel.Checkpoint{RunID: run, Graph: "g", Step: step, Values: maps.Clone(values), Versions: maps.Clone(versions), Next: []pregel.Trigger{{Node: "agent"}}}
		cps = append(cps, cp)
		if err := s.Commit(ctx, cp); err != nil {
			t.Fatal(err)
		}
		u := e.measure(t, func() error {
			got, err := e.store().Load(ctx, run, pregel.Latest)
			if err == nil && !equalValues(got.Values, cp.Values) {
				err = fmt.Errorf("Load(Latest) after step %d: values differ", step)
			}
			return err
		})
		if n := u.calls.Total().Requests; n != 1 {
			t.Errorf("Load(Latest) after step %d by a new Store made %d requests, want 1 (%s)", step, n, opsString(u.calls))
		}
	}
	for sk, chans := range stepValues(t, e, run) {
		if want := []string{"messages", "route", "user"}; !slices.Equal(chans, want) {
			t.Errorf("%s holds the values of %v, want %v", sk, chans, want)
		}
	}
	checkSteps(t, e.store(), run, cps)
}

// TestCommitOverflow commits a step whose changed values exceed what one
// item may hold, in bytes (12 values of 300 KB) and with values over the
// item limit, and loads them back.
func TestCommitOverflow(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEnv(t)
	s := e.store()
	cp := &pregel.Checkpoint{RunID: "overflow", Graph: "g", Values: map[string]json.RawMessage{}, Versions: map[string]int{}}
	for i := range 150 {
		ch := fmt.Sprintf("small%03d", i)
		cp.Values[ch] = json.RawMessage(strconv.Itoa(i))
		cp.Versions[ch] = 0
	}
	for i := range 12 {
		ch := fmt.Sprintf("medium%02d", i)
		cp.Values[ch] = json.RawMessage(strconv.Quote(piece(i, 300_000)))
		cp.Versions[ch] = 0
	}
	cp.Values["huge"] = json.RawMessage(strconv.Quote(piece(99, 1_500_000)))
	cp.Versions["huge"] = 0
	cp.Values["empty"] = json.RawMessage{}
	cp.Versions["empty"] = 0
	long := strings.Repeat("l", 300)
	cp.Values[long] = json.RawMessage(`"a channel with a name too long for a map key"`)
	cp.Versions[long] = 0
	if err := s.Commit(ctx, cp); err != nil {
		t.Fatal(err)
	}
	next := &pregel.Checkpoint{RunID: "overflow", Graph: "g", Step: 1, Values: maps.Clone(cp.Values), Versions: maps.Clone(cp.Versions)}
	next.Values["small000"] = json.RawMessage(`"changed"`)
	next.Versions["small000"] = 1
	if err := s.Commit(ctx, next); err != nil {
		t.Fatal(err)
	}
	for _, st := range []*dynamo.Store{s, e.store()} {
		for _, want := range []*pregel.Checkpoint{cp, next} {
			got, err := st.Load(ctx, "overflow", want.Step)
			if err != nil {
				t.Fatal(err)
			}
			if !equalValues(got.Values, want.Values) || !maps.Equal(got.Versions, want.Versions) {
				var diff []string
				for ch := range want.Values {
					if string(got.Values[ch]) != string(want.Values[ch]) {
						diff = append(diff, ch)
					}
				}
				t.Errorf("Load(%d): %d values, %d versions; want %d, %d; differing channels %v", want.Step, len(got.Values), len(got.Versions), len(want.Values), len(want.Versions), diff)
			}
		}
	}
	for _, it := range items(t, e, "overflow", "STEP#") {
		if n := dynamo.ItemSize(it); n > 400<<10 {
			t.Errorf("step item %v is %d bytes", it["sk"], n)
		}
	}
	// Values over 64 KiB are not stored in step items: the 12 medium
	// values share a blob (11 chunks), "huge" has its own (5 chunks).
	if n := len(sortKeys(t, e, "overflow", "BLOB#")); n != 16 {
		t.Errorf("%d chunk items, want 16", n)
	}
}

// TestLosingCommitLeavesNoChunks commits one step from many goroutines,
// each with a value over the item limit: the losers' chunks are deleted.
func TestLosingCommitLeavesNoChunks(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEnv(t)
	s := e.store()
	cps := checkpoints("race", 1)
	if err := s.Commit(ctx, cps[0]); err != nil {
		t.Fatal(err)
	}
	const n = 6
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		cp := &pregel.Checkpoint{RunID: "race", Graph: "g", Step: 1, Values: maps.Clone(cps[0].Values), Versions: maps.Clone(cps[0].Versions)}
		cp.Values["a"] = json.RawMessage(strconv.Quote(piece(i, 800_000)))
		cp.Versions["a"] = 1
		wg.Go(func() { errs[i] = s.Commit(ctx, cp) })
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, pregel.ErrStepConflict):
			t.Errorf("Commit: %v", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d commits won, want 1", won)
	}
	// 800 KB in chunks of 350 KB: 3 chunks, the winner's only.
	if chunks := sortKeys(t, e, "race", "BLOB#"); len(chunks) != 3 {
		t.Errorf("%d chunk items after the race, want the winner's 3: %v", len(chunks), chunks)
	}
}

// TestTaskResultsDeletedOnCommit checks that the commit of a step deletes
// the task results recorded for it, large ones' chunks included, and that
// results left over from a committed step are never returned.
func TestTaskResultsDeletedOnCommit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEnv(t)
	s := e.store()
	cps := checkpoints("tasks", 3)
	if err := s.Commit(ctx, cps[0]); err != nil {
		t.Fatal(err)
	}
	big := pregel.TaskResult{TaskID: "big", Node: "n", Status: pregel.NodeCompleted, Writes: map[string]json.RawMessage{"a": json.RawMessage(strconv.Quote(piece(1, 700_000)))}}
	small := pregel.TaskResult{TaskID: "small", Node: "n", Status: pregel.NodeCompleted}
	// Recorded by other Stores (node handlers), seen by s through
	// PendingTasks.
	for _, r := range []pregel.TaskResult{big, small} {
		u := e.measure(t, func() error { _, err := e.store().RecordTask(ctx, "tasks", 1, r); return err })
		t.Logf("RecordTask(%s): %s", r.TaskID, opsString(u.calls))
	}
	if got := sortKeys(t, e, "tasks", "TASK#"); len(got) != 2 {
		t.Fatalf("task items %v, want 2", got)
	}
	if got, err := s.PendingTasks(ctx, "tasks", 1); err != nil || len(got) != 2 {
		t.Fatalf("PendingTasks(1) = %d results, %v; want 2", len(got), err)
	}
	u := e.measure(t, func() error { return s.Commit(ctx, cps[1]) })
	t.Logf("Commit with 2 recorded results: %s", opsString(u.calls))
	if got := sortKeys(t, e, "tasks", "TASK#"); len(got) != 0 {
		t.Errorf("task items after commit: %v", got)
	}
	if got := sortKeys(t, e, "tasks", "BLOB#"); len(got) != 0 {
		t.Errorf("chunk items after commit: %v", got)
	}

	// A result of step 1 that the committer did not know of (written here
	// directly) is never returned, and a Store that finds it deletes it.
	_, err := e.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(e.table),
		Item: map[string]types.AttributeValue{
			"pk":    &types.AttributeValueMemberS{Value: "RUN#tasks"},
			"sk":    &types.AttributeValueMemberS{Value: "TASK#0000000001#late"},
			"final": &types.AttributeValueMemberBOOL{Value: true},
			"data":  &types.AttributeValueMemberB{Value: []byte(`{"task_id":"late","node":"n","status":"completed"}`)},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []*dynamo.Store{s, e.store()} {
		for _, step := range []int{1, 2} {
			if got, err := st.PendingTasks(ctx, "tasks", step); err != nil || len(got) != 0 {
				t.Errorf("PendingTasks(%d) = %v, %v; want none", step, got, err)
			}
		}
	}
	if got := sortKeys(t, e, "tasks", "TASK#"); len(got) != 0 {
		t.Errorf("task items after PendingTasks found them on a committed step: %v", got)
	}
	if err := s.Commit(ctx, cps[2]); err != nil {
		t.Fatal(err)
	}
}

// TestRecordTaskFence records results from a Store that does not know the
// step was committed by another: they are refused and leave nothing.
func TestRecordTaskFence(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEnv(t)
	a, b := e.store(), e.store()
	cps := checkpoints("fence", 3)
	if err := a.Commit(ctx, cps[0]); err != nil {
		t.Fatal(err)
	}
	r := pregel.TaskResult{TaskID: "t", Node: "n", Status: pregel.NodeInterrupted}
	if _, err := b.RecordTask(ctx, "fence", 1, r); err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(ctx, cps[1]); err != nil {
		t.Fatal(err)
	}
	for _, r := range []pregel.TaskResult{r, {TaskID: "u", Node: "n", Status: pregel.NodeCompleted}} {
		if _, err := b.RecordTask(ctx, "fence", 1, r); !errors.Is(err, pregel.ErrStepConflict) {
			t.Errorf("RecordTask(%s) on the committed step: %v, want ErrStepConflict", r.TaskID, err)
		}
	}
	if got := sortKeys(t, e, "fence", "TASK#"); len(got) != 0 {
		t.Errorf("task items after refused results: %v", got)
	}
}

// TestStoresTakeTurns runs a loop whose ticks land on two Stores in turn,
// as on two Lambda containers, each loading the latest step, recording a
// result and committing.
func TestStoresTakeTurns(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEnv(t)
	stores := []*dynamo.Store{e.store(), e.store(), e.store(dynamo.WithCacheSize(0))}
	const run = "turns"
	values := map[string]json.RawMessage{"big": json.RawMessage(strconv.Quote(piece(0, 500_000)))}
	versions := map[string]int{"big": 0}
	var cps []*pregel.Checkpoint
	for step := range 12 {
		s := stores[step%len(stores)]
		if step > 0 {
			prev, err := s.Load(ctx, run, pregel.Latest)
			if err != nil {
				t.Fatal(err)
			}
			if prev.Step != step-1 || !equalValues(prev.Values, cps[step-1].Values) {
				t.Fatalf("step %d: Load(Latest) = step %d, values differ: %t", step, prev.Step, !equalValues(prev.Values, cps[step-1].Values))
			}
			r := pregel.TaskResult{TaskID: fmt.Sprint("t", step), Node: "n", Status: pregel.NodeCompleted}
			if _, err := stores[(step+1)%len(stores)].RecordTask(ctx, run, step, r); err != nil {
				t.Fatal(err)
			}
			if got, err := s.PendingTasks(ctx, run, step); err != nil || len(got) != 1 {
				t.Fatalf("PendingTasks(%d) = %v, %v", step, got, err)
			}
		}
		values[fmt.Sprint("c", step%4)] = json.RawMessage(strconv.Itoa(step))
		versions[fmt.Sprint("c", step%4)] = step
		if step%5 == 4 {
			values["big"] = json.RawMessage(strconv.Quote(piece(step, 450_000)))
			versions["big"] = step
		}
		cp := &pregel.Checkpoint{RunID: run, Graph: "g", Step: step, Values: maps.Clone(values), Versions: maps.Clone(versions)}
		cps = append(cps, cp)
		if err := s.Commit(ctx, cp); err != nil {
			t.Fatal(err)
		}
		for _, other := range stores {
			if got, err := other.PendingTasks(ctx, run, step); err != nil || len(got) != 0 {
				t.Fatalf("PendingTasks(%d) after its commit = %v, %v", step, got, err)
			}
		}
	}
	for _, s := range stores {
		checkSteps(t, s, run, cps)
	}
	if got := sortKeys(t, e, run, "TASK#"); len(got) != 0 {
		t.Errorf("task items after the run: %v", got)
	}
}

// lostResponse is a connection error the SDK retries.
type lostResponse struct{}

func (lostResponse) Error() string         { return "test: the response was lost" }
func (lostResponse) ConnectionError() bool { return true }

// TestCommitSurvivesLostResponse loses the response of a commit's PutItem
// that succeeded: the SDK retries it, the retry finds the step committed,
// by this very commit, which is no conflict.
func TestCommitSurvivesLostResponse(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEnv(t)
	var lose atomic.Int32
	lose.Store(1)
	client := dynamodb.NewFromConfig(moto.Start(t).Config, func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
			return stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc("test.lose", func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
				out, md, err := next.HandleDeserialize(ctx, in)
				if err == nil && awsmiddleware.GetOperationName(ctx) == "PutItem" && lose.Add(-1) == 0 {
					return out, md, lostResponse{}
				}
				return out, md, err
			}), middleware.After)
		})
	})
	s := dynamo.New(client, e.table)
	cps := checkpoints("lost", 2)
	if err := s.Commit(ctx, cps[0]); err != nil {
		t.Fatalf("Commit(0) whose first response was lost: %v", err)
	}
	if lose.Load() >= 0 {
		t.Fatal("no response was lost")
	}
	if err := s.Commit(ctx, cps[1]); err != nil {
		t.Fatal(err)
	}
	if err := e.store().Commit(ctx, cps[1]); !errors.Is(err, pregel.ErrStepConflict) {
		t.Errorf("Commit(1) again: %v, want ErrStepConflict", err)
	}
	checkSteps(t, e.store(), "lost", cps)
}

// TestHistoryOfChunkedDocuments lists the history of steps whose metadata
// and manifest are blobs.
func TestHistoryOfChunkedDocuments(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEnv(t)
	s := e.store()
	cps := checkpoints("hist", 3)
	cps[1].Next = []pregel.Trigger{{Node: "n", Send: true, Arg: json.RawMessage(strconv.Quote(piece(3, 200_000)))}}
	for i := range 5000 {
		cps[2].Values[fmt.Sprintf("channel-%05d", i)] = json.RawMessage(`1`)
		cps[2].Versions[fmt.Sprintf("channel-%05d", i)] = 2
	}
	for _, cp := range cps {
		if err := s.Commit(ctx, cp); err != nil {
			t.Fatal(err)
		}
	}
	for _, st := range []*dynamo.Store{s, e.store()} {
		got, err := st.History(ctx, "hist")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 || len(got[2].Changed) != 5001 || got[1].Next[0] != "n" {
			t.Errorf("History: %d steps", len(got))
		}
	}
	checkSteps(t, e.store(), "hist", cps)
}
