package dynamo

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

var _ runs.StorageMeter = (*Store)(nil)

// RunStorage implements [runs.StorageMeter]: it reads the run's partition
// (a Query costing its size in read units) and sizes each item as
// DynamoDB bills it (attribute names and values). Step items, task
// results and the blobs they refer to are checkpoints, the values in a
// step item of channels that are segments (named with the segment
// separator) are segments, event batch items and their blobs are events,
// and the run item and its blob are the record, as stored (its compact
// form, runrecord.go), which the Service counts instead of the record's
// JSON.
func (s *Store) RunStorage(ctx context.Context, runID string) (runs.Storage, error) {
	pk := runPK(runID)
	p := dynamodb.NewQueryPaginator(s.client, &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(pk)},
	})
	var (
		out         = runs.Storage{Measured: []string{runs.StorageCheckpoints, runs.StorageEvents, runs.StorageRecords}}
		blobs       = map[string]int64{} // blob id -> bytes
		eventBlobs  = map[string]bool{}
		recordBlobs = map[string]bool{}
	)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return runs.Storage{}, fmt.Errorf("dynamo: measure run %q: Query: %w", runID, err)
		}
		for _, it := range page.Items {
			sk, _ := getS(it, attrSK)
			n := int64(itemSize(it))
			switch {
			case sk == skRun:
				out.RecordBytes += n
				out.Runs = 1
				for _, name := range []string{attrRecord, attrData} {
					if ref, err := docRef(it, name); err == nil && ref != nil {
						recordBlobs[ref.ID] = true
					}
				}
			case strings.HasPrefix(sk, skEvent):
				out.EventBytes += n
				if ref, err := docRef(it, attrData); err == nil && ref != nil {
					eventBlobs[ref.ID] = true
				}
			case strings.HasPrefix(sk, skBlob):
				id, _, _ := strings.Cut(strings.TrimPrefix(sk, skBlob), "#")
				blobs[id] += n
			default:
				seg := int64(0)
				if vals, ok := it[attrVals].(*types.AttributeValueMemberM); ok {
					for name, v := range vals.Value {
						if pregel.IsSegment(name) {
							seg += int64(len(name) + attrSize(v))
						}
					}
				}
				out.SegmentBytes += seg
				out.CheckpointBytes += n - seg
			}
		}
	}
	for id, n := range blobs {
		switch {
		case eventBlobs[id]:
			out.EventBytes += n
		case recordBlobs[id]:
			out.RecordBytes += n
		default:
			out.CheckpointBytes += n
		}
	}
	out.TotalBytes = out.CheckpointBytes + out.SegmentBytes + out.EventBytes + out.RecordBytes
	return out, nil
}

// itemSize is an item's size as DynamoDB counts it: each attribute's name
// and value.
func itemSize(it map[string]types.AttributeValue) int {
	n := 0
	for name, v := range it {
		n += len(name) + attrSize(v)
	}
	return n
}

// attrSize is the size of an attribute value as DynamoDB counts it
// (numbers approximately: their digits).
func attrSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return len(v.Value)/2 + 1
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberM:
		n := 3
		for k, x := range v.Value {
			n += len(k) + attrSize(x) + 1
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, x := range v.Value {
			n += attrSize(x) + 1
		}
		return n
	case *types.AttributeValueMemberSS:
		n := 0
		for _, x := range v.Value {
			n += len(x)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, x := range v.Value {
			n += len(x)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, x := range v.Value {
			n += len(x)/2 + 1
		}
		return n
	}
	return 0
}
