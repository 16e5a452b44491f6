package dynamo_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// runItem returns run id's item as stored.
func runItem(t *testing.T, e *env, id string) map[string]types.AttributeValue {
	t.Helper()
	out, err := e.client.GetItem(t.Context(), &dynamodb.GetItemInput{
		TableName: aws.String(e.table),
		Key:       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "RUN#" + id}, "sk": &types.AttributeValueMemberS{Value: "~RUN"}},
	})
	if err != nil || out.Item == nil {
		t.Fatalf("GetItem of run %s: %v", id, err)
	}
	return out.Item
}

// runData returns the stored compact record (the rec attribute) of run
// id's item, which must hold no data (the whole record of writers from
// before the compact form).
func runData(t *testing.T, e *env, id string) map[string]json.RawMessage {
	t.Helper()
	it := runItem(t, e, id)
	for _, name := range []string{"data", "data_ref"} {
		if _, ok := it[name]; ok {
			t.Errorf("run %s: item holds %s besides its compact record", id, name)
		}
	}
	b, ok := it["rec"].(*types.AttributeValueMemberB)
	if !ok {
		t.Fatalf("run %s: no inline rec attribute: %v", id, it)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b.Value, &m); err != nil {
		t.Fatalf("run %s: record %s: %v", id, b.Value, err)
	}
	return m
}

// TestRunRecordCompact: a run item's record leaves out what the item's
// attributes hold (id, graph, status, context id, version, created_at),
// step 0 and zero counters, and every way of reading a run gives it back
// whole; RunStorage counts the record as stored.
func TestRunRecordCompact(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEnv(t)
	s := e.store()
	created := time.Date(2026, 11, 27, 10, 0, 0, 123456789, time.UTC)
	stamp := &pregel.Stamp{Version: "v3", Fingerprint: "f00d", Reducers: map[string]string{"messages": "append"}}
	r, ok, err := s.CreateRun(ctx, runs.Run{ID: "c1", Graph: "agent", Status: pregel.RunPending, ContextID: "ctx-9",
		ThreadID: "th", CreatedAt: created, Input: json.RawMessage(`{"q":1}`), GraphVersion: stamp})
	if err != nil || !ok {
		t.Fatalf("CreateRun: created %t, %v", ok, err)
	}
	data := runData(t, e, "c1")
	for _, k := range []string{"run_id", "graph", "status", "context_id", "version", "created_at", "step", "counters"} {
		if _, ok := data[k]; ok {
			t.Errorf("stored record holds %q: %v", k, data)
		}
	}
	for _, k := range []string{"thread_id", "input", "graph_version", "updated_at"} {
		if _, ok := data[k]; !ok {
			t.Errorf("stored record lacks %q: %v", k, data)
		}
	}

	r.Status, r.Step, r.Counters = pregel.RunRunning, 4, pregel.Counters{Completed: 3, Failed: 1}
	zone := time.FixedZone("", 3600) // as JSON gives it back
	r.Events = []runs.Event{
		{At: created, Type: runs.EventCreated, Status: pregel.RunPending},
		{At: created.Add(23 * time.Millisecond), Type: runs.EventRunning, Status: pregel.RunRunning},
		{At: created.Add(time.Second).In(zone), Type: runs.EventDrainRequested, Status: pregel.RunRunning, Step: 2, Detail: "deploy"},
		{At: created.Add(2 * time.Second), Type: runs.EventRunning, Status: pregel.RunRunning, Step: 4},
		{At: created.Add(3 * time.Second), Type: runs.EventRunning, Status: "", Step: 4},
	}
	if r, err = s.UpdateRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	data = runData(t, e, "c1")
	if string(data["step"]) != "4" || string(data["counters"]) != `{"completed":3,"failed":1}` {
		t.Errorf("stored step %s, counters %s; want 4 and the non-zero counters", data["step"], data["counters"])
	}
	if _, ok := data["status"]; ok {
		t.Errorf("updated record holds the status: %v", data)
	}
	if want := `[{"t":1795773600123456789,"type":"created","status":"pending"},{"dt":23000000,"type":"running"},` +
		`{"at":"2026-11-27T11:00:01.123456789+01:00","type":"drain_requested","status":"running","step":2,"detail":"deploy"},` +
		`{"t":1795773602123456789,"type":"running","step":4},{"dt":1000000000,"type":"running","status":"","step":4}]`; string(data["events"]) != want {
		t.Errorf("stored events\n %s\nwant\n %s", data["events"], want)
	}

	want := r
	want.CreatedAt = created
	check := func(what string, got runs.Run) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
		}
	}
	check("UpdateRun", r)
	got, err := s.GetRun(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	check("GetRun", got)
	for _, f := range []runs.Filter{{Graph: "agent"}, {Status: pregel.RunRunning}, {}} {
		page, err := s.ListRuns(ctx, f)
		if err != nil || len(page.Runs) != 1 {
			t.Fatalf("ListRuns(%+v): %d runs, %v", f, len(page.Runs), err)
		}
		check("ListRuns", page.Runs[0])
	}
	if _, ok, err := s.CreateRun(ctx, runs.Run{ID: "c1", Graph: "agent"}); err != nil || ok {
		t.Fatalf("CreateRun of an existing run: created %t, %v", ok, err)
	}

	// No graph, no status, no context: still whole.
	bare, _, err := s.CreateRun(ctx, runs.Run{ID: "c2", CreatedAt: created})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetRun(ctx, "c2"); err != nil || !reflect.DeepEqual(got, bare) {
		t.Errorf("GetRun of a bare run: %+v, %v; want %+v", got, err, bare)
	}

	// RunStorage counts the record as the item is stored, not its JSON.
	st, err := s.RunStorage(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	whole, _ := json.Marshal(want)
	if st.RecordBytes <= 0 || st.RecordBytes >= int64(len(whole)) || st.Runs != 1 {
		t.Errorf("RunStorage: record %d bytes, runs %d; want more than 0 and less than the %d bytes of its JSON, 1 run", st.RecordBytes, st.Runs, len(whole))
	}
}
