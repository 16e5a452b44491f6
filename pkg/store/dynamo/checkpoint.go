package dynamo

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/superstep/superstep/pkg/pregel"
)

// stepMeta is a checkpoint without its values and versions: the meta
// document of a step item. Every step writes one, so its form is compact:
// a task's times are two integers (storedTask), zero counters are left
// out, and the stamp is left out when it is the manifest base's
// (BaseStamp), about 80 bytes a step item less than the checkpoint's own
// JSON, 170 with the stamp.
// Items written before hold a task's times as RFC 3339 "started" and
// "finished", and every counter; they read as before.
type stepMeta struct {
	Graph        string              `json:"graph"`
	Next         []pregel.Trigger    `json:"next,omitempty"`
	Barriers     map[string][]string `json:"barriers,omitempty"`
	Tasks        []storedTask        `json:"tasks,omitempty"`
	Counters     storedCounters      `json:"counters,omitzero"`
	DrainRequest string              `json:"drain_request,omitempty"`
	Stamp        *pregel.Stamp       `json:"stamp,omitempty"`
	// BaseStamp says the step's stamp is its manifest base's (the step
	// holds its manifest as a difference, manifest.go): about 90 bytes
	// a step item less for an agent's graph.
	BaseStamp bool `json:"bs,omitempty"`
}

// storedTask is a task's status as a step item holds it: Started as Unix
// nanoseconds (T0) and Finished as nanoseconds after Started (DT), when
// both are within what Unix nanoseconds represent; otherwise the
// status's own "started" and "finished".
type storedTask struct {
	pregel.TaskStatus
	T0 int64 `json:"t0,omitempty"`
	DT int64 `json:"dt,omitempty"`
}

// storedCounters is [pregel.Counters] without its zeros.
type storedCounters struct {
	Completed int `json:"completed,omitempty"`
	Skipped   int `json:"skipped,omitempty"`
	Cancelled int `json:"cancelled,omitempty"`
	Failed    int `json:"failed,omitempty"`
}

// storeTasks returns the stored form of tasks.
func storeTasks(tasks []pregel.TaskStatus) []storedTask {
	if len(tasks) == 0 {
		return nil
	}
	out := make([]storedTask, len(tasks))
	for i, t := range tasks {
		out[i].TaskStatus = t
		if y := t.Started.Year(); y > 1970 && y < 2262 && !t.Finished.IsZero() && !t.Finished.Before(t.Started) {
			out[i].T0, out[i].DT = t.Started.UnixNano(), t.Finished.Sub(t.Started).Nanoseconds()
			out[i].Started, out[i].Finished = time.Time{}, time.Time{}
		}
	}
	return out
}

// tasks returns the tasks' statuses, of either form.
func (m *stepMeta) tasks() []pregel.TaskStatus {
	if len(m.Tasks) == 0 {
		return nil
	}
	out := make([]pregel.TaskStatus, len(m.Tasks))
	for i, st := range m.Tasks {
		out[i] = st.TaskStatus
		if st.T0 != 0 {
			out[i].Started = time.Unix(0, st.T0).UTC()
			out[i].Finished = out[i].Started.Add(time.Duration(st.DT))
		}
	}
	return out
}

// manifest says, for every channel of a checkpoint, its version and where
// its value is: the manifest document of a step item. A step carries the
// manifest of the previous step forward, changing the entries of the
// channels it wrote, so loading any step reads its item and exactly the
// values it needs.
type manifest map[string]chanLoc

// chanLoc is a channel's entry in a manifest. Unless Cleared, Empty or Blob
// says otherwise, the value is vals[<channel>] in the item of step home().
type chanLoc struct {
	// Version is the channel's version: the step that last changed it.
	Version int `json:"v"`
	// At is the step whose item holds the value when that is not
	// Version: a later step stored it again, because its item was cheaper
	// to read with the value than without (see planCommit), or because
	// the previous step's manifest did not match. Zero means Version.
	At int `json:"at,omitempty"`
	// Size is the size in bytes of the item that holds the value, when
	// that is not the manifest's own step item: what reading it costs.
	Size int `json:"n,omitempty"`
	// Cleared: the channel has a version but no value.
	Cleared bool `json:"cleared,omitempty"`
	// Empty: the value is zero bytes long (stored nowhere).
	Empty bool `json:"empty,omitempty"`
	// Blob holds the value at [Off, Off+Len) of a blob.
	Blob *blobRef `json:"blob,omitempty"`
	Off  int      `json:"off,omitempty"`
	Len  int      `json:"len,omitempty"`
	// From, when set, is the run whose partition holds the value, in
	// the item of its step FromStep (and Blob is in that partition): the
	// channel was inherited from the state the run continues (Version is
	// pregel.Inherited; see CommitFrom).
	From     string `json:"from,omitempty"`
	FromStep int    `json:"fs,omitempty"`
}

// where returns the key of the item that holds an inline value, for a
// run whose partition is pk.
func (l chanLoc) where(pk string) (string, string) {
	if l.From != "" {
		return runPK(l.From), stepSK(l.FromStep)
	}
	return pk, stepSK(l.home())
}

// partition returns the partition of the value's blob.
func (l chanLoc) partition(pk string) string {
	if l.From != "" {
		return runPK(l.From)
	}
	return pk
}

// home returns the step whose item holds the value in its vals.
func (l chanLoc) home() int {
	if l.At != 0 {
		return l.At
	}
	return l.Version
}

// inline reports whether the value is in the vals of a step item.
func (l chanLoc) inline() bool { return !l.Cleared && !l.Empty && l.Blob == nil }

// inlineName reports whether a channel's value may be stored under its
// name in the vals map of a step item; the values of other channels go to
// blobs.
func inlineName(ch string) bool {
	return ch != "" && len(ch) <= maxInlineName && utf8.ValidString(ch)
}

// Request units, to weigh where values go: DynamoDB charges a write unit
// per KB written and a strongly consistent read unit per 4 KB read, and
// the write unit costs 5 times the read unit on demand.
func writeUnits(size int) int { return max(1, (size+1023)/1024) }
func readUnits(size int) int  { return max(1, (size+4095)/4096) }

const writeCostInReads = 5

// stepDoc is a step item decoded but for its values.
type stepDoc struct {
	step   int
	commit string
	size   int
	meta   stepMeta
	man    manifest
	// base is the whole manifest the step's is read from (the step's
	// own when its item holds it whole; see manifest.go).
	base *manifestBase
	item map[string]types.AttributeValue
}

