package dynamo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Key and attribute names. The table's key is (pk, sk); see README.md.
const (
	attrPK = "pk"
	attrSK = "sk"

	// skRun sorts after every other sort key of a run's partition, so a
	// Query in descending order from it reads the run record, then the
	// task results, then the newest step (see LoadRun).
	skRun  = "~RUN"
	skStep = "STEP#"
	skTask = "TASK#"
	skBlob = "BLOB#"

	// attrCommit is the id of the commit that wrote a step item.
	attrCommit = "commit_id"
	// attrMeta and attrManifest hold a step's metadata and channel
	// manifest (see stepMeta and manifest) as JSON, inline or, with the
	// suffix refSuffix, as a reference to a blob.
	attrMeta     = "meta"
	attrManifest = "manifest"
	// attrVals is the map, in a step item, from channel to the value the
	// step stored for it.
	attrVals = "vals"
	// attrValue holds a chunk of a blob (BLOB items).
	attrValue = "v"
	// attrData holds a JSON document: a task result, or a run record of
	// the whole runs.Run as items written before 2026-11-27 hold it.
	attrData = "data"
	// attrRecord holds a run record in its compact form (runrecord.go).
	// It is not attrData so that a reader from before the compact form
	// finds no record and fails, rather than reading the fields the
	// compact form leaves out as empty (see README.md, deploys).
	attrRecord = "rec"
	// refSuffix names the attribute that replaces a document attribute
	// whose content lives in a blob.
	refSuffix = "_ref"

	// Task result items.
	attrFinal = "final"
	attrSeq   = "seq"

	// Run items, and the keys of the run indexes.
	attrVersion   = "version"
	attrExpiresAt = "expires_at"
	attrGraph     = "run_graph"
	attrStatus    = "run_status"
	attrPos       = "run_pos"
	attrContext   = "run_context"
)

// Index names.
const (
	// IndexByGraph lists runs by graph, newest first: partition key
	// run_graph, sort key run_pos.
	IndexByGraph = "by_graph"
	// IndexByStatus lists runs by status, newest first: partition key
	// run_status, sort key run_pos.
	IndexByStatus = "by_status"
)

// Size limits. DynamoDB allows 400 KB per item (409,600 bytes, names
// included), 25 items per BatchWriteItem and 100 keys per BatchGetItem;
// these stay below with room to spare.
const (
	// chunkSize is the payload of one blob chunk item.
	chunkSize = 350_000
	// maxInlineValue is the largest task result or run record stored in
	// its item rather than in a blob.
	maxInlineValue = chunkSize
	// maxInlineDoc is the largest step document (metadata, manifest)
	// stored in the step item rather than in a blob.
	maxInlineDoc = 128 << 10
	// maxStepItem bounds the estimated size of a step item; what does not
	// fit goes to blobs. maxItemSize is DynamoDB's limit, which the exact
	// size is checked against.
	maxStepItem = 380_000
	maxItemSize = 400 << 10
	// maxInlineStepValue is the largest value stored in a step item;
	// larger ones go to blobs, so that loading a step whose tasks do not
	// read them (LoadRunReading), or the next step's manifest, does not
	// read them.
	maxInlineStepValue = 64 << 10
	// maxInlineName is the longest channel name stored as a key of the
	// vals map; the values of longer (or empty) names go to blobs.
	maxInlineName = 255
	// maxProjectedChannels is the most channels a BatchGetItem projects
	// one by one from vals; with more, it reads the whole map.
	maxProjectedChannels = 64
	maxBatchWrite        = 25
	maxBatchGet          = 100
)

// maxStep is the largest step a sort key can hold.
const maxStep = 9_999_999_999

func runPK(runID string) string         { return "RUN#" + runID }
func stepSK(step int) string            { return fmt.Sprintf("%s%010d", skStep, step) }
func taskPrefix(step int) string        { return fmt.Sprintf("%s%010d#", skTask, step) }
func taskSK(step int, id string) string { return taskPrefix(step) + id }
func blobSK(id string, i int) string    { return fmt.Sprintf("%s%s#%05d", skBlob, id, i) }

// parseTaskSK returns the step of a task result item's sort key.
func parseTaskSK(sk string) (int, bool) {
	rest, ok := splitPrefix(sk, skTask)
	if !ok || len(rest) < 11 || rest[10] != '#' {
		return 0, false
	}
	n, err := strconv.Atoi(rest[:10])
	return n, err == nil && n >= 0
}

