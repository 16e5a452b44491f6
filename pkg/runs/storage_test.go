package runs_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// recordMeter is a run store that measures its records, as the DynamoDB
// store does (its compact run items).
type recordMeter struct {
	*runs.MemoryStore
	record int64
}

func (m recordMeter) RunStorage(context.Context, string) (runs.Storage, error) {
	return runs.Storage{RecordBytes: m.record, Runs: 1, Measured: []string{runs.StorageRecords}}, nil
}

// TestRunStorageRecord: a run's record counts as its store keeps it when
// the store measures it, and as its JSON when no store does.
func TestRunStorageRecord(t *testing.T) {
	ctx := t.Context()
	run := runs.Run{ID: "r1", Graph: "g", Status: pregel.RunCompleted, CreatedAt: time.Now().UTC(), Input: json.RawMessage(`{"x":1}`)}
	for _, c := range []struct {
		name string
		runs runs.Store
		want func(stored runs.Run) int64
	}{
		{"measured by the store", recordMeter{runs.NewMemoryStore(), 123}, func(runs.Run) int64 { return 123 }},
		{"as JSON", runs.NewMemoryStore(), func(stored runs.Run) int64 {
			b, _ := json.Marshal(stored)
			return int64(len(b))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			stored, _, err := c.runs.CreateRun(ctx, run)
			if err != nil {
				t.Fatal(err)
			}
			svc := &runs.Service{Runs: c.runs, Checkpoints: pregel.NewMemoryStore(), Dispatcher: &nopDispatcher{}}
			st, err := svc.RunStorage(ctx, "r1")
			if err != nil {
				t.Fatal(err)
			}
			if want := c.want(stored); st.RecordBytes != want || st.Runs != 1 || st.TotalBytes != st.CheckpointBytes+st.SegmentBytes+st.EventBytes+want {
				t.Errorf("RunStorage: record %d bytes, %d runs, total %d; want record %d bytes, 1 run, the parts' sum", st.RecordBytes, st.Runs, st.TotalBytes, want)
			}
		})
	}
}
