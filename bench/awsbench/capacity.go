package awsbench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/superstep/superstep/pkg/store/dynamo"
)

// Request unit sizes: a write unit covers 1 KB of item, a read unit 4 KB.
const (
	writeUnitBytes = 1024
	readUnitBytes  = 4096
)

// CapacityMeter estimates the read and write request units DynamoDB
// charges for the requests of the clients it is installed on, from the
// sizes of the items they touch, by the rules of the DynamoDB developer
// guide ("DynamoDB read and write operations"):
//
//   - a strongly consistent read costs 1 unit per 4 KB of item, rounded up
//     per item (GetItem, BatchGetItem) or over the items a Query page
//     evaluates; an eventually consistent one half that; a transactional
//     read 2 per 4 KB. Projections do not reduce it; a missing item or an
//     empty Query costs the minimum;
//   - a write costs 1 unit per 1 KB, rounded up, of the larger of the item
//     before and after it (PutItem, UpdateItem, DeleteItem, BatchWriteItem),
//     2 per 1 KB in TransactWriteItems, where a ConditionCheck costs as a
//     transactional write of the item it checks; a write whose condition
//     fails costs the same;
//   - a write that changes what a global secondary index projects costs 1
//     unit per 1 KB of the index entry written (2 entries when its index key
//     changes), after the table's DescribeTable.
//
// moto_server cannot tell: it answers ReturnConsumedCapacity with fixed
// placeholders (1.0 per write, 0.5 per GetItem, none for transactions).
//
// To see the items, the meter reads them through Reader, a client without
// the meter: for a write, each item before the request, and after it when
// the request does not say (an update; a put leaves the item it puts, a
// delete none); for a projected or filtered read, the full items. These reads are not counted and their
// time is summed in [CapacityMeter.Overhead], so that callers timing a
// handler can take it out. The estimate is exact only when no other
// request writes the same items meanwhile.
//
// Install it like an awsmeter.Meter, on an aws.Config's APIOptions or a
// client's; the zero value with Reader set is ready to use, and it is safe
// for concurrent use.
type CapacityMeter struct {
	// Reader reads items and describes tables. Required; it must not have
	// this meter installed.
	Reader *dynamodb.Client

	mu       sync.Mutex
	ops      map[string]Units
	tables   map[string]*tableSchema
	overhead time.Duration
	err      error
}

// Units are request units charged for one operation (or in all).
type Units struct {
	// Read request units.
	Read float64 `json:"read"`
	// Write request units, IndexWrite included.
	Write float64 `json:"write"`
	// IndexWrite is the part of Write spent on global secondary indexes.
	IndexWrite float64 `json:"index_write"`
}

func (u Units) add(v Units) Units {
	return Units{Read: u.Read + v.Read, Write: u.Write + v.Write, IndexWrite: u.IndexWrite + v.IndexWrite}
}

// Install adds the meter to a client's middleware stack, at the end of the
// initialize step, where the typed input and output are visible. Its
// signature fits the APIOptions of aws.Config and of the clients' Options.
func (m *CapacityMeter) Install(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("superstep.awsbench.capacity", m.handle), middleware.After)
}

// Snapshot returns the units counted so far, by operation name.
func (m *CapacityMeter) Snapshot() map[string]Units {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.ops)
}

// Overhead is the time spent so far in the meter's own reads.
func (m *CapacityMeter) Overhead() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.overhead
}

// Err returns the first error of the meter's own reads, if any: the
// estimate is then incomplete.
func (m *CapacityMeter) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

func (m *CapacityMeter) charge(op string, u Units) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ops == nil {
		m.ops = make(map[string]Units)
	}
	m.ops[op] = m.ops[op].add(u)
}

func (m *CapacityMeter) fail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err == nil {
		m.err = err
	}
}

// timed runs fn and adds its duration to the overhead.
func (m *CapacityMeter) timed(fn func()) {
	start := time.Now()
	fn()
	d := time.Since(start)
	m.mu.Lock()
	m.overhead += d
	m.mu.Unlock()
}

// target is an item a write touches.
type target struct {
	table string
	key   map[string]types.AttributeValue
	// check: a ConditionCheck, which reads but does not change the item.
	check bool
	// known: once the write succeeded, the item is put (nil: deleted),
	// with no need to read it back.
	known bool
	put   map[string]types.AttributeValue
}