// checkpoint returns the checkpoint of the step without its values.
func (d *stepDoc) checkpoint(runID string) *pregel.Checkpoint {
	cp := &pregel.Checkpoint{
		RunID:        runID,
		Graph:        d.meta.Graph,
		Step:         d.step,
		Versions:     make(map[string]int, len(d.man)),
		Next:         d.meta.Next,
		Barriers:     d.meta.Barriers,
		Tasks:        d.meta.tasks(),
		Counters:     pregel.Counters(d.meta.Counters),
		DrainRequest: d.meta.DrainRequest,
		Stamp:        d.meta.Stamp,
	}
	for ch, loc := range d.man {
		cp.Versions[ch] = loc.Version
	}
	return cp
}

// decodeDocs decodes step items but for their values, reading chunked
// documents with one BatchGetItem if there are any.
func (s *Store) decodeDocs(ctx context.Context, runID string, items []map[string]types.AttributeValue) ([]stepDoc, error) {
	docs := make([]stepDoc, len(items))
	f := s.newFetcher()
	for i, it := range items {
		sk, _ := getS(it, attrSK)
		step, ok := parseStepSK(sk)
		if !ok {
			return nil, fmt.Errorf("dynamo: run %q: bad step key %q", runID, sk)
		}
		commit, _ := getS(it, attrCommit)
		docs[i] = stepDoc{step: step, commit: commit, size: ItemSize(it), item: it}
		for _, name := range []string{attrMeta, attrManifest, attrDelta} {
			if err := f.addDoc(it, name); err != nil {
				return nil, fmt.Errorf("dynamo: load run %q step %d: %w", runID, step, err)
			}
		}
	}
	if len(f.keys) > 0 {
		if err := f.fetch(ctx); err != nil {
			return nil, fmt.Errorf("dynamo: load run %q: read documents: %w", runID, err)
		}
	}
	var deltas map[int]manifestDelta
	for i := range docs {
		d := &docs[i]
		raw, ok, err := f.doc(d.item, attrMeta)
		if err != nil || !ok {
			return nil, fmt.Errorf("dynamo: load run %q step %d: %s is unreadable (%v)", runID, d.step, attrMeta, err)
		}
		if err := json.Unmarshal(raw, &d.meta); err != nil {
			return nil, fmt.Errorf("dynamo: load run %q step %d: %s: %w", runID, d.step, attrMeta, err)
		}
		man, delta, err := decodeManifest(f, d.item)
		if err != nil {
			return nil, fmt.Errorf("dynamo: load run %q step %d: the manifest is unreadable: %w", runID, d.step, err)
		}
		if delta != nil {
			if deltas == nil {
				deltas = map[int]manifestDelta{}
			}
			deltas[i] = *delta
			continue
		}
		if d.meta.BaseStamp {
			return nil, fmt.Errorf("dynamo: load run %q step %d: the item holds its manifest whole but names its base's stamp", runID, d.step)
		}
		d.man, d.base = man, &manifestBase{run: runID, step: d.step, man: man, stamp: d.meta.Stamp}
	}
	if len(deltas) > 0 {
		if err := s.resolveBases(ctx, runID, docs, deltas); err != nil {
			return nil, err
		}
		for i := range deltas {
			if d := &docs[i]; d.meta.BaseStamp {
				if d.base.stamp == nil {
					return nil, fmt.Errorf("dynamo: load run %q step %d: its manifest base (run %q step %d) has no stamp", runID, d.step, d.base.run, d.base.step)
				}
				d.meta.Stamp = d.base.stamp
			}
		}
	}
	return docs, nil
}

// entry returns what the Store knows of a decoded step but its values.
func (d *stepDoc) entry() *stepEntry {
	return &stepEntry{commit: d.commit, size: d.size, man: d.man, base: d.base}
}

// remember caches what the Store knows of a committed step, keeping a
// whole checkpoint already cached over a manifest alone.
func (s *Store) remember(runID string, step int, e *stepEntry) {
	s.steps.update(stepKey{runID, step}, func(old *stepEntry, ok bool) (*stepEntry, int64) {
		if ok && old.cp != nil && old.commit == e.commit && (e.cp == nil || len(old.cp.Unloaded) < len(e.cp.Unloaded)) {
			return old, old.cost()
		}
		return e, e.cost()
	})
	if e.cp != nil {
		s.newest.update(runID, func(old int, ok bool) (int, int64) {
			if ok && old > step {
				return old, 1
			}
			return step, 1
		})
	}
}

// newestCached returns the newest step of a run whose checkpoint the cache
// has.
func (s *Store) newestCached(runID string) (*stepEntry, int, bool) {
	step, ok := s.newest.get(runID)
	if !ok {
		return nil, 0, false
	}
	e, ok := s.steps.get(stepKey{runID, step})
	if !ok || e.cp == nil {
		return nil, 0, false
	}
	return e, step, true
}

// cachedValue returns the value of channel ch at loc from a cached
// checkpoint of the run that has the channel at the same version: a
// channel has one value per version.
func (s *Store) cachedValue(runID string, step int, ch string, loc chanLoc) (json.RawMessage, bool) {
	for _, k := range []int{step - 1, loc.home(), loc.Version} {
		if k < 0 || k == step {
			continue
		}
		e, ok := s.steps.get(stepKey{runID, k})
		if !ok || e.cp == nil {
			continue
		}
		if v, ok := e.cp.Versions[ch]; !ok || v != loc.Version {
			continue
		}
		if v, ok := e.cp.Values[ch]; ok {
			return v, true
		}
	}
	return nil, false
}

// stepBefore returns what the Store knows of the step before step (from
// its cache, or with a GetItem of the step item), or nil if that step is
// not committed.
func (s *Store) stepBefore(ctx context.Context, runID string, step int) (*stepEntry, error) {
	if e, ok := s.steps.get(stepKey{runID, step - 1}); ok {
		return e, nil
	}
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            key(runPK(runID), stepSK(step-1)),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("dynamo: read step %d of run %q: %w", step-1, runID, err)
	}
	if out.Item == nil || isStopItem(out.Item) {
		return nil, nil
	}
	docs, err := s.decodeDocs(ctx, runID, []map[string]types.AttributeValue{out.Item})
	if err != nil {
		return nil, err
	}
	e := docs[0].entry()
	s.remember(runID, step-1, e)
	return e, nil
}

// isCommitted reports whether a step is committed, from the Store's cache
// or with a GetItem of the step item's key.
func (s *Store) isCommitted(ctx context.Context, runID string, step int) (bool, error) {
	if step < 0 {
		return false, nil
	}
	if _, ok := s.steps.get(stepKey{runID, step}); ok {
		return true, nil
	}
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:                aws.String(s.table),
		Key:                      key(runPK(runID), stepSK(step)),
		ConsistentRead:           aws.Bool(true),
		ProjectionExpression:     aws.String("#sk, #stop"),
		ExpressionAttributeNames: map[string]string{"#sk": attrSK, "#stop": attrStop},
	})
	if err != nil {
		return false, fmt.Errorf("dynamo: read step %d of run %q: %w", step, runID, err)
	}
	return out.Item != nil && !isStopItem(out.Item), nil
}

