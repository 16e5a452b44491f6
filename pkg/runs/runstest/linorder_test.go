package runstest

import (
	"context"
	"maps"
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/superstep/superstep/pkg/runs"
)

// TestOrderFactsPrune checks that the order facts only prune: two
// overlapping creates may queue in either order without them; with them,
// only in the order the thread's records show, and a read that saw the
// other order makes the history illegal.
func TestOrderFactsPrune(t *testing.T) {
	history := []porcupine.Operation{
		{ClientId: 0, Call: 0, Return: 10, Input: linInput{Thread: "t", Op: "create", Run: "a", Strategy: runs.StrategyEnqueue}, Output: linOutput{}},
		{ClientId: 1, Call: 1, Return: 11, Input: linInput{Thread: "t", Op: "create", Run: "b", Strategy: runs.StrategyEnqueue}, Output: linOutput{}},
		{ClientId: 0, Call: 20, Return: 21, Input: linInput{Thread: "t", Op: "read"}, Output: linOutput{Messages: []string{"b", "re:b", "done", "a", "re:a", "done"}}},
	}
	done := runFact{Status: "completed", Writes: 3}
	with := func(ca, cb, oa, ob int) map[string]runFact {
		a, b := done, done
		a.Claim, b.Claim, a.Order, b.Order = ca, cb, oa, ob
		return map[string]runFact{"a": a, "b": b}
	}
	for _, tc := range []struct {
		name  string
		facts map[string]runFact
		want  porcupine.CheckResult
	}{
		{"no order known", with(0, 0, 0, 0), porcupine.Ok},
		{"the order the read saw", with(2, 1, 2, 1), porcupine.Ok},
		{"claims in the other order", with(1, 2, 0, 0), porcupine.Illegal},
		{"took the thread in the other order", with(0, 0, 1, 2), porcupine.Illegal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := append([]porcupine.Operation(nil), history...)
			if got := porcupine.CheckOperations(newLinModel(h, maps.Clone(tc.facts)).model(), h); got != (tc.want == porcupine.Ok) {
				t.Errorf("linearizable = %v, want %s", got, tc.want)
			}
		})
	}
}

// TestOrderLog checks the orders read from a thread's versions: the
// claims in the order runs first appear (active, queued or superseding),
// the activations in the order runs first hold the thread.
func TestOrderLog(t *testing.T) {
	m := runs.NewMemoryStore()
	l := newOrderLog(m)
	ctx := context.Background()
	th, _, err := l.CreateThread(ctx, runs.Thread{ID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []func(*runs.Thread){
		func(th *runs.Thread) { th.Active = "a" },
		func(th *runs.Thread) { th.Queue = []string{"b"} },
		func(th *runs.Thread) { th.Queue = []string{"b", "c"} },
		func(th *runs.Thread) {
			th.Queue = []string{"b", "c", "d"}
			th.Superseding = &runs.Superseding{Run: "d"}
		},
		func(th *runs.Thread) { th.Active, th.Queue, th.Superseding = "b", []string{"d"}, nil }, // c cancelled
		func(th *runs.Thread) { th.Active, th.Queue = "d", nil },
	} {
		step(&th)
		if th, err = l.UpdateThread(ctx, th); err != nil {
			t.Fatal(err)
		}
	}
	claims, acts := l.orders()
	if want := map[string]int{"a": 1, "b": 2, "c": 3, "d": 4}; !maps.Equal(claims, want) {
		t.Errorf("claims = %v, want %v", claims, want)
	}
	if want := map[string]int{"a": 1, "b": 2, "d": 3}; !maps.Equal(acts, want) {
		t.Errorf("activations = %v, want %v", acts, want)
	}
}