// parseStepSK returns the step of a step item's sort key.
func parseStepSK(sk string) (int, bool) {
	rest, ok := splitPrefix(sk, skStep)
	if !ok || len(rest) != 10 {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && n >= 0
}

func key(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: str(pk), attrSK: str(sk)}
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}
func bin(b []byte) types.AttributeValue { return &types.AttributeValueMemberB{Value: b} }
func boolean(b bool) types.AttributeValue {
	return &types.AttributeValueMemberBOOL{Value: b}
}

// getS, getN and getB read attributes of an item; ok is false when the
// attribute is missing or has another type.
func getS(item map[string]types.AttributeValue, name string) (string, bool) {
	v, ok := item[name].(*types.AttributeValueMemberS)
	if !ok {
		return "", false
	}
	return v.Value, true
}

func getN(item map[string]types.AttributeValue, name string) (int64, bool) {
	v, ok := item[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	return n, err == nil
}

func getB(item map[string]types.AttributeValue, name string) ([]byte, bool) {
	v, ok := item[name].(*types.AttributeValueMemberB)
	if !ok {
		return nil, false
	}
	return v.Value, true
}

// getM reads a map attribute of an item; it is nil when the attribute is
// missing or has another type.
func getM(item map[string]types.AttributeValue, name string) map[string]types.AttributeValue {
	v, ok := item[name].(*types.AttributeValueMemberM)
	if !ok {
		return nil
	}
	return v.Value
}

// marshal encodes v as compact JSON without escaping <, > and &, so that
// compact JSON inside (json.RawMessage) comes back byte for byte.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Blobs.

// blobRef locates a blob: a byte string stored as chunk items
// BLOB#<id>#<%05d> in the run's partition. Blobs are written once, before
// the item that references them, under an id no other writer uses.
type blobRef struct {
	ID     string `json:"id"`
	Size   int    `json:"size"`
	Chunks int    `json:"chunks"`
}

// pendingBlob is a blob to write.
type pendingBlob struct {
	ref  blobRef
	data []byte
}

func newBlob(id string, data []byte) pendingBlob {
	return pendingBlob{ref: blobRef{ID: id, Size: len(data), Chunks: (len(data) + chunkSize - 1) / chunkSize}, data: data}
}

// chunkKeys returns the keys of the chunk items of a blob.
func (r blobRef) chunkKeys(pk string) []map[string]types.AttributeValue {
	keys := make([]map[string]types.AttributeValue, r.Chunks)
	for i := range keys {
		keys[i] = key(pk, blobSK(r.ID, i))
	}
	return keys
}

// blobItems returns the chunk items of blobs.
func blobItems(pk string, blobs []pendingBlob) []map[string]types.AttributeValue {
	var items []map[string]types.AttributeValue
	for _, b := range blobs {
		for i := range b.ref.Chunks {
			end := min((i+1)*chunkSize, len(b.data))
			item := key(pk, blobSK(b.ref.ID, i))
			item[attrValue] = bin(b.data[i*chunkSize : end])
			items = append(items, item)
		}
	}
	return items
}

// docAttr stores a document in the attribute name of item: inline when it
// is at most max bytes, else as a blob, which it returns for the caller to
// write first.
func docAttr(item map[string]types.AttributeValue, name string, data []byte, max int) (*pendingBlob, error) {
	if len(data) <= max {
		item[name] = bin(data)
		return nil, nil
	}
	b := newBlob(newID(), data)
	ref, err := marshal(b.ref)
	if err != nil {
		return nil, err
	}
	item[name+refSuffix] = str(string(ref))
	return &b, nil
}

// docRef returns the blob reference of the document attribute name of
// item, if it is stored as a blob.
func docRef(item map[string]types.AttributeValue, name string) (*blobRef, error) {
	s, ok := getS(item, name+refSuffix)
	if !ok {
		return nil, nil
	}
	var ref blobRef
	if err := json.Unmarshal([]byte(s), &ref); err != nil {
		return nil, fmt.Errorf("attribute %s: %w", name+refSuffix, err)
	}
	return &ref, nil
}

// itemKey identifies an item in results of batchGet.
type itemKey struct{ pk, sk string }

func keyOf(item map[string]types.AttributeValue) itemKey {
	pk, _ := getS(item, attrPK)
	sk, _ := getS(item, attrSK)
	return itemKey{pk, sk}
}

// fetcher gathers the keys of items to read, reads them in as few
// BatchGetItem calls as it can and resolves documents, blobs and values.
type fetcher struct {
	s     *Store
	keys  []map[string]types.AttributeValue
	seen  map[itemKey]bool
	chans map[string]bool // channels to read from the vals of step items
	items map[itemKey]map[string]types.AttributeValue
}

func (s *Store) newFetcher() *fetcher {
	return &fetcher{s: s, seen: map[itemKey]bool{}, chans: map[string]bool{}, items: map[itemKey]map[string]types.AttributeValue{}}
}

// add asks for an item.
func (f *fetcher) add(k map[string]types.AttributeValue) {
	ik := keyOf(k)
	if f.seen[ik] {
		return
	}
	f.seen[ik] = true
	f.keys = append(f.keys, k)
}

// addValue asks for the value of channel ch in the step item (pk, sk).
func (f *fetcher) addValue(pk, sk, ch string) {
	f.add(key(pk, sk))
	f.chans[ch] = true
}

// addBlob asks for the chunks of a blob.
func (f *fetcher) addBlob(pk string, r blobRef) {
	for _, k := range r.chunkKeys(pk) {
		f.add(k)
	}
}

// addDoc asks for the blob of the document attribute name of item, if it
// has one.
func (f *fetcher) addDoc(item map[string]types.AttributeValue, name string) error {
	ref, err := docRef(item, name)
	if err != nil || ref == nil {
		return err
	}
	pk, _ := getS(item, attrPK)
	f.addBlob(pk, *ref)
	return nil
}

// fetch reads the items asked for since the last fetch. When values were
// asked for, it reads only the keys, the chunks' payload and those values
// (the request units are the same, the bytes fewer).
func (f *fetcher) fetch(ctx context.Context) error {
	keys := f.keys
	f.keys = nil
	var proj *string
	var names map[string]string
	if len(f.chans) > 0 {
		proj, names = valueProjection(slices.Sorted(maps.Keys(f.chans)))
		clear(f.chans)
	}
	items, err := f.s.batchGet(ctx, keys, proj, names)
	for _, it := range items {
		f.items[keyOf(it)] = it
	}
	return err
}

// valueProjection returns a ProjectionExpression for the keys, the
// payload of chunk items and the values of chans in step items.
func valueProjection(chans []string) (*string, map[string]string) {
	names := map[string]string{"#pk": attrPK, "#sk": attrSK, "#v": attrValue, "#vals": attrVals}
	if len(chans) > maxProjectedChannels {
		return aws.String("#pk, #sk, #v, #vals"), names
	}
	var b strings.Builder
	b.WriteString("#pk, #sk, #v")
	for i, ch := range chans {
		alias := "#c" + strconv.Itoa(i)
		names[alias] = ch
		b.WriteString(", #vals." + alias)
	}
	return aws.String(b.String()), names
}

// item returns a fetched item, nil if it does not exist.
func (f *fetcher) item(pk, sk string) map[string]types.AttributeValue {
	return f.items[itemKey{pk, sk}]
}

// blob reassembles a fetched blob.
func (f *fetcher) blob(pk string, r blobRef) ([]byte, error) {
	out := make([]byte, 0, r.Size)
	for i := range r.Chunks {
		it := f.item(pk, blobSK(r.ID, i))
		b, ok := getB(it, attrValue)
		if !ok {
			return nil, fmt.Errorf("chunk %d of blob %s of %s is missing", i, r.ID, pk)
		}
		out = append(out, b...)
	}
	if len(out) != r.Size {
		return nil, fmt.Errorf("blob %s of %s has %d bytes, want %d", r.ID, pk, len(out), r.Size)
	}
	return out, nil
}

// doc returns the document attribute name of item, from the item or from
// its fetched blob; ok is false when the item has neither.
func (f *fetcher) doc(item map[string]types.AttributeValue, name string) (data []byte, ok bool, err error) {
	if b, ok := getB(item, name); ok {
		return b, true, nil
	}
	ref, err := docRef(item, name)
	if err != nil || ref == nil {
		return nil, false, err
	}
	pk, _ := getS(item, attrPK)
	b, err := f.blob(pk, *ref)
	return b, err == nil, err
}

// Batches.

// batchGet reads items with strongly consistent reads, retrying the keys
// DynamoDB leaves unprocessed. Items that do not exist are left out.
// proj and names, if set, are the ProjectionExpression of every key.
func (s *Store) batchGet(ctx context.Context, keys []map[string]types.AttributeValue, proj *string, names map[string]string) ([]map[string]types.AttributeValue, error) {
	var out []map[string]types.AttributeValue
	for len(keys) > 0 {
		n := min(len(keys), maxBatchGet)
		batch := keys[:n]
		keys = keys[n:]
		for attempt := 0; len(batch) > 0; attempt++ {
			if attempt > 0 {
				if err := backoff(ctx, attempt); err != nil {
					return out, err
				}
			}
			res, err := s.client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{
				RequestItems: map[string]types.KeysAndAttributes{
					s.table: {Keys: batch, ConsistentRead: aws.Bool(true), ProjectionExpression: proj, ExpressionAttributeNames: names},
				},
			})
			if err != nil {
				return out, fmt.Errorf("BatchGetItem: %w", err)
			}
			out = append(out, res.Responses[s.table]...)
			batch = res.UnprocessedKeys[s.table].Keys
		}
	}
	return out, nil
}

