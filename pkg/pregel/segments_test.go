package pregel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// segs describes a layout as "step:size" pairs, for comparisons.
func segs(l layout) string {
	var parts []string
	for _, s := range l {
		parts = append(parts, fmt.Sprintf("%d:%d", s.step, s.size))
	}
	return strings.Join(parts, " ")
}

func TestNextLayout(t *testing.T) {
	// Two segments: [1,2] stored by step 1, [3] by step 2.
	base := nextLayout(nextLayout(nil, nil, json.RawMessage(`[1,2]`), 1), json.RawMessage(`[1,2]`), json.RawMessage(`[1,2,3]`), 2)
	if got := segs(base); got != "1:3 2:2" {
		t.Fatalf("base layout %s, want 1:3 2:2", got)
	}
	tests := []struct {
		name       string
		old        layout
		prev, next string
		want       string // layout at step 3
		stored     string // what step 3 stores
	}{
		{"first value", nil, ``, `[1,2]`, "3:3", `[1,2]`},
		{"unknown layout: stored whole", nil, `[1,2]`, `[1,2,3]`, "3:5", `[1,2,3]`},
		{"append", base, `[1,2,3]`, `[1,2,3,4,5]`, "1:3 2:2 3:4", `[4,5]`},
		{"nothing appended", base, `[1,2,3]`, `[1,2,3]`, "1:3 2:2", ``},
		{"last replaced", base, `[1,2,3]`, `[1,2,9]`, "1:3 3:2", `[9]`},
		{"last removed", base, `[1,2,3]`, `[1,2]`, "1:3", ``},
		{"first replaced: all again", base, `[1,2,3]`, `[7,2,3]`, "3:5", `[7,2,3]`},
		{"element grown across a boundary", base, `[1,2,3]`, `[1,2,34]`, "1:3 3:3", `[34]`},
		{"prefix that is not an element", base, `[1,2,3]`, `[1,23]`, "3:4", `[1,23]`},
		{"emptied", base, `[1,2,3]`, `[]`, "3:0", `[]`},
		{"empty then appended", layout{{step: 1, size: 0, stored: json.RawMessage(`[]`)}}, `[]`, `[5]`, "3:1", `[5]`},
		{"not an array", base, `[1,2,3]`, `{"a":1}`, "", ``},
		{"white space kept in segments", nil, ``, ` [ 1 , 2 ] `, "3:7", `[ 1 , 2 ]`},
		{"layout that does not match prev", layout{{step: 1, size: 99}}, `[1,2,3]`, `[1,2,3,4]`, "3:7", `[1,2,3,4]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := nextLayout(tt.old, json.RawMessage(tt.prev), json.RawMessage(tt.next), 3)
			if got := segs(l); got != tt.want {
				t.Fatalf("layout %s, want %s", got, tt.want)
			}
			var stored []string
			for _, s := range l {
				if s.step == 3 {
					stored = append(stored, string(s.stored))
				}
			}
			if got := strings.Join(stored, " "); got != tt.stored {
				t.Errorf("step 3 stores %s, want %s", got, tt.stored)
			}
			if l == nil {
				return
			}
			// The stored form loads back to the value.
			cp := &Checkpoint{Step: 3, Values: map[string]json.RawMessage{"a": json.RawMessage(tt.next)}, Versions: map[string]int{"a": 3}, layouts: map[string]layout{"a": l}}
			back, err := UnpackSegments(PackSegments(cp))
			if err != nil {
				t.Fatal(err)
			}
			in, _ := arrayInner(json.RawMessage(tt.next))
			if want := "[" + string(in) + "]"; string(back.Values["a"]) != want {
				t.Errorf("loaded %s, want %s", back.Values["a"], want)
			}
		})
	}
}

func TestMergeTail(t *testing.T) {
	// 40 appends of 100 bytes: tier 0 never holds more than maxOpen
	// segments, and the merges store them together.
	var l layout
	var prev json.RawMessage
	for step := range 40 {
		elems := make([]string, step+1)
		for i := range elems {
			elems[i] = `"` + strings.Repeat("x", 98) + `"`
		}
		next := json.RawMessage("[" + strings.Join(elems, ",") + "]")
		l = nextLayout(l, prev, next, step)
		if len(l) > maxOpen {
			t.Fatalf("step %d: %d segments, more than %d", step, len(l), maxOpen)
		}
		if in, _ := arrayInner(next); l.total() != len(in) {
			t.Fatalf("step %d: layout covers %d bytes of %d", step, l.total(), len(in))
		}
		prev = next
	}
	// Step 31 merged the first segment and those of steps 15..30 (17 in
	// tier 0 with its own), but not its own.
	if got := segs(l); got != "31:3130 31:101 32:101 33:101 34:101 35:101 36:101 37:101 38:101 39:101" {
		t.Errorf("layout %s", got)
	}
	// Merges by tier: tier-1 segments merge when more than maxOpen end the
	// array.
	var big layout
	for i := range maxOpen + 1 {
		big = append(big, segment{step: i, size: sealSize})
	}
	big = append(big, segment{step: 99, size: 10})
	in := bytes.Repeat([]byte("x"), big.total())
	if got, want := segs(mergeTail(slices.Clone(big), in, 100)), fmt.Sprintf("100:%d 99:10", big.total()-10); got != want {
		t.Errorf("tier-1 merge: %s, want %s", got, want)
	}
	if got := segs(mergeTail(slices.Clone(big[1:]), in[sealSize:], 100)); !strings.HasPrefix(got, "1:") || len(strings.Fields(got)) != maxOpen+1 {
		t.Errorf("maxOpen tier-1 segments merged: %s", got)
	}
}

func TestUnpackSegmentsRejectsBadStoredForms(t *testing.T) {
	tests := []struct {
		name     string
		values   map[string]json.RawMessage
		versions map[string]int
	}{
		{"missing segment", map[string]json.RawMessage{SegmentName("a", 1): json.RawMessage(`[2]`)}, map[string]int{"a": 1, SegmentName("a", 0): 0, SegmentName("a", 1): 1}},
		{"segment not an array", map[string]json.RawMessage{SegmentName("a", 0): json.RawMessage(`2`)}, map[string]int{"a": 1, SegmentName("a", 0): 0}},
		{"empty later segment", map[string]json.RawMessage{SegmentName("a", 0): json.RawMessage(`[1]`), SegmentName("a", 1): json.RawMessage(`[]`)}, map[string]int{"a": 1, SegmentName("a", 0): 0, SegmentName("a", 1): 1}},
		{"no version of the channel", map[string]json.RawMessage{SegmentName("a", 0): json.RawMessage(`[1]`)}, map[string]int{SegmentName("a", 0): 0}},
		{"bad number", map[string]json.RawMessage{"a\x1fx": json.RawMessage(`[1]`)}, map[string]int{"a": 0, "a\x1fx": 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := UnpackSegments(&Checkpoint{Values: tt.values, Versions: tt.versions}); err == nil {
				t.Error("no error")
			}
		})
	}
}

// TestSegmentsRandomEdits drives an array through random edits (appends,
// replacements and removals of recent elements): at every step the stored
// form loads back to the value and the number of segments stays bounded;
// over the run, the bytes stored stay within a small multiple of the bytes
// appended (storing whole values, they would be quadratic).
func TestSegmentsRandomEdits(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	var (
		l                 layout
		value             json.RawMessage
		elems             []string
		written, appended int
	)
	for step := range 2000 {
		prev := value
		switch r := rng.IntN(10); {
		case r < 7 || len(elems) == 0:
			for range 1 + rng.IntN(3) {
				e := fmt.Sprintf(`{"n":%d,"t":%q}`, step, strings.Repeat("y", rng.IntN(300)))
				elems = append(elems, e)
				appended += len(e) + 1
			}
		case r < 9: // replace a recent one
			i := len(elems) - 1 - rng.IntN(min(len(elems), 3))
			elems[i] = fmt.Sprintf(`{"n":%d,"r":true}`, step)
		default: // remove a recent one
			i := len(elems) - 1 - rng.IntN(min(len(elems), 3))
			elems = append(elems[:i], elems[i+1:]...)
		}
		value = json.RawMessage("[" + strings.Join(elems, ",") + "]")
		l = nextLayout(l, prev, value, step)
		cp := &Checkpoint{Step: step, Values: map[string]json.RawMessage{"log": value}, Versions: map[string]int{"log": step}, layouts: map[string]layout{"log": l}}
		packed := PackSegments(cp)
		for ch, v := range packed.Versions {
			if v == step && IsSegment(ch) {
				written += len(packed.Values[ch])
			}
		}
		back, err := UnpackSegments(packed)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if !bytes.Equal(back.Values["log"], value) {
			t.Fatalf("step %d: loaded %s, want %s", step, back.Values["log"], value)
		}
		if got, want := segs(back.layouts["log"]), segs(l); got != want {
			t.Fatalf("step %d: loaded layout %s, want %s", step, got, want)
		}
		if len(l) > 3*maxOpen {
			t.Fatalf("step %d: %d segments", step, len(l))
		}
	}
	t.Logf("%d elements, %d bytes, %d segments; %d bytes appended, %d stored", len(elems), len(value), len(l), appended, written)
	if written > 8*appended {
		t.Errorf("stored %d bytes for %d bytes appended", written, appended)
	}
}