// Commit implements [pregel.Checkpointer]. It writes the chunks of values
// too large for the step item (BatchWriteItem, only if there are some) and
// puts the step item if it does not exist: one PutItem in the common case.
// The previous step's item must exist; the Store knows that from its cache
// when it loaded or committed that step, and reads the item otherwise.
// Since steps are committed in order and never deleted, the two conditions
// make step N the successor of the newest step. A step the Store knows is
// committed fails without a request.
//
// The task results of the step that the Store has seen (recorded or read)
// are deleted after the commit; others are left, and never read again.
//
// The commit puts its step item over a stop marker (stop.go) if one is
// there; CommitStop says so.
func (s *Store) Commit(ctx context.Context, cp *pregel.Checkpoint) error {
	_, err := s.commit(ctx, cp)
	return err
}

// commit is Commit reporting whether the step item replaced a stop marker
// (see CommitStop).
func (s *Store) commit(ctx context.Context, cp *pregel.Checkpoint) (stop bool, err error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if cp.Step < 0 {
		return false, fmt.Errorf("dynamo: commit step %d of run %q: %w", cp.Step, cp.RunID, pregel.ErrStepConflict)
	}
	full := cp
	cp = pregel.PackSegments(cp)
	if err := checkVersions(cp); err != nil {
		return false, err
	}
	if _, ok := s.steps.get(stepKey{cp.RunID, cp.Step}); ok {
		return false, fmt.Errorf("dynamo: commit step %d of run %q: the step is committed: %w", cp.Step, cp.RunID, pregel.ErrStepConflict)
	}
	pk := runPK(cp.RunID)
	var prev *stepEntry
	if cp.Step > 0 {
		var err error
		if prev, err = s.stepBefore(ctx, cp.RunID, cp.Step); err != nil {
			return false, err
		}
		if prev == nil {
			return false, fmt.Errorf("dynamo: commit step %d of run %q, whose step %d is not committed: %w", cp.Step, cp.RunID, cp.Step-1, pregel.ErrStepConflict)
		}
	}

	commit := newID()
	plan, err := planCommit(cp, commit, prev)
	if err != nil {
		return false, err
	}
	refs := make([]blobRef, len(plan.blobs))
	for i, b := range plan.blobs {
		refs[i] = b.ref
	}
	if err := s.writeBlobs(ctx, pk, plan.blobs); err != nil {
		s.dropBlobs(ctx, pk, refs)
		return false, fmt.Errorf("dynamo: commit step %d of run %q: %w", cp.Step, cp.RunID, err)
	}
	// The item goes where no step is: where nothing is, or over a stop
	// marker, whose old item the answer returns (stop.go).
	put, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           aws.String(s.table),
		Item:                                plan.item,
		ConditionExpression:                 aws.String("attribute_not_exists(sk) OR attribute_exists(#stop)"),
		ExpressionAttributeNames:            map[string]string{"#stop": attrStop},
		ReturnValues:                        types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		stop = stopOnCommit(put.Attributes)
	} else {
		ccf, ok := isConditionFailed(err)
		if !ok {
			// The outcome is unknown (the put may have succeeded
			// after a time-out), so the chunks stay.
			return false, fmt.Errorf("dynamo: commit step %d of run %q: %w", cp.Step, cp.RunID, err)
		}
		// The step is committed. By this commit, if the SDK retried a
		// put that succeeded but whose answer was lost.
		stored := ccf.Item
		if stored == nil {
			if stored, err = s.getItem(ctx, pk, stepSK(cp.Step)); err != nil {
				return false, fmt.Errorf("dynamo: commit step %d of run %q: the step exists; reading its commit id: %w", cp.Step, cp.RunID, err)
			}
		}
		if id, _ := getS(stored, attrCommit); id != commit {
			s.dropBlobs(ctx, pk, refs)
			return false, fmt.Errorf("dynamo: commit step %d of run %q: another commit came first: %w", cp.Step, cp.RunID, pregel.ErrStepConflict)
		}
		// This commit's item, put by a try whose answer was lost:
		// whether it replaced a stop marker is unknown.
		stop = true
	}
	s.remember(cp.RunID, cp.Step, &stepEntry{commit: commit, size: plan.size, man: plan.man, base: plan.base, cp: cp, full: full})
	s.dropTasks(ctx, cp.RunID, cp.Step)
	return stop, nil
}

// checkVersions rejects a checkpoint whose Values and Versions disagree.
func checkVersions(cp *pregel.Checkpoint) error {
	for ch := range cp.Values {
		if _, ok := cp.Versions[ch]; !ok {
			return fmt.Errorf("dynamo: commit step %d of run %q: channel %q has a value but no version", cp.Step, cp.RunID, ch)
		}
	}
	for ch, v := range cp.Versions {
		if v == pregel.Inherited {
			continue // the run's step 0 says where the value is (CommitFrom)
		}
		if v < 0 || v > cp.Step {
			return fmt.Errorf("dynamo: commit step %d of run %q: channel %q has version %d, outside 0..%d", cp.Step, cp.RunID, ch, v, cp.Step)
		}
	}
	return nil
}

// commitPlan is what a commit writes: blobs first, then the step item.
type commitPlan struct {
	blobs []pendingBlob
	item  map[string]types.AttributeValue
	man   manifest
	// base is the whole manifest of the step's (manifest.go).
	base *manifestBase
	// size is the step item's size.
	size int
}

// chanValue is a channel's value to store.
type chanValue struct {
	ch   string
	data []byte
}

// valsEntrySize is what a value adds to the vals map of an item.
func (v chanValue) valsEntrySize() int { return len(v.ch) + len(v.data) + 1 }

// Size estimates of manifest entries, in bytes of JSON.
const (
	// blobLocSize: what a blob location adds to a channel's entry.
	blobLocSize = 160
	// movedLocSize: what storing an unchanged value again changes in its
	// entry (an "at" of up to 10 digits instead of an "n").
	movedLocSize = 16
	// refDocSize: a document stored as a blob reference.
	refDocSize = 200
)

