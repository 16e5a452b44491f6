package pregel_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/superstep/superstep/pkg/pregel"
)

// v1State is the state of version v1 of the test graph: a draft and its
// notes, then a review that waits for an answer.
type v1State struct {
	Draft  string   `json:"draft"`
	Notes  []string `json:"notes" reduce:"append"`
	Answer string   `json:"answer"`
}

// typedState changes the type of draft (string -> object).
type typedState struct {
	Draft  struct{ Text string } `json:"draft"`
	Notes  []string              `json:"notes" reduce:"append"`
	Answer string                `json:"answer"`
}

// lastNotes changes the reducer of notes (append -> last value).
type lastNotes struct {
	Draft  string   `json:"draft"`
	Notes  []string `json:"notes"`
	Answer string   `json:"answer"`
}

// renamedChannel renames draft to text.
type renamedChannel struct {
	Text   string   `json:"text"`
	Notes  []string `json:"notes" reduce:"append"`
	Answer string   `json:"answer"`
}

func draft[S any](set func(*S)) func(context.Context, S) (S, error) {
	return func(_ context.Context, s S) (S, error) {
		var out S
		set(&out)
		return out, nil
	}
}

func review[S any](set func(*S, string)) func(context.Context, S) (S, error) {
	return reviewOf(func(out *S, _ S, a string) { set(out, a) })
}

// reviewOf is review for a node that reads the state too.
func reviewOf[S any](set func(out *S, in S, answer string)) func(context.Context, S) (S, error) {
	return func(ctx context.Context, in S) (S, error) {
		var out S
		ans, err := pregel.Interrupt[string](ctx, "approve?")
		if err != nil {
			return out, err
		}
		set(&out, in, ans)
		return out, nil
	}
}

