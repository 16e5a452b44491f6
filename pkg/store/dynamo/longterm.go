package dynamo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/superstep/superstep/pkg/longterm"
)

// The long-term store (pkg/longterm) lives in the deployment's table, in
// partitions of its own: pk = MEM#<first namespace component>, sk = MEM#
// and the item's longterm.SortKey, so that the items under any prefix are
// one range of one partition (one Query). The first components the Store
// has written are noted in the partition MEMROOTS (sk = the component),
// once per component per process, for listing every namespace. README.md
// has the layout and the request units of each operation.
const (
	pkMemPrefix = "MEM#"
	skMemPrefix = "MEM#"
	pkMemRoots  = "MEMROOTS"

	attrLTNamespace = "ns"
	attrLTKey       = "key"
	attrLTValue     = "value"
	attrLTCreated   = "created"
	attrLTUpdated   = "updated"
	attrLTExpires   = "expires_ns"
	attrLTVector    = "vector"
)

// LongTerm returns the long-term store backend (pkg/longterm) on the
// Store's table: wrap it with longterm.New.
func (s *Store) LongTerm() longterm.Backend {
	return &longTermBackend{s: s, roots: newLRU[string, bool](maxNotes)}
}

type longTermBackend struct {
	s     *Store
	roots *lru[string, bool] // first components noted in MEMROOTS
}

var (
	_ longterm.Backend = (*longTermBackend)(nil)
	_ longterm.Roots   = (*longTermBackend)(nil)
)

func memKey(sortKey string) map[string]types.AttributeValue {
	root, _, _ := strings.Cut(sortKey, "\x1e")
	root, _, _ = strings.Cut(root, "\x1f")
	return map[string]types.AttributeValue{
		attrPK: &types.AttributeValueMemberS{Value: pkMemPrefix + root},
		attrSK: &types.AttributeValueMemberS{Value: skMemPrefix + sortKey},
	}
}

// Put is one UpdateItem: last writer wins, and created is kept
// (if_not_exists). Replacing an item that had expired but that DynamoDB's
// TTL has not deleted yet takes a second UpdateItem, to give it its new
// creation time.
func (b *longTermBackend) Put(ctx context.Context, r longterm.Record) error {
	ns, err := json.Marshal(r.Namespace)
	if err != nil {
		return fmt.Errorf("dynamo: put long-term item: %w", err)
	}
	set := []string{"#ns = :ns", "#key = :key", "#value = :value", "#updated = :updated", "#created = if_not_exists(#created, :created)"}
	names := map[string]string{"#ns": attrLTNamespace, "#key": attrLTKey, "#value": attrLTValue, "#updated": attrLTUpdated, "#created": attrLTCreated, "#exp": attrLTExpires, "#ttl": attrExpiresAt, "#vector": attrLTVector}
	values := map[string]types.AttributeValue{
		":ns":      &types.AttributeValueMemberS{Value: string(ns)},
		":key":     &types.AttributeValueMemberS{Value: r.Key},
		":value":   &types.AttributeValueMemberB{Value: r.Value},
		":updated": num(r.UpdatedAt.UnixNano()),
		":created": num(r.CreatedAt.UnixNano()),
	}
	var remove []string
	if r.ExpiresAt.IsZero() {
		remove = append(remove, "#exp", "#ttl")
	} else {
		set = append(set, "#exp = :exp", "#ttl = :ttl")
		values[":exp"] = num(r.ExpiresAt.UnixNano())
		// DynamoDB's TTL is in whole seconds: round up.
		values[":ttl"] = num(r.ExpiresAt.Add(time.Second - 1).Unix())
	}
	if r.Vector == nil {
		remove = append(remove, "#vector")
	} else {
		set = append(set, "#vector = :vector")
		values[":vector"] = &types.AttributeValueMemberB{Value: r.Vector}
	}
	expr := "SET " + strings.Join(set, ", ")
	if len(remove) > 0 {
		expr += " REMOVE " + strings.Join(remove, ", ")
	}
	key := memKey(r.SortKey)
	out, err := b.s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(b.s.table),
		Key:                       key,
		UpdateExpression:          aws.String(expr),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
		ReturnValues:              types.ReturnValueUpdatedOld,
	})
	if err != nil {
		return fmt.Errorf("dynamo: put long-term item: %w", err)
	}
	if old, ok := out.Attributes[attrLTExpires].(*types.AttributeValueMemberN); ok {
		if exp, err := strconv.ParseInt(old.Value, 10, 64); err == nil && exp <= r.UpdatedAt.UnixNano() {
			// The item replaced had expired: this Put made a new one.
			_, err := b.s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName:                 aws.String(b.s.table),
				Key:                       key,
				UpdateExpression:          aws.String("SET #created = :created"),
				ConditionExpression:       aws.String("#updated = :updated"),
				ExpressionAttributeNames:  map[string]string{"#created": attrLTCreated, "#updated": attrLTUpdated},
				ExpressionAttributeValues: map[string]types.AttributeValue{":created": num(r.CreatedAt.UnixNano()), ":updated": num(r.UpdatedAt.UnixNano())},
			})
			var cond *types.ConditionalCheckFailedException
			if err != nil && !errors.As(err, &cond) { // a later Put won: it decides
				return fmt.Errorf("dynamo: put long-term item: %w", err)
			}
		}
	}
	return b.noteRoot(ctx, r.Namespace[0])
}

