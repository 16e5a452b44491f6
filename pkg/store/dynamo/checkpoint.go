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

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/superstep/superstep/pkg/pregel"
)

// stepMeta is a checkpoint without its values: the meta document of the
// head and step items.
type stepMeta struct {
	Graph        string              `json:"graph"`
	Next         []pregel.Trigger    `json:"next,omitempty"`
	Barriers     map[string][]string `json:"barriers,omitempty"`
	Tasks        []pregel.TaskStatus `json:"tasks,omitempty"`
	Counters     pregel.Counters     `json:"counters"`
	DrainRequest string              `json:"drain_request,omitempty"`
}

// manifest says, for every channel of a checkpoint, its version and where
// its value is: the manifest document of the head and step items. A step
// carries the manifest of the previous step forward, changing the entries
// of the channels it wrote, so loading any step reads its item and exactly
// the values it needs.
type manifest map[string]chanLoc

// chanLoc is a channel's entry in a manifest.
type chanLoc struct {
	// Version is the channel's version: the step that last changed it.
	Version int `json:"v"`
	// At is the step whose commit stored the value: VAL#<channel>#<At>
	// holds it unless Cleared, Empty or Blob says otherwise. It equals
	// Version except when a checkpoint's unchanged channel did not match
	// the manifest of the previous step and was stored again.
	At int `json:"at"`
	// Cleared: the channel has a version but no value.
	Cleared bool `json:"cleared,omitempty"`
	// Empty: the value is zero bytes long (stored nowhere).
	Empty bool `json:"empty,omitempty"`
	// Blob holds the value at [Off, Off+Len) of a blob.
	Blob *blobRef `json:"blob,omitempty"`
	Off  int      `json:"off,omitempty"`
	Len  int      `json:"len,omitempty"`
}

// head is the checkpoint head of a run: its latest committed step.
type head struct {
	step   int
	commit string
	item   map[string]types.AttributeValue
}

// getHead reads a run's head; it returns nil when the run has no committed
// step. attrs, if any, limit the attributes read.
func (s *Store) getHead(ctx context.Context, runID string, attrs ...string) (*head, error) {
	in := &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            key(runPK(runID), skHead),
		ConsistentRead: aws.Bool(true),
	}
	if len(attrs) > 0 {
		in.ProjectionExpression, in.ExpressionAttributeNames = projection(append(attrs, attrPK, attrStep, attrCommit))
	}
	out, err := s.client.GetItem(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("dynamo: read head of run %q: %w", runID, err)
	}
	if out.Item == nil {
		return nil, nil
	}
	step, ok := getN(out.Item, attrStep)
	if !ok {
		return nil, fmt.Errorf("dynamo: head of run %q has no step", runID)
	}
	commit, _ := getS(out.Item, attrCommit)
	return &head{step: int(step), commit: commit, item: out.Item}, nil
}

// projection returns a ProjectionExpression for attrs, with every name
// aliased (some, like step, are reserved words).
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

// docAttrs lists a document attribute with its blob reference.
func docAttrs(names ...string) []string {
	var out []string
	for _, n := range names {
		out = append(out, n, n+refSuffix)
	}
	return out
}

