package dynamo_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/superstep/superstep/pkg/store/dynamo"
)

// capacity estimates the request units DynamoDB would charge for the calls
// of a client, per operation. moto answers ReturnConsumedCapacity with a
// constant, so the estimate is computed here, from DynamoDB's rules:
//
//   - an item's size is the sum of its attribute names and values (strings
//     and binaries by length, numbers by about one byte per two digits,
//     maps and lists with 3 bytes plus 1 per element);
//   - a write costs 1 WRU per KB of the larger of the old and the new item
//     (at least 1), twice that in a transaction; a failed conditional
//     write costs the same;
//   - a strongly consistent read costs 1 RRU per 4 KB of the whole item,
//     whatever the projection (at least 1, also for a missing item);
//     BatchGetItem rounds each item, Query the sum of the items it reads;
//     a ConditionCheck in a transaction costs 2 RRU per 4 KB;
//   - an item in a global secondary index costs a write of its projection
//     plus 100 bytes when it enters, leaves or changes in the index.
//
// To know the whole size of the items read with a projection, and the old
// item of a write, it keeps a copy of every item written through the
// client: tests must write the table through it only.
type capacity struct {
	mu    sync.Mutex
	items map[string]map[string]types.AttributeValue
	ops   map[string]*units
}

// units are the request units of one operation.
type units struct {
	Calls    int
	RRU, WRU float64
}

func (u units) sub(b units) units {
	return units{Calls: u.Calls - b.Calls, RRU: u.RRU - b.RRU, WRU: u.WRU - b.WRU}
}

func (u *units) add(b units) {
	u.Calls += b.Calls
	u.RRU += b.RRU
	u.WRU += b.WRU
}

// cost returns the on-demand price of u in dollars per million.
func (u units) cost() float64 { return u.WRU*0.625 + u.RRU*0.125 }

// capacityStats is a snapshot of a capacity estimate.
type capacityStats map[string]units

func (s capacityStats) sub(before capacityStats) capacityStats {
	out := capacityStats{}
	for op, u := range s {
		if d := u.sub(before[op]); d != (units{}) {
			out[op] = d
		}
	}
	return out
}

func (s capacityStats) total() units {
	var t units
	for _, u := range s {
		t.add(u)
	}
	return t
}

func (s capacityStats) String() string {
	var parts []string
	for _, op := range slices.Sorted(maps.Keys(s)) {
		u := s[op]
		parts = append(parts, fmt.Sprintf("%s=%d (%.4g RRU, %.4g WRU)", op, u.Calls, u.RRU, u.WRU))
	}
	return strings.Join(parts, " ")
}

func newCapacity() *capacity {
	return &capacity{items: map[string]map[string]types.AttributeValue{}, ops: map[string]*units{}}
}

func (c *capacity) snapshot() capacityStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := capacityStats{}
	for op, u := range c.ops {
		out[op] = *u
	}
	return out
}

// install adds the estimate to a client's middleware stack.
func (c *capacity) install(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("test.capacity", c.handle), middleware.After)
}

func (c *capacity) handle(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	out, md, err := next.HandleInitialize(ctx, in)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.account(in.Parameters, out.Result, err)
	return out, md, err
}

// Global secondary indexes of the table (see dynamo.CreateTable).
var indexes = []struct {
	hash, rng string
	include   []string
}{
	{"run_graph", "run_pos", []string{"run_status", "run_context"}},
	{"run_status", "run_pos", []string{"run_context"}},
}

func itemID(table string, k map[string]types.AttributeValue) string {
	return table + "\x00" + sval(k["pk"]) + "\x00" + sval(k["sk"])
}

