package dynamo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// Run event streams ([runs.EventLog]).
//
// A run's events live in its partition, as batch items: sk =
// EVT#<id of the batch's first event, 12 digits>, attribute last = the id
// of its last event, data = the events as a JSON array (or data_ref, a
// blob, when the array is over the inline limit). One AppendEvents call
// writes one item (more only when its events do not fit one), so a
// superstep whose events are appended together costs one PutItem.
//
// The put is conditioned on the item not existing: writers that race for
// the same ids (the tick and node functions of one run) cannot both win,
// and the loser learns the winner's last id from the failed condition
// (ReturnValuesOnConditionCheckFailure) and tries after it. A Store
// remembers the next id of the runs it appended to, so a warm writer does
// not read before it writes; a cold one reads the newest batch item first
// (one Query of one small item). Batches thus tile the ids 1, 2, 3...
// without gaps or overlaps.
//
// A compacted item (CompactEvents: the pieces of a model's message the
// writer appended in several batches, see runs.Compactor) is written over
// the first item it replaces and covers up to the last; its elements are
// runs.LoggedEvent, and one with pieces stands for as many ids. The items
// it replaced are deleted after it is written; a reader skips ids it has
// read already, and when an item it would read next is gone although the
// stream goes on, looks for the item covering that id among the
// maxCoverScan items below (coverEvents), so it sees a compaction under
// way as either the old items or the new one, never a gap.
//
// Retention: a run keeps its newest events, up to [WithEventRetention]
// (runs.DefaultStreamRetention by default); EventsSince never returns an
// older one. Every retention/10 events, the append that crosses the mark
// turns the batch items wholly older than the retention into tombstones
// (the key and last id, no events), so that storage stays bounded while
// the run lives and no writer can ever put a batch into a hole. The
// tombstones and the rest go with the run: [Store.PurgeRun] deletes the
// whole partition once the run record has expired.
//
// By age ([WithEventMaxAge]): each batch item, and the chunks of its blob,
// get expires_at = append time + the maximum age, which the table's TTL
// acts on; readers treat an item past it as a tombstone, since DynamoDB
// deletes expired items lazily. Tombstones carry no TTL (they hold the
// ids), but go with the run.

const (
	skEvent = "EVT#"
	// attrLast is the id of a batch item's last event; attrGone marks a
	// tombstone.
	attrLast = "last"
	attrGone = "gone"
	// maxItemEvents bounds the events of one batch item, so that a reader
	// looking for the item holding an id starts at most this far back.
	maxItemEvents = 256
	// maxEventChase is how many failed puts a writer follows from the
	// winners' last ids before it reads the newest batch instead.
	maxEventChase = 2
	// maxEventAttempts bounds the puts of one batch item.
	maxEventAttempts = 32
	// lastEventID is the largest id a sort key holds.
	lastEventID = 999_999_999_999
)

func eventSK(first int64) string { return fmt.Sprintf("%s%012d", skEvent, first) }

func parseEventSK(sk string) (int64, bool) {
	rest, ok := splitPrefix(sk, skEvent)
	if !ok || len(rest) != 12 {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 64)
	return n, err == nil && n > 0
}

var _ runs.EventLog = (*Store)(nil)

// WithEventRetention sets how many events the Store keeps per run (the
// newest); 0 or less means runs.DefaultStreamRetention. The functions of a
// deployment must agree on it.
func WithEventRetention(n int) Option {
	return func(s *Store) { s.eventRetention = n }
}

// WithEventMaxAge sets how long a run's events are kept: each batch item
// gets expires_at = append time + d, which DynamoDB's TTL acts on, and is
// no longer read once past it. Zero or less keeps them until the count
// retention drops them or their run is purged.
func WithEventMaxAge(d time.Duration) Option {
	return func(s *Store) { s.eventMaxAge = max(d, 0) }
}

// eventExpired reports whether an event item is past its expires_at.
func (s *Store) eventExpired(it map[string]types.AttributeValue) bool {
	exp, ok := getN(it, attrExpiresAt)
	return ok && exp <= s.now().Unix()
}

func (s *Store) retentionOfEvents() int64 {
	if s.eventRetention <= 0 {
		return runs.DefaultStreamRetention
	}
	return int64(s.eventRetention)
}

