package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/store/sqlite"
)

// BenchmarkRunView20k measures the views of a completed 20,000-step run
// of echo on SQLite (one task per step, its two nodes taking turns), served by the handler without
// a network: GET /v1/runs/{run_id} and the run's diagram GET
// /v1/graphs/echo?run=. The bytes of each answer are reported as B/view.
//
//	go test -run '^$' -bench RunView20k -benchtime 20x ./pkg/api/
func BenchmarkRunView20k(b *testing.B) {
	const steps = 20_000
	ctx := b.Context()
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "view.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	reg, err := runs.NewRegistry(echoGraph(b))
	if err != nil {
		b.Fatal(err)
	}
	svc := &runs.Service{Graphs: reg, Runs: st, Checkpoints: st, Dispatcher: &recordingDispatcher{}}
	if _, _, err := st.CreateRun(ctx, runs.Run{ID: "long", Graph: "echo", Status: pregel.RunRunning}); err != nil {
		b.Fatal(err)
	}
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	for i := range steps {
		cp := &pregel.Checkpoint{RunID: "long", Graph: "echo", Step: i,
			Values:   map[string]json.RawMessage{"text": json.RawMessage(fmt.Sprintf(`"%d"`, i))},
			Versions: map[string]int{"text": i},
			Next:     []pregel.Trigger{{Node: "exclaim"}}}
		if i > 0 {
			at := t0.Add(time.Duration(i) * time.Millisecond)
			node := "exclaim" // the nodes take turns, as in a loop
			if i%2 == 1 {
				node = "upper"
			}
			cp.Tasks = []pregel.TaskStatus{{TaskID: fmt.Sprintf("%024x", i), Node: node, Status: pregel.NodeCompleted, Attempts: 1, Started: at, Finished: at.Add(500 * time.Microsecond)}}
		}
		if err := st.Commit(ctx, cp); err != nil {
			b.Fatal(err)
		}
	}
	r, err := st.GetRun(ctx, "long")
	if err != nil {
		b.Fatal(err)
	}
	r.Status, r.Step = pregel.RunCompleted, steps-1
	if _, err := st.UpdateRun(ctx, r); err != nil {
		b.Fatal(err)
	}
	h, err := api.New(api.Config{Service: svc, NoStreams: true})
	if err != nil {
		b.Fatal(err)
	}
	for _, path := range []string{"/v1/runs/long", "/v1/graphs/echo?run=long"} {
		b.Run(path, func(b *testing.B) {
			var n int
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
				if rec.Code != http.StatusOK {
					b.Fatalf("%s: %d %s", path, rec.Code, rec.Body)
				}
				n = rec.Body.Len()
			}
			b.ReportMetric(float64(n), "B/view")
		})
	}
}