func sval(v types.AttributeValue) string {
	if s, ok := v.(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

func (c *capacity) op(name string) *units {
	u := c.ops[name]
	if u == nil {
		u = &units{}
		c.ops[name] = u
	}
	return u
}

func kb(size int, unit int) float64 { return math.Max(1, math.Ceil(float64(size)/float64(unit))) }

func (c *capacity) size(table string, k map[string]types.AttributeValue) int {
	return dynamo.ItemSize(c.items[itemID(table, k)])
}

// write accounts a write of item (nil: a delete) at key k and returns its
// units; apply says whether it took effect.
func (c *capacity) write(table string, k, item map[string]types.AttributeValue, apply bool) float64 {
	id := itemID(table, k)
	old := c.items[id]
	w := kb(max(dynamo.ItemSize(old), dynamo.ItemSize(item)), 1024)
	for _, ix := range indexes {
		w += indexWrite(ix.hash, ix.rng, ix.include, old, item)
	}
	if apply {
		if item == nil {
			delete(c.items, id)
		} else {
			c.items[id] = item
		}
	}
	return w
}

func indexWrite(hash, rng string, include []string, old, item map[string]types.AttributeValue) float64 {
	entry := func(it map[string]types.AttributeValue) map[string]types.AttributeValue {
		if it == nil || it[hash] == nil || it[rng] == nil {
			return nil
		}
		e := map[string]types.AttributeValue{}
		for _, a := range append([]string{"pk", "sk", hash, rng}, include...) {
			if v, ok := it[a]; ok {
				e[a] = v
			}
		}
		return e
	}
	o, n := entry(old), entry(item)
	size := func(e map[string]types.AttributeValue) float64 { return kb(dynamo.ItemSize(e)+100, 1024) }
	switch {
	case o == nil && n == nil:
		return 0
	case o == nil:
		return size(n)
	case n == nil:
		return size(o)
	case sval(o[hash]) != sval(n[hash]) || sval(o[rng]) != sval(n[rng]):
		return size(o) + size(n)
	case equalItems(o, n):
		return 0
	default:
		return size(n)
	}
}

func equalItems(a, b map[string]types.AttributeValue) bool {
	return reflect.DeepEqual(a, b)
}

func (c *capacity) account(params, result any, err error) {
	var ccf *types.ConditionalCheckFailedException
	failedCondition := errors.As(err, &ccf)
	var tce *types.TransactionCanceledException
	cancelled := errors.As(err, &tce)
	if err != nil && !failedCondition && !cancelled {
		return // nothing reached the table (or the test broke it)
	}
	switch in := params.(type) {
	case *dynamodb.GetItemInput:
		c.op("GetItem").add(units{Calls: 1, RRU: readUnits(in.ConsistentRead) * kb(c.size(aws.ToString(in.TableName), in.Key), 4096)})
	case *dynamodb.BatchGetItemInput:
		var r float64
		for table, ka := range in.RequestItems {
			for _, k := range ka.Keys {
				r += readUnits(ka.ConsistentRead) * kb(c.size(table, k), 4096)
			}
		}
		c.op("BatchGetItem").add(units{Calls: 1, RRU: r})
	case *dynamodb.QueryInput:
		out, _ := result.(*dynamodb.QueryOutput)
		total := 0
		if out != nil {
			for _, it := range out.Items {
				if full, ok := c.items[itemID(aws.ToString(in.TableName), it)]; ok && in.IndexName == nil {
					total += dynamo.ItemSize(full)
				} else {
					total += dynamo.ItemSize(it)
				}
			}
		}
		c.op("Query").add(units{Calls: 1, RRU: readUnits(in.ConsistentRead) * kb(total, 4096)})
	case *dynamodb.PutItemInput:
		c.op("PutItem").add(units{Calls: 1, WRU: c.write(aws.ToString(in.TableName), in.Item, in.Item, err == nil)})
	case *dynamodb.DeleteItemInput:
		c.op("DeleteItem").add(units{Calls: 1, WRU: c.write(aws.ToString(in.TableName), in.Key, nil, err == nil)})
	case *dynamodb.UpdateItemInput:
		table := aws.ToString(in.TableName)
		item := applyUpdate(c.items[itemID(table, in.Key)], in.Key, aws.ToString(in.UpdateExpression), in.ExpressionAttributeNames, in.ExpressionAttributeValues)
		c.op("UpdateItem").add(units{Calls: 1, WRU: c.write(table, in.Key, item, err == nil)})
	case *dynamodb.BatchWriteItemInput:
		var w float64
		for table, reqs := range in.RequestItems {
			for _, r := range reqs {
				if r.PutRequest != nil {
					w += c.write(table, r.PutRequest.Item, r.PutRequest.Item, true)
				} else if r.DeleteRequest != nil {
					w += c.write(table, r.DeleteRequest.Key, nil, true)
				}
			}
		}
		c.op("BatchWriteItem").add(units{Calls: 1, WRU: w})
	case *dynamodb.TransactWriteItemsInput:
		var u units
		u.Calls = 1
		for _, ti := range in.TransactItems {
			switch {
			case ti.Put != nil:
				u.WRU += 2 * c.write(aws.ToString(ti.Put.TableName), ti.Put.Item, ti.Put.Item, err == nil)
			case ti.Update != nil:
				table := aws.ToString(ti.Update.TableName)
				item := applyUpdate(c.items[itemID(table, ti.Update.Key)], ti.Update.Key, aws.ToString(ti.Update.UpdateExpression), ti.Update.ExpressionAttributeNames, ti.Update.ExpressionAttributeValues)
				u.WRU += 2 * c.write(table, ti.Update.Key, item, err == nil)
			case ti.Delete != nil:
				u.WRU += 2 * c.write(aws.ToString(ti.Delete.TableName), ti.Delete.Key, nil, err == nil)
			case ti.ConditionCheck != nil:
				u.RRU += 2 * kb(c.size(aws.ToString(ti.ConditionCheck.TableName), ti.ConditionCheck.Key), 4096)
			}
		}
		c.op("TransactWriteItems").add(u)
	}
}

func readUnits(consistent *bool) float64 {
	if aws.ToBool(consistent) {
		return 1
	}
	return 0.5
}

// applyUpdate returns old (or a new item with key k) after the SET and
// REMOVE clauses of expr, as this package writes them: "#a = :v",
// "#a = if_not_exists(#a, :v)" and "REMOVE #a, #b".
func applyUpdate(old, k map[string]types.AttributeValue, expr string, names map[string]string, values map[string]types.AttributeValue) map[string]types.AttributeValue {
	item := maps.Clone(old)
	if item == nil {
		item = maps.Clone(k)
	}
	name := func(s string) string {
		s = strings.TrimSpace(s)
		if n, ok := names[s]; ok {
			return n
		}
		return s
	}
	set, remove := expr, ""
	if i := strings.Index(expr, "REMOVE "); i >= 0 {
		set, remove = expr[:i], expr[i+len("REMOVE "):]
	}
	set = strings.TrimPrefix(strings.TrimSpace(set), "SET ")
	depth, start := 0, 0
	var clauses []string
	for i, r := range set {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				clauses = append(clauses, set[start:i])
				start = i + 1
			}
		}
	}
	if strings.TrimSpace(set[start:]) != "" {
		clauses = append(clauses, set[start:])
	}
	for _, cl := range clauses {
		lhs, rhs, ok := strings.Cut(cl, "=")
		if !ok {
			continue
		}
		attr, rhs := name(lhs), strings.TrimSpace(rhs)
		if inner, ok := strings.CutPrefix(rhs, "if_not_exists("); ok {
			_, v, _ := strings.Cut(strings.TrimSuffix(inner, ")"), ",")
			if _, exists := item[attr]; !exists {
				item[attr] = values[strings.TrimSpace(v)]
			}
			continue
		}
		item[attr] = values[rhs]
	}
	for _, r := range strings.Split(remove, ",") {
		if r = strings.TrimSpace(r); r != "" {
			delete(item, name(r))
		}
	}
	return item
}
