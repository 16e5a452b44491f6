package dynamo_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/superstep/superstep/pkg/pregel"
)

// TestStepMetaCompact: a step item holds a task's times as two integers
// and no zero counters, and reads back to the nanosecond; an item written
// before (times as RFC 3339 text, every counter) reads as before, and a
// run continues from it.
func TestStepMetaCompact(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEnv(t)
	const run = "compact-meta"
	old := `{"graph":"g","next":[{"node":"n","from":["n"]}],"tasks":[{"task_id":"t0","node":"n","status":"completed","attempts":1,"started":"2026-11-27T07:00:24.765337446Z","finished":"2026-11-27T07:00:24.765410414Z"}],"counters":{"completed":1,"skipped":0,"cancelled":0,"failed":0}}`
	if _, err := e.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(e.table),
		Item: oldStepItem(run, 0, old, map[string]any{"x": map[string]any{"v": 0}}, map[string]string{"x": "1"})}); err != nil {
		t.Fatal(err)
	}
	s := e.store()
	cp, err := s.Load(ctx, run, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(cp.Tasks) != 1 || cp.Tasks[0].Duration() != 72968 || cp.Tasks[0].Started.Nanosecond() != 765337446 || cp.Counters.Completed != 1 {
		t.Fatalf("old item: tasks %+v counters %+v", cp.Tasks, cp.Counters)
	}

	started := time.Date(2026, 11, 27, 10, 0, 0, 123456789, time.UTC)
	next := &pregel.Checkpoint{RunID: run, Graph: "g", Step: 1,
		Values:   map[string]json.RawMessage{"x": json.RawMessage(`2`)},
		Versions: map[string]int{"x": 1},
		Next:     []pregel.Trigger{{Node: "n", From: []string{"n"}}},
		Tasks: []pregel.TaskStatus{
			{TaskID: "t1", Node: "n", Status: pregel.NodeCompleted, Attempts: 1, Started: started, Finished: started.Add(1234567 * time.Nanosecond)},
			{TaskID: "t2", Node: "n", Status: pregel.NodePending},
		},
		Counters: pregel.Counters{Completed: 2},
		Stamp:    &pregel.Stamp{Fingerprint: "f"},
	}
	if err := s.Commit(ctx, next); err != nil {
		t.Fatal(err)
	}
	out, err := e.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(e.table), Key: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "RUN#" + run}, "sk": &types.AttributeValueMemberS{Value: "STEP#0000000001"}}})
	if err != nil {
		t.Fatal(err)
	}
	meta := string(out.Item["meta"].(*types.AttributeValueMemberB).Value)
	for _, bad := range []string{`"started"`, `"finished"`, `"skipped"`} {
		if strings.Contains(meta, bad) {
			t.Errorf("step item's meta holds %s: %s", bad, meta)
		}
	}
	if !strings.Contains(meta, `"t0":`) {
		t.Errorf("step item's meta lacks the task's times: %s", meta)
	}
	// Read back by a store with nothing cached.
	got, err := e.store().Load(ctx, run, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Tasks) != 2 {
		t.Fatalf("tasks %+v", got.Tasks)
	}
	if g := got.Tasks[0]; !g.Started.Equal(started) || g.Duration() != 1234567*time.Nanosecond || g.TaskID != "t1" || g.Attempts != 1 {
		t.Errorf("task 1: %+v", g)
	}
	if g := got.Tasks[1]; !g.Started.IsZero() || !g.Finished.IsZero() || g.Status != pregel.NodePending {
		t.Errorf("task 2: %+v", g)
	}
	if got.Counters != next.Counters || string(got.Values["x"]) != "2" || got.Stamp == nil || got.Stamp.Fingerprint != "f" {
		t.Errorf("counters %+v values %v stamp %+v", got.Counters, got.Values, got.Stamp)
	}
}

// TestStepMetaBaseStamp: a step item that holds its manifest as a
// difference from a base of the same stamp leaves the stamp out, and
// reads back with it, by a store with nothing cached; a step of another
// stamp holds its own.
func TestStepMetaBaseStamp(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEnv(t)
	s := e.store()
	const run = "base-stamp"
	v1 := &pregel.Stamp{Fingerprint: "f1", Reducers: map[string]string{"log": "append"}}
	v2 := &pregel.Stamp{Version: "v2", Fingerprint: "f1", Reducers: map[string]string{"log": "append"}}
	values, versions := map[string]json.RawMessage{}, map[string]int{}
	for i := range 30 {
		ch := fmt.Sprintf("c%02d", i)
		values[ch], versions[ch] = json.RawMessage(`"value"`), 0
	}
	same := &pregel.Stamp{Fingerprint: "f1", Reducers: map[string]string{"log": "append"}}
	stamps := []*pregel.Stamp{v1, same, same, v2}
	for step, st := range stamps {
		cp := &pregel.Checkpoint{RunID: run, Graph: "g", Step: step, Values: map[string]json.RawMessage{}, Versions: map[string]int{}, Stamp: st}
		for ch, v := range versions {
			cp.Values[ch], cp.Versions[ch] = values[ch], v
		}
		if step > 0 {
			ch := fmt.Sprintf("c%02d", step)
			cp.Values[ch], cp.Versions[ch] = json.RawMessage(fmt.Sprintf(`"step %d"`, step)), step
			values[ch], versions[ch] = cp.Values[ch], step
		}
		if err := s.Commit(ctx, cp); err != nil {
			t.Fatal(err)
		}
	}
	bases := 0
	for step, st := range stamps {
		out, err := e.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(e.table), Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "RUN#" + run}, "sk": &types.AttributeValueMemberS{Value: fmt.Sprintf("STEP#%010d", step)}}})
		if err != nil {
			t.Fatal(err)
		}
		meta := string(out.Item["meta"].(*types.AttributeValueMemberB).Value)
		var man struct {
			Base *struct{ Step int } `json:"base"`
		}
		if err := json.Unmarshal(out.Item["mdelta"].(*types.AttributeValueMemberB).Value, &man); err != nil {
			t.Fatal(err)
		}
		baseStamp := man.Base != nil && stamps[man.Base.Step].Version == st.Version
		if baseStamp {
			bases++
		}
		if has := strings.Contains(meta, `"stamp"`); has == baseStamp || strings.Contains(meta, `"bs":true`) != baseStamp {
			t.Errorf("step %d (a difference from a base of its stamp: %v) holds its stamp %v: %s", step, baseStamp, has, meta)
		}
		got, err := e.store().Load(ctx, run, step)
		if err != nil {
			t.Fatal(err)
		}
		if got.Stamp == nil || got.Stamp.Version != st.Version || got.Stamp.Fingerprint != st.Fingerprint || got.Stamp.Reducers["log"] != "append" {
			t.Errorf("step %d: stamp %+v, want %+v", step, got.Stamp, st)
		}
		if string(got.Values[fmt.Sprintf("c%02d", step)]) != string(values[fmt.Sprintf("c%02d", step)]) {
			t.Errorf("step %d: values %v", step, got.Values)
		}
	}
	if bases == 0 {
		t.Error("no step held its manifest as a difference from a base of its stamp")
	}
}