// headAndTasks reads a run's head and the task results recorded since
// (normally those of the open step, see Commit) with one Query. It returns
// a nil head when the run has no committed step. attrs, if any, limit the
// attributes read.
func (s *Store) headAndTasks(ctx context.Context, runID string, attrs ...string) (*head, []map[string]types.AttributeValue, error) {
	if len(attrs) > 0 {
		attrs = append(attrs, attrPK, attrSK, attrStep, attrCommit)
	}
	var h *head
	var tasks []map[string]types.AttributeValue
	err := s.query(ctx, runPK(runID), skHead, attrs, func(it map[string]types.AttributeValue) error {
		sk, _ := getS(it, attrSK)
		if sk != skHead {
			tasks = append(tasks, it)
			return nil
		}
		step, ok := getN(it, attrStep)
		if !ok {
			return fmt.Errorf("head has no step")
		}
		commit, _ := getS(it, attrCommit)
		h = &head{step: int(step), commit: commit, item: it}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("dynamo: read head of run %q: %w", runID, err)
	}
	return h, tasks, nil
}

// taskStep returns the step of a task result item.
func taskStep(item map[string]types.AttributeValue) (int, bool) {
	sk, _ := getS(item, attrSK)
	rest, ok := splitPrefix(sk, skTask)
	if !ok || len(rest) < 11 {
		return 0, false
	}
	n, err := strconv.Atoi(rest[:10])
	return n, err == nil
}

// Commit implements [pregel.Checkpointer]. It reads the head and the
// recorded task results (one Query), writes the chunks of values too large
// for the transaction (BatchWriteItem, only if there are some), and commits
// the step with one TransactWriteItems conditioned on the head, which also
// deletes the task results of the step.
//
// A task result recorded between the Query and the transaction outlives
// the commit; PendingTasks ignores it, and the next commit deletes it.
func (s *Store) Commit(ctx context.Context, cp *pregel.Checkpoint) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if cp.Step < 0 {
		return fmt.Errorf("dynamo: commit step %d of run %q: %w", cp.Step, cp.RunID, pregel.ErrStepConflict)
	}
	if err := checkVersions(cp); err != nil {
		return err
	}
	pk := runPK(cp.RunID)
	h, tasks, err := s.headAndTasks(ctx, cp.RunID, append(docAttrs(attrManifest), attrData+refSuffix)...)
	if err != nil {
		return err
	}
	switch {
	case h == nil && cp.Step > 0:
		return fmt.Errorf("dynamo: commit step %d of run %q, which has no committed step: %w", cp.Step, cp.RunID, pregel.ErrStepConflict)
	case h != nil && h.step != cp.Step-1:
		return fmt.Errorf("dynamo: commit step %d of run %q after step %d: %w", cp.Step, cp.RunID, h.step, pregel.ErrStepConflict)
	}
	var prev manifest
	if h != nil {
		f := s.newFetcher()
		if err := f.addDoc(h.item, attrManifest); err != nil {
			return fmt.Errorf("dynamo: head of run %q: %w", cp.RunID, err)
		}
		if err := f.fetch(ctx); err != nil {
			return fmt.Errorf("dynamo: read manifest of run %q: %w", cp.RunID, err)
		}
		raw, ok, err := f.doc(h.item, attrManifest)
		if err != nil || !ok {
			return fmt.Errorf("dynamo: manifest of run %q step %d is unreadable (%v)", cp.RunID, h.step, err)
		}
		if err := json.Unmarshal(raw, &prev); err != nil {
			return fmt.Errorf("dynamo: manifest of run %q step %d: %w", cp.RunID, h.step, err)
		}
	}

	commit := newID()
	w, err := s.planCommit(cp, commit, prev)
	if err != nil {
		return err
	}
	refs := make([]blobRef, len(w.blobs))
	for i, b := range w.blobs {
		refs[i] = b.ref
	}
	if err := s.writeBlobs(ctx, pk, w.blobs); err != nil {
		s.dropBlobs(ctx, pk, refs)
		return fmt.Errorf("dynamo: commit step %d of run %q: %w", cp.Step, cp.RunID, err)
	}

	// The head: its condition is the fence.
	update := &types.Update{
		TableName: aws.String(s.table),
		Key:       key(pk, skHead),
		ExpressionAttributeNames: map[string]string{
			"#step": attrStep, "#commit": attrCommit,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":step": num(int64(cp.Step)), ":commit": str(commit),
		},
	}
	set := "#step = :step, #commit = :commit"
	var remove []string
	for i, name := range []string{attrMeta, attrManifest} {
		// Exactly one of the document attribute and its reference is
		// set; the other is removed.
		n, r := fmt.Sprintf("#d%d", i), fmt.Sprintf("#r%d", i)
		update.ExpressionAttributeNames[n] = name
		update.ExpressionAttributeNames[r] = name + refSuffix
		if v, ok := w.step[name]; ok {
			set += fmt.Sprintf(", %s = :d%d", n, i)
			update.ExpressionAttributeValues[fmt.Sprintf(":d%d", i)] = v
			remove = append(remove, r)
		} else {
			set += fmt.Sprintf(", %s = :r%d", r, i)
			update.ExpressionAttributeValues[fmt.Sprintf(":r%d", i)] = w.step[name+refSuffix]
			remove = append(remove, n)
		}
	}
	update.UpdateExpression = aws.String("SET " + set + " REMOVE " + remove[0] + ", " + remove[1])
	if cp.Step == 0 {
		update.ConditionExpression = aws.String("attribute_not_exists(#step)")
	} else {
		update.ConditionExpression = aws.String("#step = :prev AND #commit = :prevCommit")
		update.ExpressionAttributeValues[":prev"] = num(int64(h.step))
		update.ExpressionAttributeValues[":prevCommit"] = str(h.commit)
	}
	items := []types.TransactWriteItem{
		{Update: update},
		{Put: &types.Put{
			TableName:           aws.String(s.table),
			Item:                w.step,
			ConditionExpression: aws.String("attribute_not_exists(pk)"),
		}},
	}
	for _, v := range w.values {
		items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.table), Item: v}})
	}
	// The task results of the step (and any left by an earlier race) go
	// with it: in the transaction while it has room, after it otherwise,
	// with their chunks.
	var later []map[string]types.AttributeValue
	var taskBlobs []blobRef
	for _, it := range tasks {
		if n, ok := taskStep(it); !ok || n > cp.Step {
			continue
		}
		k := key(keyOf(it).pk, keyOf(it).sk)
		if len(items) < maxTxItems {
			items = append(items, types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(s.table), Key: k}})
		} else {
			later = append(later, k)
		}
		if ref, err := docRef(it, attrData); err == nil && ref != nil {
			taskBlobs = append(taskBlobs, *ref)
		}
	}

	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if err := backoff(ctx, attempt); err != nil {
				s.dropBlobs(ctx, pk, refs)
				return fmt.Errorf("dynamo: commit step %d of run %q: %w", cp.Step, cp.RunID, err)
			}
		}
		// A client token makes the SDK's own retries of this call
		// idempotent: a commit whose response was lost is not reported
		// as a conflict with itself.
		_, err = s.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
			TransactItems:      items,
			ClientRequestToken: aws.String(newID()),
		})
		if err == nil {
			break
		}
		reasons, ok := cancellation(err)
		switch {
		case ok && (reasonIs(reasons, 0, "ConditionalCheckFailed") || reasonIs(reasons, 1, "ConditionalCheckFailed")):
			s.dropBlobs(ctx, pk, refs)
			return fmt.Errorf("dynamo: commit step %d of run %q: another commit came first: %w", cp.Step, cp.RunID, pregel.ErrStepConflict)
		case ok && conflicted(reasons):
			continue
		case ok:
			// Cancelled for another reason: nothing was written.
			s.dropBlobs(ctx, pk, refs)
		}
		// Otherwise the outcome is unknown (the transaction may have
		// committed after a time-out), so the chunks stay.
		return fmt.Errorf("dynamo: commit step %d of run %q: %w", cp.Step, cp.RunID, err)
	}
	// The step is committed. What is left of its task results is dead
	// weight that PendingTasks ignores, so a failure to delete it is not
	// one of the commit.
	if len(later) > 0 {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		_ = s.batchWrite(ctx, nil, later)
		cancel()
	}
	s.dropBlobs(ctx, pk, taskBlobs)
	return nil
}

