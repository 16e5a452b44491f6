package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/superstep/superstep/pkg/pregel"
)

type appendState struct {
	Count int   `json:"count"`
	Ticks []int `json:"ticks" reduce:"append"`
}

// recordingStore keeps a copy of each checkpoint committed through it.
type recordingStore struct {
	pregel.Checkpointer
	commits []pregel.Checkpoint
}

func (r *recordingStore) Commit(ctx context.Context, cp *pregel.Checkpoint) error {
	if err := r.Checkpointer.Commit(ctx, cp); err != nil {
		return err
	}
	c := *cp
	c.Values = map[string]json.RawMessage{}
	for k, v := range cp.Values {
		c.Values[k] = append(json.RawMessage(nil), v...)
	}
	c.Tasks = append([]pregel.TaskStatus(nil), cp.Tasks...)
	r.commits = append(r.commits, c)
	return nil
}

// TestStepRowsCompact runs a loop that appends to a segmented channel, and
// checks both that each step's row is written in the compact form (a task's
// times as integers, the graph version stamp by number, segment versions as
// lists, no zero counters, no graph name: the stamp's row holds it) and
// that every step reads back as committed: values, tasks with their times
// to the nanosecond, counters, stamp, graph.
func TestStepRowsCompact(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "superstep.db")
	st := open(t, path)
	const steps = 40
	g := pregel.NewGraph[appendState]("compact")
	g.AddFunc("tick", func(_ context.Context, s appendState) (appendState, error) {
		return appendState{Count: s.Count + 1, Ticks: []int{s.Count + 1}}, nil
	}, pregel.Writes("count", "ticks"))
	g.AddEdge(pregel.Start, "tick")
	g.AddConditionalEdges("tick", func(_ context.Context, s appendState) ([]string, error) {
		if s.Count >= steps {
			return []string{pregel.End}, nil
		}
		return []string{"tick"}, nil
	}, "tick", pregel.End)
	graph, err := g.Compile(pregel.MaxSteps(steps + 5))
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingStore{Checkpointer: st}
	res, err := graph.Run(ctx, appendState{}, pregel.WithStore(rec), pregel.WithRunID("c"))
	if err != nil || res.Status != pregel.RunCompleted {
		t.Fatalf("run: %v, %v", res.Status, err)
	}

	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT meta FROM steps ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var meta string
		if err := rows.Scan(&meta); err != nil {
			t.Fatal(err)
		}
		for _, bad := range []string{`\u001f`, `"stamp"`, `"started"`, `"finished"`, `"skipped":0`, `"graph"`} {
			if strings.Contains(meta, bad) {
				t.Errorf("step %d's row holds %s: %s", n, bad, meta)
			}
		}
		for _, want := range []string{`"sid":`} {
			if !strings.Contains(meta, want) {
				t.Errorf("step %d's row lacks %s: %s", n, want, meta)
			}
		}
		if n > 0 && (!strings.Contains(meta, `"t0":`) || !strings.Contains(meta, `"segs":{"ticks":[`)) {
			t.Errorf("step %d's row lacks the task's times or the segments' list: %s", n, meta)
		}
		if len(meta) > 360 {
			t.Errorf("step %d's row is %d bytes: %s", n, len(meta), meta)
		}
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n != len(rec.commits) {
		t.Fatalf("%d rows for %d commits", n, len(rec.commits))
	}
	for _, want := range rec.commits {
		got, err := st.Load(ctx, "c", want.Step)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Tasks) != len(want.Tasks) {
			t.Fatalf("step %d: %d tasks, want %d", want.Step, len(got.Tasks), len(want.Tasks))
		}
		for i := range want.Tasks {
			g, w := got.Tasks[i], want.Tasks[i]
			if !g.Started.Equal(w.Started) || !g.Finished.Equal(w.Finished) || w.Started.IsZero() {
				t.Errorf("step %d task %d ran %v–%v, want %v–%v", want.Step, i, g.Started, g.Finished, w.Started, w.Finished)
			}
			g.Started, g.Finished = w.Started, w.Finished
			if !reflect.DeepEqual(g, w) {
				t.Errorf("step %d task %d: %+v, want %+v", want.Step, i, g, w)
			}
		}
		if got.Graph != "compact" {
			t.Errorf("step %d: graph %q, want compact", want.Step, got.Graph)
		}
		if got.Counters != want.Counters || got.Stamp == nil || want.Stamp == nil || !reflect.DeepEqual(*got.Stamp, *want.Stamp) {
			t.Errorf("step %d: counters %+v stamp %+v, want %+v %+v", want.Step, got.Counters, got.Stamp, want.Counters, want.Stamp)
		}
		var gs, ws appendState
		if err := (&pregel.Result{Values: got.Values}).Decode(&gs); err != nil {
			t.Fatal(err)
		}
		if err := (&pregel.Result{Values: want.Values}).Decode(&ws); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(gs, ws) {
			t.Errorf("step %d: state %+v, want %+v", want.Step, gs, ws)
		}
	}
}

// TestStepRowsOfEarlierSchema reads steps written in the form of schema
// versions 2 to 7: the stamp whole, a task's times as RFC 3339 text, zero
// counters, segment versions as keys of their own.
func TestStepRowsOfEarlierSchema(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "superstep.db")
	st := open(t, path)
	cp := &pregel.Checkpoint{RunID: "old", Graph: "g", Step: 0,
		Values:   map[string]json.RawMessage{"limit": json.RawMessage(`5`)},
		Versions: map[string]int{"limit": 0}}
	if err := st.Commit(ctx, cp); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const old = `{"graph":"g","next":[{"node":"count","from":["count"]}],"tasks":[{"task_id":"t1","node":"count","status":"completed","attempts":1,"started":"2026-11-27T07:00:24.765337446Z","finished":"2026-11-27T07:00:24.765410414Z"}],"counters":{"completed":1,"skipped":0,"cancelled":0,"failed":0},"stamp":{"fingerprint":"40bdc09d29a3ecfb","reducers":{"ticks":"append"}},"versions":{"limit":0}}`
	if _, err := db.ExecContext(ctx, `UPDATE steps SET meta = ? WHERE id = (SELECT MAX(id) FROM steps)`, old); err != nil {
		t.Fatal(err)
	}
	got, err := st.Load(ctx, "old", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Tasks) != 1 || got.Tasks[0].Duration() != 72968 || got.Tasks[0].Started.Nanosecond() != 765337446 {
		t.Errorf("tasks %+v", got.Tasks)
	}
	if got.Stamp == nil || got.Stamp.Fingerprint != "40bdc09d29a3ecfb" || got.Stamp.Reducers["ticks"] != "append" {
		t.Errorf("stamp %+v", got.Stamp)
	}
	if got.Counters.Completed != 1 || string(got.Values["limit"]) != "5" {
		t.Errorf("counters %+v values %v", got.Counters, got.Values)
	}
}