// planCommit lays out the items of a commit, without a request: it is a
// pure function of the checkpoint, the commit's id and the previous
// step's entry (nil for step 0). The step item holds the metadata, the
// manifest and the values the step changed, the smallest first while the
// item stays under maxStepItem; values that do not fit get a blob each
// when they are larger than a chunk and share one blob otherwise
// (placeValues).
//
// A value the step did not change stays where it is, in the item of an
// earlier step, unless storing it again makes this step cheaper to load
// (carryHeld).
func planCommit(cp *pregel.Checkpoint, commit string, prev *stepEntry) (*commitPlan, error) {
	var prevMan manifest
	var prevBase *manifestBase
	prevSize := 0
	if prev != nil {
		prevMan, prevSize, prevBase = prev.man, prev.size, prev.base
	}
	man, stored, held, err := layoutChannels(cp, prevMan, prevSize)
	if err != nil {
		return nil, err
	}
	meta, err := marshal(stepMeta{
		Graph:        cp.Graph,
		Next:         cp.Next,
		Barriers:     cp.Barriers,
		Tasks:        storeTasks(cp.Tasks),
		Counters:     storedCounters(cp.Counters),
		DrainRequest: cp.DrainRequest,
		Stamp:        cp.Stamp,
	})
	if err != nil {
		return nil, fmt.Errorf("dynamo: commit step %d of run %q: encode: %w", cp.Step, cp.RunID, err)
	}
	manJSON, err := marshal(man)
	if err != nil {
		return nil, fmt.Errorf("dynamo: commit step %d of run %q: encode manifest: %w", cp.Step, cp.RunID, err)
	}
	pk, sk := runPK(cp.RunID), stepSK(cp.Step)
	fixed := len(attrPK) + len(pk) + len(attrSK) + len(sk) + len(attrCommit) + len(commit) +
		docSize(attrMeta, len(meta)) + len(attrVals) + 3
	plan := &commitPlan{man: man}
	vals, size := placeValues(plan, commit, fixed, len(manJSON), stored)
	carryHeld(man, vals, held, cp.Step, size)

	manDoc, base, err := manifestDoc(cp.RunID, cp.Step, man, cp.Stamp, prevBase)
	if err != nil {
		return nil, fmt.Errorf("dynamo: commit step %d of run %q: encode manifest: %w", cp.Step, cp.RunID, err)
	}
	if cp.Stamp != nil && (base.run != cp.RunID || base.step != cp.Step) && sameStamp(base.stamp, cp.Stamp) {
		// A difference from a base of the same stamp: the stamp is the
		// base's. (The values were placed for the longer meta.)
		if meta, err = marshal(stepMeta{
			Graph:        cp.Graph,
			Next:         cp.Next,
			Barriers:     cp.Barriers,
			Tasks:        storeTasks(cp.Tasks),
			Counters:     storedCounters(cp.Counters),
			DrainRequest: cp.DrainRequest,
			BaseStamp:    true,
		}); err != nil {
			return nil, fmt.Errorf("dynamo: commit step %d of run %q: encode: %w", cp.Step, cp.RunID, err)
		}
	}
	plan.base = base
	plan.item = key(pk, sk)
	plan.item[attrCommit] = str(commit)
	for _, doc := range []struct {
		name string
		data []byte
	}{{attrMeta, meta}, {attrDelta, manDoc}} {
		b, err := docAttr(plan.item, doc.name, doc.data, maxInlineDoc)
		if err != nil {
			return nil, fmt.Errorf("dynamo: commit step %d of run %q: %w", cp.Step, cp.RunID, err)
		}
		if b != nil {
			plan.blobs = append(plan.blobs, *b)
		}
	}
	if len(vals) > 0 {
		plan.item[attrVals] = &types.AttributeValueMemberM{Value: vals}
	}
	plan.size = ItemSize(plan.item)
	if plan.size > maxItemSize {
		return nil, fmt.Errorf("dynamo: commit step %d of run %q: the step item would be %d bytes, over DynamoDB's %d", cp.Step, cp.RunID, plan.size, maxItemSize)
	}
	return plan, nil
}

// requests is the number of write requests the plan takes: the step
// item's PutItem, and a BatchWriteItem per 25 chunks of its blobs (when
// none is throttled).
func (p *commitPlan) requests() int {
	chunks := 0
	for _, b := range p.blobs {
		chunks += b.ref.Chunks
	}
	return 1 + (chunks+24)/25
}

// writeUnits is the write capacity the plan's items take, as DynamoDB
// counts it: a unit per KiB (rounded up) of each item.
func (p *commitPlan) writeUnits(pk string) int {
	n := writeUnits(p.size)
	for _, item := range blobItems(pk, p.blobs) {
		n += writeUnits(ItemSize(item))
	}
	return n
}

// layoutChannels places each channel of cp in the manifest: a channel the
// step did not change keeps the location the previous step's manifest
// gives it (prevSize, that step item's size, sized in when it lives
// there); a changed one is cleared, empty or a value to store. held lists
// the unchanged inline values by the step whose item holds them.
func layoutChannels(cp *pregel.Checkpoint, prevMan manifest, prevSize int) (man manifest, stored []chanValue, held map[int][]chanValue, err error) {
	step := cp.Step
	man = make(manifest, len(cp.Versions))
	held = map[int][]chanValue{}
	for _, ch := range slices.Sorted(maps.Keys(cp.Versions)) {
		v := cp.Versions[ch]
		if cp.Unloaded[ch] {
			// Not read, so not changed: where the previous step has it.
			old, ok := prevMan[ch]
			if !ok || v >= step || old.Version != v || old.Cleared {
				return nil, nil, nil, fmt.Errorf("dynamo: commit step %d of run %q: channel %q was not loaded, and step %d does not hold its version %d", cp.Step, cp.RunID, ch, step-1, v)
			}
			if old.home() == step-1 && old.From == "" {
				old.Size = prevSize
			}
			man[ch] = old
			continue
		}
		val, has := cp.Values[ch]
		if old, ok := prevMan[ch]; ok && v < step && old.Version == v && old.Cleared == !has {
			if old.home() == step-1 && old.From == "" {
				old.Size = prevSize
			}
			man[ch] = old
			if old.inline() && has && inlineName(ch) && old.From == "" {
				held[old.home()] = append(held[old.home()], chanValue{ch, val})
			}
			continue
		}
		loc := chanLoc{Version: v}
		if v != step {
			loc.At = step
		}
		switch {
		case !has:
			loc.Cleared = true
		case len(val) == 0:
			loc.Empty = true
		default:
			stored = append(stored, chanValue{ch, val})
		}
		man[ch] = loc
	}
	return man, stored, held, nil
}

// docSize is what a document attribute of n bytes adds to an item: itself,
// or a blob reference when it is over maxInlineDoc.
func docSize(name string, n int) int {
	if n > maxInlineDoc {
		return len(name) + len(refSuffix) + refDocSize
	}
	return len(name) + n
}