// checkVersions rejects a checkpoint whose Values and Versions disagree.
func checkVersions(cp *pregel.Checkpoint) error {
	for ch := range cp.Values {
		if _, ok := cp.Versions[ch]; !ok {
			return fmt.Errorf("dynamo: commit step %d of run %q: channel %q has a value but no version", cp.Step, cp.RunID, ch)
		}
	}
	for ch, v := range cp.Versions {
		if v < 0 || v > cp.Step {
			return fmt.Errorf("dynamo: commit step %d of run %q: channel %q has version %d, outside 0..%d", cp.Step, cp.RunID, ch, v, cp.Step)
		}
	}
	return nil
}

// commitWrites is what a commit writes: blobs first, then, in the
// transaction, the step item and the value items.
type commitWrites struct {
	blobs  []pendingBlob
	step   map[string]types.AttributeValue
	values []map[string]types.AttributeValue
}

// planCommit lays out the items of a commit. Changed channels get a value
// item in the transaction when they fit its limits (the smallest first);
// values too large for an item get a blob each, and the others that do not
// fit share one blob.
func (s *Store) planCommit(cp *pregel.Checkpoint, commit string, prev manifest) (*commitWrites, error) {
	pk := runPK(cp.RunID)
	w := &commitWrites{}
	man := make(manifest, len(cp.Versions))
	type change struct {
		ch    string
		value []byte
	}
	var changes []change
	for _, ch := range slices.Sorted(maps.Keys(cp.Versions)) {
		v := cp.Versions[ch]
		val, has := cp.Values[ch]
		if old, ok := prev[ch]; ok && v < cp.Step && old.Version == v && old.Cleared == !has {
			man[ch] = old
			continue
		}
		loc := chanLoc{Version: v, At: cp.Step}
		switch {
		case !has:
			loc.Cleared = true
		case len(val) == 0:
			loc.Empty = true
		default:
			changes = append(changes, change{ch, val})
		}
		man[ch] = loc
	}

	slices.SortStableFunc(changes, func(a, b change) int { return cmp.Compare(len(a.value), len(b.value)) })
	slots, budget := maxTxItems-2, maxTxValueBytes
	var pack []byte
	var packed []string
	for i, c := range changes {
		loc := man[c.ch]
		switch size := len(c.value) + len(c.ch) + 64; {
		case len(c.value) > maxInlineValue:
			b := newBlob(fmt.Sprintf("%s.%d", commit, i), c.value)
			w.blobs = append(w.blobs, b)
			loc.Blob, loc.Off, loc.Len = &b.ref, 0, len(c.value)
		case slots > 0 && size <= budget:
			slots--
			budget -= size
			item := key(pk, valueSK(c.ch, cp.Step))
			item[attrValue] = bin(c.value)
			item[attrCommit] = str(commit)
			w.values = append(w.values, item)
		default:
			loc.Off, loc.Len = len(pack), len(c.value)
			pack = append(pack, c.value...)
			packed = append(packed, c.ch)
		}
		man[c.ch] = loc
	}
	if len(packed) > 0 {
		b := newBlob(commit+".pack", pack)
		w.blobs = append(w.blobs, b)
		for _, ch := range packed {
			loc := man[ch]
			loc.Blob = &b.ref
			man[ch] = loc
		}
	}

	meta, err := marshal(stepMeta{
		Graph:        cp.Graph,
		Next:         cp.Next,
		Barriers:     cp.Barriers,
		Tasks:        cp.Tasks,
		Counters:     cp.Counters,
		DrainRequest: cp.DrainRequest,
	})
	if err != nil {
		return nil, fmt.Errorf("dynamo: commit step %d of run %q: encode: %w", cp.Step, cp.RunID, err)
	}
	manJSON, err := marshal(man)
	if err != nil {
		return nil, fmt.Errorf("dynamo: commit step %d of run %q: encode manifest: %w", cp.Step, cp.RunID, err)
	}
	w.step = key(pk, stepSK(cp.Step))
	w.step[attrCommit] = str(commit)
	for name, data := range map[string][]byte{attrMeta: meta, attrManifest: manJSON} {
		b, err := docAttr(w.step, name, data, maxInlineDoc)
		if err != nil {
			return nil, err
		}
		if b != nil {
			w.blobs = append(w.blobs, *b)
		}
	}
	return w, nil
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
	p := dynamodb.NewQueryPaginator(s.client, in)
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("Query: %w", err)
		}
		for _, it := range out.Items {
			if err := fn(it); err != nil {
				return err
			}
		}
	}
	return nil
}

