package awsbench_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/superstep/superstep/bench/awsbench"

	"github.com/superstep/superstep/pkg/store/dynamo"
)

func TestItemSize(t *testing.T) {
	for _, tc := range []struct {
		name string
		item map[string]types.AttributeValue
		want int
	}{
		{"nil", nil, 0},
		{"string", map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "abc"}}, 2 + 3},
		{"binary", map[string]types.AttributeValue{"v": &types.AttributeValueMemberB{Value: make([]byte, 1000)}}, 1 + 1000},
		// 12345: 5 significant digits, 3 bytes + 1; 1000: 1 digit.
		{"numbers", map[string]types.AttributeValue{
			"a": &types.AttributeValueMemberN{Value: "12345"},
			"b": &types.AttributeValueMemberN{Value: "1000"},
			"c": &types.AttributeValueMemberN{Value: "-0.05"},
		}, 1 + 4 + 1 + 2 + 1 + 2},
		{"bool and null", map[string]types.AttributeValue{
			"t": &types.AttributeValueMemberBOOL{Value: true},
			"n": &types.AttributeValueMemberNULL{Value: true},
		}, 2 + 2},
		{"map and list", map[string]types.AttributeValue{
			"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k": &types.AttributeValueMemberS{Value: "vv"}}},
			"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "x"}}},
		}, (1 + 3 + 1 + 1 + 2) + (1 + 3 + 1 + 1)},
	} {
		if got := dynamo.ItemSize(tc.item); got != tc.want {
			t.Errorf("%s: ItemSize = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// The meter charges known items what the DynamoDB developer guide says.
func TestCapacityMeter(t *testing.T) {
	srv := moto.Start(t)
	ctx := t.Context()
	plain := dynamodb.NewFromConfig(srv.Config)
	table := "capacity-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	_, err := plain.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("g"), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange},
		},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName:  aws.String("by_g"),
			KeySchema:  []types.KeySchemaElement{{AttributeName: aws.String("g"), KeyType: types.KeyTypeHash}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		}},
		BillingMode: types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatal(err)
	}
	m := &awsbench.CapacityMeter{Reader: plain}
	cfg := srv.Config.Copy()
	cfg.APIOptions = append(cfg.APIOptions, m.Install)
	c := dynamodb.NewFromConfig(cfg)

	key := func(sk string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "p"}, "sk": &types.AttributeValueMemberS{Value: sk}}
	}
	// item is key(sk) with a binary attribute making it size bytes.
	item := func(sk string, size int) map[string]types.AttributeValue {
		it := key(sk)
		it["v"] = &types.AttributeValueMemberB{Value: make([]byte, size-dynamo.ItemSize(it)-1)}
		return it
	}
	step := func(name string, want awsbench.Units, call func() error) {
		t.Helper()
		before := m.Snapshot()
		if err := call(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var got awsbench.Units
		for op, u := range m.Snapshot() {
			b := before[op]
			got.Read += u.Read - b.Read
			got.Write += u.Write - b.Write
			got.IndexWrite += u.IndexWrite - b.IndexWrite
		}
		if got != want {
			t.Errorf("%s: %+v, want %+v", name, got, want)
		}
	}

	step("PutItem of 3000 bytes", awsbench.Units{Write: 3}, func() error {
		_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("a", 3000)})
		return err
	})
	step("consistent GetItem, projected", awsbench.Units{Read: 1}, func() error {
		_, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("a"), ConsistentRead: aws.Bool(true), ProjectionExpression: aws.String("pk")})
		return err
	})
	step("eventually consistent GetItem of a missing item", awsbench.Units{Read: 0.5}, func() error {
		_, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("none")})
		return err
	})
	step("UpdateItem growing it to 5000 bytes", awsbench.Units{Write: 5}, func() error {
		_, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(table), Key: key("a"),
			UpdateExpression:          aws.String("SET w = :w"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":w": &types.AttributeValueMemberB{Value: make([]byte, 1999)}},
		})
		return err
	})
	// 5000 + 1500 bytes evaluated: 2 units; the projection does not count.
	step("TransactWriteItems: put 1500 bytes, check 5000", awsbench.Units{Write: 2*2 + 2*5}, func() error {
		_, err := c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String(table), Item: item("b", 1500)}},
			{ConditionCheck: &types.ConditionCheck{TableName: aws.String(table), Key: key("a"), ConditionExpression: aws.String("attribute_exists(pk)")}},
		}})
		return err
	})
	step("consistent Query over 6500 bytes, projected", awsbench.Units{Read: 2}, func() error {
		_, err := c.Query(ctx, &dynamodb.QueryInput{
			TableName:                 aws.String(table),
			KeyConditionExpression:    aws.String("#pk = :pk"),
			ExpressionAttributeNames:  map[string]string{"#pk": "pk", "#sk": "sk"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: "p"}},
			ProjectionExpression:      aws.String("#sk"),
			ConsistentRead:            aws.Bool(true),
		})
		return err
	})
	// Not projected: the meter sizes the items the page returned.
	step("consistent Query over 6500 bytes, whole items", awsbench.Units{Read: 2}, func() error {
		_, err := c.Query(ctx, &dynamodb.QueryInput{
			TableName:                 aws.String(table),
			KeyConditionExpression:    aws.String("pk = :pk"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: "p"}},
			ConsistentRead:            aws.Bool(true),
		})
		return err
	})
	step("consistent BatchGetItem of 5000 and 1500 bytes", awsbench.Units{Read: 2 + 1}, func() error {
		_, err := c.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
			table: {Keys: []map[string]types.AttributeValue{key("a"), key("b")}, ConsistentRead: aws.Bool(true)},
		}})
		return err
	})
	// Index entry: pk, sk and g, a few bytes: 1 unit.
	step("PutItem into the index", awsbench.Units{Write: 1 + 1, IndexWrite: 1}, func() error {
		it := key("c")
		it["g"] = &types.AttributeValueMemberS{Value: "x"}
		_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: it})
		return err
	})
	step("UpdateItem changing the index key", awsbench.Units{Write: 1 + 2, IndexWrite: 2}, func() error {
		_, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(table), Key: key("c"),
			UpdateExpression:          aws.String("SET g = :g"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":g": &types.AttributeValueMemberS{Value: "y"}},
		})
		return err
	})
	step("UpdateItem outside the projection", awsbench.Units{Write: 1}, func() error {
		_, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(table), Key: key("c"),
			UpdateExpression:          aws.String("SET note = :o"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":o": &types.AttributeValueMemberS{Value: "z"}},
		})
		return err
	})
	step("failed conditional DeleteItem of 5000 bytes", awsbench.Units{Write: 5}, func() error {
		_, err := c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key("a"), ConditionExpression: aws.String("attribute_not_exists(pk)")})
		if err == nil {
			t.Error("the conditional delete succeeded")
		}
		return nil
	})
	step("DeleteItem of 5000 bytes", awsbench.Units{Write: 5}, func() error {
		_, err := c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key("a")})
		return err
	})
	// A put is charged for the larger of the item it replaces and its own.
	step("PutItem of 500 bytes over 1500", awsbench.Units{Write: 2}, func() error {
		_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("b", 500)})
		return err
	})
	step("BatchWriteItem: put 2500 bytes, delete 500", awsbench.Units{Write: 3 + 1}, func() error {
		_, err := c.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{
			table: {
				{PutRequest: &types.PutRequest{Item: item("d", 2500)}},
				{DeleteRequest: &types.DeleteRequest{Key: key("b")}},
			},
		}})
		return err
	})
	step("PutItem of 100 bytes over 2500", awsbench.Units{Write: 3}, func() error {
		_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("d", 100)})
		return err
	})
	if err := m.Err(); err != nil {
		t.Fatal(err)
	}
	if m.Overhead() <= 0 {
		t.Error("the meter's own reads took no time")
	}
}
