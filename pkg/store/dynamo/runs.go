package dynamo

import (
	"container/heap"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// Page sizes of ListRuns, as in runs.MemoryStore.
const (
	defaultPageSize = 50
	maxPageSize     = 500
)

// noStatus stands for the empty status in the by_status index, whose keys
// cannot be empty.
const noStatus = "-"

// listedStatuses are the partitions of the by_status index that an
// unfiltered listing merges: every run status, and noStatus.
var listedStatuses = []pregel.RunStatus{
	pregel.RunPending, pregel.RunRunning, pregel.RunInterrupted, pregel.RunDrained,
	pregel.RunCompleted, pregel.RunFailed, pregel.RunCancelled, noStatus,
}

// posLayout formats CreatedAt in the sort key of the run indexes: fixed
// width, so that the keys sort as the times do.
const posLayout = "2006-01-02T15:04:05.000000000Z"

// runPos returns the sort key of a run in the run indexes: its creation
// time, then its id. Sorted in descending order, the keys list runs newest
// first, and by id descending among runs created at the same time, as
// runs.MemoryStore does.
func runPos(created time.Time, id string) string {
	return created.UTC().Format(posLayout) + "#" + id
}

func parsePos(pos string) (time.Time, string, error) {
	ts, id, ok := strings.Cut(pos, "#")
	if !ok || id == "" || len(ts) != len(posLayout) {
		return time.Time{}, "", fmt.Errorf("bad run position %q", pos)
	}
	t, err := time.Parse(posLayout, ts)
	return t, id, err
}

func statusKey(st pregel.RunStatus) string {
	if st == "" {
		return noStatus
	}
	return string(st)
}

// checkStatus rejects statuses that an unfiltered listing would miss.
func checkStatus(r runs.Run) error {
	if r.Status == "" {
		return nil
	}
	for _, st := range listedStatuses[:len(listedStatuses)-1] {
		if r.Status == st {
			return nil
		}
	}
	return fmt.Errorf("run %q has status %q, which is not a run status: %w", r.ID, r.Status, runs.ErrInvalid)
}

// runItem returns the attributes of a run item, and the blob to write
// first if the record is too large for it.
func (s *Store) runItem(r runs.Run) (map[string]types.AttributeValue, *pendingBlob, error) {
	data, err := encodeRun(&r)
	if err != nil {
		return nil, nil, fmt.Errorf("dynamo: encode run %q: %w", r.ID, err)
	}
	item := key(runPK(r.ID), skRun)
	blob, err := docAttr(item, attrRecord, data, maxInlineValue)
	if err != nil {
		return nil, nil, err
	}
	item[attrVersion] = num(r.Version)
	item[attrStatus] = str(statusKey(r.Status))
	item[attrPos] = str(runPos(r.CreatedAt, r.ID))
	if r.Graph != "" {
		item[attrGraph] = str(r.Graph)
	}
	if r.ContextID != "" {
		item[attrContext] = str(r.ContextID)
	}
	if exp, ok := s.expiry(r); ok {
		item[attrExpiresAt] = num(exp)
	}
	return item, blob, nil
}

// expiry returns the TTL of a finished run, in Unix seconds.
func (s *Store) expiry(r runs.Run) (int64, bool) {
	if !r.Status.Terminal() || s.retention <= 0 || keepThreadRuns(r) {
		return 0, false
	}
	return s.now().Add(s.retention).Unix(), true
}

// decodeRuns decodes run items, reading chunked records. CreatedAt comes
// from the item's position, which UpdateRun never changes.
func (s *Store) decodeRuns(ctx context.Context, items []map[string]types.AttributeValue) ([]runs.Run, error) {
	f := s.newFetcher()
	for _, it := range items {
		name, _ := recordAttr(it)
		if err := f.addDoc(it, name); err != nil {
			return nil, err
		}
	}
	if err := f.fetch(ctx); err != nil {
		return nil, err
	}
	out := make([]runs.Run, len(items))
	for i, it := range items {
		pk, _ := getS(it, attrPK)
		name, compact := recordAttr(it)
		raw, ok, err := f.doc(it, name)
		if err != nil || !ok {
			return nil, fmt.Errorf("dynamo: run record %s is unreadable (%v)", pk, err)
		}
		if err := decodeRun(it, raw, compact, &out[i]); err != nil {
			return nil, fmt.Errorf("dynamo: run record %s: %w", pk, err)
		}
	}
	return out, nil
}

// CreateRun implements [runs.Store] with a conditional PutItem. A new
// record gets Version 1 and, if UpdatedAt is zero, UpdatedAt = CreatedAt.
func (s *Store) CreateRun(ctx context.Context, r runs.Run) (runs.Run, bool, error) {
	if err := ctx.Err(); err != nil {
		return runs.Run{}, false, err
	}
	if r.ID == "" {
		return runs.Run{}, false, fmt.Errorf("create run: empty run id: %w", runs.ErrInvalid)
	}
	if err := checkStatus(r); err != nil {
		return runs.Run{}, false, err
	}
	r.CreatedAt = r.CreatedAt.Round(0).UTC()
	if r.UpdatedAt.IsZero() {
		r.UpdatedAt = r.CreatedAt
	}
	r.Version = 1
	item, blob, err := s.runItem(r)
	if err != nil {
		return runs.Run{}, false, err
	}
	pk := runPK(r.ID)
	var refs []blobRef
	if blob != nil {
		refs = append(refs, blob.ref)
		if err := s.writeBlobs(ctx, pk, []pendingBlob{*blob}); err != nil {
			s.dropBlobs(ctx, pk, refs)
			return runs.Run{}, false, fmt.Errorf("dynamo: create run %q: %w", r.ID, err)
		}
	}
	_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           aws.String(s.table),
		Item:                                item,
		ConditionExpression:                 aws.String("attribute_not_exists(pk)"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return r, true, nil
	}
	ccf, ok := isConditionFailed(err)
	if !ok {
		// The run may have been stored: its chunks stay.
		return runs.Run{}, false, fmt.Errorf("dynamo: create run %q: %w", r.ID, err)
	}
	s.dropBlobs(ctx, pk, refs)
	old := ccf.Item
	if old == nil {
		if old, err = s.getItem(ctx, pk, skRun); err != nil {
			return runs.Run{}, false, fmt.Errorf("dynamo: create run %q: read the stored run: %w", r.ID, err)
		}
	}
	stored, err := s.decodeRuns(ctx, []map[string]types.AttributeValue{old})
	if err != nil {
		return runs.Run{}, false, err
	}
	return stored[0], false, nil
}

// GetRun implements [runs.Store] with a GetItem.
func (s *Store) GetRun(ctx context.Context, id string) (runs.Run, error) {
	if err := ctx.Err(); err != nil {
		return runs.Run{}, err
	}
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            key(runPK(id), skRun),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return runs.Run{}, fmt.Errorf("dynamo: get run %q: %w", id, err)
	}
	if out.Item == nil {
		return runs.Run{}, fmt.Errorf("run %q: %w", id, runs.ErrNotFound)
	}
	rs, err := s.decodeRuns(ctx, []map[string]types.AttributeValue{out.Item})
	if err != nil {
		return runs.Run{}, err
	}
	return rs[0], nil
}

