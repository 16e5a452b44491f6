package awsbench_test

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
)

// partitionMeter is an SDK middleware that notes, for every DynamoDB write
// request made (PutItem, UpdateItem, DeleteItem, and each item of
// BatchWriteItem and TransactWriteItems), its partition key value and the
// second it was made in, to find the peak write requests per second per
// partition key value: DynamoDB serves at most 1,000 write units a second
// per partition key value. Each write is at least one write unit, and
// exactly one for items under 1 KB (task results, counters, leases of the
// fan-out), so the peak is a lower bound of the peak write units per
// second. It also counts the attempts DynamoDB throttled (the SDK retries
// them): moto never throttles, so on moto they are 0.
//
// The peak per second measures how fast moto served the harness, not what
// Lambda would send; the writes per partition key value over the whole
// run (total) do not depend on it: at 1,000 WRU/s per value, a value that
// takes w writes needs at least w/1,000 s, however the writes are spread.
type partitionMeter struct {
	mu        sync.Mutex
	perSecond map[string]map[int64]int // pk -> unix second -> writes
	total     map[string]int           // pk -> writes
	reads     map[string]int           // pk -> GetItem and Query requests
	throttled int
}

func (p *partitionMeter) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.perSecond, p.total, p.reads, p.throttled = nil, nil, nil, 0
}

// mostRead returns the most GetItem and Query requests made to one
// partition key value over the run (each at least 1 RRU strongly
// consistent), and the key.
func (p *partitionMeter) mostRead() (int, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	best, key := 0, ""
	for pk, n := range p.reads {
		if n > best {
			best, key = n, pk
		}
	}
	return best, key
}

// busiest returns the most writes made to one partition key value over the
// run, the key, and the number of values written to.
func (p *partitionMeter) busiest() (int, string, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	best, key := 0, ""
	for pk, n := range p.total {
		if n > best {
			best, key = n, pk
		}
	}
	return best, key, len(p.total)
}

// Install adds the middleware to a client's stack: the write notes at
// Initialize (once per request), the throttling count at Finalize after
// the retry middleware (once per attempt).
func (p *partitionMeter) Install(stack *middleware.Stack) error {
	if err := stack.Initialize.Add(middleware.InitializeMiddlewareFunc("superstep.awsbench.partitions", p.handle), middleware.After); err != nil {
		return err
	}
	return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("superstep.awsbench.throttles", func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
		out, md, err := next.HandleFinalize(ctx, in)
		var ae smithy.APIError
		if errors.As(err, &ae) {
			switch ae.ErrorCode() {
			case "ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded":
				p.mu.Lock()
				p.throttled++
				p.mu.Unlock()
			}
		}
		return out, md, err
	}), middleware.After)
}

func (p *partitionMeter) handle(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	var pks []string
	pkOf := func(m map[string]types.AttributeValue) {
		if v, ok := m["pk"].(*types.AttributeValueMemberS); ok {
			pks = append(pks, v.Value)
		}
	}
	var reads []string
	switch r := in.Parameters.(type) {
	case *dynamodb.GetItemInput:
		if v, ok := r.Key["pk"].(*types.AttributeValueMemberS); ok {
			reads = append(reads, v.Value)
		}
	case *dynamodb.QueryInput:
		if v, ok := r.ExpressionAttributeValues[":pk"].(*types.AttributeValueMemberS); ok {
			reads = append(reads, v.Value)
		}
	case *dynamodb.PutItemInput:
		pkOf(r.Item)
	case *dynamodb.UpdateItemInput:
		pkOf(r.Key)
	case *dynamodb.DeleteItemInput:
		pkOf(r.Key)
	case *dynamodb.BatchWriteItemInput:
		for _, reqs := range r.RequestItems {
			for _, w := range reqs {
				switch {
				case w.PutRequest != nil:
					pkOf(w.PutRequest.Item)
				case w.DeleteRequest != nil:
					pkOf(w.DeleteRequest.Key)
				}
			}
		}
	case *dynamodb.TransactWriteItemsInput:
		for _, w := range r.TransactItems {
			switch {
			case w.Put != nil:
				pkOf(w.Put.Item)
			case w.Update != nil:
				pkOf(w.Update.Key)
			case w.Delete != nil:
				pkOf(w.Delete.Key)
			case w.ConditionCheck != nil:
				pkOf(w.ConditionCheck.Key)
			}
		}
	}
	if len(reads) > 0 {
		p.mu.Lock()
		if p.reads == nil {
			p.reads = map[string]int{}
		}
		for _, pk := range reads {
			p.reads[pk]++
		}
		p.mu.Unlock()
	}
	if len(pks) > 0 {
		sec := time.Now().Unix()
		p.mu.Lock()
		if p.perSecond == nil {
			p.perSecond = map[string]map[int64]int{}
			p.total = map[string]int{}
		}
		for _, pk := range pks {
			if p.perSecond[pk] == nil {
				p.perSecond[pk] = map[int64]int{}
			}
			p.perSecond[pk][sec]++
			p.total[pk]++
		}
		p.mu.Unlock()
	}
	return next.HandleInitialize(ctx, in)
}

// peak returns the most writes made in one second to one partition key
// value, the key, and the throttled attempts counted.
func (p *partitionMeter) peak() (int, string, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	best, key := 0, ""
	for pk, secs := range p.perSecond {
		for _, n := range secs {
			if n > best {
				best, key = n, pk
			}
		}
	}
	return best, key, p.throttled
}
