package pregel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Segmented storage of array channels.
//
// The value of a channel whose reducer was registered with
// [Builder.AppendReducer] (the built-in append reducer is one) is a JSON
// array that steps mostly extend at the end. Stored whole at every step that
// changes it, a conversation of N messages would cost O(N) bytes per step
// and O(N²) in all. Instead the engine keeps, with each checkpoint, a
// layout of the array in segments: consecutive runs of its elements, each
// stored by the step that wrote it. A step stores only the segments from
// the first one it changed to the end: appending k elements stores those k;
// replacing or removing an element rewrites its segment and the ones after
// it (the recent ones, for a conversation).
//
// To keep the number of segments, and so the number of values a load
// reads, small, segments are merged by size tiers: tier 0 holds segments
// under sealSize (16 KiB) bytes, tier t those under sealSize·16^t. When
// more than maxOpen (16) segments of a tier end the array (with the smaller
// ones after them), the step that makes them so merges them into one
// segment, which it stores. So:
//
//   - a load of an array of B bytes reads at most maxOpen segments per
//     tier: 16 plus one per 16 KiB up to 256 KiB, about 32 up to 4 MiB, 48
//     up to 64 MiB; a store that reads a step's values with one batched
//     request (SQLite, DynamoDB's BatchGetItem of up to 100 keys) still
//     does so with one;
//   - a step that appends d bytes writes d bytes, and every 16 steps or so
//     a tier-0 merge of less than 16 KiB + 16·d bytes: about 1 KiB a step
//     on average, whatever the array's length. Each higher tier costs, on
//     average, writing every element once more, in a merge at every
//     256 KiB, 4 MiB... of array;
//   - each step's checkpoint lists the versions of the segments (a few
//     bytes each, at most 16 per tier).
//
// Stores see segments as channels of their own: [PackSegments] turns a
// checkpoint into its stored form, where segment k of channel ch is the
// channel SegmentName(ch, k) whose version is the step that wrote it and
// whose value is a JSON array of its elements, and ch keeps its version but
// has no value. [UnpackSegments] turns a loaded checkpoint back. Stores
// that write only the channels a step changed, carry the versions of the
// others forward and let a continued run inherit channels thus write and
// read only what changed, with no other change.

const (
	// sealSize is the size in bytes below which a segment is of tier 0;
	// tier t holds segments below sealSize·16^t bytes.
	sealSize  = 16 << 10
	tierShift = 4
	maxTiers  = 8
	// maxOpen is the number of segments of a tier or lower at the end of
	// an array above which a step merges them into one.
	maxOpen = 16
	// segmentSep separates a channel's name from a segment's number in
	// the names of the stored form.
	segmentSep = "\x1f"
)

// SegmentName returns the name under which the stored form of a checkpoint
// holds segment k of channel ch.
func SegmentName(ch string, k int) string { return ch + segmentSep + strconv.Itoa(k) }

// IsSegment reports whether name is the name of a segment in the stored
// form of a checkpoint.
func IsSegment(name string) bool { return strings.Contains(name, segmentSep) }

// SegmentOf returns the channel whose segment name is, and false when
// name is not a segment's name.
func SegmentOf(name string) (ch string, ok bool) {
	i := strings.LastIndex(name, segmentSep)
	if i < 0 {
		return "", false
	}
	return name[:i], true
}

// segment is a run of consecutive elements of an array value.
type segment struct {
	// step is the step that stored it (Inherited when an earlier run
	// did).
	step int
	// size is the number of bytes of the array's text between its
	// brackets that the segment covers; but for the first segment, that
	// text starts with the comma before its first element.
	size int
	// stored is its stored form: a JSON array of its elements.
	stored json.RawMessage
}

// layout is the segments of an array value, in order. Layouts are shared
// between checkpoints and never modified.
type layout []segment

func (l layout) total() int {
	n := 0
	for _, s := range l {
		n += s.size
	}
	return n
}