// noteRoot records a first component in MEMROOTS, once per process.
func (b *longTermBackend) noteRoot(ctx context.Context, root string) error {
	if _, ok := b.roots.get(root); ok {
		return nil
	}
	_, err := b.s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(b.s.table),
		Item: map[string]types.AttributeValue{
			attrPK: &types.AttributeValueMemberS{Value: pkMemRoots},
			attrSK: &types.AttributeValueMemberS{Value: root},
		},
	})
	if err != nil {
		return fmt.Errorf("dynamo: note long-term root: %w", err)
	}
	b.roots.put(root, true, 1)
	return nil
}

func (b *longTermBackend) Get(ctx context.Context, sortKey string) (longterm.Record, error) {
	out, err := b.s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(b.s.table),
		Key:            memKey(sortKey),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return longterm.Record{}, fmt.Errorf("dynamo: get long-term item: %w", err)
	}
	if out.Item == nil {
		return longterm.Record{}, fmt.Errorf("dynamo: get long-term item: %w", longterm.ErrNotFound)
	}
	return decodeLongTerm(out.Item)
}

func (b *longTermBackend) Delete(ctx context.Context, sortKey string) error {
	_, err := b.s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(b.s.table),
		Key:       memKey(sortKey),
	})
	if err != nil {
		return fmt.Errorf("dynamo: delete long-term item: %w", err)
	}
	return nil
}

// Scan is a Query of the prefix's range in its root's partition, from
// after on (BETWEEN is inclusive: the item at after is skipped).
func (b *longTermBackend) Scan(ctx context.Context, prefix longterm.Namespace, after string, limit int) ([]longterm.Record, error) {
	lo, hi := longterm.PrefixRange(prefix)
	lo = max(lo, after)
	in := &dynamodb.QueryInput{
		TableName:              aws.String(b.s.table),
		KeyConditionExpression: aws.String("#pk = :pk AND #sk BETWEEN :lo AND :hi"),
		ExpressionAttributeNames: map[string]string{
			"#pk": attrPK, "#sk": attrSK,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": &types.AttributeValueMemberS{Value: pkMemPrefix + prefix[0]},
			":lo": &types.AttributeValueMemberS{Value: skMemPrefix + lo},
			":hi": &types.AttributeValueMemberS{Value: skMemPrefix + hi},
		},
		ConsistentRead: aws.Bool(true),
		Limit:          aws.Int32(int32(limit + 1)),
	}
	var out []longterm.Record
	for {
		page, err := b.s.client.Query(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("dynamo: query long-term items: %w", err)
		}
		for _, it := range page.Items {
			r, err := decodeLongTerm(it)
			if err != nil {
				return nil, err
			}
			if r.SortKey == after || !longterm.InRange(prefix, r.SortKey) {
				continue
			}
			out = append(out, r)
			if len(out) == limit {
				return out, nil
			}
		}
		if page.LastEvaluatedKey == nil {
			return out, nil
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}

func (b *longTermBackend) Roots(ctx context.Context) ([]string, error) {
	p := dynamodb.NewQueryPaginator(b.s.client, &dynamodb.QueryInput{
		TableName:                 aws.String(b.s.table),
		KeyConditionExpression:    aws.String("#pk = :pk"),
		ExpressionAttributeNames:  map[string]string{"#pk": attrPK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: pkMemRoots}},
	})
	var out []string
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("dynamo: list long-term roots: %w", err)
		}
		for _, it := range page.Items {
			if sk, ok := it[attrSK].(*types.AttributeValueMemberS); ok {
				out = append(out, sk.Value)
			}
		}
	}
	return out, nil
}

func decodeLongTerm(it map[string]types.AttributeValue) (longterm.Record, error) {
	var r longterm.Record
	str := func(name string) string {
		v, _ := it[name].(*types.AttributeValueMemberS)
		if v == nil {
			return ""
		}
		return v.Value
	}
	n := func(name string) int64 {
		v, _ := it[name].(*types.AttributeValueMemberN)
		if v == nil {
			return 0
		}
		x, _ := strconv.ParseInt(v.Value, 10, 64)
		return x
	}
	sk, ok := strings.CutPrefix(str(attrSK), skMemPrefix)
	if !ok {
		return r, fmt.Errorf("dynamo: long-term item with sort key %q", str(attrSK))
	}
	r.SortKey = sk
	if err := json.Unmarshal([]byte(str(attrLTNamespace)), &r.Namespace); err != nil {
		return r, fmt.Errorf("dynamo: long-term item %q: namespace: %w", sk, err)
	}
	r.Key = str(attrLTKey)
	if v, ok := it[attrLTValue].(*types.AttributeValueMemberB); ok {
		r.Value = v.Value
	}
	if v, ok := it[attrLTVector].(*types.AttributeValueMemberB); ok {
		r.Vector = v.Value
	}
	r.CreatedAt = time.Unix(0, n(attrLTCreated)).UTC()
	r.UpdatedAt = time.Unix(0, n(attrLTUpdated)).UTC()
	if e := n(attrLTExpires); e > 0 {
		r.ExpiresAt = time.Unix(0, e).UTC()
	}
	return r, nil
}
