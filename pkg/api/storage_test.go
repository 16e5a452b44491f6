package api_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/pregel"
)

// TestStorage: GET /v1/runs/{id}/storage and /v1/threads/{id}/storage
// say what a run and a thread with its runs store; the thread's is the
// sum of its runs' and its record; unknown ids are 404.
func TestStorage(t *testing.T) {
	e := newThreadEnv(t)
	e.do("POST", "/v1/threads", map[string]any{"thread_id": "chat-1"}).ok(t, http.StatusCreated, nil)
	var ids []string
	for _, text := range []string{"hi", "yo"} {
		var r api.Run
		e.do("POST", "/v1/threads/chat-1/runs", map[string]any{"graph": "echo", "input": map[string]string{"text": text}}).ok(t, http.StatusAccepted, &r)
		e.await(r.RunID, pregel.RunCompleted)
		ids = append(ids, r.RunID)
	}
	var sum int64
	for _, id := range ids {
		var st api.Storage
		e.do("GET", "/v1/runs/"+id+"/storage", nil).ok(t, http.StatusOK, &st)
		if st.Runs != 1 || st.RecordBytes <= 0 || st.TotalBytes != st.CheckpointBytes+st.SegmentBytes+st.EventBytes+st.RecordBytes || !slices.Contains(st.Measured, "records") {
			t.Errorf("run %s storage %+v; want 1 run, its record's bytes, a total that adds up", id, st)
		}
		sum += st.TotalBytes
	}
	var th api.Storage
	e.do("GET", "/v1/threads/chat-1/storage", nil).ok(t, http.StatusOK, &th)
	if th.Runs != 2 || th.TotalBytes <= sum || th.TotalBytes != th.CheckpointBytes+th.SegmentBytes+th.EventBytes+th.RecordBytes {
		t.Errorf("thread storage %+v; want 2 runs and more than their %d bytes (the thread's record)", th, sum)
	}
	e.do("GET", "/v1/runs/nope/storage", nil).problem(t, http.StatusNotFound, `run "nope" does not exist`)
	e.do("GET", "/v1/threads/nope/storage", nil).problem(t, http.StatusNotFound, "nope")
}
