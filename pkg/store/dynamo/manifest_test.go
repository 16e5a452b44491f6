package dynamo_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// oldStepItem returns a step item as the layout before manifests by
// difference wrote it: attribute manifest, every channel's entry.
func oldStepItem(run string, step int, meta string, man map[string]any, vals map[string]string) map[string]types.AttributeValue {
	manJSON, _ := json.Marshal(man)
	m := map[string]types.AttributeValue{}
	for ch, v := range vals {
		m[ch] = &types.AttributeValueMemberB{Value: []byte(v)}
	}
	return map[string]types.AttributeValue{
		"pk":        &types.AttributeValueMemberS{Value: "RUN#" + run},
		"sk":        &types.AttributeValueMemberS{Value: fmt.Sprintf("STEP#%010d", step)},
		"commit_id": &types.AttributeValueMemberS{Value: fmt.Sprintf("old-commit-%d", step)},
		"meta":      &types.AttributeValueMemberB{Value: []byte(meta)},
		"manifest":  &types.AttributeValueMemberB{Value: manJSON},
		"vals":      &types.AttributeValueMemberM{Value: m},
	}
}

// TestOldLayoutReadable: step items written by the previous layout (a
// whole manifest in every item) load, serve as the base of the
// differences later steps write, show in History, and a run continues
// from them; every read by a Store with nothing cached.
func TestOldLayoutReadable(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEnv(t)
	const run = "old-layout"
	man0, man1 := map[string]any{}, map[string]any{}
	vals0 := map[string]string{}
	for i := range 30 {
		ch := fmt.Sprintf("c%02d", i)
		man0[ch] = map[string]any{"v": 0}
		man1[ch] = map[string]any{"v": 0, "n": 900}
		vals0[ch] = fmt.Sprintf("%q", "value-of-"+ch)
	}
	man0["log"] = map[string]any{"v": 0, "cleared": true}
	man0["log\x1f0"] = map[string]any{"v": 0}
	vals0["log\x1f0"] = `["a"]`
	man1["c00"] = map[string]any{"v": 1}
	man1["log"] = map[string]any{"v": 1, "cleared": true}
	man1["log\x1f0"] = map[string]any{"v": 0, "n": 900}
	man1["log\x1f1"] = map[string]any{"v": 1}
	meta := `{"graph":"g","next":[{"node":"n","from":["n"]}],"counters":{"completed":0,"skipped":0,"cancelled":0,"failed":0}}`
	for _, it := range []map[string]types.AttributeValue{
		oldStepItem(run, 0, meta, man0, vals0),
		oldStepItem(run, 1, meta, man1, map[string]string{"c00": `"changed"`, "log\x1f1": `["b"]`}),
	} {
		if _, err := e.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(e.table), Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	want := func(step int) (map[string]string, map[string]int) {
		vals, vers := map[string]string{}, map[string]int{}
		for i := range 30 {
			ch := fmt.Sprintf("c%02d", i)
			vals[ch], vers[ch] = fmt.Sprintf("%q", "value-of-"+ch), 0
		}
		vals["log"], vers["log"] = `["a"]`, 0
		if step >= 1 {
			vals["c00"], vers["c00"] = `"changed"`, 1
			vals["log"], vers["log"] = `["a","b"]`, 1
		}
		if step >= 2 {
			vals["c01"], vers["c01"] = `"two"`, 2
			vals["log"], vers["log"] = `["a","b","c"]`, 2
		}
		return vals, vers
	}
	check := func(what string, cp *pregel.Checkpoint, step int, inherited bool) {
		t.Helper()
		vals, vers := want(step)
		if len(cp.Values) != len(vals) {
			t.Errorf("%s: %d values, want %d", what, len(cp.Values), len(vals))
		}
		for ch, v := range vals {
			if got := string(cp.Values[ch]); got != v {
				t.Errorf("%s: %s = %s, want %s", what, ch, got, v)
			}
			if inherited {
				continue
			}
			if cp.Versions[ch] != vers[ch] {
				t.Errorf("%s: %s at version %d, want %d", what, ch, cp.Versions[ch], vers[ch])
			}
		}
	}
	for _, step := range []int{0, 1} {
		cp, err := e.store().Load(ctx, run, step)
		if err != nil {
			t.Fatalf("load old step %d: %v", step, err)
		}
		check(fmt.Sprintf("old step %d", step), cp, step, false)
	}

	// A new commit on top of the old items: its manifest is a difference
	// from the old step 1, read from its item.
	s := e.store()
	cp, err := s.Load(ctx, run, pregel.Latest)
	if err != nil {
		t.Fatal(err)
	}
	next := *cp
	next.Step = 2
	next.Values, next.Versions = maps.Clone(cp.Values), maps.Clone(cp.Versions)
	next.Values["c01"], next.Versions["c01"] = json.RawMessage(`"two"`), 2
	next.Values["log"], next.Versions["log"] = json.RawMessage(`["a","b","c"]`), 2
	if err := s.Commit(ctx, &next); err != nil {
		t.Fatal(err)
	}
	out, err := e.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(e.table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "RUN#" + run}, "sk": &types.AttributeValueMemberS{Value: "STEP#0000000002"}}})
	if err != nil {
		t.Fatal(err)
	}
	doc, ok := out.Item["mdelta"].(*types.AttributeValueMemberB)
	if _, whole := out.Item["manifest"]; !ok || whole {
		t.Fatalf("step 2 item %v: want its manifest in mdelta only", out.Item)
	}
	old, _ := json.Marshal(man1)
	if !strings.Contains(string(doc.Value), `"base":{"step":1}`) || 2*len(doc.Value) > len(old) {
		t.Errorf("step 2 manifest %s (%d bytes): want a difference from step 1, at most half the whole manifest (%d bytes)", doc.Value, len(doc.Value), len(old))
	}
	cp2, err := e.store().Load(ctx, run, 2)
	if err != nil {
		t.Fatalf("load step 2: %v", err)
	}
	check("step 2", cp2, 2, false)
	hist, err := e.store().History(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 3 {
		t.Fatalf("history: %d steps, want 3", len(hist))
	}
	for step, info := range hist {
		if info.Step != step {
			t.Errorf("history entry %d: step %d", step, info.Step)
		}
		cp, err := e.store().Load(ctx, run, info.Step)
		if err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("history step %d", step), cp, step, false)
	}
	if got := strings.Join(hist[2].Changed, ","); got != "c01,log" {
		t.Errorf("history step 2 changed %q, want c01,log", got)
	}

	// A run continuing from the old step 1 inherits its channels.
	cont := &pregel.Checkpoint{RunID: "old-layout-continued", Graph: "g", Values: map[string]json.RawMessage{}, Versions: map[string]int{}}
	for ch, v := range cp.Values {
		if ch != "log" {
			cont.Values[ch], cont.Versions[ch] = v, pregel.Inherited
		}
	}
	if err := e.store().CommitFrom(ctx, cont, runs.StepRef{RunID: run, Step: 1}); err != nil {
		t.Fatal(err)
	}
	got, err := e.store().Load(ctx, cont.RunID, 0)
	if err != nil {
		t.Fatal(err)
	}
	vals, _ := want(1)
	delete(vals, "log")
	if len(got.Values) != len(vals) {
		t.Errorf("continued run: %d values, want %d", len(got.Values), len(vals))
	}
	for ch, v := range vals {
		if string(got.Values[ch]) != v || got.Versions[ch] != pregel.Inherited {
			t.Errorf("continued run: %s = %s at version %d, want %s inherited", ch, got.Values[ch], got.Versions[ch], v)
		}
	}
}
