package dynamo

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/superstep/superstep/pkg/pregel"
)

// Manifests by difference.
//
// A step item holds its manifest whole (attribute manifest), or, when
// that is shorter by half or more, as the difference from the whole
// manifest of an earlier step, its base (attribute mdelta): the entries
// that differ and the channels gone. The base is the previous step's base
// (or the previous step, when it holds its manifest whole), so a base is
// always one read away, never a chain; a step whose difference grew to
// half its manifest writes its manifest whole again and becomes the base
// of the steps after it. A run that continues a thread (CommitFrom) takes
// as its base the base of the step it continues, in that run's partition,
// seen as inherited (manifestBase.in). So a step that appends to a long
// conversation stores the entries of what it wrote, not one entry per
// open segment: about half a manifest per step at most, a few entries
// usually.
//
// Items written before this layout hold their manifests whole, and are
// read as before.

const (
	// attrDelta holds a step's manifest as a difference (manifestDelta)
	// as JSON, inline or, with refSuffix, as a blob reference.
	attrDelta = "mdelta"
	// minDeltaManifest is the length of manifest JSON under which a
	// step item holds its manifest whole: small states cost no read of a
	// base on a cold load.
	minDeltaManifest = 256
)

// manifestDelta is a manifest as a difference: the manifest is the
// base's (seen from this run: manifestBase.in) with the entries of Set
// put and the channels of Del removed.
type manifestDelta struct {
	// Run is the run of the base when it is not this step's own.
	Run  string
	Step int
	Set  manifest
	Del  []string
}

// wireManifest is the document of attribute mdelta: a manifest whole (no
// Base) or as a difference from Base, its entries naming the runs they
// inherit from by their place in Runs.
type wireManifest struct {
	Base *wireBase          `json:"base,omitempty"`
	Runs []string           `json:"runs,omitempty"`
	Set  map[string]wireLoc `json:"set,omitempty"`
	// Seg holds the entries of segments (pregel.SegmentName), by
	// channel and segment number: their names are not repeated.
	Seg map[string]map[string]wireLoc `json:"seg,omitempty"`
	Del []string                      `json:"del,omitempty"`
}

type wireBase struct {
	Run  string `json:"run,omitempty"`
	Step int    `json:"step"`
}

// wireLoc is a chanLoc whose From is 1 + its run's place in Runs.
type wireLoc struct {
	Version  int      `json:"v"`
	At       int      `json:"at,omitempty"`
	Size     int      `json:"n,omitempty"`
	Cleared  bool     `json:"c,omitempty"`
	Empty    bool     `json:"e,omitempty"`
	Blob     *blobRef `json:"blob,omitempty"`
	Off      int      `json:"off,omitempty"`
	Len      int      `json:"len,omitempty"`
	From     int      `json:"r,omitempty"`
	FromStep int      `json:"fs,omitempty"`
}

// encodeManifest returns the mdelta document of set and del over base
// (nil: set is the whole manifest).
func encodeManifest(base *wireBase, set manifest, del []string) ([]byte, error) {
	w := wireManifest{Base: base, Del: del}
	runs := map[string]int{}
	for _, ch := range slices.Sorted(maps.Keys(set)) {
		loc := set[ch]
		wl := wireLoc{Version: loc.Version, At: loc.At, Size: loc.Size, Cleared: loc.Cleared, Empty: loc.Empty,
			Blob: loc.Blob, Off: loc.Off, Len: loc.Len, FromStep: loc.FromStep}
		if loc.From != "" {
			i, ok := runs[loc.From]
			if !ok {
				w.Runs = append(w.Runs, loc.From)
				i = len(w.Runs)
				runs[loc.From] = i
			}
			wl.From = i
		}
		if name, k, ok := splitSegment(ch); ok {
			if w.Seg == nil {
				w.Seg = map[string]map[string]wireLoc{}
			}
			if w.Seg[name] == nil {
				w.Seg[name] = map[string]wireLoc{}
			}
			w.Seg[name][k] = wl
			continue
		}
		if w.Set == nil {
			w.Set = map[string]wireLoc{}
		}
		w.Set[ch] = wl
	}
	return marshal(w)
}