// Load implements [pregel.Checkpointer]. It reads the head (Latest) or the
// step item, then the step's values with BatchGetItem: two requests when
// no document is chunked.
func (s *Store) Load(ctx context.Context, runID string, step int) (*pregel.Checkpoint, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	pk := runPK(runID)
	var item map[string]types.AttributeValue
	switch {
	case step == pregel.Latest:
		h, err := s.getHead(ctx, runID)
		if err != nil {
			return nil, err
		}
		if h == nil {
			return nil, fmt.Errorf("dynamo: run %q: %w", runID, pregel.ErrNotFound)
		}
		step, item = h.step, h.item
	case step < 0:
		return nil, fmt.Errorf("dynamo: run %q step %d: %w", runID, step, pregel.ErrNotFound)
	default:
		out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
			TableName:      aws.String(s.table),
			Key:            key(pk, stepSK(step)),
			ConsistentRead: aws.Bool(true),
		})
		if err != nil {
			return nil, fmt.Errorf("dynamo: load run %q step %d: %w", runID, step, err)
		}
		if out.Item == nil {
			return nil, fmt.Errorf("dynamo: run %q step %d: %w", runID, step, pregel.ErrNotFound)
		}
		item = out.Item
	}
	cps, err := s.decodeSteps(ctx, runID, []map[string]types.AttributeValue{item}, []int{step}, true)
	if err != nil {
		return nil, err
	}
	return cps[0], nil
}

