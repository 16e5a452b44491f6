package dynamo_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// legacyWriter writes run items exactly as the Store of main 7b5f500 (the
// last before the compact record) does: the whole runs.Run as JSON in
// data, or in a blob named by data_ref when it is over 350,000 bytes;
// CreateRun a conditional PutItem, UpdateRun an UpdateItem that sets and
// removes the attributes it knows (not rec) on the version. It stands for
// a function of the previous release still running during a deploy.
type legacyWriter struct {
	e   *env
	ids int
}

func legacyJSON(r runs.Run) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		panic(err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// item returns the run item of r, writing its record's blob first if it
// needs one.
func (w *legacyWriter) item(ctx context.Context, r runs.Run) (map[string]types.AttributeValue, error) {
	pk := "RUN#" + r.ID
	data := legacyJSON(r)
	item := map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: pk},
		"sk": &types.AttributeValueMemberS{Value: "~RUN"},
	}
	const chunk = 350_000
	if len(data) <= chunk {
		item["data"] = &types.AttributeValueMemberB{Value: data}
	} else {
		w.ids++
		id := fmt.Sprintf("legacy%d", w.ids)
		n := (len(data) + chunk - 1) / chunk
		for i := range n {
			if _, err := w.e.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(w.e.table), Item: map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: pk},
				"sk": &types.AttributeValueMemberS{Value: fmt.Sprintf("BLOB#%s#%05d", id, i)},
				"v":  &types.AttributeValueMemberB{Value: data[i*chunk : min((i+1)*chunk, len(data))]},
			}}); err != nil {
				return nil, err
			}
		}
		item["data_ref"] = &types.AttributeValueMemberS{Value: fmt.Sprintf(`{"id":%q,"size":%d,"chunks":%d}`, id, len(data), n)}
	}
	item["version"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(r.Version, 10)}
	st := string(r.Status)
	if st == "" {
		st = "-"
	}
	item["run_status"] = &types.AttributeValueMemberS{Value: st}
	item["run_pos"] = &types.AttributeValueMemberS{Value: r.CreatedAt.UTC().Format("2006-01-02T15:04:05.000000000Z") + "#" + r.ID}
	if r.Graph != "" {
		item["run_graph"] = &types.AttributeValueMemberS{Value: r.Graph}
	}
	if r.ContextID != "" {
		item["run_context"] = &types.AttributeValueMemberS{Value: r.ContextID}
	}
	return item, nil
}

// create is the legacy CreateRun (a run that is not finished: no
// expires_at).
func (w *legacyWriter) create(ctx context.Context, r runs.Run) (runs.Run, error) {
	r.CreatedAt = r.CreatedAt.Round(0).UTC()
	if r.UpdatedAt.IsZero() {
		r.UpdatedAt = r.CreatedAt
	}
	r.Version = 1
	item, err := w.item(ctx, r)
	if err != nil {
		return runs.Run{}, err
	}
	_, err = w.e.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(w.e.table), Item: item, ConditionExpression: aws.String("attribute_not_exists(pk)"),
	})
	return r, err
}

// update is the legacy UpdateRun: its error is DynamoDB's own (a
// ConditionalCheckFailedException when the version moved).
func (w *legacyWriter) update(ctx context.Context, r runs.Run) (runs.Run, error) {
	expected := r.Version
	r.Version++
	r.UpdatedAt = time.Now().UTC()
	item, err := w.item(ctx, r)
	if err != nil {
		return runs.Run{}, err
	}
	names := map[string]string{"#version": "version", "#pos": "run_pos"}
	values := map[string]types.AttributeValue{":expected": &types.AttributeValueMemberN{Value: strconv.FormatInt(expected, 10)}, ":pos": item["run_pos"]}
	set := []string{"#pos = if_not_exists(#pos, :pos)"}
	var remove []string
	for i, name := range []string{"data", "data_ref", "version", "run_status", "run_graph", "run_context", "expires_at"} {
		alias := fmt.Sprintf("#a%d", i)
		names[alias] = name
		if v, ok := item[name]; ok {
			set = append(set, fmt.Sprintf("%s = :a%d", alias, i))
			values[fmt.Sprintf(":a%d", i)] = v
		} else {
			remove = append(remove, alias)
		}
	}
	expr := "SET " + strings.Join(set, ", ")
	if len(remove) > 0 {
		expr += " REMOVE " + strings.Join(remove, ", ")
	}
	_, err = w.e.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(w.e.table), Key: map[string]types.AttributeValue{"pk": item["pk"], "sk": item["sk"]},
		UpdateExpression: aws.String(expr), ConditionExpression: aws.String("#version = :expected"),
		ExpressionAttributeNames: names, ExpressionAttributeValues: values,
	})
	return r, err
}

