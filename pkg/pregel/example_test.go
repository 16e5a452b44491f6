package pregel_test

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/superstep/superstep/pkg/pregel"
)

type ticket struct {
	Question string `json:"question"`
	Answer   string `json:"answer"`
}

// A graph's runs return its own state type through a Runnable.
func ExampleRunnable() {
	g := pregel.NewGraph[ticket]("helpdesk")
	g.AddFunc("answer", func(_ context.Context, s ticket) (ticket, error) {
		return ticket{Answer: "Try turning it off and on again."}, nil
	})
	g.AddEdge(pregel.Start, "answer").AddEdge("answer", pregel.End)
	run, err := g.CompileRunnable()
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := run.Invoke(context.Background(), ticket{Question: "My screen is dark"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Status, res.Step, res.State.Answer)
	// Output: completed 1 Try turning it off and on again.
}

type words struct {
	Text   string   `json:"text"`
	Counts []string `json:"counts" reduce:"append"`
}

// A fan-out starts one task per item; each reads its item with Arg, and
// the append reducer collects their writes.
func ExampleBuilder_AddFanOut() {
	g := pregel.NewGraph[words]("count")
	g.AddFanOut(pregel.Start, "count", func(_ context.Context, s words) ([]any, error) {
		var items []any
		for _, w := range strings.Fields(s.Text) {
			items = append(items, w)
		}
		return items, nil
	})
	g.AddFunc("count", func(ctx context.Context, _ words) (words, error) {
		w, err := pregel.Arg[string](ctx)
		if err != nil {
			return words{}, err
		}
		return words{Counts: []string{fmt.Sprintf("%s=%d", w, len(w))}}, nil
	})
	g.AddEdge("count", pregel.End)
	run, err := g.CompileRunnable()
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := run.Invoke(context.Background(), words{Text: "durable agent graphs"})
	if err != nil {
		fmt.Println(err)
		return
	}
	counts := slices.Sorted(slices.Values(res.State.Counts)) // tasks finish in any order
	fmt.Println(res.Status, counts)
	// Output: completed [agent=5 durable=7 graphs=6]
}

// An interrupt stops the run until it is resumed with an answer.
func ExampleInterrupt() {
	g := pregel.NewGraph[ticket]("approve")
	g.AddFunc("review", func(ctx context.Context, s ticket) (ticket, error) {
		answer, err := pregel.Interrupt[string](ctx, "approve "+s.Question+"?")
		if err != nil {
			return ticket{}, err
		}
		return ticket{Answer: answer}, nil
	})
	g.AddEdge(pregel.Start, "review").AddEdge("review", pregel.End)
	run, err := g.CompileRunnable()
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, store := context.Background(), pregel.NewMemoryStore()
	res, err := run.Invoke(ctx, ticket{Question: "a laptop"}, pregel.WithStore(store), pregel.WithRunID("r1"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Status, string(res.Interrupts[0].Value))
	res, err = run.Resume(ctx, "r1", pregel.WithStore(store), pregel.WithResume("yes"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Status, res.State.Answer)
	// Output:
	// interrupted "approve a laptop?"
	// completed yes
}
