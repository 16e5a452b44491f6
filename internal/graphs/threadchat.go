package graphs

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
)

// ThreadChatEnv names the environment variable that registers the
// test-only graph [ThreadChatGraph]: when it holds a number of
// milliseconds (0 or more), that graph is served too and each of its
// nodes takes that long. The fault tests of the linearizability check
// (cmd/superstep) drive threads of it on a dev server they kill. Leave it
// unset in real use.
const ThreadChatEnv = "SUPERSTEP_TEST_THREAD_CHAT"

// ThreadChatGraph is the name of the test-only graph of [ThreadChatEnv]:
// the conversation turn of the thread model in pkg/runs/runstest. A run
// appends its input message, then "re:"+message (node reply), then
// "done" (node done); a run whose message starts with "ask" stops at an
// interrupt in reply until it is resumed.
const ThreadChatGraph = "test-thread-chat"

type threadChatState struct {
	Messages []string `json:"messages" reduce:"append"`
}

func threadChatGraph(delay string) (*pregel.Graph, error) {
	ms, err := strconv.Atoi(delay)
	if err != nil || ms < 0 || ms > 10_000 {
		return nil, fmt.Errorf("%s=%q: want milliseconds, 0..10000", ThreadChatEnv, delay)
	}
	pause := func(ctx context.Context) error {
		if ms == 0 {
			return nil
		}
		t := time.NewTimer(time.Duration(ms) * time.Millisecond)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		}
	}
	g := pregel.NewGraph[threadChatState](ThreadChatGraph).
		Describe("Test only: a conversation turn (message, reply, done); messages starting with ask wait for an answer.").
		ValidateInput(func(s threadChatState) error {
			if len(s.Messages) == 0 {
				return fmt.Errorf(`want {"messages": ["..."]}`)
			}
			return nil
		})
	g.AddFunc("reply", func(ctx context.Context, s threadChatState) (threadChatState, error) {
		last := s.Messages[len(s.Messages)-1]
		if strings.HasPrefix(last, "ask") {
			if _, err := pregel.Interrupt[string](ctx, "go on?"); err != nil {
				return threadChatState{}, err
			}
		}
		if err := pause(ctx); err != nil {
			return threadChatState{}, err
		}
		return threadChatState{Messages: []string{"re:" + last}}, nil
	})
	g.AddFunc("done", func(ctx context.Context, _ threadChatState) (threadChatState, error) {
		if err := pause(ctx); err != nil {
			return threadChatState{}, err
		}
		return threadChatState{Messages: []string{"done"}}, nil
	})
	g.AddEdge(pregel.Start, "reply").AddEdge("reply", "done").AddEdge("done", pregel.End)
	return g.Compile()
}
