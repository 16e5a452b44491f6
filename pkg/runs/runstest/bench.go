package runstest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// BenchmarkCreateOnThread measures runs.Service.CreateOnThread on the
// stores of env, on a thread that has earlier runs before it, each
// finished, as the thread's next run finds them. With earlier = 1, each
// create is on a new thread (of one earlier run); with more, every create
// is on the same thread, which has earlier runs and then those the
// benchmark adds. A create claims the thread, stores the run's
// record, builds its step 0 from the thread's state and commits it; the
// run is not executed (the dispatcher does nothing), and between creates,
// outside the timer, it is marked completed and the thread passed on.
//
// The state is the same size whatever the number of runs: a 10 KB
// document the first run wrote and a short last-value channel each run
// writes, so the figures show what the thread's history costs. around,
// if set, is called before each timed create and the function it returns
// after it (to meter requests, say).
func BenchmarkCreateOnThread(b *testing.B, env ThreadEnv, earlier int, around func() func()) {
	b.Helper()
	ctx := context.Background()
	type state struct {
		Doc  string `json:"doc"`
		Text string `json:"text"`
	}
	g := pregel.NewGraph[state]("bench")
	g.AddFunc("n", func(context.Context, state) (state, error) { return state{}, nil })
	g.AddEdge(pregel.Start, "n").AddEdge("n", pregel.End)
	graph, err := g.Compile()
	if err != nil {
		b.Fatal(err)
	}
	reg, err := runs.NewRegistry(graph)
	if err != nil {
		b.Fatal(err)
	}
	svc := &runs.Service{Graphs: reg, Runs: env.Runs, Checkpoints: env.Checkpoints, Threads: env.Threads, Dispatcher: nopDispatcher{}, Logger: slog.New(slog.DiscardHandler)}
	doc, _ := json.Marshal(map[string]string{"doc": strings.Repeat("d", 10_000)})
	input := json.RawMessage(`{"text":"hello"}`)
	prefix := fmt.Sprintf("bench-%d-%s", earlier, randomID())

	create := func(thread string, in json.RawMessage) runs.Run {
		r, _, err := svc.CreateOnThread(ctx, thread, runs.ThreadRunRequest{Graph: "bench", Input: in})
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	finish := func(r runs.Run) {
		r, err := runs.Mutate(ctx, env.Runs, r.ID, func(r *runs.Run) error {
			r.Status = pregel.RunCompleted
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		if err := svc.RunStopped(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
	newThread := func(id string) {
		if _, _, err := svc.CreateThread(ctx, runs.CreateThreadRequest{ThreadID: id}); err != nil {
			b.Fatal(err)
		}
		finish(create(id, doc))
	}

	if earlier < 1 {
		b.Fatalf("earlier is %d; a thread's state comes from at least one run", earlier)
	}
	busy := prefix + "-busy"
	if earlier > 1 {
		newThread(busy)
		for range earlier - 1 {
			finish(create(busy, input))
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		thread := busy
		if earlier == 1 {
			b.StopTimer()
			thread = fmt.Sprintf("%s-%d", prefix, i)
			newThread(thread)
			b.StartTimer()
		}
		var after func()
		if around != nil {
			after = around()
		}
		r := create(thread, input)
		if after != nil {
			after()
		}
		b.StopTimer()
		finish(r)
		b.StartTimer()
	}
}

// nopDispatcher leaves runs where they are.
type nopDispatcher struct{}

func (nopDispatcher) Dispatch(context.Context, runs.Run) error { return nil }
func (nopDispatcher) Signal(context.Context, runs.Run)         {}

func randomID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