// eventGroup is the events of one batch item, encoded.
type eventGroup struct {
	n    int
	data []byte
}

// groupEvents encodes evs as JSON arrays of at most maxItemEvents events
// and, unless one event alone is larger, maxInlineValue bytes.
func groupEvents(evs []pregel.Event) ([]eventGroup, error) {
	var (
		groups []eventGroup
		cur    = []byte{'['}
		n      int
	)
	flush := func() {
		if n > 0 {
			groups = append(groups, eventGroup{n: n, data: append(cur, ']')})
		}
		cur, n = []byte{'['}, 0
	}
	for i := range evs {
		raw, err := marshal(&evs[i])
		if err != nil {
			return nil, fmt.Errorf("encode event %d (%s): %w", i, evs[i].Type, err)
		}
		if n > 0 && (n == maxItemEvents || len(cur)+len(raw)+2 > maxInlineValue) {
			flush()
		}
		if n > 0 {
			cur = append(cur, ',')
		}
		cur = append(cur, raw...)
		n++
	}
	flush()
	return groups, nil
}

// AppendEvents implements [runs.EventLog]: usually one conditional
// PutItem (see the notes on the layout above).
func (s *Store) AppendEvents(ctx context.Context, runID string, evs []pregel.Event) ([]runs.StreamEvent, error) {
	if runID == "" {
		return nil, fmt.Errorf("append events with no run id: %w", runs.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	groups, err := groupEvents(evs)
	if err != nil {
		return nil, fmt.Errorf("dynamo: append events of run %q: %w", runID, err)
	}
	out := make([]runs.StreamEvent, 0, len(evs))
	for _, g := range groups {
		first, err := s.putEvents(ctx, runID, g)
		if err != nil {
			return nil, fmt.Errorf("dynamo: append %d events of run %q: %w", len(evs), runID, err)
		}
		for k := range g.n {
			out = append(out, runs.StreamEvent{ID: first + int64(k), Event: evs[len(out)]})
		}
		s.pruneEvents(ctx, runID, first+int64(g.n)-1, g.n)
	}
	return out, nil
}

// putEvents writes one batch item after the newest and returns the id of
// its first event.
func (s *Store) putEvents(ctx context.Context, runID string, g eventGroup) (int64, error) {
	pk := runPK(runID)
	item := key(pk, "")
	blob, err := docAttr(item, attrData, g.data, maxInlineValue)
	if err != nil {
		return 0, err
	}
	var exp types.AttributeValue
	if s.eventMaxAge > 0 {
		exp = num(s.now().Add(s.eventMaxAge).Unix())
		item[attrExpiresAt] = exp
	}
	if blob != nil {
		chunks := blobItems(pk, []pendingBlob{*blob})
		for _, c := range chunks {
			if exp != nil {
				c[attrExpiresAt] = exp
			}
		}
		if err := s.batchWrite(ctx, chunks, nil); err != nil {
			return 0, fmt.Errorf("write chunks: %w", err)
		}
	}
	next, known := s.eventHeads.get(runID)
	if !known {
		if next, err = s.eventHead(ctx, pk); err != nil {
			return 0, s.dropBlobOf(ctx, pk, blob, err)
		}
	}
	chased := 0
	for attempt := 0; ; attempt++ {
		if attempt == maxEventAttempts || next+int64(g.n)-1 > lastEventID {
			return 0, s.dropBlobOf(ctx, pk, blob, fmt.Errorf("no free event id after %d attempts (other writers keep winning)", attempt))
		}
		item[attrSK] = str(eventSK(next))
		item[attrLast] = num(next + int64(g.n) - 1)
		_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
			TableName:                           aws.String(s.table),
			Item:                                item,
			ConditionExpression:                 aws.String("attribute_not_exists(sk)"),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		if err == nil {
			s.eventHeads.put(runID, next+int64(g.n), 1)
			return next, nil
		}
		ccf, failed := isConditionFailed(err)
		if !failed {
			s.eventHeads.take(runID)
			return 0, s.dropBlobOf(ctx, pk, blob, fmt.Errorf("PutItem: %w", err))
		}
		// Another writer has these ids: go after its batch, or, when that
		// keeps happening or it is not known, after the newest.
		if last, ok := getN(ccf.Item, attrLast); ok && last >= next && chased < maxEventChase {
			next, chased = last+1, chased+1
			continue
		}
		chased = 0
		if next, err = s.eventHead(ctx, pk); err != nil {
			return 0, s.dropBlobOf(ctx, pk, blob, err)
		}
	}
}

// dropBlobOf deletes the blob of a batch item that was not written and
// returns err.
func (s *Store) dropBlobOf(ctx context.Context, pk string, blob *pendingBlob, err error) error {
	if blob != nil {
		s.dropBlobs(ctx, pk, []blobRef{blob.ref})
	}
	return err
}

// eventHead reads the id after the newest event of a run's stream (1 when
// it has none): one Query of the newest batch item, keys and last id only.
func (s *Store) eventHead(ctx context.Context, pk string) (int64, error) {
	out, err := s.client.Query(ctx, &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		KeyConditionExpression:    aws.String("pk = :pk AND sk BETWEEN :lo AND :hi"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(pk), ":lo": str(eventSK(1)), ":hi": str(eventSK(lastEventID))},
		ProjectionExpression:      aws.String("#last"),
		ExpressionAttributeNames:  map[string]string{"#last": attrLast},
		ScanIndexForward:          aws.Bool(false),
		Limit:                     aws.Int32(1),
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		return 0, fmt.Errorf("read the newest event: Query: %w", err)
	}
	if len(out.Items) == 0 {
		return 1, nil
	}
	last, ok := getN(out.Items[0], attrLast)
	if !ok {
		return 0, errors.New("the newest event item has no last id")
	}
	return last + 1, nil
}

// pruneEvents turns the batch items of a run that hold only events older
// than the retention into tombstones, when the append that ended with id
// last (n events) crossed a multiple of retention/10. It is best effort:
// readers never return events older than the retention anyway, and
// PurgeRun deletes what a failed prune leaves.
func (s *Store) pruneEvents(ctx context.Context, runID string, last int64, n int) {
	retention := s.retentionOfEvents()
	every := max(retention/10, 1)
	cutoff := last - retention // ids up to cutoff are dropped
	before := max(cutoff-int64(n), 0)
	if cutoff <= 0 || cutoff/every == before/every {
		return
	}
	// The prune at the previous mark tombstoned every item ending at or
	// before it; items ending after it start at most maxItemEvents-1
	// earlier.
	lo := max((before/every)*every-maxItemEvents+2, 1)
	pk := runPK(runID)
	var (
		puts, deletes []map[string]types.AttributeValue
	)
	err := s.queryRange(ctx, pk, eventSK(lo), eventSK(cutoff), "#sk, #last, #gone, #ref",
		map[string]string{"#sk": attrSK, "#last": attrLast, "#gone": attrGone, "#ref": attrData + refSuffix},
		func(it map[string]types.AttributeValue) error {
			end, _ := getN(it, attrLast)
			if _, gone := it[attrGone]; gone || end > cutoff {
				return nil
			}
			sk, _ := getS(it, attrSK)
			tomb := key(pk, sk)
			tomb[attrLast], tomb[attrGone] = num(end), boolean(true)
			puts = append(puts, tomb)
			if ref, err := docRef(it, attrData); err == nil && ref != nil {
				deletes = append(deletes, ref.chunkKeys(pk)...)
			}
			return nil
		})
	if err == nil {
		_ = s.batchWrite(ctx, puts, deletes)
	}
}

// queryRange calls fn with the items of partition pk whose sort keys are
// between lo and hi, in order, projected to proj (all attributes when
// empty). An error of fn stops it and is returned.
func (s *Store) queryRange(ctx context.Context, pk, lo, hi, proj string, names map[string]string, fn func(map[string]types.AttributeValue) error) error {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		KeyConditionExpression:    aws.String("pk = :pk AND sk BETWEEN :lo AND :hi"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(pk), ":lo": str(lo), ":hi": str(hi)},
		ConsistentRead:            aws.Bool(true),
	}
	if proj != "" {
		in.ProjectionExpression, in.ExpressionAttributeNames = aws.String(proj), names
	}
	return s.queryPages(ctx, in, fn)
}

// eventPageItems is how many batch items a read of events asks for per
// Query when it catches up: several requests of modest size rather than
// 1 MB pages it may not need.
const eventPageItems = 16

// EventsSince implements [runs.EventLog]. It reads the newest batch item
// first (one small Query), which tells the last id, hence the oldest kept,
// and holds what a watcher reading at the end of the stream has not seen
// yet, usually all of it: a poll is one request. A reader further behind
// reads forward from the item holding the first event it wants.
func (s *Store) EventsSince(ctx context.Context, runID string, after int64, limit int) (runs.EventPage, error) {
	if after < 0 {
		return runs.EventPage{}, fmt.Errorf("event id %d is negative: %w", after, runs.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return runs.EventPage{}, err
	}
	page, err := s.eventsSince(ctx, runPK(runID), after, runs.PageLimit(limit))
	if err != nil {
		return runs.EventPage{}, fmt.Errorf("dynamo: read events of run %q: %w", runID, err)
	}
	return page, nil
}

func (s *Store) eventsSince(ctx context.Context, pk string, after int64, limit int) (runs.EventPage, error) {
	head, err := s.eventItems(ctx, pk, 1, lastEventID, false, 1)
	if err != nil || len(head) == 0 {
		return runs.EventPage{}, err
	}
	newest := head[0]
	page := runs.EventPage{Last: newest.last}
	page.First = max(page.Last-s.retentionOfEvents()+1, 1)
	if newest.gone {
		page.First = page.Last + 1
	}
	start := max(after+1, page.First)
	if start > page.Last {
		return page, nil
	}
	items := head
	if newest.first > start {
		// Read forward from the item holding start: it begins there, or
		// (a reader that stopped inside a batch) before.
		if items, err = s.eventItems(ctx, pk, start, lastEventID, true, eventPageItems); err != nil {
			return runs.EventPage{}, err
		}
		if len(items) == 0 || items[0].first > start {
			prev, err := s.eventItems(ctx, pk, 1, start, false, 1)
			if err != nil {
				return runs.EventPage{}, err
			}
			items = append(prev, items...)
		}
		// More pages while the page is short and the stream goes on.
		for n := countFrom(items, start); n < limit; n = countFrom(items, start) {
			end := items[len(items)-1].last
			if end >= page.Last {
				break
			}
			more, err := s.eventItems(ctx, pk, end+1, lastEventID, true, eventPageItems)
			if err != nil {
				return runs.EventPage{}, err
			}
			if len(more) == 0 {
				break
			}
			items = append(items, more...)
		}
	}
	f := s.newFetcher()
	for _, it := range items {
		if it.last >= start && !it.gone {
			if err := f.addDoc(it.item, attrData); err != nil {
				return runs.EventPage{}, err
			}
		}
	}
	if len(f.keys) > 0 {
		if err := f.fetch(ctx); err != nil {
			return runs.EventPage{}, err
		}
	}
	next := start // the id of the next event wanted
	for k := 0; k < len(items) && len(page.Events) < limit; k++ {
		it := items[k]
		if it.last < next {
			continue // before start, or covered by a compacted item read
		}
		if it.first > next && next <= page.Last {
			// No item read holds next: a compaction that is deleting
			// the items it replaced may have deleted it already; the
			// item it wrote covers it.
			cov, err := s.coverEvents(ctx, pk, next)
			if err != nil {
				return runs.EventPage{}, err
			}
			if cov != nil {
				items = slices.Insert(items, k, *cov)
				k--
				continue
			}
			// A hole no item covers (DynamoDB's TTL deleted it): go on.
		}
		if it.gone {
			// Pruned by a writer with a smaller retention.
			page.First, page.Events = it.last+1, nil
			next = it.last + 1
			continue
		}
		data, ok, err := f.doc(it.item, attrData)
		if !ok && err == nil {
			// An item inserted above: its blob was not fetched.
			g := s.newFetcher()
			if err = g.addDoc(it.item, attrData); err == nil {
				if err = g.fetch(ctx); err == nil {
					data, ok, err = g.doc(it.item, attrData)
				}
			}
		}
		if err != nil || !ok {
			return runs.EventPage{}, fmt.Errorf("events from %d: data missing: %v", it.first, err)
		}
		var evs []runs.LoggedEvent
		if err := json.Unmarshal(data, &evs); err != nil {
			return runs.EventPage{}, fmt.Errorf("decode events from %d: %w", it.first, err)
		}
		id := it.first - 1
		for _, le := range evs {
			id += int64(max(len(le.Pieces), 1))
			if id >= next && len(page.Events) < limit {
				ev := runs.StreamEvent{ID: id, Event: le.Event, Pieces: le.Pieces}
				page.Events = append(page.Events, ev.From(next-1))
				next = id + 1
			}
		}
		if id != it.last {
			return runs.EventPage{}, fmt.Errorf("events item %d holds ids to %d, not to %d", it.first, id, it.last)
		}
	}
	return page, nil
}

// maxCoverScan bounds the items coverEvents reads: more than a
// compaction replaces (see runs.Compactor).
const maxCoverScan = 128

// coverEvents returns the item holding event id, found among the
// maxCoverScan items below it, or nil.
func (s *Store) coverEvents(ctx context.Context, pk string, id int64) (*eventItem, error) {
	hi := id
	for scanned := 0; scanned < maxCoverScan && hi >= 1; {
		items, err := s.eventItems(ctx, pk, 1, hi, false, 32)
		if err != nil {
			return nil, err
		}
		for i := range items {
			if items[i].last >= id {
				return &items[i], nil
			}
		}
		if len(items) < 32 {
			return nil, nil
		}
		scanned += len(items)
		hi = items[len(items)-1].first - 1
	}
	return nil, nil
}

var _ runs.EventCompactor = (*Store)(nil)

// CompactEvents implements [runs.EventCompactor]. The batch items of ids
// c.First to c.Last (they must tile them exactly) are replaced by one
// item at c.First's key holding c.Events, each with its pieces: a
// conditional PutItem over the first (which must not have changed), then
// a BatchWriteItem deleting the others. A reader between the two sees
// both the new item and some old ones; it skips the ids it has read
// (eventsSince), and when an old item it would have read next is
// already gone, finds the new one (coverEvents). So a compaction costs a
// PutItem of the item's size and a delete (1 WRU) per item replaced, and
// leaves one item where there were as many as the writer's flushes.
func (s *Store) CompactEvents(ctx context.Context, runID string, c runs.Compaction) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(c.Events) == 0 || len(c.Events) > maxItemEvents || c.First < 1 || c.Last < c.First {
		return fmt.Errorf("dynamo: compact events %d to %d of run %q into %d: %w", c.First, c.Last, runID, len(c.Events), runs.ErrInvalid)
	}
	pk := runPK(runID)
	var (
		old     []eventItem
		deletes []map[string]types.AttributeValue
	)
	err := s.queryRange(ctx, pk, eventSK(c.First), eventSK(c.Last), "#sk, #last, #gone, #ref",
		map[string]string{"#sk": attrSK, "#last": attrLast, "#gone": attrGone, "#ref": attrData + refSuffix},
		func(it map[string]types.AttributeValue) error {
			sk, _ := getS(it, attrSK)
			first, _ := parseEventSK(sk)
			last, _ := getN(it, attrLast)
			_, gone := it[attrGone]
			old = append(old, eventItem{first: first, last: last, gone: gone, item: it})
			return nil
		})
	if err != nil {
		return fmt.Errorf("dynamo: compact events of run %q: %w", runID, err)
	}
	next := c.First
	for _, it := range old {
		if it.first != next || it.gone {
			break
		}
		next = it.last + 1
	}
	if len(old) == 0 || next != c.Last+1 || old[len(old)-1].last != c.Last {
		return fmt.Errorf("dynamo: compact events %d to %d of run %q: the items hold others: %w", c.First, c.Last, runID, runs.ErrConflict)
	}
	data := []byte{'['}
	for i, ev := range c.Events {
		raw, err := marshal(runs.LoggedEvent{Event: ev.Event, Pieces: ev.Pieces})
		if err != nil {
			return fmt.Errorf("dynamo: compact events of run %q: encode event %d: %w", runID, ev.ID, err)
		}
		if i > 0 {
			data = append(data, ',')
		}
		data = append(data, raw...)
	}
	data = append(data, ']')
	item := key(pk, eventSK(c.First))
	item[attrLast] = num(c.Last)
	blob, err := docAttr(item, attrData, data, maxInlineValue)
	if err != nil {
		return err
	}
	if s.eventMaxAge > 0 {
		item[attrExpiresAt] = num(s.now().Add(s.eventMaxAge).Unix())
	}
	if blob != nil {
		chunks := blobItems(pk, []pendingBlob{*blob})
		for _, ch := range chunks {
			if e, ok := item[attrExpiresAt]; ok {
				ch[attrExpiresAt] = e
			}
		}
		if err := s.batchWrite(ctx, chunks, nil); err != nil {
			return fmt.Errorf("dynamo: compact events of run %q: write chunks: %w", runID, err)
		}
	}
	out, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 aws.String(s.table),
		Item:                      item,
		ConditionExpression:       aws.String("attribute_exists(sk) AND attribute_not_exists(#gone) AND #last = :last"),
		ExpressionAttributeNames:  map[string]string{"#gone": attrGone, "#last": attrLast},
		ExpressionAttributeValues: map[string]types.AttributeValue{":last": num(old[0].last)},
		ReturnValues:              types.ReturnValueAllOld,
	})
	if err != nil {
		err = s.dropBlobOf(ctx, pk, blob, err)
		if _, failed := isConditionFailed(err); failed {
			err = fmt.Errorf("the first item changed: %w", runs.ErrConflict)
		}
		return fmt.Errorf("dynamo: compact events %d to %d of run %q: PutItem: %w", c.First, c.Last, runID, err)
	}
	var refs []blobRef
	if ref, err := docRef(out.Attributes, attrData); err == nil && ref != nil && (blob == nil || *ref != blob.ref) {
		refs = append(refs, *ref)
	}
	for _, it := range old[1:] {
		deletes = append(deletes, key(pk, eventSK(it.first)))
		if ref, err := docRef(it.item, attrData); err == nil && ref != nil {
			refs = append(refs, *ref)
		}
	}
	for _, r := range refs {
		deletes = append(deletes, r.chunkKeys(pk)...)
	}
	if err := s.batchWrite(ctx, nil, deletes); err != nil {
		// Readers skip what the new item covers; PurgeRun deletes the
		// rest with the run.
		return fmt.Errorf("dynamo: compact events of run %q: delete the items replaced: %w", runID, err)
	}
	return nil
}