// recordAttrs lists the record attributes of run id's item.
func recordAttrs(t *testing.T, e *env, id string) []string {
	t.Helper()
	var out []string
	it := runItem(t, e, id)
	for _, name := range []string{"data", "data_ref", "rec", "rec_ref"} {
		if _, ok := it[name]; ok {
			out = append(out, name)
		}
	}
	return out
}

// TestRunRecordDeployReads: every shape of run item that the previous
// release's writers and this one's leave during a rolling deploy reads
// whole, by GetRun, ListRuns and LoadRun: the previous release's whole
// JSON in data (inline or in a blob), this one's compact rec (inline or in
// a blob), and an item holding both, where a writer of the previous
// release updated an item this one wrote, whose data is the newer record.
// Its next update stores it compact, without data, and leaves no blob
// behind but its own.
func TestRunRecordDeployReads(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEnv(t)
	s := e.store()
	legacy := &legacyWriter{e: e}
	created := time.Date(2026, 11, 27, 9, 15, 0, 987654321, time.UTC)
	big := json.RawMessage(strconv.Quote(piece(3, 400_000)))
	base := func(id string, input json.RawMessage) runs.Run {
		return runs.Run{ID: id, Graph: "agent", Status: pregel.RunPending, ContextID: "ctx-" + id, ThreadID: "th",
			CreatedAt: created, Input: input, GraphVersion: &pregel.Stamp{Version: "v2", Fingerprint: "beef"},
			Events: []runs.Event{{At: created, Type: runs.EventCreated, Status: pregel.RunPending}}}
	}
	// advance is what a tick does to a run: running at step 3.
	advance := func(r runs.Run) runs.Run {
		r.Status, r.Step, r.Counters = pregel.RunRunning, 3, pregel.Counters{Completed: 3}
		r.Events = append(cloneEvents(r.Events), runs.Event{At: created.Add(time.Second), Type: runs.EventRunning, Status: pregel.RunRunning})
		return r
	}
	for _, tc := range []struct {
		name  string
		input json.RawMessage
		// write leaves the item to read and returns the run it must read as.
		write func(t *testing.T, r runs.Run) runs.Run
		attrs string // the record attributes it leaves
	}{
		{"previous release, inline", nil, func(t *testing.T, r runs.Run) runs.Run {
			r, err := legacy.create(ctx, r)
			must(t, err)
			r, err = legacy.update(ctx, advance(r))
			must(t, err)
			return r
		}, "data"},
		{"previous release, blob", big, func(t *testing.T, r runs.Run) runs.Run {
			r, err := legacy.create(ctx, r)
			must(t, err)
			return r
		}, "data_ref"},
		{"this release, inline", nil, func(t *testing.T, r runs.Run) runs.Run {
			r, _, err := s.CreateRun(ctx, r)
			must(t, err)
			r, err = s.UpdateRun(ctx, advance(r))
			must(t, err)
			return r
		}, "rec"},
		{"this release, blob", big, func(t *testing.T, r runs.Run) runs.Run {
			r, _, err := s.CreateRun(ctx, r)
			must(t, err)
			return r
		}, "rec_ref"},
		{"previous release over this one's", nil, func(t *testing.T, r runs.Run) runs.Run {
			r, _, err := s.CreateRun(ctx, r)
			must(t, err)
			r, err = legacy.update(ctx, advance(r))
			must(t, err)
			return r
		}, "data rec"},
		{"previous release's blob over this one's", nil, func(t *testing.T, r runs.Run) runs.Run {
			r, _, err := s.CreateRun(ctx, r)
			must(t, err)
			r = advance(r)
			r.Input = big
			r, err = legacy.update(ctx, r)
			must(t, err)
			return r
		}, "data_ref rec"},
		{"previous release over this one's blob", big, func(t *testing.T, r runs.Run) runs.Run {
			r, _, err := s.CreateRun(ctx, r)
			must(t, err)
			r = advance(r)
			r.Input = json.RawMessage(`"small"`)
			r, err = legacy.update(ctx, r)
			must(t, err)
			return r
		}, "data rec_ref"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := strings.ReplaceAll(tc.name, " ", "-")
			want := tc.write(t, base(id, tc.input))
			if got := strings.Join(recordAttrs(t, e, id), " "); got != tc.attrs {
				t.Fatalf("the item holds %q, want %q", got, tc.attrs)
			}
			check := func(what string, got runs.Run, err error) {
				t.Helper()
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
				}
			}
			got, err := s.GetRun(ctx, id)
			check("GetRun", got, err)
			loaded, _, _, err := e.store().LoadRun(ctx, id)
			check("LoadRun", loaded, err)
			page, err := s.ListRuns(ctx, runs.Filter{Graph: "agent", ContextID: "ctx-" + id})
			if err != nil || len(page.Runs) != 1 {
				t.Fatalf("ListRuns: %d runs, %v", len(page.Runs), err)
			}
			check("ListRuns", page.Runs[0], nil)

			// This release's update stores it compact and drops the
			// blobs of the records before.
			got.Status, got.Step = pregel.RunCompleted, 4
			want, err = s.UpdateRun(ctx, got)
			must(t, err)
			if attrs := strings.Join(recordAttrs(t, e, id), " "); attrs != "rec" && attrs != "rec_ref" {
				t.Errorf("after an update the item holds %q, want rec or rec_ref alone", attrs)
			}
			got, err = s.GetRun(ctx, id)
			check("GetRun after an update", got, err)
			wantChunks := 0
			if len(want.Input) > 350_000 {
				wantChunks = 2
			}
			if chunks := sortKeys(t, e, id, "BLOB#"); len(chunks) != wantChunks {
				t.Errorf("chunk items %v, want the current record's %d", chunks, wantChunks)
			}
		})
	}
}