func (m *CapacityMeter) handle(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	op := awsmiddleware.GetOperationName(ctx)
	ctx0 := context.WithoutCancel(ctx)
	var (
		targets []target
		factor  = 1.0
	)
	switch p := in.Parameters.(type) {
	case *dynamodb.PutItemInput:
		targets = []target{{table: aws.ToString(p.TableName), key: m.keyOf(ctx0, aws.ToString(p.TableName), p.Item), known: true, put: p.Item}}
	case *dynamodb.UpdateItemInput:
		targets = []target{{table: aws.ToString(p.TableName), key: p.Key}}
	case *dynamodb.DeleteItemInput:
		targets = []target{{table: aws.ToString(p.TableName), key: p.Key, known: true}}
	case *dynamodb.BatchWriteItemInput:
		for table, reqs := range p.RequestItems {
			for _, r := range reqs {
				switch {
				case r.PutRequest != nil:
					targets = append(targets, target{table: table, key: m.keyOf(ctx0, table, r.PutRequest.Item), known: true, put: r.PutRequest.Item})
				case r.DeleteRequest != nil:
					targets = append(targets, target{table: table, key: r.DeleteRequest.Key, known: true})
				}
			}
		}
	case *dynamodb.TransactWriteItemsInput:
		factor = 2
		for _, it := range p.TransactItems {
			switch {
			case it.Put != nil:
				table := aws.ToString(it.Put.TableName)
				targets = append(targets, target{table: table, key: m.keyOf(ctx0, table, it.Put.Item), known: true, put: it.Put.Item})
			case it.Update != nil:
				targets = append(targets, target{table: aws.ToString(it.Update.TableName), key: it.Update.Key})
			case it.Delete != nil:
				targets = append(targets, target{table: aws.ToString(it.Delete.TableName), key: it.Delete.Key, known: true})
			case it.ConditionCheck != nil:
				targets = append(targets, target{table: aws.ToString(it.ConditionCheck.TableName), key: it.ConditionCheck.Key, check: true})
			}
		}
	default:
		out, md, err := next.HandleInitialize(ctx, in)
		if err == nil {
			m.read(ctx0, op, in.Parameters, out.Result)
		}
		return out, md, err
	}

	before := make([]map[string]types.AttributeValue, len(targets))
	m.timed(func() {
		for i, t := range targets {
			before[i] = m.get(ctx0, t.table, t.key)
		}
	})
	out, md, err := next.HandleInitialize(ctx, in)
	if err != nil && !chargedFailure(err) {
		return out, md, err
	}
	after := slices.Clone(before)
	if err == nil {
		// A put leaves the item it puts and a delete none, unless a batch
		// left it unprocessed: then every item is read back.
		o, _ := out.Result.(*dynamodb.BatchWriteItemOutput)
		unprocessed := o != nil && len(o.UnprocessedItems) > 0
		m.timed(func() {
			for i, t := range targets {
				switch {
				case t.check:
				case t.known && !unprocessed:
					after[i] = t.put
				default:
					after[i] = m.get(ctx0, t.table, t.key)
				}
			}
		})
	}
	var u Units
	for i, t := range targets {
		u.Write += factor * writeUnits(max(dynamo.ItemSize(before[i]), dynamo.ItemSize(after[i])))
		if !t.check {
			iw := m.indexWrites(ctx0, t.table, before[i], after[i])
			u.Write += iw
			u.IndexWrite += iw
		}
	}
	m.charge(op, u)
	return out, md, err
}

// chargedFailure reports whether a failed write is still charged: its
// condition failed, or its transaction was cancelled.
func chargedFailure(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	var tce *types.TransactionCanceledException
	return errors.As(err, &ccf) || errors.As(err, &tce)
}

