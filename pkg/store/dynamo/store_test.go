package dynamo_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/superstep/superstep/internal/awsmeter"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/store/dynamo"
)

// growState is the state of the graph of TestLargeStateRun.
type growState struct {
	Chunks []string `json:"chunks" reduce:"append"`
	Steps  int      `json:"steps"`
}

// piece returns the i-th chunk the graph appends: n bytes of JSON-safe
// text that differ from one chunk to the next.
func piece(i, n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	r := i % len(alphabet)
	s := fmt.Sprintf("chunk %d:", i) + strings.Repeat(alphabet[r:]+alphabet[:r], n/len(alphabet)+1)
	return s[:n]
}

// TestLargeStateRun runs a graph whose state grows by 500 KB a step to over
// 5 MB, on the store, and checks the final state byte for byte, from the
// run's result and from a checkpoint loaded by another Store.
func TestLargeStateRun(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEnv(t)
	const pieceSize = 500 << 10
	const target = 5 << 20
	g := pregel.NewGraph[growState]("grow")
	g.AddFunc("grow", func(_ context.Context, s growState) (growState, error) {
		return growState{Chunks: []string{piece(len(s.Chunks), pieceSize)}, Steps: s.Steps + 1}, nil
	})
	g.AddEdge(pregel.Start, "grow")
	g.AddConditionalEdges("grow", func(_ context.Context, s growState) ([]string, error) {
		if len(s.Chunks)*pieceSize >= target {
			return []string{pregel.End}, nil
		}
		return []string{"grow"}, nil
	}, "grow", pregel.End)
	graph, err := g.Compile(pregel.MaxSteps(100))
	if err != nil {
		t.Fatal(err)
	}

	// A meter per step: the observer is not needed, the meter's totals
	// over the run divided by the steps say enough.
	before := e.meter.Snapshot()
	res, err := graph.Run(ctx, growState{}, pregel.WithStore(e.store()), pregel.WithRunID("big"))
	if err != nil {
		t.Fatal(err)
	}
	used := e.meter.Snapshot().Sub(before)
	if res.Status != pregel.RunCompleted {
		t.Fatalf("run status %s (%v), want completed", res.Status, res.Err)
	}
	n := (target + pieceSize - 1) / pieceSize
	want := growState{Steps: n}
	for i := range n {
		want.Chunks = append(want.Chunks, piece(i, pieceSize))
	}
	check := func(what string, values map[string]json.RawMessage) {
		t.Helper()
		var got growState
		raw, _ := json.Marshal(values)
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got.Steps != want.Steps || len(got.Chunks) != len(want.Chunks) {
			t.Fatalf("%s: %d steps and %d chunks, want %d and %d", what, got.Steps, len(got.Chunks), want.Steps, len(want.Chunks))
		}
		for i := range want.Chunks {
			if got.Chunks[i] != want.Chunks[i] {
				t.Fatalf("%s: chunk %d differs", what, i)
			}
		}
	}
	check("Run result", res.Values)

	cp, err := e.store().Load(ctx, "big", pregel.Latest)
	if err != nil {
		t.Fatal(err)
	}
	check("Load(Latest)", cp.Values)
	if size := len(cp.Values["chunks"]); size < target {
		t.Errorf("final chunks channel is %d bytes, want over %d", size, target)
	}
	if cp.Step != res.Step {
		t.Errorf("Load(Latest) step %d, run result step %d", cp.Step, res.Step)
	}
	// An earlier step loads too, with its smaller state.
	mid, err := e.store().Load(ctx, "big", 3)
	if err != nil {
		t.Fatal(err)
	}
	var midState growState
	raw, _ := json.Marshal(mid.Values)
	if err := json.Unmarshal(raw, &midState); err != nil || len(midState.Chunks) != 3 || midState.Chunks[2] != piece(2, pieceSize) {
		t.Errorf("Load(3): %d chunks (%v), want 3", len(midState.Chunks), err)
	}
	steps := res.Step + 1
	tot := used.Total()
	t.Logf("run of %d steps to %d bytes of state: %d requests (%.1f per step), %d request bytes, %d response bytes; by operation: %s",
		steps, len(cp.Values["chunks"]), tot.Requests, float64(tot.Requests)/float64(steps), tot.RequestBytes, tot.ResponseBytes, opsString(used))
}

