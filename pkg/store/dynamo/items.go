package dynamo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
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

	skRun   = "RUN"
	skHead  = "HEAD"
	skStep  = "STEP#"
	skValue = "VAL#"
	// Task results sort right after the head, so that one Query reads
	// the head with them.
	skTask = "HEAD#TASK#"
	skBlob = "BLOB#"

	// attrStep is the head's latest committed step; attrCommit the id of
	// the commit that wrote an item.
	attrStep   = "step"
	attrCommit = "commit_id"
	// attrMeta and attrManifest hold a step's metadata and channel
	// manifest (see stepMeta and manifest) as JSON, inline or, with the
	// suffix refSuffix, as a reference to a blob.
	attrMeta     = "meta"
	attrManifest = "manifest"
	// attrValue holds a channel value (VAL items) or a chunk of a blob
	// (BLOB items).
	attrValue = "v"
	// attrData holds a JSON document: a task result or a run record.
	attrData = "data"
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

// Size limits. DynamoDB allows 400 KB per item, 100 items and 4 MB per
// transaction, 25 items per BatchWriteItem and 100 keys per BatchGetItem;
// these stay below with room for keys and attribute names.
const (
	// chunkSize is the payload of one blob chunk item.
	chunkSize = 350_000
	// maxInlineValue is the largest channel value stored in its own VAL
	// item inside the commit transaction.
	maxInlineValue = chunkSize
	// maxInlineDoc is the largest document (step metadata, manifest,
	// task result, run record) stored inline; the head holds two.
	maxInlineDoc = 128 << 10
	// maxTxItems and maxTxValueBytes bound the channel values written
	// inside a commit transaction (which also holds the head and the step
	// item, at most 2*maxInlineDoc each with keys).
	maxTxItems      = 100
	maxTxValueBytes = 3 << 20
	maxBatchWrite   = 25
	maxBatchGet     = 100
)

func runPK(runID string) string          { return "RUN#" + runID }
func stepSK(step int) string             { return fmt.Sprintf("%s%010d", skStep, step) }
func valueSK(ch string, step int) string { return fmt.Sprintf("%s%s#%010d", skValue, ch, step) }
func taskPrefix(step int) string         { return fmt.Sprintf("%s%010d#", skTask, step) }
func taskSK(step int, id string) string  { return taskPrefix(step) + id }
func blobSK(id string, i int) string     { return fmt.Sprintf("%s%s#%05d", skBlob, id, i) }

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
// BatchGetItem calls as it can and resolves documents and blobs.
type fetcher struct {
	s     *Store
	keys  []map[string]types.AttributeValue
	seen  map[itemKey]bool
	items map[itemKey]map[string]types.AttributeValue
}

func (s *Store) newFetcher() *fetcher {
	return &fetcher{s: s, seen: map[itemKey]bool{}, items: map[itemKey]map[string]types.AttributeValue{}}
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

// fetch reads the items asked for since the last fetch.
func (f *fetcher) fetch(ctx context.Context) error {
	keys := f.keys
	f.keys = nil
	items, err := f.s.batchGet(ctx, keys)
	for _, it := range items {
		f.items[keyOf(it)] = it
	}
	return err
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
func (s *Store) batchGet(ctx context.Context, keys []map[string]types.AttributeValue) ([]map[string]types.AttributeValue, error) {
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
					s.table: {Keys: batch, ConsistentRead: aws.Bool(true)},
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

// maxAttempts bounds the retries of transactions cancelled by conflicts
// with other transactions and of unprocessed batch items.
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

// cancellation returns the reasons of a cancelled transaction.
func cancellation(err error) ([]types.CancellationReason, bool) {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return nil, false
	}
	return tce.CancellationReasons, true
}

func reasonIs(reasons []types.CancellationReason, i int, code string) bool {
	return i < len(reasons) && aws.ToString(reasons[i].Code) == code
}

// conflicted reports whether a transaction was cancelled only because
// another transaction touched one of its items, or for throttling, so that
// it may be retried.
func conflicted(reasons []types.CancellationReason) bool {
	conflict := false
	for _, r := range reasons {
		switch aws.ToString(r.Code) {
		case "TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded":
			conflict = true
		case "", "None":
		default:
			return false
		}
	}
	return conflict
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