// UpdateRun implements [runs.Store] with an UpdateItem conditioned on the
// version. CreatedAt cannot change.
func (s *Store) UpdateRun(ctx context.Context, r runs.Run) (runs.Run, error) {
	if err := ctx.Err(); err != nil {
		return runs.Run{}, err
	}
	if err := checkStatus(r); err != nil {
		return runs.Run{}, err
	}
	expected := r.Version
	r.Version++
	r.UpdatedAt = s.now().UTC()
	item, blob, err := s.runItem(r)
	if err != nil {
		return runs.Run{}, err
	}
	pk := runPK(r.ID)
	var refs []blobRef
	if blob != nil {
		refs = append(refs, blob.ref)
		if err := s.writeBlobs(ctx, pk, []pendingBlob{*blob}); err != nil {
			s.dropBlobs(ctx, pk, refs)
			return runs.Run{}, fmt.Errorf("dynamo: update run %q: %w", r.ID, err)
		}
	}

	names := map[string]string{"#version": attrVersion, "#pos": attrPos}
	values := map[string]types.AttributeValue{":expected": num(expected), ":pos": item[attrPos]}
	// The position, and so CreatedAt, keeps its stored value; naming it
	// makes UPDATED_OLD return it.
	set := []string{"#pos = if_not_exists(#pos, :pos)"}
	var remove []string
	// An item written before the compact form, or since by a writer from
	// before it, holds data (or data_ref): it goes, so that rec is the
	// record (recordAttr).
	for i, name := range []string{attrRecord, attrRecord + refSuffix, attrData, attrData + refSuffix, attrVersion, attrStatus, attrGraph, attrContext, attrExpiresAt} {
		alias := fmt.Sprintf("#a%d", i)
		names[alias] = name
		if v, ok := item[name]; ok {
			set = append(set, fmt.Sprintf("%s = :a%d", alias, i))
			values[fmt.Sprintf(":a%d", i)] = v
		} else {
			remove = append(remove, alias)
		}
	}
	expr := "SET " + strings.Join(set, ", ")
	if len(remove) > 0 {
		expr += " REMOVE " + strings.Join(remove, ", ")
	}
	out, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.table),
		Key:                                 key(pk, skRun),
		UpdateExpression:                    aws.String(expr),
		ConditionExpression:                 aws.String("#version = :expected"),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValues:                        types.ReturnValueUpdatedOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err != nil {
		if ccf, ok := isConditionFailed(err); ok {
			s.dropBlobs(ctx, pk, refs)
			if ccf.Item == nil {
				return runs.Run{}, fmt.Errorf("update run %q: %w", r.ID, runs.ErrNotFound)
			}
			stored, _ := getN(ccf.Item, attrVersion)
			return runs.Run{}, fmt.Errorf("update run %q at version %d: stored version is %d: %w", r.ID, expected, stored, runs.ErrConflict)
		}
		return runs.Run{}, fmt.Errorf("dynamo: update run %q: %w", r.ID, err)
	}
	if pos, ok := getS(out.Attributes, attrPos); ok {
		if t, _, err := parsePos(pos); err == nil {
			r.CreatedAt = t
		}
	}
	// The record's previous blobs, if it had some, are garbage now.
	for _, name := range []string{attrRecord, attrData} {
		if ref, err := docRef(out.Attributes, name); err == nil && ref != nil {
			s.dropBlobs(ctx, pk, []blobRef{*ref})
		}
	}
	if wantsStop(r) {
		// A chained superstep's commit sees the request (stop.go). The
		// request is recorded either way: without its marker, a chain
		// sees it when it reads the record, at its end at the latest.
		if err := s.markStop(ctx, r.ID); err != nil {
			slog.WarnContext(ctx, "drain or cancel recorded, but a chain of supersteps will see it only at its end", "run_id", r.ID, "err", err)
		}
	}
	return r, nil
}

