package infra

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
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

// TestSweepStream: the table has a stream of new and old images;
// SweepFunction is its only reader, with partial batch responses, bounded
// retries and an SQS on-failure destination, through a filter that passes
// exactly the TTL deletions of run and thread records (Expiries) and one
// for push notifications (TestPushStream).
func TestSweepStream(t *testing.T) {
	tp := loadTemplate(t)
	table := tp.resource(t, "Table", "AWS::DynamoDB::Table")
	if got := asMap(table.Properties["StreamSpecification"])["StreamViewType"]; got != "NEW_AND_OLD_IMAGES" {
		t.Errorf("Table: StreamSpecification.StreamViewType %v, want NEW_AND_OLD_IMAGES (the push filter reads the run status before and after)", got)
	}

	var streams []string
	for _, fn := range tp.resources("AWS::Serverless::Function") {
		for name, ev := range asMap(fn.Properties["Events"]) {
			if typ := asMap(ev)["Type"]; typ == "DynamoDB" || typ == "Kinesis" {
				streams = append(streams, fn.ID+"."+name)
			}
		}
	}
	slices.Sort(streams)
	if !slices.Equal(streams, []string{"SweepFunction.Expiries", "SweepFunction.PushNotifications"}) {
		t.Fatalf("stream event sources %v, want [SweepFunction.Expiries SweepFunction.PushNotifications]", streams)
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
// the table's shape: one TTL removal of a run record, with its old image.
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
	if r.EventName != "REMOVE" || r.EventSource != "aws:dynamodb" || r.Change.StreamViewType != "NEW_AND_OLD_IMAGES" || r.Change.SequenceNumber == "" {
		t.Errorf("%s: eventName %q, eventSource %q, StreamViewType %q, SequenceNumber %q; want a REMOVE from a NEW_AND_OLD_IMAGES aws:dynamodb stream",
			sweepSample, r.EventName, r.EventSource, r.Change.StreamViewType, r.Change.SequenceNumber)
	}
	if r.UserIdentity == nil || r.UserIdentity.Type != "Service" || r.UserIdentity.PrincipalID != "dynamodb.amazonaws.com" {
		t.Errorf("%s: userIdentity %+v, want the TTL process's", sweepSample, r.UserIdentity)
	}
	if len(r.Change.NewImage) > 0 || r.Change.OldImage["sk"].String() != "~RUN" {
		t.Errorf("%s: a removal has the old image (of a run record) and no new one", sweepSample)
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
				switch w := want.(type) {
				case string:
					found = found || w == s
				case map[string]any:
					// Content filters: {"anything-but": [...]} and
					// {"prefix": "..."}.
					if but, ok := w["anything-but"].([]any); ok && len(w) == 1 {
						found = found || !slices.Contains(but, any(s))
					} else if p, ok := w["prefix"].(string); ok && len(w) == 1 {
						found = found || strings.HasPrefix(s, p)
					} else {
						t.Fatalf("pattern field %s: %v is not a filter implemented here", k, want)
					}
				default:
					t.Fatalf("pattern field %s: %v is not an exact string match (not implemented here)", k, want)
				}
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

// TestPushStream: SweepFunction's PushNotifications mapping reads the same
// stream, with partial batch responses, bounded retries and the sweep's
// dead-letter queue, through filters that pass the changes of run records
// whose status is not running before or after, and new push configs:
// exactly what can change a task's state or needs a first notification.
func TestPushStream(t *testing.T) {
	tp := loadTemplate(t)
	fn := tp.resource(t, "SweepFunction", "AWS::Serverless::Function")
	p := asMap(asMap(asMap(fn.Properties["Events"])["PushNotifications"])["Properties"])
	if id, attr, ok := refTarget(p["Stream"]); !ok || id != "Table" || attr != "StreamArn" {
		t.Errorf("PushNotifications: Stream %v, want !GetAtt Table.StreamArn", p["Stream"])
	}
	if !slices.Contains(asList(p["FunctionResponseTypes"]), any("ReportBatchItemFailures")) {
		t.Errorf("PushNotifications: FunctionResponseTypes %v, want [ReportBatchItemFailures]", p["FunctionResponseTypes"])
	}
	if n, ok := asInt(p["MaximumRetryAttempts"]); !ok || n < 1 || n > 100 {
		t.Errorf("PushNotifications: MaximumRetryAttempts %v, want 1..100", p["MaximumRetryAttempts"])
	}
	if id, _, ok := refTarget(asMap(asMap(p["DestinationConfig"])["OnFailure"])["Destination"]); !ok || id != "SweepDeadLetterQueue" {
		t.Errorf("PushNotifications: on-failure destination %v, want the SweepDeadLetterQueue", p["DestinationConfig"])
	}
	var patterns []map[string]any
	for _, f := range asList(asMap(p["FilterCriteria"])["Filters"]) {
		raw, ok := asMap(f)["Pattern"].(string)
		if !ok || len(raw) > 4096 {
			t.Fatalf("PushNotifications: filter %v: want a JSON string of at most 4096 bytes", f)
		}
		var pat map[string]any
		if err := json.Unmarshal([]byte(raw), &pat); err != nil {
			t.Fatalf("PushNotifications: filter is not JSON: %v\n%s", err, raw)
		}
		patterns = append(patterns, pat)
	}
	record := func(event, sk, oldStatus, newStatus string) map[string]any {
		ddb := map[string]any{"Keys": map[string]any{"pk": map[string]any{"S": "RUN#r1"}, "sk": map[string]any{"S": sk}}, "StreamViewType": "NEW_AND_OLD_IMAGES"}
		if newStatus != "" {
			ddb["NewImage"] = map[string]any{"run_status": map[string]any{"S": newStatus}}
		}
		if oldStatus != "" {
			ddb["OldImage"] = map[string]any{"run_status": map[string]any{"S": oldStatus}}
		}
		return map[string]any{"eventName": event, "eventSource": "aws:dynamodb", "dynamodb": ddb}
	}
	for _, tc := range []struct {
		name string
		rec  map[string]any
		want bool
	}{
		{"run created", record("INSERT", "~RUN", "", "pending"), true},
		{"run started", record("MODIFY", "~RUN", "pending", "running"), true},
		{"a step of a running run", record("MODIFY", "~RUN", "running", "running"), false},
		{"run interrupted", record("MODIFY", "~RUN", "running", "interrupted"), true},
		{"run resumed", record("MODIFY", "~RUN", "interrupted", "pending"), true},
		{"run completed", record("MODIFY", "~RUN", "running", "completed"), true},
		{"paused run cancelled", record("MODIFY", "~RUN", "drained", "cancelled"), true},
		{"TTL removal of a run record", record("REMOVE", "~RUN", "completed", ""), false},
		{"push config stored", record("INSERT", "PUSH#hook", "", ""), true},
		{"push config cursor moved", record("MODIFY", "PUSH#hook", "", ""), false},
		{"step committed", record("INSERT", "STEP#0000000003", "", ""), false},
		{"task result", record("INSERT", "TASK#0000000003#a1", "", ""), false},
	} {
		pass := false
		for _, pat := range patterns {
			pass = pass || matchPattern(t, pat, tc.rec)
		}
		if pass != tc.want {
			t.Errorf("%s: the filters pass it: %t, want %t", tc.name, pass, tc.want)
		}
		// What passes is what the handler acts on.
		sk := asMap(asMap(asMap(tc.rec["dynamodb"])["Keys"])["sk"])["S"].(string)
		if _, isPush := dynamo.PushConfigKey("RUN#r1", sk); tc.want && !isPush {
			if _, ok := dynamo.RunRecordKey("RUN#r1", sk); !ok {
				t.Errorf("%s: passed, but its key is neither a run record's nor a push config's", tc.name)
			}
		}
	}
}