// arrayInner returns the text of a JSON array between its brackets.
func arrayInner(v json.RawMessage) ([]byte, bool) {
	v = bytes.TrimSpace(v)
	if len(v) < 2 || v[0] != '[' || v[len(v)-1] != ']' {
		return nil, false
	}
	return v[1 : len(v)-1], true
}

// wrapSegment returns the stored form of the segment whose text is text:
// a JSON array of its elements. A segment but the first starts with a
// comma.
func wrapSegment(text []byte, first bool) json.RawMessage {
	if !first {
		text = text[1:]
	}
	out := make([]byte, 0, len(text)+2)
	out = append(out, '[')
	out = append(out, text...)
	return append(out, ']')
}

// nextLayout returns the layout of next, the value at step of a channel
// whose value was prev with layout old (nil when unknown). It keeps the
// segments of old that next begins with, byte for byte, and adds one
// segment for the rest. It returns nil when next is not an array.
func nextLayout(old layout, prev, next json.RawMessage, step int) layout {
	inN, ok := arrayInner(next)
	if !ok {
		return nil
	}
	kept, end := 0, 0
	if inP, ok := arrayInner(prev); ok && len(old) > 0 && old.total() == len(inP) {
		ends := make([]int, len(old)+1)
		for i, s := range old {
			ends[i+1] = ends[i] + s.size
		}
		for j := len(old); j > 0; j-- {
			e := ends[j]
			if e == 0 {
				break
			}
			if e > len(inN) || (e < len(inN) && inN[e] != ',') || !bytes.Equal(inN[:e], inP[:e]) {
				continue
			}
			kept, end = j, e
			break
		}
	}
	out := make(layout, kept, kept+1)
	copy(out, old[:kept])
	if rem := inN[end:]; kept == 0 || len(rem) > 0 {
		s := segment{step: step, size: len(rem)}
		if kept == 0 {
			s.stored = bytes.TrimSpace(next)
		} else {
			s.stored = wrapSegment(rem, false)
		}
		out = append(out, s)
	}
	return mergeTail(out, inN, step)
}

// tierLimit is the size below which a segment is of tier t or lower.
func tierLimit(t int) int { return sealSize << (tierShift * t) }

// mergeTail merges, tier by tier, the segments at the end of l, the layout
// at step of the array whose text between brackets is in: when the
// segments below tierLimit(t) that end the array include more than maxOpen
// of tier t, they but the last become one segment, stored by step, of a
// higher tier.
// So an array has at most maxOpen segments of each tier, and an element is
// written again about once per tier it rises through.
func mergeTail(l layout, in []byte, step int) layout {
	for t := 0; t < maxTiers; {
		i, n := len(l), 0
		for i > 0 && l[i-1].size < tierLimit(t) {
			if t == 0 || l[i-1].size >= tierLimit(t-1) {
				n++ // of tier t
			}
			i--
		}
		if n > maxOpen {
			// Merge all but the last segment: the newest elements are
			// the ones a replacement or removal most likely hits next.
			last := l[len(l)-1]
			start := l[:i].total()
			end := len(in) - last.size
			l = append(l[:i], segment{step: step, size: end - start, stored: wrapSegment(in[start:end], i == 0)}, last)
			t = 0 // the merged segment may fill the tier above
			continue
		}
		if i == 0 {
			break
		}
		t++
	}
	return l
}

// segmentLayouts returns the layouts of the segmented channels of next,
// a checkpoint of step that follows prev. A channel changed at this step
// gets a new layout if the graph segments it and none otherwise (it is
// stored whole); an unchanged one keeps its layout, even if the graph no
// longer segments it (a new version of the graph resuming the run): its
// value is where the segments are.
func (g *Graph) segmentLayouts(prev, next *Checkpoint) map[string]layout {
	if prev == nil {
		prev = &Checkpoint{}
	}
	if len(g.segmented) == 0 && len(prev.layouts) == 0 {
		return nil
	}
	var out map[string]layout
	set := func(ch string, l layout) {
		if l == nil {
			return
		}
		if out == nil {
			out = make(map[string]layout, len(g.segmented)+len(prev.layouts))
		}
		out[ch] = l
	}
	changed := func(ch string) bool { v, ok := next.Versions[ch]; return ok && v == next.Step }
	for ch, l := range prev.layouts {
		if !changed(ch) {
			set(ch, l)
		}
	}
	for ch := range g.segmented {
		nv, has := next.Values[ch]
		if !changed(ch) || !has {
			continue
		}
		set(ch, nextLayout(prev.layouts[ch], prev.Values[ch], nv, next.Step))
	}
	return out
}

