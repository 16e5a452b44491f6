package pregel_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
)

// askGraph is one node "ask" that asks for a T and stores what it got
// with store; retry is its retry policy.
func askGraph[T any](t *testing.T, retry pregel.RetryPolicy, execs *atomic.Int32, store func(T) St) *pregel.Graph {
	t.Helper()
	g := pregel.NewGraph[St]("ask")
	g.AddFunc("ask", func(ctx context.Context, _ St) (St, error) {
		execs.Add(1)
		v, err := pregel.Interrupt[T](ctx, "how many?")
		if err != nil {
			return St{}, err
		}
		return store(v), nil
	}, pregel.WithRetry(retry))
	g.AddEdge(pregel.Start, "ask").AddEdge("ask", pregel.End)
	return compile(t, g)
}

// A wrong-typed answer is refused before the run goes on: the run still
// waits, and a later correct answer completes it.
func TestWrongTypedAnswerIsRefusedAndTheRunWaits(t *testing.T) {
	var execs atomic.Int32
	cg := askGraph(t, pregel.RetryPolicy{MaxAttempts: 3, InitialInterval: time.Millisecond}, &execs, func(n int) St { return St{Count: n} })
	store := pregel.NewMemoryStore()
	ctx := context.Background()
	res, err := cg.Run(ctx, nil, pregel.WithStore(store), pregel.WithRunID("r"))
	if err != nil || res.Status != pregel.RunInterrupted {
		t.Fatalf("Run = %s, %v; want interrupted", res.Status, err)
	}
	in := res.Interrupts[0]
	if in.Type != pregel.TypeInteger {
		t.Errorf("interrupt type = %q, want %q", in.Type, pregel.TypeInteger)
	}
	for _, bad := range []pregel.RunOption{
		pregel.WithResume("three"),
		pregel.WithResumeByID(map[string]any{in.ID: "three"}),
		pregel.WithResume(3.5),
		pregel.WithResume(map[string]int{"n": 3}),
	} {
		_, err = cg.Resume(ctx, "r", pregel.WithStore(store), bad)
		if !errors.Is(err, pregel.ErrInvalidResume) || !strings.Contains(err.Error(), "wants an integer") {
			t.Errorf("Resume with a wrong-typed answer: %v; want ErrInvalidResume saying an integer is wanted", err)
		}
	}
	pending, err := store.PendingTasks(ctx, "r", 1)
	if err != nil || len(pending) != 1 || pending[0].Status != pregel.NodeInterrupted || len(pending[0].Resume) != 0 {
		t.Fatalf("after refused answers, pending = %+v, %v; want the task still waiting without an answer", pending, err)
	}
	res, err = cg.Resume(ctx, "r", pregel.WithStore(store), pregel.WithResume(3))
	if err != nil || res.Status != pregel.RunCompleted || state(t, res).Count != 3 {
		t.Fatalf("Resume with 3 = %s %+v, %v; want completed with count 3", res.Status, res.Values, err)
	}
	if execs.Load() != 2 {
		t.Errorf("ask executed %d times, want 2 (the refused answers never reached it)", execs.Load())
	}
}

// An answer of the right JSON type that still does not decode (a field of
// the wrong type) is not lost either: the node asks again under the same
// interrupt id, saying why, without retrying; a correct answer completes
// the run.
func TestUndecodableAnswerAsksAgain(t *testing.T) {
	type answer struct {
		N int `json:"n"`
	}
	var execs atomic.Int32
	cg := askGraph(t, pregel.RetryPolicy{MaxAttempts: 3, InitialInterval: time.Millisecond}, &execs, func(a answer) St { return St{Count: a.N} })
	store := pregel.NewMemoryStore()
	ctx := context.Background()
	res, err := cg.Run(ctx, nil, pregel.WithStore(store), pregel.WithRunID("r"))
	if err != nil || res.Status != pregel.RunInterrupted || res.Interrupts[0].Type != pregel.TypeObject {
		t.Fatalf("Run = %s %+v, %v; want interrupted for an object", res.Status, res.Interrupts, err)
	}
	id := res.Interrupts[0].ID
	res, err = cg.Resume(ctx, "r", pregel.WithStore(store), pregel.WithResume(json.RawMessage(`{"n":"three"}`)))
	if err != nil || res.Status != pregel.RunInterrupted || len(res.Interrupts) != 1 {
		t.Fatalf("Resume with {n: three} = %s %+v, %v; want interrupted again", res.Status, res.Interrupts, err)
	}
	again := res.Interrupts[0]
	if again.ID != id || !strings.Contains(again.Error, `"n" is a string, want an integer`) || strings.Contains(again.Error, "Go") {
		t.Errorf("asked again as %+v; want the same id %s and an error naming field n", again, id)
	}
	if execs.Load() != 2 {
		t.Errorf("ask executed %d times, want 2: a refused answer is not retried", execs.Load())
	}
	res, err = cg.Resume(ctx, "r", pregel.WithStore(store), pregel.WithResume(map[string]int{"n": 3}))
	if err != nil || res.Status != pregel.RunCompleted || state(t, res).Count != 3 {
		t.Fatalf("Resume with {n: 3} = %s %+v, %v; want completed with count 3", res.Status, res.Interrupts, err)
	}
}

