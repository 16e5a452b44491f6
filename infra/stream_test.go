package infra

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/superstep/superstep/pkg/store/dynamo"
)

// sweepSample is the sample stream event of SweepFunction (for
// `sam local invoke SweepFunction -e ...`), relative to this package.
const sweepSample = "../events/dynamodb-run-expired.json"

// The filter of SweepFunction's stream event source, as JSON: removals by
// the TTL process (DynamoDB's service identity) of run records. A user's
// DeleteItem has no userIdentity; claims expire by TTL too, under another
// sort key.
var wantSweepFilter = map[string]any{
	"eventName": []any{"REMOVE"},
	"userIdentity": map[string]any{
		"type":        []any{"Service"},
		"principalId": []any{"dynamodb.amazonaws.com"},
	},
	"dynamodb": map[string]any{
		"Keys": map[string]any{
			"sk": map[string]any{"S": []any{"~RUN", "~THREAD"}},
		},
	},
}

// TestSweepStream: the table has a keys-only stream; SweepFunction is its
// only reader, with partial batch responses, bounded retries and an SQS
// on-failure destination, through a filter that passes exactly the TTL
// deletions of run and thread records.
func TestSweepStream(t *testing.T) {
	tp := loadTemplate(t)
	table := tp.resource(t, "Table", "AWS::DynamoDB::Table")
	if got := asMap(table.Properties["StreamSpecification"])["StreamViewType"]; got != "KEYS_ONLY" {
		t.Errorf("Table: StreamSpecification.StreamViewType %v, want KEYS_ONLY (the sweep reads keys only)", got)
	}

	var streams []string
	for _, fn := range tp.resources("AWS::Serverless::Function") {
		for name, ev := range asMap(fn.Properties["Events"]) {
			if typ := asMap(ev)["Type"]; typ == "DynamoDB" || typ == "Kinesis" {
				streams = append(streams, fn.ID+"."+name)
			}
		}
	}
	if !slices.Equal(streams, []string{"SweepFunction.Expiries"}) {
		t.Fatalf("stream event sources %v, want [SweepFunction.Expiries]", streams)
	}

	fn := tp.resource(t, "SweepFunction", "AWS::Serverless::Function")
	p := asMap(asMap(asMap(fn.Properties["Events"])["Expiries"])["Properties"])
	if id, attr, ok := refTarget(p["Stream"]); !ok || id != "Table" || attr != "StreamArn" {
		t.Errorf("Expiries: Stream %v, want !GetAtt Table.StreamArn", p["Stream"])
	}
	// TRIM_HORIZON: records written before the mapping is enabled, or
	// while it is disabled (up to the stream's 24 hours), are read too.
	if p["StartingPosition"] != "TRIM_HORIZON" {
		t.Errorf("Expiries: StartingPosition %v, want TRIM_HORIZON", p["StartingPosition"])
	}
	if n, ok := asInt(p["BatchSize"]); !ok || n < 1 || n > 100 {
		t.Errorf("Expiries: BatchSize %v, want 1..100", p["BatchSize"])
	}
	if !slices.Contains(asList(p["FunctionResponseTypes"]), any("ReportBatchItemFailures")) {
		t.Errorf("Expiries: FunctionResponseTypes %v, want [ReportBatchItemFailures] (HandleStream reports the failed record)", p["FunctionResponseTypes"])
	}
	if b, ok := asBool(p["BisectBatchOnFunctionError"]); !ok || !b {
		t.Errorf("Expiries: BisectBatchOnFunctionError %v, want true", p["BisectBatchOnFunctionError"])
	}
	// The default, -1, retries a failing batch until its records leave
	// the stream, holding up the shard for a day.
	if n, ok := asInt(p["MaximumRetryAttempts"]); !ok || n < 1 || n > 100 {
		t.Errorf("Expiries: MaximumRetryAttempts %v, want 1..100", p["MaximumRetryAttempts"])
	}
	onFailure := asMap(asMap(p["DestinationConfig"])["OnFailure"])
	if id, attr, ok := refTarget(onFailure["Destination"]); !ok || id != "SweepDeadLetterQueue" || attr != "Arn" {
		t.Errorf("Expiries: DestinationConfig.OnFailure.Destination %v, want !GetAtt SweepDeadLetterQueue.Arn", onFailure["Destination"])
	} else {
		tp.resource(t, id, "AWS::SQS::Queue")
	}

	filters := asList(asMap(p["FilterCriteria"])["Filters"])
	if len(filters) != 1 {
		t.Fatalf("Expiries: FilterCriteria.Filters %v, want one filter", filters)
	}
	pattern, ok := asMap(filters[0])["Pattern"].(string)
	if !ok {
		t.Fatalf("Expiries: filter Pattern %v is not a string (Lambda takes the pattern as a JSON string)", asMap(filters[0])["Pattern"])
	}
	if len(pattern) > 4096 {
		t.Errorf("Expiries: filter Pattern is %d bytes, over Lambda's 4096", len(pattern))
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(pattern), &got); err != nil {
		t.Fatalf("Expiries: filter Pattern is not JSON: %v\n%s", err, pattern)
	}
	if !reflect.DeepEqual(got, wantSweepFilter) {
		t.Errorf("Expiries: filter pattern\n got %v\nwant %v", got, wantSweepFilter)
	}

	// The sort keys the filter passes are the store's run and thread
	// record keys, and the filter passes the sample event and nothing
	// else like it.
	for _, sk := range asList(asMap(asMap(asMap(asMap(got["dynamodb"])["Keys"])["sk"]))["S"]) {
		_, run := dynamo.RunRecordKey("RUN#r1", fmt.Sprint(sk))
		_, thread := dynamo.ThreadRecordKey("THREAD#t1", fmt.Sprint(sk))
		if !run && !thread {
			t.Errorf("the filter passes sort key %v, which is not a run record's (dynamo.RunRecordKey) or a thread record's (dynamo.ThreadRecordKey)", sk)
		}
	}
	sample := sampleStreamRecord(t)
	for name, tc := range map[string]struct {
		edit func(r map[string]any)
		want bool
	}{
		"TTL deletion of a run record (the sample)": {func(map[string]any) {}, true},
		"TTL deletion of a thread record": {func(r map[string]any) {
			keys(r)["pk"] = map[string]any{"S": "THREAD#t1"}
			keys(r)["sk"] = map[string]any{"S": "~THREAD"}
		}, true},
		"user's DeleteItem of a run record": {func(r map[string]any) { delete(r, "userIdentity") }, false},
		"another service's deletion": {func(r map[string]any) {
			r["userIdentity"] = map[string]any{"type": "Service", "principalId": "example.amazonaws.com"}
		}, false},
		"INSERT of a run record": {func(r map[string]any) { r["eventName"] = "INSERT" }, false},
		"MODIFY of a run record": {func(r map[string]any) { r["eventName"] = "MODIFY" }, false},
		"TTL deletion of a claim": {func(r map[string]any) {
			keys(r)["sk"] = map[string]any{"S": "CLAIM#0000000003#a1b2"}
		}, false},
		"TTL deletion of a step": {func(r map[string]any) {
			keys(r)["sk"] = map[string]any{"S": "STEP#0000000003"}
		}, false},
	} {
		r := clone(sample)
		tc.edit(r)
		if pass := matchPattern(t, got, r); pass != tc.want {
			t.Errorf("%s: the filter passes it: %t, want %t", name, pass, tc.want)
		}
	}
}