// pageToken is the content of a ListRuns page token: the position of the
// last run listed.
type pageToken struct {
	After string `json:"after"`
}

func encodeToken(pos string) string {
	b, _ := json.Marshal(pageToken{After: pos})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeToken(tok string) (string, error) {
	bad := fmt.Errorf("page token %q is not one this store issued; start the listing again without it: %w", tok, runs.ErrInvalid)
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return "", bad
	}
	var pt pageToken
	if err := json.Unmarshal(raw, &pt); err != nil {
		return "", bad
	}
	if _, _, err := parsePos(pt.After); err != nil {
		return "", bad
	}
	return pt.After, nil
}

// ListRuns implements [runs.Store]. With a graph it queries the by_graph
// index (status and context as filters); with a status alone, by_status;
// with neither, it merges the by_status partitions of every status. Then
// it reads the page's records with BatchGetItem.
func (s *Store) ListRuns(ctx context.Context, f runs.Filter) (runs.Page, error) {
	if err := ctx.Err(); err != nil {
		return runs.Page{}, err
	}
	limit := f.Limit
	if limit <= 0 {
		limit = defaultPageSize
	}
	limit = min(limit, maxPageSize)
	after := ""
	if f.PageToken != "" {
		var err error
		if after, err = decodeToken(f.PageToken); err != nil {
			return runs.Page{}, err
		}
	}

	var filters []string
	values := map[string]types.AttributeValue{}
	names := map[string]string{}
	var streams []*stream
	newStream := func(index, keyAttr, keyValue string) *stream {
		n := map[string]string{"#k": keyAttr}
		v := map[string]types.AttributeValue{":k": str(keyValue)}
		for a, name := range names {
			n[a] = name
		}
		for a, val := range values {
			v[a] = val
		}
		cond := "#k = :k"
		if after != "" {
			cond += " AND #pos < :after"
			n["#pos"] = attrPos
			v[":after"] = str(after)
		}
		in := &dynamodb.QueryInput{
			TableName:                 aws.String(s.table),
			IndexName:                 aws.String(index),
			KeyConditionExpression:    aws.String(cond),
			ExpressionAttributeNames:  n,
			ExpressionAttributeValues: v,
			ScanIndexForward:          aws.Bool(false),
			Limit:                     aws.Int32(int32(limit + 1)),
		}
		if len(filters) > 0 {
			in.FilterExpression = aws.String(strings.Join(filters, " AND "))
		}
		return &stream{in: in}
	}
	if f.ContextID != "" {
		filters = append(filters, "#ctx = :ctx")
		names["#ctx"] = attrContext
		values[":ctx"] = str(f.ContextID)
	}
	// The version filter (f.Version) is applied to the records read, below:
	// the indexes do not project the graph version, and changing an
	// index's projection means rebuilding it in every deployment. A page
	// may then hold fewer runs than Limit.
	switch {
	case f.Graph != "":
		if f.Status != "" {
			filters = append(filters, "#st = :st")
			names["#st"] = attrStatus
			values[":st"] = str(statusKey(f.Status))
		}
		streams = append(streams, newStream(IndexByGraph, attrGraph, f.Graph))
	case f.Status != "":
		streams = append(streams, newStream(IndexByStatus, attrStatus, statusKey(f.Status)))
	default:
		for _, st := range listedStatuses {
			streams = append(streams, newStream(IndexByStatus, attrStatus, string(st)))
		}
	}

	// Merge the streams, newest first, taking one more than a page to
	// know whether another page follows.
	var keys []map[string]types.AttributeValue
	var last string
	more := false
	h := &streamHeap{}
	for _, st := range streams {
		if err := st.fill(ctx, s.client); err != nil {
			return runs.Page{}, fmt.Errorf("dynamo: list runs: %w", err)
		}
		if st.ok() {
			heap.Push(h, st)
		}
	}
	for h.Len() > 0 {
		st := (*h)[0]
		it := st.items[0]
		st.items = st.items[1:]
		if len(keys) == limit {
			more = true
			break
		}
		keys = append(keys, key(keyOf(it).pk, keyOf(it).sk))
		last, _ = getS(it, attrPos)
		if err := st.fill(ctx, s.client); err != nil {
			return runs.Page{}, fmt.Errorf("dynamo: list runs: %w", err)
		}
		if st.ok() {
			heap.Fix(h, 0)
		} else {
			heap.Pop(h)
		}
	}

	items, err := s.batchGet(ctx, keys, nil, nil)
	if err != nil {
		return runs.Page{}, fmt.Errorf("dynamo: list runs: %w", err)
	}
	byKey := make(map[itemKey]map[string]types.AttributeValue, len(items))
	for _, it := range items {
		byKey[keyOf(it)] = it
	}
	ordered := make([]map[string]types.AttributeValue, 0, len(keys))
	for _, k := range keys {
		// A run deleted (by TTL) since the index listed it is left out.
		if it, ok := byKey[keyOf(k)]; ok {
			ordered = append(ordered, it)
		}
	}
	rs, err := s.decodeRuns(ctx, ordered)
	if err != nil {
		return runs.Page{}, err
	}
	// The indexes are eventually consistent: a run whose status changed
	// since the index listed it is left out rather than shown with a
	// status the filter excludes.
	page := runs.Page{Runs: make([]runs.Run, 0, len(rs))}
	for _, r := range rs {
		if (f.Graph == "" || r.Graph == f.Graph) && (f.Status == "" || r.Status == f.Status) && (f.ContextID == "" || r.ContextID == f.ContextID) && (f.Version == "" || r.VersionMatches(f.Version)) {
			page.Runs = append(page.Runs, r)
		}
	}
	if more {
		page.NextPageToken = encodeToken(last)
	}
	return page, nil
}