// decodeWire decodes an mdelta document: a whole manifest (delta nil) or
// a difference.
func decodeWire(raw []byte) (manifest, *manifestDelta, error) {
	var w wireManifest
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, nil, err
	}
	set := make(manifest, len(w.Set))
	for name, segs := range w.Seg {
		for k, wl := range segs {
			if w.Set == nil {
				w.Set = map[string]wireLoc{}
			}
			w.Set[name+segSep+k] = wl
		}
	}
	for ch, wl := range w.Set {
		loc := chanLoc{Version: wl.Version, At: wl.At, Size: wl.Size, Cleared: wl.Cleared, Empty: wl.Empty,
			Blob: wl.Blob, Off: wl.Off, Len: wl.Len, FromStep: wl.FromStep}
		if wl.From != 0 {
			if wl.From < 0 || wl.From > len(w.Runs) {
				return nil, nil, fmt.Errorf("channel %q inherits from run %d of %d", ch, wl.From, len(w.Runs))
			}
			loc.From = w.Runs[wl.From-1]
		}
		set[ch] = loc
	}
	if w.Base == nil {
		return set, nil, nil
	}
	return nil, &manifestDelta{Run: w.Base.Run, Step: w.Base.Step, Set: set, Del: w.Del}, nil
}

// manifestBase is a step whose item holds its manifest whole.
type manifestBase struct {
	run  string
	step int
	man  manifest
	// stamp is the base step's graph version stamp, which the steps
	// holding their manifest as a difference from it leave out when
	// theirs is the same (stepMeta.BaseStamp).
	stamp *pregel.Stamp
}

// in returns the base's manifest as a step of run sees it: as is in its
// own run; from another run, every channel inherited (pregel.Inherited),
// its value where the base's run has it (From), as CommitFrom inherits
// it.
func (b *manifestBase) in(run string) manifest {
	if b.run == run {
		return b.man
	}
	out := make(manifest, len(b.man))
	for ch, loc := range b.man {
		if loc.From == "" {
			loc.From, loc.FromStep = b.run, loc.home()
		}
		loc.Version, loc.At, loc.Size = pregel.Inherited, 0, 0
		out[ch] = loc
	}
	return out
}

// sameLoc reports whether two manifest entries are equal.
func sameLoc(a, b chanLoc) bool {
	ab, bb := a.Blob, b.Blob
	a.Blob, b.Blob = nil, nil
	if a != b || (ab == nil) != (bb == nil) {
		return false
	}
	return ab == nil || *ab == *bb
}

// diffManifest returns the difference of man from base (the base's
// manifest as run sees it).
func diffManifest(base *manifestBase, run string, man manifest) manifestDelta {
	d := manifestDelta{Step: base.step, Set: manifest{}}
	if base.run != run {
		d.Run = base.run
	}
	from := base.in(run)
	for ch, loc := range man {
		if old, ok := from[ch]; !ok || !sameLoc(old, loc) {
			d.Set[ch] = loc
		}
	}
	for ch := range from {
		if _, ok := man[ch]; !ok {
			d.Del = append(d.Del, ch)
		}
	}
	slices.Sort(d.Del)
	return d
}

// apply returns the manifest d describes over base, seen from run.
func (d manifestDelta) apply(base *manifestBase, run string) manifest {
	from := base.in(run)
	out := make(manifest, len(from)+len(d.Set))
	for ch, loc := range from {
		out[ch] = loc
	}
	for _, ch := range d.Del {
		delete(out, ch)
	}
	for ch, loc := range d.Set {
		out[ch] = loc
	}
	return out
}

// manifestDoc returns the mdelta document of a step item of run at step
// whose manifest is man and stamp stamp: a difference from prev (the previous step's
// base) when that is at most half as long as the whole, else the whole;
// and the base of the steps after it.
func manifestDoc(run string, step int, man manifest, stamp *pregel.Stamp, prev *manifestBase) ([]byte, *manifestBase, error) {
	whole, err := encodeManifest(nil, man, nil)
	if err != nil {
		return nil, nil, err
	}
	self := &manifestBase{run: run, step: step, man: man, stamp: stamp}
	if prev == nil || len(whole) <= minDeltaManifest {
		return whole, self, nil
	}
	d := diffManifest(prev, run, man)
	doc, err := encodeManifest(&wireBase{Run: d.Run, Step: d.Step}, d.Set, d.Del)
	if err != nil {
		return nil, nil, err
	}
	if 2*len(doc) > len(whole) {
		return whole, self, nil
	}
	return doc, prev, nil
}

