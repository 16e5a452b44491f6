package memorytools_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/agent"
	"github.com/superstep/superstep/pkg/agent/memorytools"
	"github.com/superstep/superstep/pkg/embedded"
	"github.com/superstep/superstep/pkg/longterm"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/store/sqlite"
)

// model is the scripted assistant: told "I like X", it calls remember
// (with the key favorite, or none when keyless); asked a question, it
// calls recall; after a tool's result it answers with what recall
// returned.
func model(keyless bool) *agent.Scripted {
	return &agent.Scripted{Reply: func(_ context.Context, req *agent.Request) (*agent.Response, error) {
		var user string
		var result *agent.ToolResult
		for _, m := range req.Messages {
			for _, b := range m.Content {
				switch {
				case m.Role == agent.RoleUser && b.Text != "":
					user, result = b.Text, nil
				case b.ToolResult != nil:
					result = b.ToolResult
				}
			}
		}
		call := func(name string, input any) *agent.Response {
			in, _ := json.Marshal(input)
			return &agent.Response{Message: agent.Message{Content: []agent.Block{{ToolCall: &agent.ToolCall{ID: fmt.Sprintf("c%d", len(req.Messages)), Name: name, Input: in}}}}}
		}
		switch {
		case result != nil && result.Error:
			return &agent.Response{Message: agent.AssistantText("tool failed: " + result.Content)}, nil
		case result != nil && strings.Contains(user, "?"):
			return &agent.Response{Message: agent.AssistantText("From memory: " + result.Content)}, nil
		case result != nil:
			return &agent.Response{Message: agent.AssistantText("Noted.")}, nil
		case strings.HasPrefix(user, "I like"):
			in := map[string]string{"memory": "the user likes " + strings.TrimPrefix(user, "I like ")}
			if !keyless {
				in["key"] = "favorite"
			}
			return call("remember", in), nil
		default:
			return call("recall", map[string]string{"query": user}), nil
		}
	}}
}

// env is an embedded runtime on a SQLite file: a Service and a Scheduler
// whose runs reach the long-term store and their thread's scope.
type env struct {
	t     *testing.T
	store *sqlite.Store
	lt    *longterm.Store
	reg   *runs.Registry
	svc   *runs.Service
	sched *embedded.Scheduler
	crash context.CancelFunc
}

