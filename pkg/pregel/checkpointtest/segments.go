package checkpointtest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/superstep/superstep/pkg/pregel"
)

// seeder is the method of the runs package's Seeder (declared there, where
// it is used): the suite commits the step 0 of a run that continues another
// with it when the store has it, and with Commit otherwise.
type seeder interface {
	CommitFrom(ctx context.Context, cp *pregel.Checkpoint, base pregel.StepRef) error
}

// segItem is an element of the "items" channel of the segments graph: its
// reducer replaces an item of the same id and deletes the item named by a
// removal, as the messages reducer of an agent does.
type segItem struct {
	ID     string `json:"id"`
	Text   string `json:"text,omitempty"`
	Remove bool   `json:"remove,omitempty"`
}

type segState struct {
	Log   []json.RawMessage `json:"log" reduce:"append"`
	Items []segItem         `json:"items" reduce:"items"`
	Note  string            `json:"note"`
}

func addItems(cur, update []segItem) []segItem {
	out := slices.Clone(cur)
	for _, it := range update {
		i := slices.IndexFunc(out, func(o segItem) bool { return o.ID == it.ID })
		switch {
		case it.Remove:
			if i >= 0 {
				out = slices.Delete(out, i, i+1)
			}
		case i >= 0:
			out[i] = it
		default:
			out = append(out, it)
		}
	}
	return out
}

// plainState is segState with reducers that are not stored in segments.
type plainState struct {
	Log   []json.RawMessage `json:"log" reduce:"concat"`
	Items []segItem         `json:"items" reduce:"items"`
	Note  string            `json:"note"`
}

// plainGraph is segmentsGraph with reducers registered with
// Builder.Reducer: a new version of the graph that stores the channels
// whole. Channel log's reducer changes name (append to concat, the same
// result), which a run only survives with a migration declared from the
// version that wrote it (see VERSIONS.md): an identity one.
func plainGraph(t *testing.T) *pregel.Graph {
	t.Helper()
	g, err := pregel.NewGraph[plainState]("segments").Version("plain").
		Migrate("segmented", func(_ context.Context, old map[string]json.RawMessage) (map[string]json.RawMessage, error) {
			return old, nil
		}).
		Reducer("items", pregel.ReducerOf(addItems)).
		Reducer("concat", pregel.ReducerOf(func(cur, upd []json.RawMessage) []json.RawMessage { return append(slices.Clip(cur), upd...) })).
		AddFunc("w", func(ctx context.Context, s plainState) (plainState, error) { return plainState{}, nil }).
		AddEdge(pregel.Start, "w").
		AddConditionalEdges("w", func(context.Context, plainState) ([]string, error) { return []string{"w"}, nil }, "w", pregel.End).
		Compile(pregel.MaxSteps(1 << 20))
	if err != nil {
		t.Fatalf("compile the plain graph: %v", err)
	}
	return g
}

// segmentsGraph returns a graph whose node w runs at every step, with two
// channels stored in segments (append and a custom AppendReducer) and one
// last-value channel.
func segmentsGraph(t *testing.T) *pregel.Graph {
	t.Helper()
	g, err := pregel.NewGraph[segState]("segments").Version("segmented").
		AppendReducer("items", pregel.ReducerOf(addItems)).
		AddFunc("w", func(ctx context.Context, s segState) (segState, error) { return segState{}, nil }).
		AddEdge(pregel.Start, "w").
		AddConditionalEdges("w", func(context.Context, segState) ([]string, error) { return []string{"w"}, nil }, "w", pregel.End).
		Compile(pregel.MaxSteps(1 << 20))
	if err != nil {
		t.Fatalf("compile the segments graph: %v", err)
	}
	return g
}

// segWriter makes random writes: appends of small and large elements,
// replacements and removals of existing items, and steps that write
// nothing.
type segWriter struct {
	rng  *rand.Rand
	next int
}

