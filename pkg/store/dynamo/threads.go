package dynamo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

var _ runs.ThreadStore = (*Store)(nil)

// A thread is one item, pk = THREAD#<id>, sk = skThread, holding the
// runs.Thread as JSON (data), its version (the condition of every write:
// what keeps a thread to one active run) and, for listings, run_status =
// threadStatus and run_pos = its creation time and id, so that threads are
// a partition of the by_status index that run listings never merge.
const (
	skThread     = "~THREAD"
	threadStatus = "~thread"
)

func threadPK(id string) string { return "THREAD#" + id }

// maxThreadItem bounds a thread record (its queue, mostly).
const maxThreadItem = maxInlineValue

func (s *Store) threadItem(t runs.Thread) (map[string]types.AttributeValue, error) {
	data, err := marshal(t)
	if err != nil {
		return nil, fmt.Errorf("dynamo: encode thread %q: %w", t.ID, err)
	}
	if len(data) > maxThreadItem {
		return nil, fmt.Errorf("dynamo: thread %q: record of %d bytes (%d runs queued) exceeds %d bytes: %w", t.ID, len(data), len(t.Queue), maxThreadItem, runs.ErrInvalid)
	}
	item := key(threadPK(t.ID), skThread)
	item[attrData] = bin(data)
	item[attrVersion] = num(t.Version)
	item[attrStatus] = str(threadStatus)
	item[attrPos] = str(runPos(t.CreatedAt, t.ID))
	if s.threadRetention > 0 && t.Active == "" && len(t.Queue) == 0 && len(t.Forks) == 0 && !t.Deleting {
		item[attrExpiresAt] = num(t.UpdatedAt.Add(s.threadRetention).Unix())
	}
	return item, nil
}

// ThreadRecordKey reports whether a table key (pk and sk, as strings) is
// the key of a thread record, and returns the thread id. A stream
// consumer uses it to recognise the expiry of a thread.
func ThreadRecordKey(pk, sk string) (threadID string, ok bool) {
	id, ok := strings.CutPrefix(pk, "THREAD#")
	if !ok || id == "" || sk != skThread {
		return "", false
	}
	return id, true
}

// PurgeThread deletes the runs of a thread whose record is gone (expired,
// see [WithThreadRetention]) with everything stored for them (DeleteRun),
// and returns how many it deleted. The thread's runs are found by listing
// the runs whose context is the thread's id (a Query of each partition of
// the by_status index, filtered), and those of the thread are deleted. If
// a thread of that id exists again, only the runs created before it are
// deleted. A purge cut short is finished by calling it again.
func (s *Store) PurgeThread(ctx context.Context, threadID string) (int, error) {
	if threadID == "" {
		return 0, errors.New("dynamo: purge thread: empty thread id")
	}
	var before time.Time
	if t, err := s.GetThread(ctx, threadID); err == nil {
		before = t.CreatedAt
	} else if !errors.Is(err, runs.ErrNotFound) {
		return 0, fmt.Errorf("dynamo: purge thread %q: %w", threadID, err)
	}
	var ids []string
	f := runs.Filter{ContextID: threadID, Limit: maxPageSize}
	for {
		p, err := s.ListRuns(ctx, f)
		if err != nil {
			return 0, fmt.Errorf("dynamo: purge thread %q: %w", threadID, err)
		}
		for _, r := range p.Runs {
			if r.ThreadID == threadID && (before.IsZero() || r.CreatedAt.Before(before)) {
				ids = append(ids, r.ID)
			}
		}
		if p.NextPageToken == "" {
			break
		}
		f.PageToken = p.NextPageToken
	}
	for i, id := range ids {
		if err := s.DeleteRun(ctx, id); err != nil {
			return i, fmt.Errorf("dynamo: purge thread %q: %w", threadID, err)
		}
	}
	return len(ids), nil
}

func decodeThread(item map[string]types.AttributeValue) (runs.Thread, error) {
	pk, _ := getS(item, attrPK)
	data, ok := getB(item, attrData)
	if !ok {
		return runs.Thread{}, fmt.Errorf("dynamo: thread record %s has no data", pk)
	}
	var t runs.Thread
	if err := json.Unmarshal(data, &t); err != nil {
		return runs.Thread{}, fmt.Errorf("dynamo: thread record %s: %w", pk, err)
	}
	if v, ok := getN(item, attrVersion); ok {
		t.Version = v
	}
	if pos, ok := getS(item, attrPos); ok {
		if at, _, err := parsePos(pos); err == nil {
			t.CreatedAt = at
		}
	}
	return t, nil
}