func newEnv(t *testing.T, backend func(longterm.Backend) longterm.Backend, keyless bool) *env {
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "superstep.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tools, err := memorytools.New(memorytools.Config{Namespace: "users/{user_id}/memories"})
	if err != nil {
		t.Fatal(err)
	}
	g, err := agent.New(agent.Config{Name: "assistant", Model: model(keyless), Tools: tools,
		ToolRetry: pregel.RetryPolicy{MaxAttempts: 3, InitialInterval: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := runs.NewRegistry(g)
	if err != nil {
		t.Fatal(err)
	}
	b := longterm.Backend(st.LongTerm())
	if backend != nil {
		b = backend(b)
	}
	e := &env{t: t, store: st, lt: longterm.New(b), reg: reg}
	e.start()
	t.Cleanup(func() { e.crash() })
	return e
}

// start starts a Service and a Scheduler, as superstep dev does.
func (e *env) start() {
	log := slog.New(slog.DiscardHandler)
	e.svc = &runs.Service{Graphs: e.reg, Runs: e.store, Checkpoints: e.store, Threads: e.store, Logger: log}
	e.sched = embedded.NewScheduler(embedded.SchedulerConfig{Graphs: e.reg, Runs: e.store, Checkpoints: e.store, Logger: log, OnStop: e.svc.RunStopped, StartThreadRun: e.svc.StartThreadRun})
	e.svc.Dispatcher = e.sched
	ctx, cancel := context.WithCancel(context.Background())
	ctx = longterm.WithScope(longterm.WithStore(ctx, e.lt), memorytools.ThreadScope(e.store, e.store))
	if err := e.sched.Start(ctx); err != nil {
		e.t.Fatal(err)
	}
	e.crash = cancel
}

func (e *env) thread(id, user string) {
	e.t.Helper()
	md, _ := json.Marshal(map[string]string{"user_id": user})
	if _, _, err := e.svc.CreateThread(e.t.Context(), runs.CreateThreadRequest{ThreadID: id, Metadata: md}); err != nil {
		e.t.Fatal(err)
	}
}

// say sends a message on a thread and returns the run.
func (e *env) say(thread, text string) runs.Run {
	e.t.Helper()
	r, _, err := e.svc.CreateOnThread(e.t.Context(), thread, runs.ThreadRunRequest{Graph: "assistant", Input: agent.TextInput(text)})
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// answer waits for the run and returns the thread's last assistant text.
func (e *env) answer(thread string, r runs.Run) string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), 10*time.Second)
	defer cancel()
	if err := e.sched.WaitIdle(ctx); err != nil {
		e.t.Fatalf("waiting for run %s: %v", r.ID, err)
	}
	got, err := e.svc.Get(e.t.Context(), r.ID)
	if err != nil || got.Status != pregel.RunCompleted {
		e.t.Fatalf("run %s: %s, %v (%s); want completed", r.ID, got.Status, err, got.Error)
	}
	st, err := e.svc.State(e.t.Context(), thread)
	if err != nil {
		e.t.Fatal(err)
	}
	var msgs []agent.Message
	if err := json.Unmarshal(st.Values["messages"], &msgs); err != nil {
		e.t.Fatal(err)
	}
	return msgs[len(msgs)-1].Text()
}

// TestRememberAcrossThreads: a preference remembered in one thread is
// recalled in another thread of the same user, and not in another user's.
func TestRememberAcrossThreads(t *testing.T) {
	e := newEnv(t, nil, false)
	e.thread("monday", "u-42")
	if got := e.answer("monday", e.say("monday", "I like green tea")); got != "Noted." {
		t.Fatalf("first thread answered %q", got)
	}
	it, err := e.lt.Get(t.Context(), longterm.Namespace{"users", "u-42", "memories"}, "favorite")
	if err != nil || !strings.Contains(string(it.Value), "green tea") {
		t.Fatalf("the store holds %s, %v; want the preference under users/u-42/memories favorite", it.Value, err)
	}
	e.thread("friday", "u-42")
	if got := e.answer("friday", e.say("friday", "What do I like to drink?")); !strings.Contains(got, "the user likes green tea") {
		t.Errorf("another thread of the same user answered %q, want the remembered preference", got)
	}
	e.thread("other", "u-7")
	if got := e.answer("other", e.say("other", "What do I like to drink?")); strings.Contains(got, "green tea") || !strings.Contains(got, "[]") {
		t.Errorf("another user's thread answered %q, want no memories", got)
	}
	// A thread without a user_id: the tool fails with what to fix.
	e.thread("anonymous", "")
	if got := e.answer("anonymous", e.say("anonymous", "What do I like?")); !strings.Contains(got, `metadata has "user_id"`) {
		t.Errorf("a thread without user_id answered %q, want the tool's error naming user_id", got)
	}
}

// crashing is a backend whose first Put stores the record and then waits
// until its context ends, as a process that crashes after the write but
// before the task's result is recorded.
type crashing struct {
	longterm.Backend
	once    sync.Once
	written chan struct{}
	mu      sync.Mutex
	puts    int
}

func (c *crashing) Put(ctx context.Context, r longterm.Record) error {
	if err := c.Backend.Put(ctx, r); err != nil {
		return err
	}
	c.mu.Lock()
	c.puts++
	c.mu.Unlock()
	first := false
	c.once.Do(func() { first = true })
	if !first {
		return nil
	}
	close(c.written)
	<-ctx.Done()
	return ctx.Err()
}

// TestRememberCrashRetry: the process crashes after remember's write and
// before its task's result is recorded; on restart the task runs again
// and puts the same item (a keyless memory's key comes from its text), so
// the store holds it once.
func TestRememberCrashRetry(t *testing.T) {
	var c *crashing
	e := newEnv(t, func(b longterm.Backend) longterm.Backend {
		c = &crashing{Backend: b, written: make(chan struct{})}
		return c
	}, true)
	e.thread("t", "u-1")
	r := e.say("t", "I like window seats")
	select {
	case <-c.written:
	case <-time.After(10 * time.Second):
		t.Fatal("remember did not write within 10s")
	}
	e.crash()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := e.sched.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	e.start()
	if got := e.answer("t", r); got != "Noted." {
		t.Fatalf("after the restart the run answered %q", got)
	}
	page, err := e.lt.List(t.Context(), longterm.Namespace{"users", "u-1"}, longterm.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 1 || !strings.Contains(string(page.Items[0].Value), "window seats") {
		t.Errorf("after a crash and a retry the store holds %d items %v, want the memory once", len(page.Items), page.Items)
	}
	c.mu.Lock()
	puts := c.puts
	c.mu.Unlock()
	if puts != 2 {
		t.Errorf("remember put %d times, want 2 (the task ran again after the crash)", puts)
	}
	st, _ := e.svc.State(t.Context(), "t")
	if n := strings.Count(string(st.Values["messages"]), `"tool_result"`); n != 1 {
		t.Errorf("the conversation records %d tool results, want 1", n)
	}
}

// TestToolsOutsideARuntime: without a store in the context, the tools say
// so; a malformed template is refused at construction.
func TestToolsOutsideARuntime(t *testing.T) {
	tools, err := memorytools.New(memorytools.Config{Namespace: "users/{user_id}"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tools[0].Call(t.Context(), json.RawMessage(`{"memory":"x"}`)); err == nil || !strings.Contains(err.Error(), "no long-term store") {
		t.Errorf("remember without a store: %v", err)
	}
	for _, tmpl := range []longterm.Template{"", "users/{user_id", "users/x{y}"} {
		if _, err := memorytools.New(memorytools.Config{Namespace: tmpl}); err == nil {
			t.Errorf("template %q accepted", tmpl)
		}
	}
	s := longterm.New(longterm.NewMemory())
	tools, _ = memorytools.New(memorytools.Config{Namespace: "users/u-1", Store: s})
	if _, err := tools[0].Call(t.Context(), json.RawMessage(`{"memory":"likes tea","key":"bad\u0000key"}`)); !errors.Is(err, agent.ErrInvalidArguments) {
		t.Errorf("remember with a bad key: %v, want ErrInvalidArguments", err)
	}
}
