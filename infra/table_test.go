package infra

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/superstep/superstep/internal/mototest"
	"github.com/superstep/superstep/pkg/store/dynamo"
)

// tableSchema is what the code depends on in a table: keys, attribute
// types, indexes with their keys and projections, and TTL.
type tableSchema struct {
	Keys       string            // "pk HASH, sk RANGE"
	Attributes map[string]string // name -> type
	Indexes    map[string]string // name -> "keys; projection [attributes]"
	TTL        string
}

// TestTableMatchesStore compares the table of template.yaml with the one
// dynamo.CreateTable makes (on the moto emulator): pkg/store/dynamo is the
// source of truth for the key schema, the attribute types, the indexes and
// the TTL attribute.
func TestTableMatchesStore(t *testing.T) {
	tp := loadTemplate(t)
	got := templateSchema(t, tp)

	srv := mototest.Start(t)
	client := dynamodb.NewFromConfig(srv.Config)
	var b [4]byte
	rand.Read(b[:])
	name := "infra-" + hex.EncodeToString(b[:])
	ctx := t.Context()
	if err := dynamo.CreateTable(ctx, client, name); err != nil {
		t.Fatal(err)
	}
	desc, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	ttl, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	td := desc.Table
	want := tableSchema{Attributes: map[string]string{}, Indexes: map[string]string{}}
	for _, k := range td.KeySchema {
		want.Keys += fmt.Sprintf("%s %s, ", aws.ToString(k.AttributeName), k.KeyType)
	}
	for _, a := range td.AttributeDefinitions {
		want.Attributes[aws.ToString(a.AttributeName)] = string(a.AttributeType)
	}
	for _, ix := range td.GlobalSecondaryIndexes {
		s := ""
		for _, k := range ix.KeySchema {
			s += fmt.Sprintf("%s %s, ", aws.ToString(k.AttributeName), k.KeyType)
		}
		na := slices.Clone(ix.Projection.NonKeyAttributes)
		slices.Sort(na)
		want.Indexes[aws.ToString(ix.IndexName)] = fmt.Sprintf("%s; %s %v", s, ix.Projection.ProjectionType, na)
	}
	if d := ttl.TimeToLiveDescription; d != nil {
		want.TTL = aws.ToString(d.AttributeName)
	}

	if got.Keys != want.Keys {
		t.Errorf("key schema: template %q, store %q", got.Keys, want.Keys)
	}
	if !maps.Equal(got.Attributes, want.Attributes) {
		t.Errorf("attribute definitions: template %v, store %v", got.Attributes, want.Attributes)
	}
	if !maps.Equal(got.Indexes, want.Indexes) {
		t.Errorf("global secondary indexes:\ntemplate %v\n   store %v", got.Indexes, want.Indexes)
	}
	if got.TTL != want.TTL {
		t.Errorf("TTL attribute: template %q, store %q", got.TTL, want.TTL)
	}
	for _, ix := range []string{dynamo.IndexByGraph, dynamo.IndexByStatus} {
		if _, ok := got.Indexes[ix]; !ok {
			t.Errorf("template has no index %s", ix)
		}
	}
}

// templateSchema reads the schema of the Table resource.
func templateSchema(t *testing.T, tp template) tableSchema {
	t.Helper()
	p := tp.resource(t, "Table", "AWS::DynamoDB::Table").Properties
	s := tableSchema{Attributes: map[string]string{}, Indexes: map[string]string{}}
	keys := func(v any) string {
		out := ""
		for _, k := range asList(v) {
			k := asMap(k)
			out += fmt.Sprintf("%v %v, ", k["AttributeName"], k["KeyType"])
		}
		return out
	}
	s.Keys = keys(p["KeySchema"])
	for _, a := range asList(p["AttributeDefinitions"]) {
		a := asMap(a)
		s.Attributes[fmt.Sprint(a["AttributeName"])] = fmt.Sprint(a["AttributeType"])
	}
	for _, ix := range asList(p["GlobalSecondaryIndexes"]) {
		ix := asMap(ix)
		proj := asMap(ix["Projection"])
		var na []string
		for _, a := range asList(proj["NonKeyAttributes"]) {
			na = append(na, fmt.Sprint(a))
		}
		slices.Sort(na)
		s.Indexes[fmt.Sprint(ix["IndexName"])] = fmt.Sprintf("%s; %v %v", keys(ix["KeySchema"]), proj["ProjectionType"], na)
	}
	s.TTL = fmt.Sprint(asMap(p["TimeToLiveSpecification"])["AttributeName"])
	return s
}