func opsString(st awsmeter.Stats) string {
	var parts []string
	for _, name := range st.Names() {
		o := st.Op(name)
		parts = append(parts, fmt.Sprintf("%s=%d (%d B)", name, o.Requests, o.RequestBytes))
	}
	return strings.Join(parts, " ")
}

// checkpoints returns steps 0..n-1 of a run with channels a..e where step
// i > 0 changes only channel "a" (and "b" every third step).
func checkpoints(run string, n int) []*pregel.Checkpoint {
	var out []*pregel.Checkpoint
	values := map[string]json.RawMessage{}
	versions := map[string]int{}
	for step := range n {
		if step == 0 {
			for _, ch := range []string{"a", "b", "c", "d", "e"} {
				values[ch] = json.RawMessage(strconv.Quote(strings.Repeat(ch, 2000)))
				versions[ch] = 0
			}
		} else {
			values["a"] = json.RawMessage(strconv.Itoa(step))
			versions["a"] = step
			if step%3 == 0 {
				values["b"] = json.RawMessage(fmt.Sprintf(`{"b":%d}`, step))
				versions["b"] = step
			}
		}
		out = append(out, &pregel.Checkpoint{
			RunID: run, Graph: "g", Step: step,
			Values: maps.Clone(values), Versions: maps.Clone(versions),
			Next:  []pregel.Trigger{{Node: "n"}},
			Tasks: []pregel.TaskStatus{{TaskID: fmt.Sprint("t", step), Node: "n", Status: pregel.NodeCompleted}},
		})
	}
	return out
}

// TestRunExpiry checks expires_at on finished runs, and that retention 0
// disables it.
func TestRunExpiry(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEnv(t)
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time { return now }
	expiresAt := func(id string) (int64, bool) {
		t.Helper()
		out, err := e.client.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: aws.String(e.table),
			Key: map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: "RUN#" + id},
				"sk": &types.AttributeValueMemberS{Value: "~RUN"},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		v, ok := out.Item["expires_at"].(*types.AttributeValueMemberN)
		if !ok {
			return 0, false
		}
		n, _ := strconv.ParseInt(v.Value, 10, 64)
		return n, true
	}
	for _, tt := range []struct {
		name      string
		retention time.Duration
		want      int64
	}{
		{"Default", -1, now.Add(dynamo.DefaultRetention).Unix()},
		{"Week", 7 * 24 * time.Hour, now.Add(7 * 24 * time.Hour).Unix()},
		{"Disabled", 0, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			opts := []dynamo.Option{dynamo.WithClock(clock)}
			if tt.retention >= 0 {
				opts = append(opts, dynamo.WithRetention(tt.retention))
			}
			s := e.store(opts...)
			r, _, err := s.CreateRun(ctx, runs.Run{ID: "exp-" + tt.name, Graph: "g", Status: pregel.RunPending, CreatedAt: now})
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := expiresAt(r.ID); ok {
				t.Error("pending run has expires_at")
			}
			r.Status = pregel.RunRunning
			if r, err = s.UpdateRun(ctx, r); err != nil {
				t.Fatal(err)
			}
			r.Status = pregel.RunCompleted
			if _, err = s.UpdateRun(ctx, r); err != nil {
				t.Fatal(err)
			}
			got, ok := expiresAt(r.ID)
			if tt.want == 0 {
				if ok {
					t.Errorf("expires_at = %d with retention 0, want none", got)
				}
				return
			}
			if !ok || got != tt.want {
				t.Errorf("expires_at = %d (present %t), want %d", got, ok, tt.want)
			}
		})
	}
}