// countFrom counts the events from id start in items.
func countFrom(items []eventItem, start int64) int {
	n := 0
	for _, it := range items {
		if it.last >= start {
			n += int(it.last - max(it.first, start) + 1)
		}
	}
	return n
}

// eventItem is a batch item read.
type eventItem struct {
	first, last int64
	gone        bool
	item        map[string]types.AttributeValue
}

// eventItems reads up to n batch items of partition pk whose first ids
// are between lo and hi: the lowest when forward, else the highest (in
// descending order).
func (s *Store) eventItems(ctx context.Context, pk string, lo, hi int64, forward bool, n int32) ([]eventItem, error) {
	out, err := s.client.Query(ctx, &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		KeyConditionExpression:    aws.String("pk = :pk AND sk BETWEEN :lo AND :hi"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(pk), ":lo": str(eventSK(lo)), ":hi": str(eventSK(hi))},
		ScanIndexForward:          aws.Bool(forward),
		Limit:                     aws.Int32(n),
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	items := make([]eventItem, 0, len(out.Items))
	for _, it := range out.Items {
		sk, _ := getS(it, attrSK)
		first, ok1 := parseEventSK(sk)
		last, ok2 := getN(it, attrLast)
		if !ok1 || !ok2 || last < first {
			return nil, fmt.Errorf("events item %s is malformed", sk)
		}
		_, gone := it[attrGone]
		gone = gone || s.eventExpired(it)
		items = append(items, eventItem{first: first, last: last, gone: gone, item: it})
	}
	return items, nil
}
