package a2a_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	core "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/superstep/superstep/pkg/a2a"
	"github.com/superstep/superstep/pkg/agent"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// MemoState is the state of the test graph "memo": a conversation.
type MemoState struct {
	Messages []agent.Message `json:"messages" reduce:"messages"`
}

// memoGraph answers the last user message of its conversation, saying
// what the user said before it, so that a reply shows what the run saw:
//
//	"wait"  answers after 400ms, or once hold is closed when it is not nil
//	"slow"  runs until cancelled (or 30s)
//	"ask"   asks for a colour (input-required), answers "colour <answer>"
//
// Text sent to it over A2A becomes a user message (agent.TextMessages).
func memoGraph(t testing.TB, hold <-chan struct{}) *pregel.Graph {
	t.Helper()
	waited := time.After
	if hold != nil {
		waited = func(time.Duration) <-chan time.Time {
			c := make(chan time.Time, 1)
			go func() { <-hold; c <- time.Now() }()
			return c
		}
	}
	b := agent.Register(pregel.NewGraph[MemoState]("memo")).Describe("Remembers what you said.")
	b.AddFunc("reply", func(ctx context.Context, s MemoState) (MemoState, error) {
		var said []string
		for _, m := range s.Messages {
			if m.Role == agent.RoleUser {
				said = append(said, fmt.Sprintf("%q", m.Text()))
			}
		}
		if len(said) == 0 {
			return MemoState{}, errors.New("no user message")
		}
		last := said[len(said)-1]
		switch last {
		case `"wait"`:
			select {
			case <-ctx.Done():
				return MemoState{}, ctx.Err()
			case <-waited(400 * time.Millisecond):
			}
		case `"slow"`:
			select {
			case <-ctx.Done():
				return MemoState{}, ctx.Err()
			case <-time.After(30 * time.Second):
			}
		case `"ask"`:
			colour, err := pregel.Interrupt[string](ctx, "which colour?")
			if err != nil {
				return MemoState{}, err
			}
			return MemoState{Messages: []agent.Message{agent.AssistantText("colour " + colour)}}, nil
		}
		earlier := "nothing"
		if len(said) > 1 {
			earlier = strings.Join(said[:len(said)-1], ", ")
		}
		return MemoState{Messages: []agent.Message{agent.AssistantText(fmt.Sprintf("you said %s; before that: %s", last, earlier))}}, nil
	})
	b.AddEdge(pregel.Start, "reply")
	b.AddEdge("reply", pregel.End)
	g, err := b.Compile(agent.TextMessages())
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// threadEnv is a server whose Service keeps threads, serving memo and
// chat.
func threadEnv(t testing.TB, sqlite bool, opts ...a2a.Option) *env {
	t.Helper()
	return heldThreadEnv(t, sqlite, nil, opts...)
}

// heldThreadEnv is threadEnv whose memo "wait" answers once hold is closed
// (not after 400ms), so that a test decides when the first task ends.
func heldThreadEnv(t testing.TB, sqlite bool, hold <-chan struct{}, opts ...a2a.Option) *env {
	t.Helper()
	return newEnv(t, envConfig{events: true, sqlite: sqlite, threads: true, opts: opts, graphs: []*pregel.Graph{memoGraph(t, hold), chatGraph(t)}})
}

// inContext returns a text message in context id.
func inContext(s, id string) *core.Message {
	m := text(s)
	m.ContextID = id
	return m
}

// lastReply is the text of the last message of a completed memo task's
// conversation (its artifact's messages channel).
func lastReply(t testing.TB, task *core.Task) string {
	t.Helper()
	wantState(t, task, core.TaskStateCompleted)
	msgs, _ := stateData(t, task)["messages"].([]any)
	if len(msgs) == 0 {
		t.Fatalf("task %s has no messages in its state", task.ID)
	}
	m, _ := msgs[len(msgs)-1].(map[string]any)
	content, _ := m["content"].([]any)
	if len(content) == 0 {
		t.Fatalf("last message %v has no content", m)
	}
	block, _ := content[0].(map[string]any)
	s, _ := block["text"].(string)
	return s
}

// historyText renders a task's history as "user: ... | agent: ...".
func historyText(task *core.Task) string {
	var b strings.Builder
	for i, m := range task.History {
		if i > 0 {
			b.WriteString(" | ")
		}
		role := "agent"
		if m.Role == core.MessageRoleUser {
			role = "user"
		}
		b.WriteString(role + ": ")
		for _, p := range m.Parts {
			b.WriteString(p.Text())
		}
	}
	return b.String()
}

// TestThreadConversation: a second message in a context continues the
// first one's conversation, over both protocol versions and both
// embedded stores; the task's history is the conversation so far.
func TestThreadConversation(t *testing.T) {
	for _, store := range []struct {
		name   string
		sqlite bool
	}{{"memory", false}, {"sqlite", true}} {
		for _, version := range protocols {
			t.Run(store.name+"/"+version, func(t *testing.T) {
				e := threadEnv(t, store.sqlite)
				c := e.client(t, "memo", version)

				// No contextId: a new conversation, whose id the task gives.
				first := send(t, c, text("my name is Ana"), nil)
				if first.ContextID == "" {
					t.Fatal("the first task has no contextId")
				}
				if got, want := lastReply(t, first), `you said "my name is Ana"; before that: nothing`; got != want {
					t.Fatalf("first reply %q, want %q", got, want)
				}
				second := send(t, c, inContext("what is my name?", first.ContextID), nil)
				if second.ContextID != first.ContextID || second.ID == first.ID {
					t.Fatalf("second task %s in context %s; want a new task in %s", second.ID, second.ContextID, first.ContextID)
				}
				if got, want := lastReply(t, second), `you said "what is my name?"; before that: "my name is Ana"`; got != want {
					t.Fatalf("second reply %q, want %q: the second task must see the first's state", got, want)
				}
				want := `user: my name is Ana | agent: you said "my name is Ana"; before that: nothing | user: what is my name? | agent: you said "what is my name?"; before that: "my name is Ana"`
				if got := historyText(second); got != want {
					t.Errorf("history\n got %s\nwant %s", got, want)
				}
				// historyLength gives the newest.
				two := 2
				got, err := c.GetTask(context.Background(), &core.GetTaskRequest{ID: second.ID, HistoryLength: &two})
				if err != nil {
					t.Fatal(err)
				}
				if h := historyText(got); !strings.HasPrefix(h, "user: what is my name? | agent: ") || len(got.History) != 2 {
					t.Errorf("historyLength 2: %s", h)
				}
				// The first task's history is its own turn.
				if h := historyText(getTask(t, c, first.ID)); h != `user: my name is Ana | agent: you said "my name is Ana"; before that: nothing` {
					t.Errorf("first task's history: %s", h)
				}
				// The conversation is the thread of the context id.
				st, err := e.svc.State(context.Background(), first.ContextID)
				if err != nil {
					t.Fatal(err)
				}
				if st.RunID != string(second.ID) {
					t.Errorf("thread %s is at run %s, want the second task %s", first.ContextID, st.RunID, second.ID)
				}
				// A client's own contextId starts a thread too.
				mine := send(t, c, inContext("hello", "chat-"+version), nil)
				again := send(t, c, inContext("again", "chat-"+version), nil)
				if got := lastReply(t, again); got != `you said "again"; before that: "hello"` || mine.ContextID != "chat-"+version {
					t.Errorf("client context: %q in %s", got, mine.ContextID)
				}
			})
		}
	}
}

// TestThreadStrategies: a message whose context has an active task
// follows the strategy of the server's options.
func TestThreadStrategies(t *testing.T) {
	tests := []struct {
		strategy runs.Strategy
		// first is the state the first task ends in; reply is the second
		// task's reply ("" when the second message is refused).
		first core.TaskState
		reply string
	}{
		{a2a.StrategyParallel, core.TaskStateCompleted, `you said "second"; before that: nothing`},
		{runs.StrategyReject, core.TaskStateCompleted, ""},
		{runs.StrategyEnqueue, core.TaskStateCompleted, `you said "second"; before that: "wait"`},
		{runs.StrategyInterrupt, core.TaskStateUnspecified, `you said "second"; before that: "wait"`},
		{runs.StrategyRollback, core.TaskStateCanceled, `you said "second"; before that: nothing`},
	}
	for _, tt := range tests {
		t.Run(string(tt.strategy), func(t *testing.T) {
			var opts []a2a.Option
			if tt.strategy != a2a.StrategyParallel {
				opts = append(opts, a2a.WithThreadStrategy(tt.strategy)) // parallel: the default
			}
			// The first task works until the test lets it end: for
			// enqueue and interrupt (which waits for the first's step to
			// end) once the second is queued behind it, for the others
			// once the second message was answered (on a loaded machine
			// a fixed wait could end first before the second arrived).
			hold := make(chan struct{})
			release := sync.OnceFunc(func() { close(hold) })
			defer release()
			e := heldThreadEnv(t, true, hold, opts...)
			c := e.client(t, "memo", "1.0")
			ctxID := "busy-" + string(tt.strategy)
			first := send(t, c, inContext("wait", ctxID), &core.SendMessageConfig{ReturnImmediately: true})
			waitState(t, c, first.ID, core.TaskStateWorking)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if tt.strategy == runs.StrategyEnqueue || tt.strategy == runs.StrategyInterrupt {
				go func() {
					defer release()
					for ctx.Err() == nil {
						if page, err := e.svc.List(ctx, runs.Filter{ContextID: ctxID}); err == nil && len(page.Runs) >= 2 {
							return
						}
						time.Sleep(10 * time.Millisecond)
					}
				}()
			}
			res, err := c.SendMessage(ctx, &core.SendMessageRequest{Message: inContext("second", ctxID)})
			release()
			if tt.reply == "" {
				if !errors.Is(err, core.ErrUnsupportedOperation) {
					t.Fatalf("second message on a busy context: %v, %v; want UnsupportedOperationError (-32004)", res, err)
				}
				for _, want := range []string{string(first.ID), ctxID, "working", "one task per context"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not say %q", err, want)
					}
				}
				page, err := e.svc.List(ctx, runs.Filter{ContextID: ctxID})
				if err != nil || len(page.Runs) != 1 {
					t.Errorf("the refused message stored something: %d runs in the context, %v", len(page.Runs), err)
				}
				if got := lastReply(t, waitState(t, c, first.ID, core.TaskStateCompleted)); got != `you said "wait"; before that: nothing` {
					t.Errorf("first reply %q", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("second message with strategy %s: %v", tt.strategy, err)
			}
			second := res.(*core.Task)
			if got := lastReply(t, second); got != tt.reply {
				t.Errorf("second reply %q, want %q", got, tt.reply)
			}
			if second.ContextID != ctxID {
				t.Errorf("second task in context %q, want %q", second.ContextID, ctxID)
			}
			if tt.strategy == a2a.StrategyParallel {
				// The second task ran beside the first, which goes on and
				// alone continues the conversation.
				if got := lastReply(t, waitState(t, c, first.ID, core.TaskStateCompleted)); got != `you said "wait"; before that: nothing` {
					t.Errorf("first reply %q", got)
				}
				page, err := e.svc.List(ctx, runs.Filter{ContextID: ctxID})
				if err != nil || len(page.Runs) != 2 {
					t.Errorf("context %s lists %d tasks (%v), want both", ctxID, len(page.Runs), err)
				}
				next := send(t, c, inContext("third", ctxID), nil)
				if got := lastReply(t, next); got != `you said "third"; before that: "wait"` {
					t.Errorf("third reply %q: the thread goes on from the first task, not the parallel one", got)
				}
			}
			old := getTask(t, c, first.ID)
			if tt.first != core.TaskStateUnspecified && old.Status.State != tt.first {
				t.Errorf("first task %s, want %s", old.Status.State, tt.first)
			}
			if old.Status.State == core.TaskStateCanceled {
				// Superseded: a final state naming its successor.
				if msg, _ := json.Marshal(old.Status.Message); !strings.Contains(string(msg), string(second.ID)) {
					t.Errorf("superseded task's status %q does not name its successor %s", msg, second.ID)
				}
			}
		})
	}
}

// TestThreadInputRequired: a message in a context whose task waits for an
// answer is refused with what to do; the answer, by task id, continues.
func TestThreadInputRequired(t *testing.T) {
	e := threadEnv(t, false)
	c := e.client(t, "memo", "0.3")
	asked := send(t, c, inContext("ask", "colours"), nil)
	wantState(t, asked, core.TaskStateInputRequired)
	_, err := c.SendMessage(context.Background(), &core.SendMessageRequest{Message: inContext("never mind", "colours")})
	if !errors.Is(err, core.ErrUnsupportedOperation) || !strings.Contains(err.Error(), "input-required") || !strings.Contains(err.Error(), "answer it") {
		t.Fatalf("message beside an input-required task: %v", err)
	}
	ans := text("blue")
	ans.TaskID, ans.ContextID = asked.ID, "colours"
	done := send(t, c, ans, nil)
	if got := lastReply(t, done); got != "colour blue" {
		t.Fatalf("answer: %q", got)
	}
	next := send(t, c, inContext("thanks", "colours"), nil)
	if got := lastReply(t, next); got != `you said "thanks"; before that: "ask"` {
		t.Errorf("after the answer: %q", got)
	}
}

// TestThreadBadInput: input that cannot start a conversation changes no
// thread.
func TestThreadBadInput(t *testing.T) {
	e := threadEnv(t, false)
	c := e.client(t, "memo", "1.0")
	ctx := context.Background()
	tests := []struct {
		name    string
		msg     *core.Message
		code    error          // a JSON-RPC error, or
		state   core.TaskState // a stored task in this state
		context string
	}{
		{"context id not an id", inContext("hi", "no spaces allowed"), core.ErrInvalidParams, "", ""},
		{"context id too long", inContext("hi", strings.Repeat("x", 129)), core.ErrInvalidParams, "", ""},
		{"unknown channel", func() *core.Message {
			m := core.NewMessage(core.MessageRoleUser, core.NewDataPart(map[string]any{"nope": 1}))
			m.ContextID = "fresh"
			return m
		}(), nil, core.TaskStateRejected, "fresh"},
		{"messages not a list", func() *core.Message {
			m := core.NewMessage(core.MessageRoleUser, core.NewDataPart(map[string]any{"messages": "hi"}))
			m.ContextID = "fresh2"
			return m
		}(), nil, core.TaskStateRejected, "fresh2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := c.SendMessage(ctx, &core.SendMessageRequest{Message: tt.msg})
			if tt.code != nil {
				if !errors.Is(err, tt.code) || !strings.Contains(err.Error(), "contextId") {
					t.Fatalf("got %v, %v; want %v naming the contextId", res, err, tt.code)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				wantState(t, res.(*core.Task), tt.state)
				if _, err := e.svc.GetThread(ctx, tt.context); !errors.Is(err, runs.ErrNotFound) {
					t.Errorf("a refused first message created thread %q: %v", tt.context, err)
				}
			}
		})
	}
	page, err := e.svc.ListThreads(ctx, runs.ThreadFilter{})
	if err != nil || len(page.Threads) != 0 {
		t.Errorf("threads after bad input: %+v, %v; want none", page.Threads, err)
	}
}

// TestThreadsOff: WithThreads(false) keeps contexts as groups of tasks,
// each starting from empty state.
func TestThreadsOff(t *testing.T) {
	e := threadEnv(t, false, a2a.WithThreads(false))
	c := e.client(t, "memo", "1.0")
	first := send(t, c, inContext("one", "group"), nil)
	second := send(t, c, inContext("two", "group"), nil)
	if got := lastReply(t, second); got != `you said "two"; before that: nothing` {
		t.Errorf("second reply %q: without threads a task starts from empty state", got)
	}
	if first.ContextID != "group" || second.ContextID != "group" {
		t.Errorf("contexts %q, %q", first.ContextID, second.ContextID)
	}
	if _, err := e.svc.GetThread(context.Background(), "group"); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("thread stored with threads off: %v", err)
	}
}

// TestNewConfigErrors: bad configuration of New (an unknown thread
// strategy, no Service) is an error saying what to fix, not a panic; the
// strategies there are are accepted.
func TestNewConfigErrors(t *testing.T) {
	e := threadEnv(t, false)
	for _, tc := range []struct {
		name    string
		svc     *runs.Service
		opts    []a2a.Option
		wantErr string // "" for none
	}{
		{"default strategy", e.svc, nil, ""},
		{"empty strategy", e.svc, []a2a.Option{a2a.WithThreadStrategy("")}, ""},
		{"reject", e.svc, []a2a.Option{a2a.WithThreadStrategy(runs.StrategyReject)}, ""},
		{"enqueue", e.svc, []a2a.Option{a2a.WithThreadStrategy(runs.StrategyEnqueue)}, ""},
		{"interrupt", e.svc, []a2a.Option{a2a.WithThreadStrategy(runs.StrategyInterrupt)}, ""},
		{"rollback", e.svc, []a2a.Option{a2a.WithThreadStrategy(runs.StrategyRollback)}, ""},
		{"parallel", e.svc, []a2a.Option{a2a.WithThreadStrategy(a2a.StrategyParallel)}, ""},
		{"unknown strategy", e.svc, []a2a.Option{a2a.WithThreadStrategy("later")},
			`WithThreadStrategy: strategy "later" is not one of reject, enqueue, interrupt, rollback, parallel`},
		{"strategy in capitals", e.svc, []a2a.Option{a2a.WithThreadStrategy("Enqueue")},
			`strategy "Enqueue" is not one of reject, enqueue, interrupt, rollback`},
		{"last strategy wins", e.svc, []a2a.Option{a2a.WithThreadStrategy(runs.StrategyEnqueue), a2a.WithThreadStrategy("later")},
			`strategy "later" is not one of`},
		{"no service", nil, nil, "needs a runs.Service"},
		{"service without registry", &runs.Service{}, nil, "needs a runs.Service"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				srv *a2a.Server
				err error
			)
			func() {
				defer func() {
					if v := recover(); v != nil {
						t.Fatalf("New panicked: %v", v)
					}
				}()
				srv, err = a2a.New(tc.svc, tc.opts...)
			}()
			if tc.wantErr == "" {
				if err != nil || srv == nil {
					t.Fatalf("New = %v, %v; want a server", srv, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("New error = %v; want one containing %q", err, tc.wantErr)
			}
			if srv != nil {
				t.Errorf("New returned a server with its error")
			}
			if tc.svc != nil && tc.svc.Graphs != nil && !errors.Is(err, runs.ErrInvalid) {
				t.Errorf("New error = %v; want one wrapping runs.ErrInvalid", err)
			}
		})
	}
}