// read charges a successful read operation.
func (m *CapacityMeter) read(ctx context.Context, op string, in, out any) {
	var u Units
	switch p := in.(type) {
	case *dynamodb.GetItemInput:
		o, _ := out.(*dynamodb.GetItemOutput)
		item := map[string]types.AttributeValue(nil)
		if o != nil {
			item = o.Item
		}
		if p.ProjectionExpression != nil || len(p.AttributesToGet) > 0 {
			m.timed(func() { item = m.get(ctx, aws.ToString(p.TableName), p.Key) })
		}
		u.Read = readUnits(dynamo.ItemSize(item), aws.ToBool(p.ConsistentRead), 1)
	case *dynamodb.BatchGetItemInput:
		o, _ := out.(*dynamodb.BatchGetItemOutput)
		m.timed(func() {
			for table, ka := range p.RequestItems {
				var unprocessed []map[string]types.AttributeValue
				if o != nil {
					unprocessed = o.UnprocessedKeys[table].Keys
				}
				for _, k := range ka.Keys {
					if slices.ContainsFunc(unprocessed, func(x map[string]types.AttributeValue) bool { return reflect.DeepEqual(x, k) }) {
						continue
					}
					u.Read += readUnits(dynamo.ItemSize(m.get(ctx, table, k)), aws.ToBool(ka.ConsistentRead), 1)
				}
			}
		})
	case *dynamodb.TransactGetItemsInput:
		m.timed(func() {
			for _, it := range p.TransactItems {
				if it.Get != nil {
					u.Read += readUnits(dynamo.ItemSize(m.get(ctx, aws.ToString(it.Get.TableName), it.Get.Key)), true, 2)
				}
			}
		})
	case *dynamodb.QueryInput:
		items := []map[string]types.AttributeValue(nil)
		if o, ok := out.(*dynamodb.QueryOutput); ok && o != nil && wholeItems(p) {
			// The page returned what it evaluated, in full.
			items = o.Items
		} else {
			m.timed(func() { items = m.evaluated(ctx, p) })
		}
		size := 0
		for _, it := range items {
			size += dynamo.ItemSize(it)
		}
		u.Read = readUnits(size, aws.ToBool(p.ConsistentRead), 1)
	case *dynamodb.ScanInput:
		m.fail(errors.New("awsbench: Scan is not estimated"))
	default:
		return
	}
	m.charge(op, u)
}

// wholeItems reports whether a Query returns every item it evaluates in
// full (as stored in the table or index it reads): no projection, filter
// or count.
func wholeItems(p *dynamodb.QueryInput) bool {
	switch p.Select {
	case "", types.SelectAllAttributes, types.SelectAllProjectedAttributes:
	default:
		return false
	}
	return p.ProjectionExpression == nil && p.FilterExpression == nil && len(p.AttributesToGet) == 0 && len(p.QueryFilter) == 0
}

// writeUnits is the write units of one standard write of size bytes.
func writeUnits(size int) float64 {
	return float64(max(1, (size+writeUnitBytes-1)/writeUnitBytes))
}

// readUnits is the read units of reading size bytes: per 4 KB, times factor
// (2 for transactions), halved for eventually consistent reads.
func readUnits(size int, consistent bool, factor float64) float64 {
	u := factor * float64(max(1, (size+readUnitBytes-1)/readUnitBytes))
	if !consistent && factor == 1 {
		u /= 2
	}
	return u
}

// get reads an item in full, nil when it does not exist.
func (m *CapacityMeter) get(ctx context.Context, table string, key map[string]types.AttributeValue) map[string]types.AttributeValue {
	if len(key) == 0 {
		return nil
	}
	out, err := m.Reader.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		m.fail(fmt.Errorf("awsbench: read an item of %s: %w", table, err))
		return nil
	}
	return out.Item
}

// exprToken matches the placeholders of an expression.
var exprToken = regexp.MustCompile(`[#:][A-Za-z0-9_]+`)

// evaluated returns the full items a Query page evaluates: the same key
// condition, start key and limit, without projection or filter.
func (m *CapacityMeter) evaluated(ctx context.Context, p *dynamodb.QueryInput) []map[string]types.AttributeValue {
	used := map[string]bool{}
	for _, tok := range exprToken.FindAllString(aws.ToString(p.KeyConditionExpression), -1) {
		used[tok] = true
	}
	q := &dynamodb.QueryInput{
		TableName:              p.TableName,
		IndexName:              p.IndexName,
		KeyConditionExpression: p.KeyConditionExpression,
		KeyConditions:          p.KeyConditions,
		ExclusiveStartKey:      p.ExclusiveStartKey,
		Limit:                  p.Limit,
		ScanIndexForward:       p.ScanIndexForward,
		ConsistentRead:         aws.Bool(p.IndexName == nil),
	}
	for k, v := range p.ExpressionAttributeNames {
		if used[k] {
			if q.ExpressionAttributeNames == nil {
				q.ExpressionAttributeNames = map[string]string{}
			}
			q.ExpressionAttributeNames[k] = v
		}
	}
	for k, v := range p.ExpressionAttributeValues {
		if used[k] {
			if q.ExpressionAttributeValues == nil {
				q.ExpressionAttributeValues = map[string]types.AttributeValue{}
			}
			q.ExpressionAttributeValues[k] = v
		}
	}
	out, err := m.Reader.Query(ctx, q)
	if err != nil {
		m.fail(fmt.Errorf("awsbench: repeat a Query of %s: %w", aws.ToString(p.TableName), err))
		return nil
	}
	return out.Items
}