// decodeSteps turns head or step items into checkpoints, reading their
// chunked documents and, if values is set, their values.
func (s *Store) decodeSteps(ctx context.Context, runID string, items []map[string]types.AttributeValue, steps []int, values bool) ([]*pregel.Checkpoint, error) {
	pk := runPK(runID)
	fail := func(step int, err error) error {
		return fmt.Errorf("dynamo: load run %q step %d: %w", runID, step, err)
	}
	f := s.newFetcher()
	for i, it := range items {
		for _, name := range []string{attrMeta, attrManifest} {
			if err := f.addDoc(it, name); err != nil {
				return nil, fail(steps[i], err)
			}
		}
	}
	if err := f.fetch(ctx); err != nil {
		return nil, fail(steps[0], err)
	}
	cps := make([]*pregel.Checkpoint, len(items))
	mans := make([]manifest, len(items))
	for i, it := range items {
		var meta stepMeta
		var man manifest
		for name, dst := range map[string]any{attrMeta: &meta, attrManifest: &man} {
			raw, ok, err := f.doc(it, name)
			if err != nil || !ok {
				return nil, fail(steps[i], fmt.Errorf("%s is unreadable (%v)", name, err))
			}
			if err := json.Unmarshal(raw, dst); err != nil {
				return nil, fail(steps[i], fmt.Errorf("%s: %w", name, err))
			}
		}
		cp := &pregel.Checkpoint{
			RunID:        runID,
			Graph:        meta.Graph,
			Step:         steps[i],
			Versions:     make(map[string]int, len(man)),
			Next:         meta.Next,
			Barriers:     meta.Barriers,
			Tasks:        meta.Tasks,
			Counters:     meta.Counters,
			DrainRequest: meta.DrainRequest,
		}
		for ch, loc := range man {
			cp.Versions[ch] = loc.Version
		}
		cps[i], mans[i] = cp, man
	}
	if !values {
		return cps, nil
	}

	for _, man := range mans {
		for ch, loc := range man {
			switch {
			case loc.Cleared || loc.Empty:
			case loc.Blob != nil:
				f.addBlob(pk, *loc.Blob)
			default:
				f.add(key(pk, valueSK(ch, loc.At)))
			}
		}
	}
	if err := f.fetch(ctx); err != nil {
		return nil, fail(steps[0], err)
	}
	blobs := map[string][]byte{}
	for i, man := range mans {
		cp := cps[i]
		cp.Values = make(map[string]json.RawMessage, len(man))
		for ch, loc := range man {
			switch {
			case loc.Cleared:
			case loc.Empty:
				cp.Values[ch] = json.RawMessage{}
			case loc.Blob != nil:
				b, ok := blobs[loc.Blob.ID]
				if !ok {
					var err error
					if b, err = f.blob(pk, *loc.Blob); err != nil {
						return nil, fail(cp.Step, fmt.Errorf("channel %q: %w", ch, err))
					}
					blobs[loc.Blob.ID] = b
				}
				if loc.Off < 0 || loc.Off+loc.Len > len(b) {
					return nil, fail(cp.Step, fmt.Errorf("channel %q: slice [%d, %d) outside blob %s of %d bytes", ch, loc.Off, loc.Off+loc.Len, loc.Blob.ID, len(b)))
				}
				cp.Values[ch] = json.RawMessage(b[loc.Off : loc.Off+loc.Len : loc.Off+loc.Len])
			default:
				v, ok := getB(f.item(pk, valueSK(ch, loc.At)), attrValue)
				if !ok {
					return nil, fail(cp.Step, fmt.Errorf("value of channel %q stored at step %d is missing", ch, loc.At))
				}
				cp.Values[ch] = json.RawMessage(v)
			}
		}
	}
	return cps, nil
}