// TestRunRecordDeployInterleavings: the updates of a writer of the previous
// release (legacyWriter) and of this one interleave on the run version:
// whichever writes on a version that moved fails, and nothing either
// wrote is lost or read back empty.
func TestRunRecordDeployInterleavings(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEnv(t)
	s := e.store()
	legacy := &legacyWriter{e: e}
	created := time.Date(2026, 11, 27, 9, 30, 0, 1, time.UTC)
	newRun := func(id string) runs.Run {
		return runs.Run{ID: id, Graph: "agent", Status: pregel.RunPending, ThreadID: "th", CreatedAt: created}
	}

	t.Run("previous release after this one", func(t *testing.T) {
		// The old writer read version 1 (the old record) before this
		// release's writer updated it.
		v1, err := legacy.create(ctx, newRun("a"))
		must(t, err)
		read, err := s.GetRun(ctx, "a")
		must(t, err)
		read.Status = pregel.RunCancelled
		v2, err := s.UpdateRun(ctx, read)
		must(t, err)
		stale := v1
		stale.Status, stale.Step = pregel.RunRunning, 1
		if _, err := legacy.update(ctx, stale); !isConditionFailed(err) {
			t.Fatalf("the old writer's update on version 1 after version 2: %v, want ConditionalCheckFailedException", err)
		}
		if got, err := s.GetRun(ctx, "a"); err != nil || !reflect.DeepEqual(got, v2) {
			t.Errorf("GetRun: %+v (%v), want this release's version 2 %+v", got, err, v2)
		}
		if got := strings.Join(recordAttrs(t, e, "a"), " "); got != "rec" {
			t.Errorf("the item holds %q, want rec", got)
		}
	})

	t.Run("this release after the previous one", func(t *testing.T) {
		// This release's writer read version 1, then an old writer
		// updated it: this release's update fails on the version and
		// a read gives the old writer's record, whole.
		_, err := legacy.create(ctx, newRun("b"))
		must(t, err)
		read, err := s.GetRun(ctx, "b")
		must(t, err)
		old := read
		old.Status, old.Step = pregel.RunRunning, 2
		old.Events = []runs.Event{{At: created.Add(time.Second), Type: runs.EventRunning, Status: pregel.RunRunning}}
		v2, err := legacy.update(ctx, old)
		must(t, err)
		read.Status = pregel.RunCancelled
		if _, err := s.UpdateRun(ctx, read); !errors.Is(err, runs.ErrConflict) {
			t.Fatalf("UpdateRun on version 1 after the old writer's version 2: %v, want ErrConflict", err)
		}
		got, err := s.GetRun(ctx, "b")
		if err != nil || !reflect.DeepEqual(got, v2) {
			t.Fatalf("GetRun: %+v (%v), want the old writer's version 2 %+v", got, err, v2)
		}
		got.Status = pregel.RunCancelled
		v3, err := s.UpdateRun(ctx, got)
		must(t, err)
		if again, err := s.GetRun(ctx, "b"); err != nil || !reflect.DeepEqual(again, v3) || again.Step != 2 || again.Status != pregel.RunCancelled {
			t.Errorf("GetRun after this release's update: %+v (%v), want %+v", again, err, v3)
		}
	})

	t.Run("previous release over this one, then this one", func(t *testing.T) {
		// An old writer's update lands on an item this release wrote
		// (it cannot read one, but a record it holds may carry the
		// item's version); its whole record wins, and this release's
		// next update removes it.
		v1, _, err := s.CreateRun(ctx, newRun("c"))
		must(t, err)
		old := v1
		old.Status, old.Step = pregel.RunInterrupted, 5
		v2, err := legacy.update(ctx, old)
		must(t, err)
		got, err := s.GetRun(ctx, "c")
		if err != nil || !reflect.DeepEqual(got, v2) {
			t.Fatalf("GetRun: %+v (%v), want the old writer's %+v", got, err, v2)
		}
		got.Status = pregel.RunPending
		v3, err := s.UpdateRun(ctx, got)
		must(t, err)
		if again, err := s.GetRun(ctx, "c"); err != nil || !reflect.DeepEqual(again, v3) || again.Step != 5 {
			t.Errorf("GetRun: %+v (%v), want %+v", again, err, v3)
		}
		if got := strings.Join(recordAttrs(t, e, "c"), " "); got != "rec" {
			t.Errorf("the item holds %q, want rec", got)
		}
	})

	t.Run("creates", func(t *testing.T) {
		// Whichever release creates a run first, the other's create
		// finds it.
		mine, _, err := s.CreateRun(ctx, newRun("d"))
		must(t, err)
		if _, err := legacy.create(ctx, newRun("d")); !isConditionFailed(err) {
			t.Errorf("the old writer's create of an existing run: %v, want ConditionalCheckFailedException", err)
		}
		theirs, err := legacy.create(ctx, newRun("e"))
		must(t, err)
		for _, want := range []runs.Run{mine, theirs} {
			got, created, err := s.CreateRun(ctx, newRun(want.ID))
			if err != nil || created || !reflect.DeepEqual(got, want) {
				t.Errorf("CreateRun of existing run %s: %+v, created %t, %v; want %+v", want.ID, got, created, err, want)
			}
		}
	})
}

func isConditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// cloneEvents returns a copy of evs, so that appending to it leaves evs alone.
func cloneEvents(evs []runs.Event) []runs.Event { return append([]runs.Event(nil), evs...) }