// batchWrite puts and deletes items, retrying those DynamoDB leaves
// unprocessed.
func (s *Store) batchWrite(ctx context.Context, puts, deletes []map[string]types.AttributeValue) error {
	reqs := make([]types.WriteRequest, 0, len(puts)+len(deletes))
	for _, it := range puts {
		reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: it}})
	}
	for _, k := range deletes {
		reqs = append(reqs, types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: k}})
	}
	for len(reqs) > 0 {
		n := min(len(reqs), maxBatchWrite)
		batch := reqs[:n]
		reqs = reqs[n:]
		for attempt := 0; len(batch) > 0; attempt++ {
			if attempt > 0 {
				if err := backoff(ctx, attempt); err != nil {
					return err
				}
			}
			res, err := s.client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{
				RequestItems: map[string][]types.WriteRequest{s.table: batch},
			})
			if err != nil {
				return fmt.Errorf("BatchWriteItem: %w", err)
			}
			batch = res.UnprocessedItems[s.table]
		}
	}
	return nil
}

// writeBlobs writes the chunk items of blobs.
func (s *Store) writeBlobs(ctx context.Context, pk string, blobs []pendingBlob) error {
	if len(blobs) == 0 {
		return nil
	}
	if err := s.batchWrite(ctx, blobItems(pk, blobs), nil); err != nil {
		return fmt.Errorf("write chunks: %w", err)
	}
	return nil
}