// CreateThread implements [runs.ThreadStore] with a conditional PutItem.
func (s *Store) CreateThread(ctx context.Context, t runs.Thread) (runs.Thread, bool, error) {
	if t.ID == "" {
		return runs.Thread{}, false, fmt.Errorf("dynamo: create thread: empty thread id: %w", runs.ErrInvalid)
	}
	t.CreatedAt = t.CreatedAt.Round(0).UTC()
	if t.UpdatedAt.IsZero() {
		t.UpdatedAt = t.CreatedAt
	}
	t.Version = 1
	item, err := s.threadItem(t)
	if err != nil {
		return runs.Thread{}, false, err
	}
	_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           aws.String(s.table),
		Item:                                item,
		ConditionExpression:                 aws.String("attribute_not_exists(pk)"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return t, true, nil
	}
	ccf, ok := isConditionFailed(err)
	if !ok {
		return runs.Thread{}, false, fmt.Errorf("dynamo: create thread %q: %w", t.ID, err)
	}
	if ccf.Item != nil {
		old, err := decodeThread(ccf.Item)
		return old, false, err
	}
	old, err := s.GetThread(ctx, t.ID)
	return old, false, err
}

// GetThread implements [runs.ThreadStore] with a strongly consistent
// GetItem.
func (s *Store) GetThread(ctx context.Context, id string) (runs.Thread, error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            key(threadPK(id), skThread),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return runs.Thread{}, fmt.Errorf("dynamo: get thread %q: %w", id, err)
	}
	if out.Item == nil {
		return runs.Thread{}, fmt.Errorf("dynamo: thread %q: %w", id, runs.ErrNotFound)
	}
	return decodeThread(out.Item)
}

// UpdateThread implements [runs.ThreadStore]: one PutItem conditioned on
// the stored version.
func (s *Store) UpdateThread(ctx context.Context, t runs.Thread) (runs.Thread, error) {
	expected := t.Version
	t.Version++
	t.UpdatedAt = s.now().UTC()
	t.CreatedAt = t.CreatedAt.Round(0).UTC()
	item, err := s.threadItem(t)
	if err != nil {
		return runs.Thread{}, err
	}
	_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           aws.String(s.table),
		Item:                                item,
		ConditionExpression:                 aws.String("#v = :expected"),
		ExpressionAttributeNames:            map[string]string{"#v": attrVersion},
		ExpressionAttributeValues:           map[string]types.AttributeValue{":expected": num(expected)},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return t, nil
	}
	if ccf, ok := isConditionFailed(err); ok {
		if ccf.Item == nil {
			return runs.Thread{}, fmt.Errorf("dynamo: update thread %q: %w", t.ID, runs.ErrNotFound)
		}
		stored, _ := getN(ccf.Item, attrVersion)
		return runs.Thread{}, fmt.Errorf("dynamo: update thread %q at version %d: stored version is %d: %w", t.ID, expected, stored, runs.ErrConflict)
	}
	return runs.Thread{}, fmt.Errorf("dynamo: update thread %q: %w", t.ID, err)
}

// DeleteThread implements [runs.ThreadStore] with a DeleteItem conditioned
// on the version.
func (s *Store) DeleteThread(ctx context.Context, id string, version int64) error {
	_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                           aws.String(s.table),
		Key:                                 key(threadPK(id), skThread),
		ConditionExpression:                 aws.String("#v = :expected"),
		ExpressionAttributeNames:            map[string]string{"#v": attrVersion},
		ExpressionAttributeValues:           map[string]types.AttributeValue{":expected": num(version)},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return nil
	}
	if ccf, ok := isConditionFailed(err); ok {
		if ccf.Item == nil {
			return fmt.Errorf("dynamo: delete thread %q: %w", id, runs.ErrNotFound)
		}
		stored, _ := getN(ccf.Item, attrVersion)
		return fmt.Errorf("dynamo: delete thread %q at version %d: stored version is %d: %w", id, version, stored, runs.ErrConflict)
	}
	return fmt.Errorf("dynamo: delete thread %q: %w", id, err)
}