// placeValues puts the values the step stored into the step item (vals),
// the smallest first while the item stays under maxStepItem, and the
// others into blobs of plan, updating their locations in plan.man. fixed
// is the size of the item without its manifest and values, manLen the
// length of the manifest's JSON without blob locations. It returns the
// item's values and its estimated size.
func placeValues(plan *commitPlan, commit string, fixed, manLen int, stored []chanValue) (map[string]types.AttributeValue, int) {
	man := plan.man
	// The manifest estimated with a blob location for every value
	// stored: each value placed in the item takes its location off.
	manSize := manLen + blobLocSize*len(stored)
	valsSize := 0
	itemSizeWith := func(manSize, valsSize int) int { return fixed + docSize(attrManifest, manSize) + valsSize }
	vals := map[string]types.AttributeValue{}
	slices.SortStableFunc(stored, func(a, b chanValue) int { return cmp.Compare(len(a.data), len(b.data)) })
	var out []chanValue
	for _, v := range stored {
		if !inlineName(v.ch) || len(v.data) > maxInlineStepValue || itemSizeWith(manSize-blobLocSize, valsSize+v.valsEntrySize()) > maxStepItem {
			out = append(out, v)
			continue
		}
		vals[v.ch] = bin(v.data)
		manSize -= blobLocSize
		valsSize += v.valsEntrySize()
	}
	var pack []byte
	var packed []string
	for i, v := range out {
		loc := man[v.ch]
		if len(v.data) > chunkSize {
			b := newBlob(fmt.Sprintf("%s.%d", commit, i), v.data)
			plan.blobs = append(plan.blobs, b)
			loc.Blob, loc.Off, loc.Len = &b.ref, 0, len(v.data)
		} else {
			loc.Off, loc.Len = len(pack), len(v.data)
			pack = append(pack, v.data...)
			packed = append(packed, v.ch)
		}
		man[v.ch] = loc
	}
	if len(packed) > 0 {
		b := newBlob(commit+".pack", pack)
		plan.blobs = append(plan.blobs, b)
		for _, ch := range packed {
			loc := man[ch]
			loc.Blob = &b.ref
			man[ch] = loc
		}
	}
	return vals, itemSizeWith(manSize, valsSize)
}

// carryHeld stores again, in the step item (vals, of estimated size
// size), values of earlier items that a load of this step would read:
// for each such item, the values it holds are copied when the write units
// this adds (at writeCostInReads read units each) plus the read units it
// adds to reading this item are at most the read units of reading that
// item. Small values beside a large one that changes at every step are
// thus carried along, and a load reads one item. The groups go the most
// read units saved per byte first.
func carryHeld(man manifest, vals map[string]types.AttributeValue, held map[int][]chanValue, step, size int) {
	type group struct {
		values      []chanValue
		bytes, save int
	}
	var groups []group
	for _, values := range held {
		g := group{save: readUnits(man[values[0].ch].Size)}
		for _, v := range values {
			// A value that costs more to store again than to read
			// where it is stays there: a load that needs only the
			// others then does not read that item.
			if n := v.valsEntrySize() + movedLocSize; writeCostInReads*(writeUnits(n)-1) <= g.save {
				g.values = append(g.values, v)
				g.bytes += n
			}
		}
		if len(g.values) > 0 {
			groups = append(groups, g)
		}
	}
	slices.SortFunc(groups, func(a, b group) int {
		return cmp.Or(cmp.Compare(b.save*a.bytes, a.save*b.bytes), cmp.Compare(a.values[0].ch, b.values[0].ch))
	})
	for _, g := range groups {
		next := size + g.bytes
		cost := writeCostInReads*(writeUnits(next)-writeUnits(size)) + readUnits(next) - readUnits(size)
		if next > maxStepItem || cost > g.save {
			continue
		}
		for _, v := range g.values {
			loc := man[v.ch]
			loc.At, loc.Size = step, 0
			man[v.ch] = loc
			vals[v.ch] = bin(v.data)
		}
		size = next
	}
}

// query reads, with strongly consistent reads, the items of partition pk
// whose sort key starts with prefix, in sort key order.
func (s *Store) query(ctx context.Context, pk, prefix string, attrs []string, fn func(map[string]types.AttributeValue) error) error {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		KeyConditionExpression:    aws.String("pk = :pk AND begins_with(sk, :prefix)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(pk), ":prefix": str(prefix)},
		ConsistentRead:            aws.Bool(true),
	}
	if len(attrs) > 0 {
		in.ProjectionExpression, in.ExpressionAttributeNames = projection(attrs)
	}
	return s.queryPages(ctx, in, fn)
}

// queryPages runs the Query in, a page at a time, calling fn with each
// item in order; an error of fn stops it and is returned.
func (s *Store) queryPages(ctx context.Context, in *dynamodb.QueryInput, fn func(map[string]types.AttributeValue) error) error {
	p := dynamodb.NewQueryPaginator(s.client, in)
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("query: %w", err)
		}
		for _, it := range out.Items {
			if err := fn(it); err != nil {
				return err
			}
		}
	}
	return nil
}

// projection returns a ProjectionExpression for attrs, with every name
// aliased (some may be reserved words).
func projection(attrs []string) (*string, map[string]string) {
	names := make(map[string]string, len(attrs))
	expr := ""
	for i, a := range slices.Compact(slices.Sorted(slices.Values(attrs))) {
		alias := "#p" + strconv.Itoa(i)
		names[alias] = a
		if expr != "" {
			expr += ", "
		}
		expr += alias
	}
	return aws.String(expr), names
}

