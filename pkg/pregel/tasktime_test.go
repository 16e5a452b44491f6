package pregel_test

import (
	"context"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
)

// Each task's status in the history says when it ran: a slow node's
// duration covers its work, and the two parallel tasks of a step overlap.
func TestTaskTimesInHistory(t *testing.T) {
	const nap = 30 * time.Millisecond
	slow := func(context.Context, St) (St, error) { time.Sleep(nap); return St{Total: 1}, nil }
	g := pregel.NewGraph[St]("times")
	g.AddFunc("a", logs("a")).AddFunc("slow1", slow).AddFunc("slow2", slow)
	g.AddEdge(pregel.Start, "a").AddEdge("a", "slow1").AddEdge("a", "slow2")
	g.AddEdge("slow1", pregel.End).AddEdge("slow2", pregel.End)
	cg := compile(t, g)
	store := pregel.NewMemoryStore()
	before := time.Now()
	if _, err := cg.Run(context.Background(), St{}, pregel.WithStore(store), pregel.WithRunID("r")); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	h, err := store.History(context.Background(), "r")
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 3 || len(h[2].Tasks) != 2 {
		t.Fatalf("history = %+v", h)
	}
	for _, s := range h[1:] {
		for _, ts := range s.Tasks {
			if ts.Started.Before(before.Add(-time.Second)) || ts.Finished.After(after) || ts.Finished.Before(ts.Started) {
				t.Errorf("step %d %s ran %v .. %v, outside the run (%v .. %v)", s.Step, ts.Node, ts.Started, ts.Finished, before, after)
			}
			if ts.Started.Location() != time.UTC {
				t.Errorf("step %d %s: time in %v, want UTC", s.Step, ts.Node, ts.Started.Location())
			}
		}
	}
	s1, s2 := h[2].Tasks[0], h[2].Tasks[1]
	for _, ts := range []pregel.TaskStatus{s1, s2} {
		if d := ts.Duration(); d < nap {
			t.Errorf("%s took %v, want at least %v", ts.Node, d, nap)
		}
	}
	if !s1.Started.Before(s2.Finished) || !s2.Started.Before(s1.Finished) {
		t.Errorf("parallel tasks do not overlap: %v..%v and %v..%v", s1.Started, s1.Finished, s2.Started, s2.Finished)
	}
	if a := h[1].Tasks[0]; a.Finished.After(s1.Started) || a.Finished.After(s2.Started) {
		t.Errorf("a finished at %v, after step 2 began", a.Finished)
	}
	if (pregel.TaskStatus{}).Duration() != 0 {
		t.Error("a status without times has a duration")
	}
}