// PackSegments returns the stored form of cp: cp itself when no channel of
// it is segmented; otherwise a copy in which each segmented channel keeps
// its version but has no value, and its segments are channels named by
// [SegmentName], with the version of the step that stored them and their
// stored form as value. A store writes the channels of the stored form
// whose version is cp.Step, as for any checkpoint, and hands what it
// loads to [UnpackSegments].
func PackSegments(cp *Checkpoint) *Checkpoint {
	if len(cp.layouts) == 0 {
		return cp
	}
	out := *cp
	out.layouts = nil
	out.Values = make(map[string]json.RawMessage, len(cp.Values)+8)
	out.Versions = make(map[string]int, len(cp.Versions)+8)
	for ch, v := range cp.Values {
		out.Values[ch] = v
	}
	for ch, v := range cp.Versions {
		out.Versions[ch] = v
	}
	for ch, l := range cp.layouts {
		in, ok := arrayInner(cp.Values[ch])
		if !ok || l.total() != len(in) {
			continue // store the value whole
		}
		delete(out.Values, ch)
		for k, s := range l {
			name := SegmentName(ch, k)
			out.Values[name], out.Versions[name] = s.stored, s.step
		}
	}
	return &out
}

// UnpackSegments returns the checkpoint whose stored form is cp, as loaded
// by a store: cp itself when it has no segments, otherwise a copy with the
// value of each segmented channel joined from its segments (and their
// layout kept, so that the next step stores only what it changes). cp is
// not modified.
func UnpackSegments(cp *Checkpoint) (*Checkpoint, error) {
	var names []string
	for ch := range cp.Versions {
		if IsSegment(ch) {
			names = append(names, ch)
		}
	}
	if len(names) == 0 {
		return cp, nil
	}
	counts := map[string]int{}
	for _, name := range names {
		i := strings.LastIndex(name, segmentSep)
		k, err := strconv.Atoi(name[i+len(segmentSep):])
		if err != nil || k < 0 {
			return nil, fmt.Errorf("pregel: stored checkpoint has a segment named %q", name)
		}
		counts[name[:i]] = max(counts[name[:i]], k+1)
	}
	out := *cp
	out.Values = make(map[string]json.RawMessage, len(cp.Values))
	out.Versions = make(map[string]int, len(cp.Versions))
	for ch, v := range cp.Values {
		if !IsSegment(ch) {
			out.Values[ch] = v
		}
	}
	for ch, v := range cp.Versions {
		if !IsSegment(ch) {
			out.Versions[ch] = v
		}
	}
	out.layouts = make(map[string]layout, len(counts))
	for ch, n := range counts {
		if _, ok := cp.Versions[ch]; !ok {
			return nil, fmt.Errorf("pregel: stored checkpoint has segments of channel %q but no version of it", ch)
		}
		l := make(layout, n)
		size := 2
		for k := range n {
			name := SegmentName(ch, k)
			v, ok := cp.Values[name]
			version, vok := cp.Versions[name]
			in, aok := arrayInner(v)
			if !ok || !vok || !aok || (k > 0 && len(bytes.TrimSpace(in)) == 0) {
				return nil, fmt.Errorf("pregel: stored checkpoint lacks segment %d of channel %q, or it is not a non-empty array", k, ch)
			}
			l[k] = segment{step: version, size: len(in), stored: v}
			if k > 0 {
				l[k].size++
			}
			size += l[k].size
		}
		joined := make([]byte, 0, size)
		joined = append(joined, '[')
		for k, s := range l {
			in, _ := arrayInner(s.stored)
			if k > 0 {
				joined = append(joined, ',')
			}
			joined = append(joined, in...)
		}
		out.Values[ch] = append(joined, ']')
		out.layouts[ch] = l
	}
	return &out, nil
}