// dropBlobs deletes blobs that nothing references, as a courtesy: a
// failure leaves garbage, not an error, and it runs even when ctx is
// cancelled.
func (s *Store) dropBlobs(ctx context.Context, pk string, refs []blobRef) {
	var keys []map[string]types.AttributeValue
	for _, r := range refs {
		keys = append(keys, r.chunkKeys(pk)...)
	}
	if len(keys) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_ = s.batchWrite(ctx, nil, keys)
}

// maxAttempts bounds the retries of unprocessed batch items.
const maxAttempts = 12

// backoff waits before retry number attempt (1, 2, ...): exponential with
// full jitter, from 10 ms up to 1 s.
func backoff(ctx context.Context, attempt int) error {
	if attempt >= maxAttempts {
		return errors.New("dynamo: too many retries")
	}
	limit := min(10*time.Millisecond<<min(attempt, 7), time.Second)
	t := time.NewTimer(time.Duration(rand.Int64N(int64(limit))) + time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// isConditionFailed reports whether err is a failed condition of a single
// item write.
func isConditionFailed(err error) (*types.ConditionalCheckFailedException, bool) {
	var ccf *types.ConditionalCheckFailedException
	return ccf, errors.As(err, &ccf)
}

// splitPrefix returns the part of s after prefix.
func splitPrefix(s, prefix string) (string, bool) {
	if !strings.HasPrefix(s, prefix) {
		return "", false
	}
	return s[len(prefix):], true
}

// ItemSize is the size of an item as DynamoDB counts it for request units:
// the UTF-8 length of each attribute name plus the size of its value
// (strings and binaries: their length; numbers: 1 byte per two significant
// digits plus 1; booleans and nulls: 1; lists and maps: 3 bytes plus, per
// element, 1 byte, its name for a map, and its size; sets: the sum of their
// elements). The 100 bytes of storage overhead per item are not counted.
func ItemSize(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return numberSize(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += numberSize(s)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range v.Value {
			n += len(b)
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += 1 + len(k) + valueSize(e)
		}
		return n
	}
	return 0
}

// numberSize is the size of a number: 1 byte per two significant digits,
// plus 1.
func numberSize(s string) int {
	mant, _, _ := strings.Cut(strings.ToLower(s), "e")
	digits := strings.Trim(strings.NewReplacer("-", "", "+", "", ".", "").Replace(mant), "0")
	return (len(digits)+1)/2 + 1
}