// TestLargeRunRecord stores a run whose input is over the item limit.
func TestLargeRunRecord(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEnv(t)
	s := e.store()
	input := json.RawMessage(strconv.Quote(piece(7, 600_000)))
	r, created, err := s.CreateRun(ctx, runs.Run{ID: "big", Graph: "g", Status: pregel.RunPending, Input: input, CreatedAt: time.Now()})
	if err != nil || !created {
		t.Fatalf("CreateRun: created %t, %v", created, err)
	}
	r.Step = 3
	if r, err = s.UpdateRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetRun(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Input) != string(input) || got.Step != 3 || got.Version != r.Version {
		t.Errorf("GetRun: input of %d bytes, step %d, version %d; want %d bytes, step 3, version %d", len(got.Input), got.Step, got.Version, len(input), r.Version)
	}
	// The first version's chunks were deleted with it.
	if chunks := sortKeys(t, e, "big", "BLOB#"); len(chunks) != 2 {
		t.Errorf("chunk items %v, want the current record's 2", chunks)
	}
	page, err := s.ListRuns(ctx, runs.Filter{Graph: "g"})
	if err != nil || len(page.Runs) != 1 || string(page.Runs[0].Input) != string(input) {
		t.Errorf("ListRuns: %d runs, %v", len(page.Runs), err)
	}
}

// TestUnknownStatusRejected: a status the indexes do not list is refused.
func TestUnknownStatusRejected(t *testing.T) {
	t.Parallel()
	s := newEnv(t).store()
	_, _, err := s.CreateRun(t.Context(), runs.Run{ID: "x", Graph: "g", Status: "paused"})
	if !errors.Is(err, runs.ErrInvalid) {
		t.Errorf("CreateRun with status paused: %v, want ErrInvalid", err)
	}
}

// Errors that wrap a sentinel of package runs reach the API's callers
// (pkg/api shows their message): they say what went wrong without naming
// the store.
func TestCallerErrorsNameNoStore(t *testing.T) {
	t.Parallel()
	s := newEnv(t).store()
	ctx := t.Context()
	_, getErr := s.GetRun(ctx, "nope")
	_, updErr := s.UpdateRun(ctx, runs.Run{ID: "nope", Graph: "g", Status: pregel.RunRunning, Version: 1})
	_, listErr := s.ListRuns(ctx, runs.Filter{PageToken: "bm90LWEtdG9rZW4"})
	_, _, badErr := s.CreateRun(ctx, runs.Run{ID: "x", Graph: "g", Status: "paused"})
	_, _, _, loadErr := s.LoadRun(ctx, "nope")
	if _, _, err := s.CreateRun(ctx, runs.Run{ID: "v", Graph: "g", Status: pregel.RunPending, Version: 1}); err != nil {
		t.Fatal(err)
	}
	_, conflictErr := s.UpdateRun(ctx, runs.Run{ID: "v", Graph: "g", Status: pregel.RunRunning, Version: 5})
	for _, c := range []struct {
		name     string
		err      error
		sentinel error
	}{
		{"GetRun of a missing run", getErr, runs.ErrNotFound},
		{"UpdateRun of a missing run", updErr, runs.ErrNotFound},
		{"UpdateRun at a stale version", conflictErr, runs.ErrConflict},
		{"ListRuns with a foreign page token", listErr, runs.ErrInvalid},
		{"CreateRun with an unknown status", badErr, runs.ErrInvalid},
		{"LoadRun of a missing run", loadErr, runs.ErrNotFound},
	} {
		if !errors.Is(c.err, c.sentinel) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.sentinel)
			continue
		}
		if strings.Contains(strings.ToLower(c.err.Error()), "dynamo") {
			t.Errorf("%s: %q names the store", c.name, c.err)
		}
	}
}