// stream pages through one index query.
type stream struct {
	in    *dynamodb.QueryInput
	items []map[string]types.AttributeValue
	done  bool
}

// fill reads pages until the stream has an item or is exhausted.
func (st *stream) fill(ctx context.Context, client *dynamodb.Client) error {
	for len(st.items) == 0 && !st.done {
		out, err := client.Query(ctx, st.in)
		if err != nil {
			return fmt.Errorf("query %s: %w", aws.ToString(st.in.IndexName), err)
		}
		st.items = out.Items
		if len(out.LastEvaluatedKey) == 0 {
			st.done = true
		} else {
			st.in.ExclusiveStartKey = out.LastEvaluatedKey
		}
	}
	return nil
}

func (st *stream) ok() bool { return len(st.items) > 0 }

func (st *stream) head() string {
	pos, _ := getS(st.items[0], attrPos)
	return pos
}

// streamHeap orders streams by their next run, newest first.
type streamHeap []*stream

func (h streamHeap) Len() int           { return len(h) }
func (h streamHeap) Less(i, j int) bool { return h[i].head() > h[j].head() }
func (h streamHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *streamHeap) Push(x any)        { *h = append(*h, x.(*stream)) }
func (h *streamHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// The Store reads a run's history a page at a time (HistoryPage).
var _ runs.HistoryPager = (*Store)(nil)