// inheritLayouts returns the layouts of the segmented channels of cp, the
// step 0 of a run that continues from state, whose segments are as
// layouts says (nil when unknown). The segments a continued run keeps are
// stored by the earlier run: their step is Inherited. A channel the graph
// segments that is inherited without its layout is stored again by cp
// (version 0): the earlier run may have stored it in segments, which cp
// would not name.
func (g *Graph) inheritLayouts(cp *Checkpoint, state map[string]json.RawMessage, layouts map[string]layout) map[string]layout {
	if len(g.segmented) == 0 && len(layouts) == 0 {
		return nil
	}
	inherited := func(ch string) layout {
		l := layouts[ch]
		if len(l) == 0 {
			return nil
		}
		out := make(layout, len(l))
		for i, s := range l {
			s.step = Inherited
			out[i] = s
		}
		return out
	}
	var out map[string]layout
	set := func(ch string, l layout) {
		if l == nil {
			return
		}
		if out == nil {
			out = make(map[string]layout, len(g.segmented)+len(layouts))
		}
		out[ch] = l
	}
	for ch := range layouts {
		if _, has := cp.Values[ch]; has && cp.Versions[ch] == Inherited {
			set(ch, inherited(ch))
		}
	}
	for ch := range g.segmented {
		v, has := cp.Values[ch]
		if !has {
			continue
		}
		switch {
		case cp.Versions[ch] != Inherited:
			set(ch, nextLayout(inherited(ch), state[ch], v, 0))
		case len(layouts[ch]) == 0:
			cp.Versions[ch] = 0
			set(ch, nextLayout(nil, nil, v, 0))
		}
	}
	return out
}

// StepChanges returns what cp's step changed, for its state_updated event
// (see [EventStateUpdated]), without copying what the checkpoint already
// holds: appended maps each segment-stored channel (one with an append
// reducer) to which the step only appended the elements it appended, as
// a JSON array; values maps every other channel the step changed to its
// new value. prev is the checkpoint the step started from; without it, or
// without its value of a channel, the channel's new value is given whole.
// Either map is nil when empty.
func StepChanges(prev, cp *Checkpoint) (values, appended map[string]json.RawMessage) {
	for _, ch := range cp.Changed() {
		nv := cp.Values[ch]
		if _, seg := cp.layouts[ch]; seg && prev != nil {
			if tail, ok := appendedTail(prev.Values[ch], nv); ok {
				if appended == nil {
					appended = make(map[string]json.RawMessage)
				}
				appended[ch] = tail
				continue
			}
		}
		if values == nil {
			values = make(map[string]json.RawMessage)
		}
		values[ch] = nv
	}
	return values, appended
}

// appendedTail returns the elements that array nv has after those of array
// old, as a JSON array, when nv is old with elements appended (compared as
// text, which the engine's encoding keeps stable), and false otherwise.
func appendedTail(old, nv json.RawMessage) (json.RawMessage, bool) {
	if old == nil {
		return nil, false
	}
	oi, ok1 := arrayInner(old)
	ni, ok2 := arrayInner(nv)
	if !ok1 || !ok2 {
		return nil, false
	}
	oi, ni = bytes.TrimSpace(oi), bytes.TrimSpace(ni)
	if !bytes.HasPrefix(ni, oi) {
		return nil, false
	}
	rest := bytes.TrimSpace(ni[len(oi):])
	if len(oi) > 0 {
		if len(rest) == 0 || rest[0] != ',' {
			return nil, false
		}
		rest = rest[1:]
	}
	if len(rest) == 0 {
		return nil, false
	}
	out := make(json.RawMessage, 0, len(rest)+2)
	out = append(append(append(out, '['), rest...), ']')
	return out, true
}