// Load implements [pregel.Checkpointer]. Latest is one Query for the
// newest step item, or, if the Store's cache has a step of the run, for a
// step item newer than that: a Store that committed or loaded the newest
// step reads no item. A step by number is served from the cache or read
// with GetItem. Values that the item does not hold and the cache does not
// have are read with one BatchGetItem.
func (s *Store) Load(ctx context.Context, runID string, step int) (*pregel.Checkpoint, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var item map[string]types.AttributeValue
	switch {
	case step == pregel.Latest:
		// The newest step item, or, when the cache has a step of the
		// run, the newest after it: none means the cached one is the
		// newest, and the Query read nothing.
		in := &dynamodb.QueryInput{
			TableName:              aws.String(s.table),
			KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :prefix)"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":pk": str(runPK(runID)), ":prefix": str(skStep),
			},
			ScanIndexForward: aws.Bool(false),
			Limit:            aws.Int32(1),
			ConsistentRead:   aws.Bool(true),
		}
		cached, known, ok := s.newestCached(runID)
		if ok {
			in.KeyConditionExpression = aws.String("pk = :pk AND sk BETWEEN :after AND :last")
			in.ExpressionAttributeValues = map[string]types.AttributeValue{
				":pk": str(runPK(runID)), ":after": str(stepSK(known + 1)), ":last": str(stepSK(maxStep)),
			}
		}
		out, err := s.client.Query(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("dynamo: load run %q: Query: %w", runID, err)
		}
		if len(out.Items) > 0 && isStopItem(out.Items[0]) {
			low := skStep
			if ok {
				low = stepSK(known + 1)
			}
			under, err := s.stepUnder(ctx, runID, low, out.Items[0])
			if err != nil {
				return nil, err
			}
			out.Items = under
		}
		switch {
		case len(out.Items) > 0:
			item = out.Items[0]
		case ok:
			return s.ensure(ctx, runID, cached.cp, nil)
		default:
			return nil, fmt.Errorf("dynamo: run %q: %w", runID, pregel.ErrNotFound)
		}
	case step < 0:
		return nil, fmt.Errorf("dynamo: run %q step %d: %w", runID, step, pregel.ErrNotFound)
	default:
		if e, ok := s.steps.get(stepKey{runID, step}); ok && e.cp != nil {
			return s.ensure(ctx, runID, e.cp, nil)
		}
		out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
			TableName:      aws.String(s.table),
			Key:            key(runPK(runID), stepSK(step)),
			ConsistentRead: aws.Bool(true),
		})
		if err != nil {
			return nil, fmt.Errorf("dynamo: load run %q step %d: %w", runID, step, err)
		}
		if out.Item == nil || isStopItem(out.Item) {
			return nil, fmt.Errorf("dynamo: run %q step %d: %w", runID, step, pregel.ErrNotFound)
		}
		item = out.Item
	}
	return s.checkpointOf(ctx, runID, item)
}

// checkpointOf returns the whole checkpoint of a step item, from the cache
// if it has it, and caches it.
func (s *Store) checkpointOf(ctx context.Context, runID string, item map[string]types.AttributeValue) (*pregel.Checkpoint, error) {
	return s.checkpointReading(ctx, runID, item, nil)
}

// checkpointReading is checkpointOf reading, of the values the item does
// not hold, only those of the channels reads returns (reading.go).
func (s *Store) checkpointReading(ctx context.Context, runID string, item map[string]types.AttributeValue, reads Reads) (*pregel.Checkpoint, error) {
	sk, _ := getS(item, attrSK)
	step, ok := parseStepSK(sk)
	if !ok {
		return nil, fmt.Errorf("dynamo: run %q: bad step key %q", runID, sk)
	}
	commit, _ := getS(item, attrCommit)
	if e, ok := s.steps.get(stepKey{runID, step}); ok && e.cp != nil && e.commit == commit {
		return s.ensure(ctx, runID, e.cp, reads)
	}
	docs, err := s.decodeDocs(ctx, runID, []map[string]types.AttributeValue{item})
	if err != nil {
		return nil, err
	}
	d := &docs[0]
	cp := d.checkpoint(runID)
	if err := s.loadValues(ctx, runID, d, cp, wanted(cp, reads)); err != nil {
		return nil, err
	}
	full, err := pregel.UnpackSegments(cp)
	if err != nil {
		return nil, fmt.Errorf("dynamo: run %q step %d: %w", runID, step, err)
	}
	e := d.entry()
	e.cp, e.full = cp, full
	s.remember(runID, step, e)
	return full, nil
}

// loadValues fills the values of a checkpoint: from its item, from cached
// checkpoints, and from one BatchGetItem of the earlier step items and
// blob chunks that hold the others. With want set, a value neither the
// item nor the cache holds is read only if its channel is in want; the
// others are noted in cp.Unloaded.
func (s *Store) loadValues(ctx context.Context, runID string, d *stepDoc, cp *pregel.Checkpoint, want map[string]bool) error {
	vals := getM(d.item, attrVals)
	cp.Values = make(map[string]json.RawMessage, len(d.man))
	var other []string
	for ch, loc := range d.man {
		switch {
		case loc.Cleared:
		case loc.Empty:
			cp.Values[ch] = json.RawMessage{}
		case loc.Blob == nil && loc.home() == d.step && loc.From == "":
			v, ok := vals[ch].(*types.AttributeValueMemberB)
			if !ok {
				return fmt.Errorf("dynamo: load run %q step %d: the value of channel %q is missing", runID, d.step, ch)
			}
			cp.Values[ch] = v.Value
		case want != nil && !want[ch]:
			if v, ok := s.cachedValue(runID, d.step, ch, loc); ok {
				cp.Values[ch] = v
				continue
			}
			if cp.Unloaded == nil {
				cp.Unloaded = map[string]bool{}
			}
			cp.Unloaded[ch] = true
		default:
			other = append(other, ch)
		}
	}
	return s.fetchValues(ctx, runID, d.step, d.man, cp.Values, other)
}

// fetchValues reads the values of channels chs of step's checkpoint, none
// of which its own item holds, into values: from cached checkpoints, and
// from one BatchGetItem of the earlier step items and blob chunks that
// hold the others.
func (s *Store) fetchValues(ctx context.Context, runID string, step int, man manifest, values map[string]json.RawMessage, chs []string) error {
	fail := func(err error) error {
		return fmt.Errorf("dynamo: load run %q step %d: %w", runID, step, err)
	}
	pk := runPK(runID)
	f := s.newFetcher()
	var missing []string
	for _, ch := range chs {
		loc := man[ch]
		if v, ok := s.cachedValue(runID, step, ch, loc); ok {
			values[ch] = v
			continue
		}
		if loc.Blob != nil {
			f.addBlob(loc.partition(pk), *loc.Blob)
		} else {
			ipk, isk := loc.where(pk)
			f.addValue(ipk, isk, ch)
		}
		missing = append(missing, ch)
	}
	if len(missing) == 0 {
		return nil
	}
	if err := f.fetch(ctx); err != nil {
		return fail(err)
	}
	blobs := map[string][]byte{}
	for _, ch := range missing {
		loc := man[ch]
		if loc.Blob == nil {
			v, ok := getM(f.item(loc.where(pk)), attrVals)[ch].(*types.AttributeValueMemberB)
			if !ok {
				return fail(fmt.Errorf("the value of channel %q stored at step %d is missing", ch, loc.home()))
			}
			values[ch] = v.Value
			continue
		}
		b, ok := blobs[loc.Blob.ID]
		if !ok {
			var err error
			if b, err = f.blob(loc.partition(pk), *loc.Blob); err != nil {
				return fail(fmt.Errorf("channel %q: %w", ch, err))
			}
			blobs[loc.Blob.ID] = b
		}
		if loc.Off < 0 || loc.Off+loc.Len > len(b) {
			return fail(fmt.Errorf("channel %q: slice [%d, %d) outside blob %s of %d bytes", ch, loc.Off, loc.Off+loc.Len, loc.Blob.ID, len(b)))
		}
		values[ch] = json.RawMessage(b[loc.Off : loc.Off+loc.Len : loc.Off+loc.Len])
	}
	return nil
}