// buildV1 is the graph whose runs the table's versions continue: draft,
// then review (an interrupt), then end.
func buildV1(t *testing.T) *pregel.Graph {
	t.Helper()
	g, err := pregel.NewGraph[v1State]("doc").Version("v1").
		AddFunc("draft", draft(func(s *v1State) { s.Draft, s.Notes = "hello", []string{"drafted"} })).
		AddFunc("review", review(func(s *v1State, a string) { s.Answer = a })).
		AddEdge(pregel.Start, "draft").AddEdge("draft", "review").AddEdge("review", pregel.End).
		Compile()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestGraphChangesTable enforces the table of graph changes in the
// package README: a run interrupted at review under v1 continues on each
// changed graph, or stops with ErrIncompatible before anything runs, as
// the table says; a stopped run continues on v1 again.
func TestGraphChangesTable(t *testing.T) {
	answerSets := func(s *v1State, a string) { s.Answer = a }
	cases := []struct {
		change string
		build  func() (*pregel.Graph, error)
		// stops: the run stops with ErrIncompatible naming this.
		stops string
		// answer: the value of channel answer after it continues.
		answer string
	}{
		{change: "a node body changes (same shape)", build: func() (*pregel.Graph, error) {
			return pregel.NewGraph[v1State]("doc").Version("v1").
				AddFunc("draft", draft(func(s *v1State) { s.Draft = "other" })).
				AddFunc("review", review(func(s *v1State, a string) { s.Answer = "body2:" + a })).
				AddEdge(pregel.Start, "draft").AddEdge("draft", "review").AddEdge("review", pregel.End).Compile()
		}, answer: `"body2:yes"`},
		{change: "a node and edges are added", build: func() (*pregel.Graph, error) {
			return pregel.NewGraph[v1State]("doc").Version("v2").
				AddFunc("draft", draft(func(s *v1State) {})).
				AddFunc("review", review(answerSets)).
				AddFunc("publish", draft(func(s *v1State) { s.Notes = []string{"published"} })).
				AddEdge(pregel.Start, "draft").AddEdge("draft", "review").AddEdge("review", "publish").AddEdge("publish", pregel.End).Compile()
		}, answer: `"yes"`},
		{change: "the interrupted node is removed", build: func() (*pregel.Graph, error) {
			return pregel.NewGraph[v1State]("doc").Version("v2").
				AddFunc("draft", draft(func(s *v1State) {})).
				AddEdge(pregel.Start, "draft").AddEdge("draft", pregel.End).Compile()
		}, stops: `node "review"`},
		{change: "the interrupted node is renamed without a declared rename", build: func() (*pregel.Graph, error) {
			return pregel.NewGraph[v1State]("doc").Version("v2").
				AddFunc("draft", draft(func(s *v1State) {})).
				AddFunc("approval", review(answerSets)).
				AddEdge(pregel.Start, "draft").AddEdge("draft", "approval").AddEdge("approval", pregel.End).Compile()
		}, stops: `node "review"`},
		{change: "the interrupted node is renamed with RenameNode", build: func() (*pregel.Graph, error) {
			return pregel.NewGraph[v1State]("doc").Version("v2").
				AddFunc("draft", draft(func(s *v1State) {})).
				AddFunc("approval", review(func(s *v1State, a string) { s.Answer = "approval:" + a })).
				RenameNode("review", "approval").
				AddEdge(pregel.Start, "draft").AddEdge("draft", "approval").AddEdge("approval", pregel.End).Compile()
		}, answer: `"approval:yes"`},
		{change: "a planned node is no longer a target of the node that planned it", build: func() (*pregel.Graph, error) {
			return pregel.NewGraph[v1State]("doc").Version("v2").
				AddFunc("draft", draft(func(s *v1State) {})).
				AddFunc("review", review(answerSets)).
				AddEdge(pregel.Start, "draft").AddEdge(pregel.Start, "review").AddEdge("draft", pregel.End).AddEdge("review", pregel.End).Compile()
		}, stops: `no longer a target of node "draft"`},
		{change: "a channel's type changes so its value does not decode", build: func() (*pregel.Graph, error) {
			return pregel.NewGraph[typedState]("doc").Version("v2").
				AddFunc("draft", draft(func(s *typedState) {})).
				AddFunc("review", review(func(s *typedState, a string) { s.Answer = a })).
				AddEdge(pregel.Start, "draft").AddEdge("draft", "review").AddEdge("review", pregel.End).Compile()
		}, stops: `channel "draft"`},
		{change: "a channel's type changes, with a migration from v1", build: func() (*pregel.Graph, error) {
			return pregel.NewGraph[typedState]("doc").Version("v2").
				AddFunc("draft", draft(func(s *typedState) {})).
				AddFunc("review", reviewOf(func(s *typedState, in typedState, a string) { s.Answer = a + ":" + in.Draft.Text })).
				Migrate("v1", func(_ context.Context, old map[string]json.RawMessage) (map[string]json.RawMessage, error) {
					var text string
					if err := json.Unmarshal(old["draft"], &text); err != nil {
						return nil, err
					}
					old["draft"], _ = json.Marshal(map[string]string{"Text": text})
					return old, nil
				}).
				AddEdge(pregel.Start, "draft").AddEdge("draft", "review").AddEdge("review", pregel.End).Compile()
		}, answer: `"yes:hello"`},
		{change: "a channel is renamed with RenameChannel", build: func() (*pregel.Graph, error) {
			return pregel.NewGraph[renamedChannel]("doc").Version("v2").
				AddFunc("draft", draft(func(s *renamedChannel) {})).
				AddFunc("review", reviewOf(func(s *renamedChannel, in renamedChannel, a string) { s.Answer = a + ":" + in.Text })).
				RenameChannel("draft", "text").
				AddEdge(pregel.Start, "draft").AddEdge("draft", "review").AddEdge("review", pregel.End).Compile()
		}, answer: `"yes:hello"`},
		{change: "a channel's reducer changes", build: func() (*pregel.Graph, error) {
			return pregel.NewGraph[lastNotes]("doc").Version("v2").
				AddFunc("draft", draft(func(s *lastNotes) {})).
				AddFunc("review", review(func(s *lastNotes, a string) { s.Answer = a })).
				AddEdge(pregel.Start, "draft").AddEdge("draft", "review").AddEdge("review", pregel.End).Compile()
		}, stops: `channel "notes"`},
		{change: "a migration returns an error", build: func() (*pregel.Graph, error) {
			return pregel.NewGraph[v1State]("doc").Version("v2").
				AddFunc("draft", draft(func(s *v1State) {})).
				AddFunc("review", review(answerSets)).
				AddFunc("extra", draft(func(s *v1State) {})).
				Migrate("v1", func(context.Context, map[string]json.RawMessage) (map[string]json.RawMessage, error) {
					return nil, errors.New("no such customer")
				}).
				AddEdge(pregel.Start, "draft").AddEdge("draft", "review").AddEdge("review", "extra").AddEdge("extra", pregel.End).Compile()
		}, stops: `no such customer`},
	}
	for _, tc := range cases {
		t.Run(tc.change, func(t *testing.T) {
			ctx := context.Background()
			v1 := buildV1(t)
			store := pregel.NewMemoryStore()
			res, err := v1.Run(ctx, map[string]any{}, pregel.WithRunID("r1"), pregel.WithStore(store))
			if err != nil || res.Status != pregel.RunInterrupted {
				t.Fatalf("v1 run: %v, %+v", err, res)
			}
			v2, err := tc.build()
			if err != nil {
				t.Fatalf("compile v2: %v", err)
			}
			before, _ := store.Load(ctx, "r1", pregel.Latest)
			// No WithPrior: the checkpoint names the code that wrote it.
			res, err = v2.Resume(ctx, "r1", pregel.WithStore(store), pregel.WithResume("yes"))
			if tc.stops != "" {
				var ie *pregel.IncompatibleError
				if !errors.As(err, &ie) || !errors.Is(err, pregel.ErrIncompatible) || !strings.Contains(err.Error(), tc.stops) {
					t.Fatalf("resume on v2: %v, %+v; want ErrIncompatible naming %s", err, res, tc.stops)
				}
				if !strings.Contains(err.Error(), "v1 (") || !strings.Contains(err.Error(), "v2 (") && !strings.Contains(err.Error(), v2.Fingerprint()) {
					t.Errorf("error %q does not name both versions", err)
				}
				after, _ := store.Load(ctx, "r1", pregel.Latest)
				if after.Step != before.Step {
					t.Fatalf("the stopped run moved from step %d to %d", before.Step, after.Step)
				}
				// v1 again: the recorded answer is intact and the run completes.
				// Its checkpoint still holds v1's stamp: v2 wrote nothing.
				if after.Stamp == nil || after.Stamp.Fingerprint != v1.Fingerprint() {
					t.Fatalf("the stopped run's checkpoint stamp is %+v, want v1's", after.Stamp)
				}
				res, err = v1.Resume(ctx, "r1", pregel.WithStore(store))
				if err != nil || res.Status != pregel.RunCompleted || string(res.Values["answer"]) != `"yes"` {
					t.Fatalf("resume on v1 again: %v, %+v", err, res)
				}
				return
			}
			if err != nil || res.Status != pregel.RunCompleted {
				t.Fatalf("resume on v2: %v, %+v", err, res)
			}
			if got := string(res.Values["answer"]); got != tc.answer {
				t.Errorf("answer = %s, want %s", got, tc.answer)
			}
		})
	}
}

func TestFingerprint(t *testing.T) {
	a, b := buildV1(t), buildV1(t)
	if a.Fingerprint() != b.Fingerprint() || len(a.Fingerprint()) != 16 {
		t.Fatalf("fingerprints of one graph differ or are malformed: %q %q", a.Fingerprint(), b.Fingerprint())
	}
	policy, err := pregel.NewGraph[v1State]("doc").Version("v1").
		AddFunc("draft", draft(func(s *v1State) {}), pregel.WithRetry(pregel.RetryPolicy{MaxAttempts: 3})).
		AddFunc("review", review(func(s *v1State, a string) {})).
		AddEdge(pregel.Start, "draft").AddEdge("draft", "review").AddEdge("review", pregel.End).Compile()
	if err != nil {
		t.Fatal(err)
	}
	if policy.Fingerprint() == a.Fingerprint() {
		t.Error("a changed retry policy keeps the fingerprint")
	}
	if a.Version() != "v1" || a.Stamp().Reducers["notes"] != "append" {
		t.Errorf("stamp = %+v", a.Stamp())
	}
}

func TestVersionDeclarationsRefused(t *testing.T) {
	noop := func(context.Context, map[string]json.RawMessage) (map[string]json.RawMessage, error) { return nil, nil }
	base := func() *pregel.Builder[v1State] {
		return pregel.NewGraph[v1State]("doc").Version("v3").
			AddFunc("draft", draft(func(s *v1State) {})).
			AddEdge(pregel.Start, "draft").AddEdge("draft", pregel.End)
	}
	for _, tc := range []struct {
		name string
		b    *pregel.Builder[v1State]
		want string
	}{
		{"two migrations from one version", base().Migrate("v1", noop).Migrate("v1", noop), `two migrations from version "v1"`},
		{"a migration from its own version", base().Migrate("v3", noop), `own version`},
		{"a rename to a missing node", base().RenameNode("old", "gone"), `no node "gone"`},
		{"a rename from a node in use", base().RenameNode("draft", "draft"), `still a node`},
		{"a rename to a missing channel", base().RenameChannel("old", "gone"), `no channel "gone"`},
		{"an empty version", base().Version(""), `version ""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.b.Compile()
			if !errors.Is(err, pregel.ErrInvalidGraph) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("compile: %v; want ErrInvalidGraph saying %s", err, tc.want)
			}
		})
	}
}

// twoReviews is the state of TestMigrationsAppliedOnce's graph.
type twoReviews struct {
	Draft  string `json:"draft"`
	First  string `json:"first"`
	Second string `json:"second"`
}

// TestMigrationsAppliedOnce: the graph version lives in the checkpoint, so
// a migration is applied once, when the run first continues on the new
// code, whatever the run's record says (a record not yet updated after a
// crash names the old version), and a run migrated twice (v1 -> v2 -> v3)
// gets each migration once.
func TestMigrationsAppliedOnce(t *testing.T) {
	ctx := context.Background()
	build := func(version string, migrations ...string) *pregel.Graph {
		t.Helper()
		b := pregel.NewGraph[twoReviews]("doc").Version(version).
			AddFunc("draft", draft(func(s *twoReviews) { s.Draft = "hello" })).
			AddFunc("first", review(func(s *twoReviews, a string) { s.First = a })).
			AddFunc("second", review(func(s *twoReviews, a string) { s.Second = a })).
			AddEdge(pregel.Start, "draft").AddEdge("draft", "first").AddEdge("first", "second").AddEdge("second", pregel.End)
		for _, from := range migrations {
			b.Migrate(from, func(_ context.Context, old map[string]json.RawMessage) (map[string]json.RawMessage, error) {
				var d string
				if err := json.Unmarshal(old["draft"], &d); err != nil {
					return nil, err
				}
				old["draft"], _ = json.Marshal(d + "+" + version)
				return old, nil
			})
		}
		g, err := b.Compile()
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	v1, v2, v3 := build("v1"), build("v2", "v1"), build("v3", "v2")
	// Same shape: the migration, declared from v1, makes v2 adopt v1's state.
	if v2.Unchanged(v1.Stamp()) || !v1.Unchanged(v2.Stamp()) {
		t.Fatalf("v2 declares a migration from v1: v2.Unchanged(v1) must be false, v1.Unchanged(v2) true")
	}

	t.Run("a stale record does not migrate again", func(t *testing.T) {
		store := pregel.NewMemoryStore()
		if res, err := v1.Run(ctx, map[string]any{}, pregel.WithRunID("r"), pregel.WithStore(store)); err != nil || res.Status != pregel.RunInterrupted {
			t.Fatalf("v1: %v %+v", err, res)
		}
		var applied []string
		res, err := v2.Resume(ctx, "r", pregel.WithStore(store), pregel.WithResume("a"), pregel.WithPrior(v1.Stamp(), func(a []string) { applied = a }))
		if err != nil || res.Status != pregel.RunInterrupted || string(res.Values["draft"]) != `"hello+v2"` {
			t.Fatalf("v2: %v %+v", err, res)
		}
		if len(applied) != 1 || applied[0] != "migrate from version v1" {
			t.Errorf("applied %q", applied)
		}
		// The record still says v1 (its update was lost): the checkpoint,
		// written by v2, wins.
		applied = nil
		res, err = v2.Resume(ctx, "r", pregel.WithStore(store), pregel.WithResume("b"), pregel.WithPrior(v1.Stamp(), func(a []string) { applied = a }))
		if err != nil || res.Status != pregel.RunCompleted || string(res.Values["draft"]) != `"hello+v2"` || applied != nil {
			t.Fatalf("v2 again: %v %+v (applied %q); want draft migrated once", err, res, applied)
		}
	})
	t.Run("v1 to v2 to v3", func(t *testing.T) {
		store := pregel.NewMemoryStore()
		if res, err := v1.Run(ctx, map[string]any{}, pregel.WithRunID("r"), pregel.WithStore(store)); err != nil || res.Status != pregel.RunInterrupted {
			t.Fatalf("v1: %v %+v", err, res)
		}
		if res, err := v2.Resume(ctx, "r", pregel.WithStore(store), pregel.WithResume("a")); err != nil || res.Status != pregel.RunInterrupted {
			t.Fatalf("v2: %v %+v", err, res)
		}
		cp, _ := store.Load(ctx, "r", pregel.Latest)
		if cp.Stamp == nil || cp.Stamp.Version != "v2" {
			t.Fatalf("checkpoint written on v2 has stamp %+v", cp.Stamp)
		}
		res, err := v3.Resume(ctx, "r", pregel.WithStore(store), pregel.WithResume("b"))
		if err != nil || res.Status != pregel.RunCompleted || string(res.Values["draft"]) != `"hello+v2+v3"` || string(res.Values["second"]) != `"b"` {
			t.Fatalf("v3: %v %+v", err, res)
		}
	})
}

// TestThreadStateAdopted: a thread's next run starts from state an older
// version wrote (ContinueFrom): a state that fits continues, with
// declared renames and migrations applied; one that does not is refused
// with ErrIncompatible naming the channel, and nothing is written.
func TestThreadStateAdopted(t *testing.T) {
	ctx := context.Background()
	v1 := buildV1(t)
	store := pregel.NewMemoryStore()
	res, err := v1.Run(ctx, map[string]any{}, pregel.WithRunID("t1"), pregel.WithStore(store))
	if err == nil {
		res, err = v1.Resume(ctx, "t1", pregel.WithStore(store), pregel.WithResume("yes"))
	}
	if err != nil || res.Status != pregel.RunCompleted {
		t.Fatalf("v1: %v %+v", err, res)
	}
	base, err := store.Load(ctx, "t1", pregel.Latest)
	if err != nil {
		t.Fatal(err)
	}
	typed := pregel.NewGraph[typedState]("doc").Version("v2").
		AddFunc("draft", draft(func(s *typedState) {})).
		AddFunc("review", review(func(s *typedState, a string) { s.Answer = a })).
		AddEdge(pregel.Start, "draft").AddEdge("draft", "review").AddEdge("review", pregel.End)
	v2, err := typed.Compile()
	if err != nil {
		t.Fatal(err)
	}
	_, err = v2.ContinueFrom(ctx, "t2", base, json.RawMessage(`{"answer":"again"}`))
	if !errors.Is(err, pregel.ErrIncompatible) || !strings.Contains(err.Error(), `channel "draft"`) {
		t.Fatalf("ContinueFrom on a changed type: %v; want ErrIncompatible naming channel draft", err)
	}
	v3, err := typed.Version("v3").Migrate("v1", func(_ context.Context, old map[string]json.RawMessage) (map[string]json.RawMessage, error) {
		var s string
		_ = json.Unmarshal(old["draft"], &s)
		old["draft"], _ = json.Marshal(map[string]string{"Text": s})
		return old, nil
	}).Compile()
	if err != nil {
		t.Fatal(err)
	}
	cp, err := v3.ContinueFrom(ctx, "t3", base, json.RawMessage(`{"answer":"again"}`))
	if err != nil || string(cp.Values["draft"]) != `{"Text":"hello"}` || cp.Stamp == nil || cp.Stamp.Version != "v3" {
		t.Fatalf("ContinueFrom with a migration: %v %+v", err, cp)
	}
}