// A subgraph's interrupt keeps its type: the parent refuses a wrong-typed
// answer too.
func TestSubgraphInterruptKeepsItsType(t *testing.T) {
	var execs atomic.Int32
	inner := askGraph(t, pregel.RetryPolicy{}, &execs, func(n int) St { return St{Count: n} })
	g := pregel.NewGraph[St]("outer")
	g.AddNode("inner", pregel.Subgraph(inner, func(St) St { return St{} }, func(_ St, c St) St { return St{Count: c.Count} }))
	g.AddEdge(pregel.Start, "inner").AddEdge("inner", pregel.End)
	outer := compile(t, g)
	store := pregel.NewMemoryStore()
	ctx := context.Background()
	res, err := outer.Run(ctx, nil, pregel.WithStore(store), pregel.WithRunID("o"))
	if err != nil || res.Status != pregel.RunInterrupted || res.Interrupts[0].Type != pregel.TypeInteger {
		t.Fatalf("Run = %s %+v, %v; want interrupted for an integer", res.Status, res.Interrupts, err)
	}
	if _, err := outer.Resume(ctx, "o", pregel.WithStore(store), pregel.WithResume("three")); !errors.Is(err, pregel.ErrInvalidResume) {
		t.Fatalf("Resume with three: %v; want ErrInvalidResume", err)
	}
	res, err = outer.Resume(ctx, "o", pregel.WithStore(store), pregel.WithResume(3))
	if err != nil || res.Status != pregel.RunCompleted || state(t, res).Count != 3 {
		t.Fatalf("Resume with 3 = %s, %v; want completed with count 3", res.Status, err)
	}
}

func TestInterruptInfoCheck(t *testing.T) {
	tests := []struct {
		typ, value string
		ok         bool
	}{
		{"", `"anything"`, true},
		{"", `{"a":1}`, true},
		{"", `{`, false},
		{"", ``, false},
		{pregel.TypeInteger, `3`, true},
		{pregel.TypeInteger, `-3`, true},
		{pregel.TypeInteger, `null`, true},
		{pregel.TypeInteger, `"three"`, false},
		{pregel.TypeInteger, `3.5`, false},
		{pregel.TypeInteger, `3e2`, false},
		{pregel.TypeNumber, `3`, true},
		{pregel.TypeNumber, `3.5`, true},
		{pregel.TypeNumber, `true`, false},
		{pregel.TypeString, `"x"`, true},
		{pregel.TypeString, `1`, false},
		{pregel.TypeBoolean, `false`, true},
		{pregel.TypeBoolean, `"false"`, false},
		{pregel.TypeArray, ` [1]`, true},
		{pregel.TypeArray, `{}`, false},
		{pregel.TypeObject, `{}`, true},
		{pregel.TypeObject, `[]`, false},
	}
	for _, tt := range tests {
		in := pregel.InterruptInfo{ID: "t.0", Node: "n", Type: tt.typ}
		err := in.Check(json.RawMessage(tt.value))
		if (err == nil) != tt.ok || err != nil && !errors.Is(err, pregel.ErrInvalidResume) {
			t.Errorf("type %q, value %s: %v; want ok=%t", tt.typ, tt.value, err, tt.ok)
		}
	}
}

// The type an interrupt records follows its Go type; types that decode
// themselves accept any JSON.
func TestInterruptRecordsItsType(t *testing.T) {
	ask := func(f func(ctx context.Context) error) string {
		g := pregel.NewGraph[St]("t")
		g.AddFunc("n", func(ctx context.Context, _ St) (St, error) { return St{}, f(ctx) })
		g.AddEdge(pregel.Start, "n").AddEdge("n", pregel.End)
		res, err := compile(t, g).Run(context.Background(), nil)
		if err != nil || res.Status != pregel.RunInterrupted {
			t.Fatalf("Run = %s, %v", res.Status, err)
		}
		return res.Interrupts[0].Type
	}
	type obj struct{ A int }
	tests := []struct {
		name string
		f    func(ctx context.Context) error
		want string
	}{
		{"int", func(ctx context.Context) error { _, err := pregel.Interrupt[int](ctx, nil); return err }, pregel.TypeInteger},
		{"*uint8", func(ctx context.Context) error { _, err := pregel.Interrupt[*uint8](ctx, nil); return err }, pregel.TypeInteger},
		{"float64", func(ctx context.Context) error { _, err := pregel.Interrupt[float64](ctx, nil); return err }, pregel.TypeNumber},
		{"string", func(ctx context.Context) error { _, err := pregel.Interrupt[string](ctx, nil); return err }, pregel.TypeString},
		{"bool", func(ctx context.Context) error { _, err := pregel.Interrupt[bool](ctx, nil); return err }, pregel.TypeBoolean},
		{"[]byte", func(ctx context.Context) error { _, err := pregel.Interrupt[[]byte](ctx, nil); return err }, pregel.TypeString},
		{"[]string", func(ctx context.Context) error { _, err := pregel.Interrupt[[]string](ctx, nil); return err }, pregel.TypeArray},
		{"map", func(ctx context.Context) error { _, err := pregel.Interrupt[map[string]int](ctx, nil); return err }, pregel.TypeObject},
		{"struct", func(ctx context.Context) error { _, err := pregel.Interrupt[obj](ctx, nil); return err }, pregel.TypeObject},
		{"any", func(ctx context.Context) error { _, err := pregel.Interrupt[any](ctx, nil); return err }, ""},
		{"json.RawMessage", func(ctx context.Context) error { _, err := pregel.Interrupt[json.RawMessage](ctx, nil); return err }, ""},
		{"time.Time", func(ctx context.Context) error { _, err := pregel.Interrupt[time.Time](ctx, nil); return err }, ""},
	}
	for _, tt := range tests {
		if got := ask(tt.f); got != tt.want {
			t.Errorf("Interrupt[%s] records type %q, want %q", tt.name, got, tt.want)
		}
	}
}