// History implements [pregel.Checkpointer] with one Query over the step
// items (plus a BatchGetItem if any document is chunked).
func (s *Store) History(ctx context.Context, runID string) ([]pregel.StepInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var items []map[string]types.AttributeValue
	var steps []int
	err := s.query(ctx, runPK(runID), skStep, nil, func(it map[string]types.AttributeValue) error {
		sk, _ := getS(it, attrSK)
		rest, _ := splitPrefix(sk, skStep)
		n, err := strconv.Atoi(rest)
		if err != nil {
			return fmt.Errorf("bad step key %q", sk)
		}
		items = append(items, it)
		steps = append(steps, n)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dynamo: history of run %q: %w", runID, err)
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("dynamo: run %q: %w", runID, pregel.ErrNotFound)
	}
	cps, err := s.decodeSteps(ctx, runID, items, steps, false)
	if err != nil {
		return nil, err
	}
	out := make([]pregel.StepInfo, len(cps))
	for i, cp := range cps {
		out[i] = cp.Info()
	}
	return out, nil
}

// RecordTask implements [pregel.Checkpointer]. It is one TransactWriteItems
// that checks the head is at step-1 and writes the result unless a final
// one is stored; when one is, it returns that (with a GetItem if the
// cancellation did not carry it).
func (s *Store) RecordTask(ctx context.Context, runID string, step int, r pregel.TaskResult) (pregel.TaskResult, error) {
	if err := ctx.Err(); err != nil {
		return pregel.TaskResult{}, err
	}
	pk := runPK(runID)
	data, err := marshal(r)
	if err != nil {
		return pregel.TaskResult{}, fmt.Errorf("dynamo: record task %q of run %q: encode: %w", r.TaskID, runID, err)
	}
	item := map[string]types.AttributeValue{}
	blob, err := docAttr(item, attrData, data, maxInlineValue)
	if err != nil {
		return pregel.TaskResult{}, err
	}
	var refs []blobRef
	if blob != nil {
		refs = append(refs, blob.ref)
		if err := s.writeBlobs(ctx, pk, []pendingBlob{*blob}); err != nil {
			s.dropBlobs(ctx, pk, refs)
			return pregel.TaskResult{}, fmt.Errorf("dynamo: record task %q of run %q: %w", r.TaskID, runID, err)
		}
	}

	names := map[string]string{"#final": attrFinal, "#seq": attrSeq, "#d": attrData, "#r": attrData + refSuffix}
	values := map[string]types.AttributeValue{":final": boolean(r.Final()), ":false": boolean(false), ":now": num(s.now().UnixNano())}
	expr := "SET #final = :final, #seq = if_not_exists(#seq, :now), "
	if v, ok := item[attrData]; ok {
		expr += "#d = :data REMOVE #r"
		values[":data"] = v
	} else {
		expr += "#r = :data REMOVE #d"
		values[":data"] = item[attrData+refSuffix]
	}
	items := []types.TransactWriteItem{
		{ConditionCheck: &types.ConditionCheck{
			TableName:                 aws.String(s.table),
			Key:                       key(pk, skHead),
			ConditionExpression:       aws.String("#step = :prev"),
			ExpressionAttributeNames:  map[string]string{"#step": attrStep},
			ExpressionAttributeValues: map[string]types.AttributeValue{":prev": num(int64(step - 1))},
		}},
		{Update: &types.Update{
			TableName:                           aws.String(s.table),
			Key:                                 key(pk, taskSK(step, r.TaskID)),
			UpdateExpression:                    aws.String(expr),
			ConditionExpression:                 aws.String("attribute_not_exists(pk) OR #final = :false"),
			ExpressionAttributeNames:            names,
			ExpressionAttributeValues:           values,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}},
	}
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if err := backoff(ctx, attempt); err != nil {
				s.dropBlobs(ctx, pk, refs)
				return pregel.TaskResult{}, fmt.Errorf("dynamo: record task %q of run %q: %w", r.TaskID, runID, err)
			}
		}
		_, err = s.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
			TransactItems:      items,
			ClientRequestToken: aws.String(newID()),
		})
		if err == nil {
			return r, nil
		}
		reasons, ok := cancellation(err)
		switch {
		case ok && reasonIs(reasons, 0, "ConditionalCheckFailed"):
			s.dropBlobs(ctx, pk, refs)
			return pregel.TaskResult{}, s.fenceError(ctx, runID, step, r.TaskID)
		case ok && reasonIs(reasons, 1, "ConditionalCheckFailed"):
			s.dropBlobs(ctx, pk, refs)
			stored := reasons[1].Item
			if stored == nil {
				if stored, err = s.getItem(ctx, pk, taskSK(step, r.TaskID)); err != nil {
					return pregel.TaskResult{}, fmt.Errorf("dynamo: record task %q of run %q: read the stored result: %w", r.TaskID, runID, err)
				}
			}
			res, err := s.decodeTasks(ctx, []map[string]types.AttributeValue{stored})
			if err != nil {
				return pregel.TaskResult{}, fmt.Errorf("dynamo: record task %q of run %q: %w", r.TaskID, runID, err)
			}
			return res[0], nil
		case ok && conflicted(reasons):
			continue
		case ok:
			s.dropBlobs(ctx, pk, refs)
		}
		// Otherwise the result may have been stored: its chunks stay.
		return pregel.TaskResult{}, fmt.Errorf("dynamo: record task %q of run %q: %w", r.TaskID, runID, err)
	}
}