func (w *segWriter) text(n int) string {
	const letters = "abcdefghijklmnopqrstuvwxyz <>&é\"\\"
	var b strings.Builder
	for range n {
		b.WriteString(string([]rune(letters)[w.rng.IntN(len([]rune(letters)))]))
	}
	return b.String()
}

func (w *segWriter) size() int {
	if w.rng.IntN(10) == 0 {
		return 4000 + w.rng.IntN(6000) // seals segments now and then
	}
	return w.rng.IntN(400)
}

// writes returns the writes of one step from the state values.
func (w *segWriter) writes(t *testing.T, values map[string]json.RawMessage) map[string]json.RawMessage {
	t.Helper()
	var have []segItem
	if v, ok := values["items"]; ok {
		if err := json.Unmarshal(v, &have); err != nil {
			t.Fatalf("decode items: %v", err)
		}
	}
	out := map[string]json.RawMessage{}
	if w.rng.IntN(10) < 7 {
		var entries []json.RawMessage
		for range 1 + w.rng.IntN(3) {
			b, _ := json.Marshal(map[string]string{"e": w.text(w.size())})
			entries = append(entries, b)
		}
		out["log"], _ = json.Marshal(entries)
	}
	var upd []segItem
	for range w.rng.IntN(3) {
		w.next++
		upd = append(upd, segItem{ID: fmt.Sprint("i", w.next), Text: w.text(w.size())})
	}
	if len(have) > 0 && w.rng.IntN(6) == 0 {
		// Replace one, recent ones more often.
		i := len(have) - 1 - min(len(have)-1, w.rng.IntN(4)*w.rng.IntN(len(have)))
		upd = append(upd, segItem{ID: have[i].ID, Text: "replaced " + w.text(w.size())})
	}
	if len(have) > 0 && w.rng.IntN(8) == 0 {
		upd = append(upd, segItem{ID: have[w.rng.IntN(len(have))].ID, Remove: true})
	}
	if len(upd) > 0 {
		out["items"], _ = json.Marshal(upd)
	}
	if w.rng.IntN(5) == 0 {
		out["note"], _ = json.Marshal(w.text(20))
	}
	return out
}

// segStep applies one step of random writes to cp.
func segStep(t *testing.T, g *pregel.Graph, w *segWriter, cp *pregel.Checkpoint) *pregel.Checkpoint {
	t.Helper()
	tasks := g.Plan(cp)
	if len(tasks) != 1 {
		t.Fatalf("step %d plans %d tasks, want 1", cp.Step+1, len(tasks))
	}
	res := pregel.TaskResult{TaskID: tasks[0].ID, Node: "w", Status: pregel.NodeCompleted, Attempts: 1, Writes: w.writes(t, cp.Values),
		Routes: []pregel.Trigger{{Node: "w", From: []string{"w"}}}}
	out, err := g.Apply(cp, tasks, []pregel.TaskResult{res})
	if err != nil {
		t.Fatalf("apply step %d: %v", cp.Step+1, err)
	}
	if out.Checkpoint == nil {
		t.Fatalf("apply step %d: no checkpoint (%s)", cp.Step+1, out.Status)
	}
	return out.Checkpoint
}

// segRun commits n steps of random writes after cp0, which it commits
// first (with CommitFrom when base is set and the store has it), and
// returns the checkpoints the engine made.
func segRun(t *testing.T, s pregel.Checkpointer, g *pregel.Graph, w *segWriter, cp0 *pregel.Checkpoint, base *pregel.StepRef, n int) []*pregel.Checkpoint {
	t.Helper()
	cps := []*pregel.Checkpoint{cp0}
	var err error
	if sd, ok := s.(seeder); ok && base != nil {
		err = sd.CommitFrom(t.Context(), cp0, *base)
	} else {
		err = s.Commit(t.Context(), cp0)
	}
	if err != nil {
		t.Fatalf("commit step 0 of run %q: %v", cp0.RunID, err)
	}
	cp := cp0
	for range n {
		cp = segStep(t, g, w, cp)
		if err := s.Commit(t.Context(), cp); err != nil {
			t.Fatalf("commit step %d of run %q: %v", cp.Step, cp.RunID, err)
		}
		cps = append(cps, cp)
		// Load right after the commit, as the next tick of a run does.
		checkCheckpoint(t, fmt.Sprintf("Load(run %q, Latest) after step %d", cp.RunID, cp.Step), mustLoad(t, s, cp.RunID, pregel.Latest), cp)
	}
	return cps
}