// History implements [pregel.Checkpointer] with one Query over the step
// items, projected to their documents (plus a BatchGetItem if any
// document is chunked). The read units are those of the whole items.
func (s *Store) History(ctx context.Context, runID string) ([]pregel.StepInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var items []map[string]types.AttributeValue
	attrs := append([]string{attrPK, attrSK, attrCommit, attrStop}, docAttrs(attrMeta, attrManifest, attrDelta)...)
	err := s.query(ctx, runPK(runID), skStep, attrs, func(it map[string]types.AttributeValue) error {
		if !isStopItem(it) {
			items = append(items, it)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dynamo: history of run %q: %w", runID, err)
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("dynamo: run %q: %w", runID, pregel.ErrNotFound)
	}
	docs, err := s.decodeDocs(ctx, runID, items)
	if err != nil {
		return nil, err
	}
	out := make([]pregel.StepInfo, len(docs))
	for i := range docs {
		out[i] = docs[i].checkpoint(runID).Info()
	}
	return out, nil
}

// HistoryPage lists at most limit committed steps of a run after step
// after (-1 for the first ones), oldest first; none after it is an empty
// page. (It makes the Store a runs.HistoryPager.) It Queries the step
// items from step after+1 on with Limit, projected to their documents,
// and goes on from LastEvaluatedKey only when a stop marker (stop.go) or
// the Query's 1 MB page left the page short; chunked documents cost one
// BatchGetItem. The read units are those of the page's items, not of the
// run's history.
func (s *Store) HistoryPage(ctx context.Context, runID string, after, limit int) ([]pregel.StepInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	from := max(after+1, 0)
	if limit <= 0 || from > maxStep {
		return nil, nil
	}
	fail := func(err error) ([]pregel.StepInfo, error) {
		return nil, fmt.Errorf("dynamo: history of run %q after step %d: %w", runID, after, err)
	}
	proj, names := projection(append([]string{attrPK, attrSK, attrCommit, attrStop}, docAttrs(attrMeta, attrManifest, attrDelta)...))
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		KeyConditionExpression:    aws.String("pk = :pk AND sk BETWEEN :from AND :last"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(runPK(runID)), ":from": str(stepSK(from)), ":last": str(stepSK(maxStep))},
		ProjectionExpression:      proj,
		ExpressionAttributeNames:  names,
		ConsistentRead:            aws.Bool(true),
	}
	var items []map[string]types.AttributeValue
	for {
		in.Limit = aws.Int32(int32(min(limit-len(items), maxHistoryQuery)))
		out, err := s.client.Query(ctx, in)
		if err != nil {
			return fail(fmt.Errorf("query: %w", err))
		}
		items = append(items, withoutStop(out.Items)...)
		if len(items) >= limit || len(out.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	docs, err := s.decodeDocs(ctx, runID, items)
	if err != nil {
		return fail(err)
	}
	res := make([]pregel.StepInfo, len(docs))
	for i := range docs {
		res[i] = docs[i].checkpoint(runID).Info()
	}
	return res, nil
}

// maxHistoryQuery bounds the Limit of one Query of HistoryPage.
const maxHistoryQuery = 1000

// docAttrs lists document attributes with their blob references.
func docAttrs(names ...string) []string {
	var out []string
	for _, n := range names {
		out = append(out, n, n+refSuffix)
	}
	return out
}

// RecordTask implements [pregel.Checkpointer]. The step must be open: the
// previous step committed (the Store's cache knows, or a GetItem reads its
// key) and the step not. The result is written with one UpdateItem unless
// a final one is stored, which the failed condition returns. Then a
// GetItem of the step item's key checks that the step is still open: if
// it was committed meanwhile, the result is deleted again and RecordTask
// fails with ErrStepConflict, as if it came after the commit.
func (s *Store) RecordTask(ctx context.Context, runID string, step int, r pregel.TaskResult) (pregel.TaskResult, error) {
	if err := ctx.Err(); err != nil {
		return pregel.TaskResult{}, err
	}
	fail := func(err error) (pregel.TaskResult, error) {
		return pregel.TaskResult{}, fmt.Errorf("dynamo: record task %q of run %q for step %d: %w", r.TaskID, runID, step, err)
	}
	if step < 1 {
		return fail(fmt.Errorf("no step before it: %w", pregel.ErrStepConflict))
	}
	if _, ok := s.steps.get(stepKey{runID, step}); ok {
		return fail(fmt.Errorf("the step is committed: %w", pregel.ErrStepConflict))
	}
	if ok, err := s.isCommitted(ctx, runID, step-1); err != nil {
		return fail(err)
	} else if !ok {
		return fail(fmt.Errorf("step %d is not committed: %w", step-1, pregel.ErrStepConflict))
	}

	// The result's partition: the run's, or its shard's (shards.go).
	info, err := s.shardsOf(ctx, runID, step)
	if err != nil {
		return fail(err)
	}
	pk := info.taskPKOf(runID, r.TaskID)
	data, err := marshal(r)
	if err != nil {
		return fail(fmt.Errorf("encode: %w", err))
	}
	item := map[string]types.AttributeValue{}
	blob, err := docAttr(item, attrData, data, maxInlineValue)
	if err != nil {
		return fail(err)
	}
	var refs []blobRef
	if blob != nil {
		refs = append(refs, blob.ref)
		if err := s.writeBlobs(ctx, pk, []pendingBlob{*blob}); err != nil {
			s.dropBlobs(ctx, pk, refs)
			return fail(err)
		}
	}
	names := map[string]string{"#sk": attrSK, "#final": attrFinal, "#seq": attrSeq, "#d": attrData, "#r": attrData + refSuffix}
	values := map[string]types.AttributeValue{":final": boolean(r.Final()), ":false": boolean(false), ":now": num(s.now().UnixNano())}
	expr := "SET #final = :final, #seq = if_not_exists(#seq, :now), "
	if v, ok := item[attrData]; ok {
		expr += "#d = :data REMOVE #r"
		values[":data"] = v
	} else {
		expr += "#r = :data REMOVE #d"
		values[":data"] = item[attrData+refSuffix]
	}
	tk := key(pk, taskSK(step, r.TaskID))
	out, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.table),
		Key:                                 tk,
		UpdateExpression:                    aws.String(expr),
		ConditionExpression:                 aws.String("attribute_not_exists(#sk) OR #final = :false"),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValues:                        types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	stored, wrote := r, err == nil
	var replaced []blobRef
	switch ccf, failed := isConditionFailed(err); {
	case wrote:
		if ref, err := docRef(out.Attributes, attrData); err == nil && ref != nil {
			replaced = append(replaced, *ref)
		}
	case failed:
		// A final result is stored: it is the one returned.
		s.dropBlobs(ctx, pk, refs)
		old := ccf.Item
		if old == nil {
			if old, err = s.getItem(ctx, pk, taskSK(step, r.TaskID)); err != nil {
				return fail(fmt.Errorf("read the stored result: %w", err))
			}
		}
		res, err := s.decodeTasks(ctx, []map[string]types.AttributeValue{old})
		if err != nil {
			return fail(err)
		}
		stored, refs = res[0], nil
		if ref, err := docRef(old, attrData); err == nil && ref != nil {
			refs = append(refs, *ref)
		}
	default:
		// The result may have been stored: its chunks stay.
		return fail(err)
	}

	// The fence: the step must still be open.
	committed, err := s.isCommitted(ctx, runID, step)
	if err != nil {
		return fail(err)
	}
	if committed {
		if wrote {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			_ = s.batchWrite(ctx, nil, []map[string]types.AttributeValue{tk})
			cancel()
			s.dropBlobs(ctx, pk, append(refs, replaced...))
		}
		return fail(fmt.Errorf("the step was committed: %w", pregel.ErrStepConflict))
	}
	s.dropBlobs(ctx, pk, replaced)
	var ref *blobRef
	if len(refs) > 0 {
		ref = &refs[0]
	}
	s.noteTasks(runID, step, map[string]*blobRef{r.TaskID: ref})
	return stored, nil
}

// noteTasks remembers task result items of an open step, for its commit
// to delete.
func (s *Store) noteTasks(runID string, step int, tasks map[string]*blobRef) {
	s.tasks.update(stepKey{runID, step}, func(note taskNote, ok bool) (taskNote, int64) {
		if !ok {
			note = taskNote{}
		}
		maps.Copy(note, tasks)
		return note, 1
	})
}

// dropTasks deletes the task result items of a committed step that the
// Store has noted, and their blobs, as a courtesy: nothing reads them
// again, so a failure leaves garbage, not an error.
func (s *Store) dropTasks(ctx context.Context, runID string, step int) {
	note, _ := s.tasks.take(stepKey{runID, step})
	info, _ := s.shards.take(stepKey{runID, step})
	if len(note) == 0 && !info.sharded() {
		return
	}
	keys := noteKeys(runID, step, note, info)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_ = s.deleteParallel(ctx, keys)
}

func (s *Store) getItem(ctx context.Context, pk, sk string) (map[string]types.AttributeValue, error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            key(pk, sk),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, err
	}
	if out.Item == nil {
		return nil, errItemNotFound
	}
	return out.Item, nil
}

// errItemNotFound is getItem's error for a key with no item.
var errItemNotFound = errors.New("item not found")

// PendingTasks implements [pregel.Checkpointer] with one Query, newest
// first, from the step's task results down to its step item (tasksDown):
// if the step item exists, or a later one, the step is committed and the
// results read are left overs: they are deleted, and none is returned.
func (s *Store) PendingTasks(ctx context.Context, runID string, step int) ([]pregel.TaskResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if _, ok := s.steps.get(stepKey{runID, step}); ok {
		return nil, nil
	}
	if step < 0 {
		return nil, nil
	}
	newest, byStep, err := s.tasksDown(ctx, runID, stepSK(step), taskPrefix(step)+lastKey)
	if err != nil {
		return nil, fmt.Errorf("dynamo: pending tasks of run %q step %d: %w", runID, step, err)
	}
	if _, ok := s.shards.get(stepKey{runID, step}); !ok {
		s.noteShards(runID, step, shardInfo{}) // no marker: not sharded
	}
	items := byStep[step]
	if len(items) == 0 {
		return nil, nil
	}
	return s.openTasks(ctx, runID, step, items, newest != nil)
}

// openTasks returns the task results of step, read as items, in the order
// they were first recorded. If the step is committed, they are left overs:
// they are deleted, and none is returned.
func (s *Store) openTasks(ctx context.Context, runID string, step int, items []map[string]types.AttributeValue, committed bool) ([]pregel.TaskResult, error) {
	note := make(map[string]*blobRef, len(items))
	for _, it := range items {
		sk, _ := getS(it, attrSK)
		id, _ := splitPrefix(sk, taskPrefix(step))
		ref, _ := docRef(it, attrData)
		note[id] = ref
	}
	s.noteTasks(runID, step, note)
	if committed {
		s.dropTasks(ctx, runID, step)
		return nil, nil
	}
	slices.SortStableFunc(items, func(a, b map[string]types.AttributeValue) int {
		sa, _ := getN(a, attrSeq)
		sb, _ := getN(b, attrSeq)
		return cmp.Compare(sa, sb)
	})
	res, err := s.decodeTasks(ctx, items)
	if err != nil {
		return nil, fmt.Errorf("dynamo: pending tasks of run %q step %d: %w", runID, step, err)
	}
	return onePerTask(res), nil
}

// onePerTask keeps one result per task, the first final one (else the
// first): a task has two only if recorded in both layouts of a step (a
// node function from before sharding beside one after, shards.go).
func onePerTask(res []pregel.TaskResult) []pregel.TaskResult {
	at := make(map[string]int, len(res))
	out := res[:0]
	for _, r := range res {
		i, seen := at[r.TaskID]
		switch {
		case !seen:
			at[r.TaskID] = len(out)
			out = append(out, r)
		case !out[i].Final() && r.Final():
			out[i] = r
		}
	}
	return out
}

// decodeTasks decodes task result items, reading chunked ones.
func (s *Store) decodeTasks(ctx context.Context, items []map[string]types.AttributeValue) ([]pregel.TaskResult, error) {
	f := s.newFetcher()
	for _, it := range items {
		if err := f.addDoc(it, attrData); err != nil {
			return nil, err
		}
	}
	if len(f.keys) > 0 {
		if err := f.fetch(ctx); err != nil {
			return nil, err
		}
	}
	out := make([]pregel.TaskResult, len(items))
	for i, it := range items {
		raw, ok, err := f.doc(it, attrData)
		if err != nil || !ok {
			sk, _ := getS(it, attrSK)
			return nil, fmt.Errorf("task result %s is unreadable (%v)", sk, err)
		}
		if err := json.Unmarshal(raw, &out[i]); err != nil {
			return nil, fmt.Errorf("task result: %w", err)
		}
	}
	return out, nil
}

// sameStamp reports whether two stamps are equal.
func sameStamp(a, b *pregel.Stamp) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a == b || a.Version == b.Version && a.Fingerprint == b.Fingerprint && maps.Equal(a.Reducers, b.Reducers)
}