// tableSchema is what the meter needs of a table's description.
type tableSchema struct {
	keys    []string
	indexes []indexSchema
}

// indexSchema describes a global secondary index.
type indexSchema struct {
	keys []string
	// all: the index projects every attribute; otherwise include lists
	// the non-key attributes it projects.
	all     bool
	include []string
}

// schema describes table, once.
func (m *CapacityMeter) schema(ctx context.Context, table string) *tableSchema {
	m.mu.Lock()
	s, ok := m.tables[table]
	m.mu.Unlock()
	if ok {
		return s
	}
	var desc *dynamodb.DescribeTableOutput
	var err error
	m.timed(func() {
		desc, err = m.Reader.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	})
	if err != nil {
		m.fail(fmt.Errorf("awsbench: describe table %s: %w", table, err))
		return &tableSchema{}
	}
	s = &tableSchema{keys: keyNames(desc.Table.KeySchema)}
	for _, g := range desc.Table.GlobalSecondaryIndexes {
		ix := indexSchema{keys: keyNames(g.KeySchema)}
		if g.Projection != nil {
			ix.all = g.Projection.ProjectionType == types.ProjectionTypeAll
			ix.include = g.Projection.NonKeyAttributes
		}
		s.indexes = append(s.indexes, ix)
	}
	m.mu.Lock()
	if m.tables == nil {
		m.tables = make(map[string]*tableSchema)
	}
	m.tables[table] = s
	m.mu.Unlock()
	return s
}

func keyNames(ks []types.KeySchemaElement) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = aws.ToString(k.AttributeName)
	}
	return out
}

// keyOf returns the key attributes of an item of table.
func (m *CapacityMeter) keyOf(ctx context.Context, table string, item map[string]types.AttributeValue) map[string]types.AttributeValue {
	key := map[string]types.AttributeValue{}
	for _, k := range m.schema(ctx, table).keys {
		if v, ok := item[k]; ok {
			key[k] = v
		}
	}
	return key
}

// indexWrites returns the write units a change of an item from before to
// after costs in table's global secondary indexes.
func (m *CapacityMeter) indexWrites(ctx context.Context, table string, before, after map[string]types.AttributeValue) float64 {
	s := m.schema(ctx, table)
	units := 0.0
	for _, ix := range s.indexes {
		eb, ea := ix.entry(s.keys, before), ix.entry(s.keys, after)
		switch {
		case eb == nil && ea == nil:
		case eb == nil:
			units += writeUnits(dynamo.ItemSize(ea))
		case ea == nil:
			units += writeUnits(dynamo.ItemSize(eb))
		case !sameAttrs(eb, ea, ix.keys):
			units += writeUnits(dynamo.ItemSize(eb)) + writeUnits(dynamo.ItemSize(ea))
		case !reflect.DeepEqual(eb, ea):
			units += writeUnits(max(dynamo.ItemSize(eb), dynamo.ItemSize(ea)))
		}
	}
	return units
}

// entry is the index entry of item, nil when the item is not in the index
// (it lacks a key attribute of the index).
func (ix indexSchema) entry(tableKeys []string, item map[string]types.AttributeValue) map[string]types.AttributeValue {
	if item == nil {
		return nil
	}
	for _, k := range ix.keys {
		if _, ok := item[k]; !ok {
			return nil
		}
	}
	if ix.all {
		return item
	}
	e := map[string]types.AttributeValue{}
	for _, names := range [][]string{tableKeys, ix.keys, ix.include} {
		for _, k := range names {
			if v, ok := item[k]; ok {
				e[k] = v
			}
		}
	}
	return e
}

// sameAttrs reports whether a and b have equal values of names.
func sameAttrs(a, b map[string]types.AttributeValue, names []string) bool {
	for _, k := range names {
		if !reflect.DeepEqual(a[k], b[k]) {
			return false
		}
	}
	return true
}