// testSegments checks channels stored in segments (see
// [pregel.Builder.AppendReducer]): random appends, replacements and
// removals over many steps, each step loaded back by number and as the
// latest equal to the engine's own checkpoint; runs continued from earlier
// steps (a fork of a thread at an old step, a continued thread's next run,
// and a run continuing that one), whose steps load back as well, the first
// run's steps unchanged.
func testSegments(t *testing.T, s pregel.Checkpointer) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	w := &segWriter{rng: rand.New(rand.NewPCG(seed, 14))}
	g := segmentsGraph(t)
	run := newRunID(t)
	cp0, err := g.Start(t.Context(), run, json.RawMessage(`{"log":[{"e":"start"}],"items":[{"id":"i0","text":"first"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	const steps = 150
	cps := segRun(t, s, g, w, cp0, nil, steps)
	checkSteps(t, s, run, cps)
	hist, err := s.History(t.Context(), run)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != len(cps) {
		t.Fatalf("History: %d steps, want %d", len(hist), len(cps))
	}
	for i, h := range hist {
		if want := cps[i].Changed(); !slices.Equal(h.Changed, want) {
			t.Errorf("History: step %d changed %q, want %q", i, h.Changed, want)
		}
	}

	// Runs that continue steps of this one: forks at old steps and a
	// thread's next run, continued in turn.
	for _, at := range []int{0, 9, steps / 2, steps} {
		t.Run(fmt.Sprintf("ContinueStep%d", at), func(t *testing.T) {
			base := mustLoad(t, s, run, at)
			fork := newRunID(t)
			in := json.RawMessage(fmt.Sprintf(`{"items":[{"id":"fork%d","text":"forked"}]}`, at))
			fcp, err := g.ContinueFrom(t.Context(), fork, base, in)
			if err != nil {
				t.Fatal(err)
			}
			fcps := segRun(t, s, g, w, fcp, &pregel.StepRef{RunID: run, Step: at}, 20)
			checkSteps(t, s, fork, fcps)

			// A run continuing the fork's last step, which inherited
			// segments itself.
			base = mustLoad(t, s, fork, pregel.Latest)
			next := newRunID(t)
			ncp, err := g.ContinueFrom(t.Context(), next, base, json.RawMessage(`{"log":[{"e":"next"}]}`))
			if err != nil {
				t.Fatal(err)
			}
			ncps := segRun(t, s, g, w, ncp, &pregel.StepRef{RunID: fork, Step: base.Step}, 10)
			checkSteps(t, s, next, ncps)
		})
	}
	checkSteps(t, s, run, cps)

	// A new version of the graph that does not segment the channels
	// resumes the run, and continues it in a new run: values stored in
	// segments stay readable, changed ones are stored whole.
	t.Run("GraphWithoutSegments", func(t *testing.T) {
		plain := plainGraph(t)
		cp := mustLoad(t, s, run, pregel.Latest)
		resumed := slices.Clone(cps)
		for range 15 {
			cp = segStep(t, plain, w, cp)
			if err := s.Commit(t.Context(), cp); err != nil {
				t.Fatal(err)
			}
			resumed = append(resumed, cp)
		}
		checkSteps(t, s, run, resumed)
		base := mustLoad(t, s, run, steps/2)
		next := newRunID(t)
		ncp, err := plain.ContinueFrom(t.Context(), next, base, json.RawMessage(`{"note":"plain"}`))
		if err != nil {
			t.Fatal(err)
		}
		checkSteps(t, s, next, segRun(t, s, plain, w, ncp, &pregel.StepRef{RunID: run, Step: steps / 2}, 15))
	})
}
