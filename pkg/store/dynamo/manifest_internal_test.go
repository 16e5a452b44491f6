package dynamo

import (
	"encoding/json"
	"fmt"
	"maps"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/superstep/superstep/pkg/pregel"
)

// TestManifestByDifference commits, without a request, 200 steps of a run
// whose append channel gains a segment a step and merges its 16 newest
// every 16 steps, beside 20 unchanged channels, and checks that each step
// item's manifest document is short whatever the number of open segments
// (a difference from a base), that the base is never a difference itself,
// and that the document read back over its base is the step's manifest.
func TestManifestByDifference(t *testing.T) {
	const run = "r"
	versions := map[string]int{"log": 0}
	values := map[string]json.RawMessage{}
	for i := range 20 {
		ch := fmt.Sprintf("setting-%02d", i)
		versions[ch], values[ch] = 0, json.RawMessage(`"a value that never changes"`)
	}
	wholes := map[int]manifest{}
	var prev *stepEntry
	segs, docBytes, wholeBytes := 0, 0, 0
	for step := range 200 {
		cp := &pregel.Checkpoint{RunID: run, Graph: "g", Step: step, Values: maps.Clone(values), Versions: maps.Clone(versions)}
		if step%16 == 15 { // a merge: the 15 newest segments become one
			for k := segs - 15; k < segs; k++ {
				delete(cp.Versions, pregel.SegmentName("log", k))
				delete(cp.Values, pregel.SegmentName("log", k))
			}
			segs -= 15
		}
		name := pregel.SegmentName("log", segs)
		segs++
		cp.Versions[name], cp.Values[name] = step, json.RawMessage(fmt.Sprintf(`["message %d"]`, step))
		cp.Versions["log"] = step
		plan, err := planCommit(cp, fmt.Sprintf("c%d", step), prev)
		if err != nil {
			t.Fatal(err)
		}
		doc, ok := plan.item[attrDelta].(*types.AttributeValueMemberB)
		if !ok {
			t.Fatalf("step %d: no %s in %v", step, attrDelta, plan.item)
		}
		if _, ok := plan.item[attrManifest]; ok {
			t.Fatalf("step %d: the item holds %s too", step, attrManifest)
		}
		man, delta, err := decodeWire(doc.Value)
		if err != nil {
			t.Fatal(err)
		}
		if delta != nil {
			base, ok := wholes[delta.Step]
			if !ok || delta.Run != "" {
				t.Fatalf("step %d: base %+v is not a step holding its manifest whole", step, delta)
			}
			man = delta.apply(&manifestBase{run: run, step: delta.Step, man: base}, run)
		} else {
			wholes[step] = man
		}
		if len(man) != len(plan.man) {
			t.Fatalf("step %d: read back %d entries, want %d", step, len(man), len(plan.man))
		}
		for ch, loc := range plan.man {
			if !sameLoc(man[ch], loc) {
				t.Errorf("step %d: %q read back as %+v, want %+v", step, ch, man[ch], loc)
			}
		}
		whole, _ := encodeManifest(nil, plan.man, nil)
		if 2*len(doc.Value) > len(whole) && delta != nil {
			t.Errorf("step %d: a difference of %d bytes for a whole of %d", step, len(doc.Value), len(whole))
		}
		if step >= 50 {
			docBytes, wholeBytes = docBytes+len(doc.Value), wholeBytes+len(whole)
		}
		prev = &stepEntry{commit: fmt.Sprintf("c%d", step), size: plan.size, man: plan.man, base: plan.base}
		values = cp.Values
		versions = cp.Versions
	}
	// Amortized over the steps, differences and the wholes written again
	// take at most half what whole manifests at every step would (the
	// layout before: 100 %).
	t.Logf("steps 50-199: %d bytes of manifest a step, %d whole", docBytes/150, wholeBytes/150)
	if 2*docBytes > wholeBytes {
		t.Errorf("steps 50-199 stored %d bytes of manifests; want at most half the %d bytes of whole ones", docBytes, wholeBytes)
	}
}
