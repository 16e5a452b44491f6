package dynalitetest

import (
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/superstep/superstep/internal/mototest"
)

// BenchmarkEmulators times the requests of a chained superstep, one at a
// time through the real client, on dynalite and on moto: a PutItem of a
// new ~900-byte step item, a GetItem, and a Query for the newest item
// (Limit 1, newest first) of a partition holding partition items, as a
// run's partition holds its steps. Not in make bench (bench/README.md
// records the figures):
//
//	go test -run '^$' -bench Emulators -benchtime 200x ./internal/dynalitetest/
func BenchmarkEmulators(b *testing.B) {
	emulators := []struct {
		name string
		cfg  func(b *testing.B) aws.Config
	}{
		{"dynalite", func(b *testing.B) aws.Config { return Start(b).Config }},
		{"moto", func(b *testing.B) aws.Config { return mototest.Start(b).Config }},
	}
	for _, emu := range emulators {
		for _, partition := range []int{10, 10_000} {
			b.Run(fmt.Sprintf("%s/partition=%d", emu.name, partition), func(b *testing.B) {
				client := dynamodb.NewFromConfig(emu.cfg(b))
				ctx := b.Context()
				createTable(b, client, "bench")
				pad := make([]byte, 800)
				for i := range pad {
					pad[i] = 'x'
				}
				item := func(pk string, step int) map[string]types.AttributeValue {
					return map[string]types.AttributeValue{
						"pk": &types.AttributeValueMemberS{Value: pk},
						"sk": &types.AttributeValueMemberS{Value: fmt.Sprintf("STEP#%09d", step)},
						"v":  &types.AttributeValueMemberS{Value: string(pad)},
					}
				}
				// Fill the partition in batches of 25.
				for i := 0; i < partition; i += 25 {
					var reqs []types.WriteRequest
					for j := i; j < min(i+25, partition); j++ {
						reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: item("RUN#a", j)}})
					}
					out, err := client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"bench": reqs}})
					if err != nil {
						b.Fatal(err)
					}
					if len(out.UnprocessedItems) > 0 {
						b.Fatal("unprocessed items")
					}
				}
				step := partition
				b.Run("PutItem", func(b *testing.B) {
					for b.Loop() {
						_, err := client.PutItem(ctx, &dynamodb.PutItemInput{
							TableName:           aws.String("bench"),
							Item:                item("RUN#b", step),
							ConditionExpression: aws.String("attribute_not_exists(sk)"),
						})
						if err != nil {
							b.Fatal(err)
						}
						step++
					}
				})
				b.Run("GetItem", func(b *testing.B) {
					key := item("RUN#a", partition/2)
					delete(key, "v")
					for b.Loop() {
						if _, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("bench"), Key: key, ConsistentRead: aws.Bool(true)}); err != nil {
							b.Fatal(err)
						}
					}
				})
				b.Run("QueryNewest", func(b *testing.B) {
					for b.Loop() {
						out, err := client.Query(ctx, &dynamodb.QueryInput{
							TableName:                 aws.String("bench"),
							KeyConditionExpression:    aws.String("pk = :pk"),
							ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: "RUN#a"}},
							ScanIndexForward:          aws.Bool(false),
							Limit:                     aws.Int32(1),
							ConsistentRead:            aws.Bool(true),
						})
						if err != nil {
							b.Fatal(err)
						}
						if len(out.Items) != 1 {
							b.Fatalf("Query returned %d items, want 1", len(out.Items))
						}
					}
				})
			})
		}
	}
}