// resolveBases completes the manifests of docs whose items hold a
// difference (delta set): from a base among docs, from the cache, or read
// with a GetItem of the base's item (cached afterwards).
func (s *Store) resolveBases(ctx context.Context, runID string, docs []stepDoc, deltas map[int]manifestDelta) error {
	for i, d := range deltas {
		doc := &docs[i]
		run := cmp.Or(d.Run, runID)
		base, err := s.baseOf(ctx, run, d.Step, docs, runID)
		if err != nil {
			return fmt.Errorf("dynamo: load run %q step %d: the base of its manifest (run %q step %d): %w", runID, doc.step, run, d.Step, err)
		}
		doc.man, doc.base = d.apply(base, runID), base
	}
	return nil
}

// baseOf returns the whole manifest of step of run: from docs (of
// docsRun), the cache, or the step's item.
func (s *Store) baseOf(ctx context.Context, run string, step int, docs []stepDoc, docsRun string) (*manifestBase, error) {
	if run == docsRun {
		for i := range docs {
			if d := &docs[i]; d.step == step && d.base != nil && d.base.run == run && d.base.step == step {
				return d.base, nil
			}
		}
	}
	if e, ok := s.steps.get(stepKey{run, step}); ok && e.base != nil && e.base.run == run && e.base.step == step {
		return e.base, nil
	}
	// Committed items never change: an eventually consistent read (half
	// the read units) finds it, or, rarely, not yet.
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table),
		Key:       key(runPK(run), stepSK(step)),
	})
	if err == nil && out.Item == nil {
		out, err = s.client.GetItem(ctx, &dynamodb.GetItemInput{
			TableName:      aws.String(s.table),
			Key:            key(runPK(run), stepSK(step)),
			ConsistentRead: aws.Bool(true),
		})
	}
	if err != nil {
		return nil, err
	}
	if out.Item == nil {
		return nil, fmt.Errorf("the item is missing")
	}
	based, err := s.decodeDocs(ctx, run, []map[string]types.AttributeValue{out.Item})
	if err != nil {
		return nil, err
	}
	if b := based[0].base; b == nil || b.run != run || b.step != step {
		return nil, fmt.Errorf("the item holds a difference, not a whole manifest")
	}
	s.remember(run, step, based[0].entry())
	return based[0].base, nil
}

// decodeManifest decodes the manifest document of a step item: whole
// (man) or a difference (delta). Items written before mdelta hold their
// manifests whole in attribute manifest.
func decodeManifest(f *fetcher, item map[string]types.AttributeValue) (man manifest, delta *manifestDelta, err error) {
	raw, ok, err := f.doc(item, attrDelta)
	if err != nil {
		return nil, nil, err
	}
	if ok {
		return decodeWire(raw)
	}
	raw, ok, err = f.doc(item, attrManifest)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		return nil, nil, fmt.Errorf("no manifest")
	}
	if err := json.Unmarshal(raw, &man); err != nil {
		return nil, nil, err
	}
	return man, nil, nil
}

// segSep is what pregel.SegmentName puts between a channel's name and a
// segment's number.
var segSep = strings.TrimSuffix(pregel.SegmentName("", 0), "0")

// splitSegment splits the name of a segment into its channel's name and
// its number (in decimal, without leading zeros).
func splitSegment(name string) (string, string, bool) {
	ch, ok := pregel.SegmentOf(name)
	if !ok {
		return "", "", false
	}
	k := name[len(ch)+len(segSep):]
	if n, err := strconv.Atoi(k); err != nil || n < 0 || strconv.Itoa(n) != k {
		return "", "", false
	}
	return ch, k, true
}
