package graphs

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
)

// ExecLogGraph is the name of the test-only graph registered when
// ExecLogEnv is set. Each round runs "tick", then "fast" and "slow" in
// parallel (joined back into tick), so a step has two tasks that finish
// at different times:
//
//	{"rounds": 3, "fast_ms": 10, "slow_ms": 300}
//
// Every execution of a node appends "TASK_ID NODE STEP\n" to the log file
// before the node does its work. fast_ms and slow_ms delay only the first
// execution of a task: one executed again (after a crash or a cancel)
// finishes at once, which keeps recovery tests quick.
const ExecLogGraph = "test-exec-log"

// ExecLogLine is the message each node of ExecLogGraph logs, with
// slog.InfoContext and the node's context, as a graph's own code would.
const ExecLogLine = "test-exec-log: node runs"

// execLogState is the state of ExecLogGraph.
type execLogState struct {
	Rounds int `json:"rounds"`
	FastMS int `json:"fast_ms,omitempty"`
	SlowMS int `json:"slow_ms,omitempty"`
	// Round counts the ticks so far.
	Round int `json:"round"`
	// Done lists "ROUND:NODE" for every fast and slow task.
	Done []string `json:"done,omitempty" reduce:"append"`
}

func execLogGraph(path string) (*pregel.Graph, error) {
	// logExec appends the task to the log and reports whether it had run
	// before.
	logExec := func(ctx context.Context) (again bool, err error) {
		t, _ := pregel.TaskFrom(ctx)
		// A graph's own log line, through the process's default logger
		// (the tracing tests look for it with the node's ids).
		slog.InfoContext(ctx, ExecLogLine, "task", t.TaskID, "node", t.Node)
		if b, err := os.ReadFile(path); err == nil {
			again = strings.Contains(string(b), t.TaskID+" ")
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return again, fmt.Errorf("exec log: %w", err)
		}
		_, err = fmt.Fprintf(f, "%s %s %d\n", t.TaskID, t.Node, t.Step)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return again, err
	}
	sleep := func(ctx context.Context, ms int) error {
		t := time.NewTimer(time.Duration(ms) * time.Millisecond)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		}
	}
	work := func(name string, delay func(execLogState) int) func(context.Context, execLogState) (execLogState, error) {
		return func(ctx context.Context, s execLogState) (execLogState, error) {
			again, err := logExec(ctx)
			if err != nil {
				return execLogState{}, err
			}
			if !again {
				if err := sleep(ctx, delay(s)); err != nil {
					return execLogState{}, err
				}
			}
			return execLogState{Done: []string{fmt.Sprintf("%d:%s", s.Round, name)}}, nil
		}
	}
	g := pregel.NewGraph[execLogState](ExecLogGraph).
		Describe("Test only: rounds of a tick then two parallel tasks, each execution logged to a file.").
		ValidateInput(func(s execLogState) error {
			if s.Rounds < 1 || s.Rounds > 100 || s.FastMS < 0 || s.SlowMS < 0 || s.FastMS > 60_000 || s.SlowMS > 60_000 {
				return fmt.Errorf(`want {"rounds": 1..100, "fast_ms": 0..60000, "slow_ms": 0..60000}`)
			}
			return nil
		})
	g.AddFunc("tick", func(ctx context.Context, s execLogState) (execLogState, error) {
		if _, err := logExec(ctx); err != nil {
			return execLogState{}, err
		}
		return execLogState{Round: s.Round + 1}, nil
	}, pregel.Writes("round"))
	g.AddFunc("fast", work("fast", func(s execLogState) int { return s.FastMS }), pregel.Writes("done"))
	g.AddFunc("slow", work("slow", func(s execLogState) int { return s.SlowMS }), pregel.Writes("done"))
	g.AddEdge(pregel.Start, "tick")
	g.AddConditionalEdges("tick", func(_ context.Context, s execLogState) ([]string, error) {
		if s.Round > s.Rounds {
			return []string{pregel.End}, nil
		}
		return []string{"fast", "slow"}, nil
	}, "fast", "slow", pregel.End)
	g.AddJoin("tick", "fast", "slow")
	return g.Compile()
}