// TestSweepSampleEvent: the sample event is a DynamoDB stream event of
// the table's shape: one TTL removal of a run record, keys only.
func TestSweepSampleEvent(t *testing.T) {
	data, err := os.ReadFile(sweepSample)
	if err != nil {
		t.Fatal(err)
	}
	var ev events.DynamoDBEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		t.Fatalf("%s: %v", sweepSample, err)
	}
	if len(ev.Records) != 1 {
		t.Fatalf("%s: %d records, want 1", sweepSample, len(ev.Records))
	}
	r := ev.Records[0]
	if r.EventName != "REMOVE" || r.EventSource != "aws:dynamodb" || r.Change.StreamViewType != "KEYS_ONLY" || r.Change.SequenceNumber == "" {
		t.Errorf("%s: eventName %q, eventSource %q, StreamViewType %q, SequenceNumber %q; want a REMOVE from a KEYS_ONLY aws:dynamodb stream",
			sweepSample, r.EventName, r.EventSource, r.Change.StreamViewType, r.Change.SequenceNumber)
	}
	if r.UserIdentity == nil || r.UserIdentity.Type != "Service" || r.UserIdentity.PrincipalID != "dynamodb.amazonaws.com" {
		t.Errorf("%s: userIdentity %+v, want the TTL process's", sweepSample, r.UserIdentity)
	}
	if len(r.Change.NewImage) > 0 || len(r.Change.OldImage) > 0 {
		t.Errorf("%s: a KEYS_ONLY record has no images", sweepSample)
	}
	if got := slices.Sorted(maps.Keys(r.Change.Keys)); !slices.Equal(got, []string{"pk", "sk"}) {
		t.Fatalf("%s: keys %v, want pk and sk", sweepSample, got)
	}
	if id, ok := dynamo.RunRecordKey(r.Change.Keys["pk"].String(), r.Change.Keys["sk"].String()); !ok || id != "example-run" {
		t.Errorf("%s: keys %v are not the record of run example-run", sweepSample, r.Change.Keys)
	}
}

// sampleStreamRecord returns the record of the sample event as plain
// JSON values.
func sampleStreamRecord(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile(sweepSample)
	if err != nil {
		t.Fatal(err)
	}
	var ev struct{ Records []map[string]any }
	if err := json.Unmarshal(data, &ev); err != nil || len(ev.Records) != 1 {
		t.Fatalf("%s: %d records, %v; want one", sweepSample, len(ev.Records), err)
	}
	return ev.Records[0]
}

func keys(r map[string]any) map[string]any { return asMap(asMap(r["dynamodb"])["Keys"]) }

// clone deep-copies plain JSON values.
func clone(m map[string]any) map[string]any {
	b, _ := json.Marshal(m)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}

// matchPattern reports whether Lambda's event filtering passes record r
// with pattern: every field of the pattern must be in r; a nested object
// matches a nested object, and a list of strings matches a string equal
// to one of them. Other operators (prefix, anything-but, exists, numeric)
// are not implemented: the test fails on them.
func matchPattern(t *testing.T, pattern, r map[string]any) bool {
	t.Helper()
	for k, pv := range pattern {
		rv, ok := r[k]
		if !ok {
			return false
		}
		switch pv := pv.(type) {
		case map[string]any:
			sub, ok := rv.(map[string]any)
			if !ok || !matchPattern(t, pv, sub) {
				return false
			}
		case []any:
			s, ok := rv.(string)
			if !ok {
				return false
			}
			found := false
			for _, want := range pv {
				w, ok := want.(string)
				if !ok {
					t.Fatalf("pattern field %s: %v is not an exact string match (not implemented here)", k, want)
				}
				found = found || w == s
			}
			if !found {
				return false
			}
		default:
			t.Fatalf("pattern field %s: %v is neither an object nor a list of values", k, pv)
		}
	}
	return true
}