// ListThreads implements [runs.ThreadStore]: a Query of the threads'
// partition of the by_status index, newest first, then a BatchGetItem of
// the page's records.
func (s *Store) ListThreads(ctx context.Context, f runs.ThreadFilter) (runs.ThreadPage, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = defaultPageSize
	}
	limit = min(limit, maxPageSize)
	names := map[string]string{"#k": attrStatus}
	values := map[string]types.AttributeValue{":k": str(threadStatus)}
	cond := "#k = :k"
	if f.PageToken != "" {
		after, err := decodeToken(f.PageToken)
		if err != nil {
			return runs.ThreadPage{}, err
		}
		cond += " AND #pos < :after"
		names["#pos"] = attrPos
		values[":after"] = str(after)
	}
	st := &stream{in: &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		IndexName:                 aws.String(IndexByStatus),
		KeyConditionExpression:    aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
		ScanIndexForward:          aws.Bool(false),
		Limit:                     aws.Int32(int32(limit + 1)),
	}}
	var keys []map[string]types.AttributeValue
	var last string
	more := false
	for {
		if err := st.fill(ctx, s.client); err != nil {
			return runs.ThreadPage{}, fmt.Errorf("dynamo: list threads: %w", err)
		}
		if !st.ok() {
			break
		}
		if len(keys) == limit {
			more = true
			break
		}
		it := st.items[0]
		st.items = st.items[1:]
		keys = append(keys, key(keyOf(it).pk, keyOf(it).sk))
		last, _ = getS(it, attrPos)
	}
	items, err := s.batchGet(ctx, keys, nil, nil)
	if err != nil {
		return runs.ThreadPage{}, fmt.Errorf("dynamo: list threads: %w", err)
	}
	byKey := make(map[itemKey]map[string]types.AttributeValue, len(items))
	for _, it := range items {
		byKey[keyOf(it)] = it
	}
	page := runs.ThreadPage{Threads: make([]runs.Thread, 0, len(keys))}
	for _, k := range keys {
		it, ok := byKey[keyOf(k)]
		if !ok {
			continue // deleted since the index listed it
		}
		t, err := decodeThread(it)
		if err != nil {
			return runs.ThreadPage{}, err
		}
		page.Threads = append(page.Threads, t)
	}
	if more {
		page.NextPageToken = encodeToken(last)
	}
	return page, nil
}

// keepThreadRuns reports whether a run's record must not expire: a run on
// a thread holds state that the thread's later runs start from, so it goes
// when its thread is deleted, not by TTL.
func keepThreadRuns(r runs.Run) bool { return r.ThreadID != "" }

var _ runs.Seeder = (*Store)(nil)

// CommitFrom implements [runs.Seeder]: it commits step 0 of cp.RunID with
// a manifest whose inherited channels (version pregel.Inherited) point at
// the items that hold their values in base's run, or in the run base
// inherited them from, so that the step item holds only the values cp's
// input wrote. A run continuing a thread of any length so writes one item
// (as a commit does) and reads base's step item, unless cached.
func (s *Store) CommitFrom(ctx context.Context, cp *pregel.Checkpoint, base runs.StepRef) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	fail := func(err error) error {
		return fmt.Errorf("dynamo: commit step 0 of run %q from step %d of run %q: %w", cp.RunID, base.Step, base.RunID, err)
	}
	if cp.Step != 0 {
		return fail(fmt.Errorf("a run continues another from its step 0, not %d", cp.Step))
	}
	full := cp
	cp = pregel.PackSegments(cp)
	if err := checkVersions(cp); err != nil {
		return err
	}
	if _, ok := s.steps.get(stepKey{cp.RunID, 0}); ok {
		return fail(fmt.Errorf("the step is committed: %w", pregel.ErrStepConflict))
	}
	be, err := s.stepBefore(ctx, base.RunID, base.Step+1)
	if err != nil {
		return err
	}
	if be == nil {
		return fail(pregel.ErrNotFound)
	}
	inherited := manifest{}
	for ch, v := range cp.Versions {
		if v != pregel.Inherited {
			continue
		}
		loc, ok := be.man[ch]
		if !ok {
			return fail(fmt.Errorf("channel %q is inherited but base has no such channel", ch))
		}
		if loc.From == "" {
			loc.From, loc.FromStep = base.RunID, loc.home()
		}
		// Size is not kept: only values of the run's own items are
		// carried along (carryHeld), so it is never read.
		loc.Version, loc.At, loc.Size = pregel.Inherited, 0, 0
		inherited[ch] = loc
	}
	pk := runPK(cp.RunID)
	commit := newID()
	plan, err := planCommit(cp, commit, &stepEntry{man: inherited, base: be.base})
	if err != nil {
		return err
	}
	refs := make([]blobRef, len(plan.blobs))
	for i, b := range plan.blobs {
		refs[i] = b.ref
	}
	if err := s.writeBlobs(ctx, pk, plan.blobs); err != nil {
		s.dropBlobs(ctx, pk, refs)
		return fail(err)
	}
	_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           aws.String(s.table),
		Item:                                plan.item,
		ConditionExpression:                 aws.String("attribute_not_exists(sk)"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err != nil {
		ccf, ok := isConditionFailed(err)
		if !ok {
			return fail(err)
		}
		stored := ccf.Item
		if stored == nil {
			if stored, err = s.getItem(ctx, pk, stepSK(0)); err != nil {
				return fail(err)
			}
		}
		if id, _ := getS(stored, attrCommit); id != commit {
			s.dropBlobs(ctx, pk, refs)
			return fail(fmt.Errorf("another commit came first: %w", pregel.ErrStepConflict))
		}
	}
	s.remember(cp.RunID, 0, &stepEntry{commit: commit, size: plan.size, man: plan.man, base: plan.base, cp: cp, full: full})
	return nil
}