// fenceError explains why a task of step cannot be recorded.
func (s *Store) fenceError(ctx context.Context, runID string, step int, taskID string) error {
	h, err := s.getHead(ctx, runID, attrStep)
	switch {
	case err != nil:
		return fmt.Errorf("dynamo: record task %q of run %q for step %d: %w (and reading the head: %w)", taskID, runID, step, pregel.ErrStepConflict, err)
	case h == nil:
		return fmt.Errorf("dynamo: record task %q of run %q, which has no committed step: %w", taskID, runID, pregel.ErrNotFound)
	default:
		return fmt.Errorf("dynamo: record task %q of run %q for step %d while step %d is open: %w", taskID, runID, step, h.step+1, pregel.ErrStepConflict)
	}
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
		return nil, errors.New("item not found")
	}
	return out.Item, nil
}

// PendingTasks implements [pregel.Checkpointer] with one Query (plus a
// BatchGetItem for results too large for an item).
func (s *Store) PendingTasks(ctx context.Context, runID string, step int) ([]pregel.TaskResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	h, all, err := s.headAndTasks(ctx, runID)
	if err != nil {
		return nil, err
	}
	// Only the open step has results; any left of committed steps are
	// ignored.
	if h == nil || step != h.step+1 {
		return nil, nil
	}
	var items []map[string]types.AttributeValue
	for _, it := range all {
		if n, ok := taskStep(it); ok && n == step {
			items = append(items, it)
		}
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
	return res, nil
}

// decodeTasks decodes task result items, reading chunked ones.
func (s *Store) decodeTasks(ctx context.Context, items []map[string]types.AttributeValue) ([]pregel.TaskResult, error) {
	f := s.newFetcher()
	for _, it := range items {
		if err := f.addDoc(it, attrData); err != nil {
			return nil, err
		}
	}
	if err := f.fetch(ctx); err != nil {
		return nil, err
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
