// Command readme is the example shown in the project's README, kept here so
// that it always compiles and its output is tested (readme_test.go). The
// README shows the lines between the README:begin and README:end markers.
// Run it with
//
//	go run ./examples/readme
package main

// README:begin
import (
	"context"
	"fmt"
	"log"
	"strings"

	"github.com/superstep/superstep/pkg/pregel"
)

// State is the graph's typed state: each field is a channel.
type State struct {
	Question string `json:"question"`
	Answer   string `json:"answer"`
}

func main() {
	g := pregel.NewGraph[State]("helpdesk")
	g.AddFunc("answer", func(_ context.Context, s State) (State, error) {
		return State{Answer: "Have you tried turning it off and on again?"}, nil
	})
	g.AddFunc("escalate", func(_ context.Context, s State) (State, error) {
		return State{Answer: "A person will call you back within the hour."}, nil
	})
	g.AddConditionalEdges(pregel.Start, func(_ context.Context, s State) ([]string, error) {
		if strings.Contains(strings.ToLower(s.Question), "urgent") {
			return []string{"escalate"}, nil
		}
		return []string{"answer"}, nil
	}, "answer", "escalate")
	g.AddEdge("answer", pregel.End).AddEdge("escalate", pregel.End)

	graph, err := g.CompileRunnable() // Invoke and Resume return State
	if err != nil {
		log.Fatal(err)
	}
	res, err := graph.Invoke(context.Background(), State{Question: "Urgent: my printer is on fire"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status, res.State.Answer)
}

// README:end
