//go:build !superstep.lambda

package superstep_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/superstep"
)

type greeting struct {
	Name    string `json:"name"`
	Message string `json:"message"`
}

// Run is the command line a project's main serves, called in-process
// here: `run` starts the graph on the local store and prints where it
// stopped (the exit code says how: 0 completed).
func ExampleRun() {
	g := pregel.NewGraph[greeting]("greet")
	g.AddFunc("greet", func(_ context.Context, s greeting) (greeting, error) {
		return greeting{Message: "Hello, " + s.Name + "!"}, nil
	})
	g.AddEdge(pregel.Start, "greet").AddEdge("greet", pregel.End)
	graph, err := g.Compile()
	if err != nil {
		fmt.Println(err)
		return
	}
	dir, err := os.MkdirTemp("", "superstep-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	var out, errs strings.Builder
	env := superstep.Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errs, Getenv: func(string) string { return "" }}
	code := superstep.Run(context.Background(), env, []string{"run", "greet", "--input", `{"name": "Ada"}`, "--run-id", "greet-1"},
		superstep.WithCompiledGraphs(graph), superstep.WithStorePath(filepath.Join(dir, "superstep.db")))
	fmt.Println("exit code", code)
	fmt.Print(out.String()) // progress goes to errs
	// Output:
	// exit code 0
	// STEP  NODE   STATUS     ATTEMPTS  REASON
	// 1     greet  completed  1         -
	//
	// State:
	// {
	//   "message": "Hello, Ada!",
	//   "name": "Ada"
	// }
	//
	// Run greet-1 of greet: completed at step 1 (1 completed, 0 skipped, 0 cancelled, 0 failed)
}
