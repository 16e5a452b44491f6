package dynamo

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/superstep/superstep/pkg/pregel"
)

// planJSON is a JSON string value of n bytes.
func planJSON(n int) json.RawMessage {
	return json.RawMessage(`"` + strings.Repeat("x", n-2) + `"`)
}

// TestPlanCommit checks the layout of commits, without a request: where
// each value goes, how many write requests the commit takes and how many
// write units DynamoDB charges for them.
func TestPlanCommit(t *testing.T) {
	// prev is step 4 of a run whose step 4 item holds a 40 KiB "doc" and a
	// small "limit" (both changed at step 4), and whose "big" lives in a
	// blob written at step 1.
	bigRef := &blobRef{ID: "c1.pack", Size: 100_000, Chunks: 1}
	prev := &stepEntry{size: 41_500, man: manifest{
		"doc":   {Version: 4},
		"limit": {Version: 4},
		"big":   {Version: 1, Blob: bigRef, Len: 100_000},
	}}
	tests := []struct {
		name        string
		cp          *pregel.Checkpoint
		prev        *stepEntry
		requests    int
		units       int
		inItem      []string // values stored in the step item
		inBlob      []string // values stored in a blob of this commit
		kept        []string // values left where an earlier step stored them
		blobs       int
		errContains string
	}{{
		name: "step 0, small values: one PutItem of 1 WRU",
		cp: &pregel.Checkpoint{RunID: "r", Step: 0,
			Values:   map[string]json.RawMessage{"a": json.RawMessage(`1`), "b": json.RawMessage(`"x"`)},
			Versions: map[string]int{"a": 0, "b": 0}},
		requests: 1, units: 1, inItem: []string{"a", "b"},
	}, {
		name: "a small change beside large unchanged values: the change and the small value of the large item are written",
		cp: &pregel.Checkpoint{RunID: "r", Step: 5,
			Values: map[string]json.RawMessage{"doc": planJSON(40_000), "limit": json.RawMessage(`3`),
				"big": planJSON(100_000), "count": json.RawMessage(`5`)},
			Versions: map[string]int{"doc": 4, "limit": 4, "big": 1, "count": 5}},
		prev:     prev,
		requests: 1, units: 1, inItem: []string{"count", "limit"}, kept: []string{"doc", "big"},
	}, {
		name: "the large value changes: the small one beside it is carried along",
		cp: &pregel.Checkpoint{RunID: "r", Step: 5,
			Values:   map[string]json.RawMessage{"doc": planJSON(40_000), "limit": json.RawMessage(`3`)},
			Versions: map[string]int{"doc": 5, "limit": 4}},
		prev:     prev,
		requests: 1, units: 40, inItem: []string{"doc", "limit"},
	}, {
		name: "a value over 64 KiB goes to a blob: a BatchWriteItem and the PutItem",
		cp: &pregel.Checkpoint{RunID: "r", Step: 0,
			Values:   map[string]json.RawMessage{"a": json.RawMessage(`1`), "doc": planJSON(70_000)},
			Versions: map[string]int{"a": 0, "doc": 0}},
		requests: 2, units: 1 + 69, inItem: []string{"a"}, inBlob: []string{"doc"}, blobs: 1,
	}, {
		name: "a value over a chunk gets a blob of its own, in two chunks",
		cp: &pregel.Checkpoint{RunID: "r", Step: 0,
			Values:   map[string]json.RawMessage{"doc": planJSON(400_000)},
			Versions: map[string]int{"doc": 0}},
		requests: 2, units: 1 + 342 + 49, inBlob: []string{"doc"}, blobs: 1,
	}, {
		name: "an unloaded channel the previous step does not hold",
		cp: &pregel.Checkpoint{RunID: "r", Step: 5,
			Values:   map[string]json.RawMessage{},
			Versions: map[string]int{"gone": 2},
			Unloaded: map[string]bool{"gone": true}},
		prev:        prev,
		errContains: `channel "gone" was not loaded`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, err := planCommit(tt.cp, "c2", tt.prev)
			if tt.errContains != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errContains) {
					t.Fatalf("planCommit: err = %v, want one saying %q", err, tt.errContains)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := plan.requests(); got != tt.requests {
				t.Errorf("requests = %d, want %d", got, tt.requests)
			}
			if got := plan.writeUnits(runPK("r")); got != tt.units {
				t.Errorf("write units = %d, want %d (item %d bytes)", got, tt.units, plan.size)
			}
			if got := len(plan.blobs); got != tt.blobs {
				t.Errorf("blobs = %d, want %d", got, tt.blobs)
			}
			if got := ItemSize(plan.item); got != plan.size {
				t.Errorf("plan.size = %d, the item is %d bytes", plan.size, got)
			}
			var vals []string
			if m, ok := plan.item[attrVals].(*types.AttributeValueMemberM); ok {
				vals = slices.Sorted(maps.Keys(m.Value))
			}
			if want := slices.Sorted(slices.Values(tt.inItem)); !slices.Equal(vals, want) {
				t.Errorf("values in the step item: %v, want %v", vals, want)
			}
			for _, ch := range tt.inItem {
				loc := plan.man[ch]
				if !loc.inline() || (loc.At != 0 && loc.At != tt.cp.Step) || (loc.At == 0 && loc.Version != tt.cp.Step) {
					t.Errorf("%s: location %+v, want this step's item", ch, loc)
				}
			}
			for _, ch := range tt.inBlob {
				if loc := plan.man[ch]; loc.Blob == nil || !strings.HasPrefix(loc.Blob.ID, "c2.") {
					t.Errorf("%s: location %+v, want a blob of this commit", ch, loc)
				}
			}
			for _, ch := range tt.kept {
				if loc, old := plan.man[ch], tt.prev.man[ch]; loc.Version != old.Version || loc.At != old.At || loc.Blob != old.Blob {
					t.Errorf("%s: location %+v, want where step %d stored it (%+v)", ch, loc, loc.home(), old)
				}
			}
			var blobBytes bytes.Buffer
			for _, b := range plan.blobs {
				blobBytes.Write(b.data)
			}
			for _, ch := range tt.inBlob {
				if !bytes.Contains(blobBytes.Bytes(), tt.cp.Values[ch]) {
					t.Errorf("%s: not in the blobs written", ch)
				}
			}
		})
	}
}
