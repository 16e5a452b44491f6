package awsmeter_test

import (
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/superstep/superstep/internal/awsmeter"
	"github.com/superstep/superstep/internal/mototest"
)

func TestMeterCountsRequestsAndBytes(t *testing.T) {
	ctx := t.Context()
	srv := mototest.Start(t)
	var m awsmeter.Meter
	client := dynamodb.NewFromConfig(srv.Config, func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, m.Install)
		o.RetryMaxAttempts = 1
	})
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String("meter"),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatal(err)
	}
	before := m.Snapshot()
	big := make([]byte, 10_000)
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Go(func() {
			_, err := client.PutItem(ctx, &dynamodb.PutItemInput{
				TableName: aws.String("meter"),
				Item: map[string]types.AttributeValue{
					"pk": &types.AttributeValueMemberS{Value: string(rune('a' + i))},
					"v":  &types.AttributeValueMemberB{Value: big},
				},
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if _, err := client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String("meter"),
		Key:       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "a"}},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String("no-such-table"),
		Key:       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "a"}},
	}); err == nil {
		t.Fatal("GetItem on a missing table succeeded")
	}
	used := m.Snapshot().Sub(before)

	put := used.Op("PutItem")
	// Binary values travel base64-encoded: 10,000 bytes are 13,336.
	if put.Requests != 5 || put.RequestBytes < 5*13_336 || put.RequestBytes > 5*14_000 || put.Errors != 0 {
		t.Errorf("PutItem: %+v, want 5 requests of about 13.4 KB each", put)
	}
	get := used.Op("GetItem")
	if get.Requests != 2 || get.Errors != 1 || get.ResponseBytes < 13_336 {
		t.Errorf("GetItem: %+v, want 2 requests, 1 error, a response over 13.3 KB", get)
	}
	if names := used.Names(); len(names) != 2 {
		t.Errorf("operations %v, want GetItem and PutItem", names)
	}
	if tot := used.Total(); tot.Requests != 7 || tot.RequestBytes != put.RequestBytes+get.RequestBytes {
		t.Errorf("Total() = %+v", tot)
	}
	if c := m.Snapshot().Op("CreateTable"); c.Requests != 1 {
		t.Errorf("CreateTable: %+v, want 1 request", c)
	}
	m.Reset()
	if tot := m.Snapshot().Total(); tot != (awsmeter.Op{}) {
		t.Errorf("after Reset: %+v", tot)
	}
}
