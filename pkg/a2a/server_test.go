package a2a_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	core "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	a2agrpc "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/superstep/superstep/pkg/a2a"
)

// protocols are the two ways the SDK's client talks to our server over
// JSON-RPC: A2A 1.0 (chosen from the card) and 0.3 (the compatibility
// binding). The other bindings of A2A 1.0 are "rest" (HTTP+JSON) and
// "grpc" (e.client).
var protocols = []string{"1.0", "0.3"}

// client returns an a2a-go client for graph speaking version: "1.0" or
// "0.3" over JSON-RPC, "rest" (HTTP+JSON 1.0) or "grpc" (gRPC 1.0), each
// chosen from the interfaces the card lists. opts add to the factory's
// (a call interceptor with a token, say).
func (e *env) client(t testing.TB, graph, version string, opts ...a2aclient.FactoryOption) *a2aclient.Client {
	t.Helper()
	ctx := context.Background()
	card, err := agentcard.DefaultResolver.Resolve(ctx, e.agentURL(graph))
	if err != nil {
		t.Fatalf("resolve card: %v", err)
	}
	binding, pv := core.TransportProtocolJSONRPC, version
	switch version {
	case "rest":
		binding, pv = core.TransportProtocolHTTPJSON, "1.0"
	case "rest0.3":
		binding, pv = core.TransportProtocolHTTPJSON, "0.3"
	case "grpc":
		binding, pv = core.TransportProtocolGRPC, "1.0"
	}
	var ifaces []*core.AgentInterface
	for _, in := range card.SupportedInterfaces {
		if string(in.ProtocolVersion) == pv && in.ProtocolBinding == binding {
			ifaces = append(ifaces, in)
		}
	}
	if len(ifaces) == 0 {
		t.Fatalf("card lists no %s %s interface: %+v", binding, pv, card.SupportedInterfaces)
	}
	card.SupportedInterfaces = ifaces
	opts = append([]a2aclient.FactoryOption{
		a2av0.WithJSONRPCTransport(a2av0.JSONRPCTransportConfig{}),
		a2av0.WithRESTTransport(a2av0.RESTTransportConfig{}),
		a2agrpc.WithGRPCTransport(grpc.WithTransportCredentials(insecure.NewCredentials())),
	}, opts...)
	c, err := a2aclient.NewFromCard(ctx, card, opts...)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	return c
}

func text(s string) *core.Message { return core.NewMessage(core.MessageRoleUser, core.NewTextPart(s)) }

func send(t testing.TB, c *a2aclient.Client, msg *core.Message, cfg *core.SendMessageConfig) *core.Task {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := c.SendMessage(ctx, &core.SendMessageRequest{Message: msg, Config: cfg})
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	task, ok := res.(*core.Task)
	if !ok {
		t.Fatalf("SendMessage returned %T, want a task", res)
	}
	return task
}

func getTask(t testing.TB, c *a2aclient.Client, id core.TaskID) *core.Task {
	t.Helper()
	task, err := c.GetTask(context.Background(), &core.GetTaskRequest{ID: id})
	if err != nil {
		t.Fatalf("GetTask: %v", err)
	}
	return task
}

// waitState polls a task until it reaches state.
func waitState(t testing.TB, c *a2aclient.Client, id core.TaskID, state core.TaskState) *core.Task {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		task := getTask(t, c, id)
		if task.Status.State == state {
			return task
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s is %s, want %s", id, task.Status.State, state)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stateData returns the data part of a completed task's artifact.
func stateData(t testing.TB, task *core.Task) map[string]any {
	t.Helper()
	if len(task.Artifacts) != 1 || len(task.Artifacts[0].Parts) != 1 {
		t.Fatalf("task %s has artifacts %+v, want one with one part", task.ID, task.Artifacts)
	}
	a := task.Artifacts[0]
	if a.ID != a2a.ArtifactID {
		t.Errorf("artifact id %q, want %q", a.ID, a2a.ArtifactID)
	}
	m, ok := a.Parts[0].Data().(map[string]any)
	if !ok {
		t.Fatalf("artifact part is %#v, want a data object", a.Parts[0].Content)
	}
	return m
}

func statusText(task *core.Task) string {
	if task.Status.Message == nil {
		return ""
	}
	var b strings.Builder
	for _, p := range task.Status.Message.Parts {
		b.WriteString(p.Text())
	}
	return b.String()
}

func wantState(t testing.TB, task *core.Task, state core.TaskState) {
	t.Helper()
	if task.Status.State != state {
		t.Fatalf("task %s is %s (%q), want %s", task.ID, task.Status.State, statusText(task), state)
	}
}

func TestAgentCard(t *testing.T) {
	e := newEnv(t, envConfig{events: true})
	resp, err := http.Get(e.agentURL("chat") + "/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("card: %s %s", resp.Status, body)
	}
	var card map[string]any
	if err := json.Unmarshal(body, &card); err != nil {
		t.Fatal(err)
	}
	// 0.3 fields for 0.3 clients, supportedInterfaces for 1.0 ones.
	if card["url"] != e.agentURL("chat") || card["protocolVersion"] != "0.3" || card["preferredTransport"] != "JSONRPC" {
		t.Errorf("0.3 fields: url %v, protocolVersion %v, preferredTransport %v", card["url"], card["protocolVersion"], card["preferredTransport"])
	}
	parsed, err := a2av0.NewAgentCardParser()(body)
	if err != nil {
		t.Fatal(err)
	}
	if parsed.Name != "chat" || parsed.Description != "Answers chat messages." {
		t.Errorf("name %q, description %q", parsed.Name, parsed.Description)
	}
	if !parsed.Capabilities.Streaming || parsed.Capabilities.PushNotifications {
		t.Errorf("capabilities %+v: want streaming only", parsed.Capabilities)
	}
	var ifaces []string
	for _, in := range parsed.SupportedInterfaces {
		ifaces = append(ifaces, fmt.Sprintf("%s %s %s", in.ProtocolBinding, in.ProtocolVersion, in.URL))
	}
	// JSON-RPC first (preferred), then HTTP+JSON; the 0.3 form lists
	// the 0.3 bindings only (a 0.3 client is offered no 1.0 binding),
	// the main one (url, preferredTransport) included, as the 0.3
	// schema says additionalInterfaces should.
	want := []string{"JSONRPC 1.0 " + e.agentURL("chat"), "HTTP+JSON 1.0 " + e.agentURL("chat"), "JSONRPC 0.3 " + e.agentURL("chat"), "HTTP+JSON 0.3 " + e.agentURL("chat")}
	if !slices.Equal(ifaces, want) {
		t.Errorf("interfaces %q, want %q", ifaces, want)
	}
	var legacyCard struct {
		AdditionalInterfaces []struct{ URL, Transport string } `json:"additionalInterfaces"`
	}
	_ = json.Unmarshal(body, &legacyCard)
	if got := fmt.Sprint(legacyCard.AdditionalInterfaces); got != fmt.Sprintf("[{%[1]s JSONRPC} {%[1]s HTTP+JSON}]", e.agentURL("chat")) {
		t.Errorf("0.3 additionalInterfaces %s: want JSONRPC and HTTP+JSON at the agent's URL", got)
	}
	if len(parsed.Skills) != 3 || parsed.Skills[0].ID != "chat" || parsed.Skills[1].ID != "chat.answer" || parsed.Skills[1].Description != "replies to the message" {
		t.Errorf("skills %+v: want the graph, then its nodes", parsed.Skills)
	}
	if !strings.Contains(parsed.Skills[0].Description, `Text parts are written to channel "message"`) {
		t.Errorf("graph skill %q does not say where text goes", parsed.Skills[0].Description)
	}

	// Without streaming (API Gateway), the card says so.
	e2 := newEnv(t, envConfig{opts: []a2a.Option{a2a.WithBaseURL("https://api.example.com/prod/"), a2a.WithBearerAuth(true)}})
	card2, err := agentcard.DefaultResolver.Resolve(context.Background(), e2.agentURL("sum"))
	if err != nil {
		t.Fatal(err)
	}
	if card2.Capabilities.Streaming {
		t.Error("streaming claimed without WithStreaming")
	}
	if got := card2.SupportedInterfaces[0].URL; got != "https://api.example.com/prod/a2a/sum" {
		t.Errorf("interface URL %q, want the base URL's", got)
	}
	if len(card2.SecurityRequirements) != 1 || card2.SecuritySchemes["bearer"] == nil {
		t.Errorf("bearer auth not declared: %+v %+v", card2.SecurityRequirements, card2.SecuritySchemes)
	}
	if card2.DefaultInputModes[len(card2.DefaultInputModes)-1] == "text/plain" {
		t.Errorf("graph sum has no text channel but takes %v", card2.DefaultInputModes)
	}

	for _, path := range []string{"/a2a/nope/.well-known/agent-card.json", "/a2a/nope", "/a2a/chat/extra/path"} {
		resp, err := http.Get(e.url + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %s, want 404", path, resp.Status)
		}
	}
}

func TestLifecycle(t *testing.T) {
	for _, events := range []bool{true, false} {
		name := "events"
		if !events {
			name = "polling"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, envConfig{events: events})
			for _, v := range protocols {
				t.Run(v, func(t *testing.T) {
					testLifecycle(t, e, v)
				})
			}
		})
	}
}

func testLifecycle(t *testing.T, e *env, version string) {
	chat := e.client(t, "chat", version)
	sum := e.client(t, "sum", version)

	t.Run("completed", func(t *testing.T) {
		msg := text("hi")
		task := send(t, chat, msg, nil)
		wantState(t, task, core.TaskStateCompleted)
		got := stateData(t, task)
		if got["reply"] != "HI" || got["message"] != "hi" {
			t.Errorf("final state %v", got)
		}
		if task.ContextID == "" {
			t.Error("no context id")
		}
		again := getTask(t, chat, task.ID)
		wantState(t, again, core.TaskStateCompleted)
		if stateData(t, again)["reply"] != "HI" {
			t.Errorf("GetTask lost the artifact")
		}
		run, err := e.svc.Get(context.Background(), string(task.ID))
		if err != nil || run.ContextID != task.ContextID {
			t.Errorf("the task is not run %s of context %s: %+v %v", task.ID, task.ContextID, run, err)
		}
	})

	t.Run("data input", func(t *testing.T) {
		task := send(t, sum, core.NewMessage(core.MessageRoleUser, core.NewDataPart(map[string]any{"a": 2, "b": 40})), nil)
		wantState(t, task, core.TaskStateCompleted)
		if got := stateData(t, task)["sum"]; got != float64(42) {
			t.Errorf("sum %v, want 42", got)
		}
	})

	t.Run("non-blocking", func(t *testing.T) {
		task := send(t, chat, text("later"), &core.SendMessageConfig{ReturnImmediately: true})
		if task.Status.State != core.TaskStateSubmitted && task.Status.State != core.TaskStateWorking && task.Status.State != core.TaskStateCompleted {
			t.Fatalf("non-blocking send: %s", task.Status.State)
		}
		done := waitState(t, chat, task.ID, core.TaskStateCompleted)
		if stateData(t, done)["reply"] != "LATER" {
			t.Errorf("state %v", stateData(t, done))
		}
	})

	t.Run("input-required then resume", func(t *testing.T) {
		task := send(t, chat, text("ask"), nil)
		wantState(t, task, core.TaskStateInputRequired)
		if !strings.Contains(statusText(task), "what is your name?") {
			t.Errorf("question %q", statusText(task))
		}
		answer := core.NewMessageForTask(core.MessageRoleUser, task, core.NewTextPart("bob"))
		done := send(t, chat, answer, nil)
		wantState(t, done, core.TaskStateCompleted)
		if done.ID != task.ID {
			t.Errorf("resume answered task %s, want %s", done.ID, task.ID)
		}
		if got := stateData(t, done)["reply"]; got != "hello bob" {
			t.Errorf("reply %v", got)
		}
	})

	t.Run("auth-required then resume", func(t *testing.T) {
		task := send(t, chat, text("auth"), nil)
		wantState(t, task, core.TaskStateAuthRequired)
		done := send(t, chat, core.NewMessageForTask(core.MessageRoleUser, task, core.NewTextPart("s3cret")), nil)
		wantState(t, done, core.TaskStateCompleted)
		if got := stateData(t, done)["reply"]; got != "token s3cret" {
			t.Errorf("reply %v", got)
		}
	})

	t.Run("failed", func(t *testing.T) {
		task := send(t, chat, text("fail"), nil)
		wantState(t, task, core.TaskStateFailed)
		raw, _ := json.Marshal(getTask(t, chat, task.ID))
		if strings.Contains(string(raw), "secret") || strings.Contains(string(raw), "10.0.0.7") {
			t.Errorf("the failure leaks internals: %s", raw)
		}
		if statusText(task) != "the task failed" {
			t.Errorf("status message %q", statusText(task))
		}
	})

	t.Run("rejected", func(t *testing.T) {
		for _, tc := range []struct {
			c    *a2aclient.Client
			msg  *core.Message
			want string
		}{
			{chat, text("invalid"), `message must not be "invalid"`},
			{sum, core.NewMessage(core.MessageRoleUser, core.NewDataPart([]any{1, 2})), "not a JSON object"},
			{sum, core.NewMessage(core.MessageRoleUser, core.NewDataPart(map[string]any{"c": 1})), `"c" is not a channel`},
		} {
			if _, isList := tc.msg.Parts[0].Data().([]any); isList && version == "grpc" {
				continue // a2a-go's gRPC client sends only object data parts
			}
			task := send(t, tc.c, tc.msg, nil)
			wantState(t, task, core.TaskStateRejected)
			if !strings.Contains(statusText(task), tc.want) {
				t.Errorf("rejection %q does not say %q", statusText(task), tc.want)
			}
			// A rejected task is stored like any terminal task.
			got, err := tc.c.GetTask(context.Background(), &core.GetTaskRequest{ID: task.ID})
			if err != nil {
				t.Fatalf("GetTask of a rejected task: %v", err)
			}
			wantState(t, got, core.TaskStateRejected)
			if got.ContextID != task.ContextID || statusText(got) != statusText(task) {
				t.Errorf("stored rejected task %+v, answered %+v", got, task)
			}
			if _, err := tc.c.CancelTask(context.Background(), &core.CancelTaskRequest{ID: task.ID}); !errors.Is(err, core.ErrTaskNotCancelable) {
				t.Errorf("CancelTask of a rejected task: %v, want TaskNotCancelable", err)
			}
			follow := core.NewMessageForTask(core.MessageRoleUser, task, core.NewDataPart(map[string]any{"a": 1}))
			if _, err := tc.c.SendMessage(context.Background(), &core.SendMessageRequest{Message: follow}); !errors.Is(err, core.ErrUnsupportedOperation) {
				t.Errorf("message for a rejected task: %v, want UnsupportedOperation", err)
			}
			if version != "0.3" {
				list, err := tc.c.ListTasks(context.Background(), &core.ListTasksRequest{ContextID: task.ContextID, Status: core.TaskStateRejected})
				if err != nil || len(list.Tasks) != 1 || list.Tasks[0].ID != task.ID {
					t.Errorf("ListTasks(rejected) = %+v, %v; want the task", list, err)
				}
				list, err = tc.c.ListTasks(context.Background(), &core.ListTasksRequest{ContextID: task.ContextID, Status: core.TaskStateFailed})
				if err != nil || len(list.Tasks) != 0 {
					t.Errorf("ListTasks(failed) = %+v, %v; want no rejected task", list, err)
				}
			}
		}
		// Text for a graph without a text channel: the spec's
		// ContentTypeNotSupportedError.
		if _, err := sum.SendMessage(context.Background(), &core.SendMessageRequest{Message: text("two and two")}); !errors.Is(err, core.ErrUnsupportedContentType) || !strings.Contains(err.Error(), `graph "sum" takes no text`) {
			t.Errorf("text for graph sum: %v, want ContentTypeNotSupported", err)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		task := send(t, chat, text("slow"), &core.SendMessageConfig{ReturnImmediately: true})
		waitState(t, chat, task.ID, core.TaskStateWorking)
		canceled, err := chat.CancelTask(context.Background(), &core.CancelTaskRequest{ID: task.ID})
		if err != nil {
			t.Fatalf("CancelTask: %v", err)
		}
		wantState(t, canceled, core.TaskStateCanceled)
		// Spec 1.0 §3.1.5: a task in a terminal state (canceled
		// included) is not cancelable.
		if _, err := chat.CancelTask(context.Background(), &core.CancelTaskRequest{ID: task.ID}); !errors.Is(err, core.ErrTaskNotCancelable) {
			t.Errorf("cancelling a canceled task again: %v, want TaskNotCancelable", err)
		}
		done := send(t, chat, text("done"), nil)
		if _, err := chat.CancelTask(context.Background(), &core.CancelTaskRequest{ID: done.ID}); !errors.Is(err, core.ErrTaskNotCancelable) {
			t.Errorf("cancelling a completed task: %v, want TaskNotCancelable", err)
		}
		// An input-required task is cancelled at once.
		asked := send(t, chat, text("ask"), nil)
		c2, err := chat.CancelTask(context.Background(), &core.CancelTaskRequest{ID: asked.ID})
		if err != nil || c2.Status.State != core.TaskStateCanceled {
			t.Errorf("cancel input-required: %v %v", c2, err)
		}
		// A message for a finished task is an unsupported operation
		// (spec 1.0 §3.1.1).
		if _, err := chat.SendMessage(context.Background(), &core.SendMessageRequest{Message: core.NewMessageForTask(core.MessageRoleUser, c2, core.NewTextPart("bob"))}); !errors.Is(err, core.ErrUnsupportedOperation) {
			t.Errorf("message for a canceled task: %v, want UnsupportedOperation", err)
		}
	})

	t.Run("drained then continued", func(t *testing.T) {
		task := send(t, chat, text("drain"), nil)
		wantState(t, task, core.TaskStateWorking)
		if !strings.Contains(statusText(task), "drained (maintenance)") {
			t.Errorf("drained status message %q", statusText(task))
		}
		done := send(t, chat, core.NewMessageForTask(core.MessageRoleUser, task, core.NewTextPart("go on")), nil)
		wantState(t, done, core.TaskStateCompleted)
		if got := stateData(t, done)["count"]; got != float64(len("drained once")) {
			t.Errorf("count %v", got)
		}
	})

	t.Run("not found", func(t *testing.T) {
		for _, id := range []core.TaskID{"nope", "bad id with spaces", core.TaskID(strings.Repeat("x", 300))} {
			if _, err := chat.GetTask(context.Background(), &core.GetTaskRequest{ID: id}); !errors.Is(err, core.ErrTaskNotFound) {
				t.Errorf("GetTask(%.20q): %v, want TaskNotFound", id, err)
			}
			if _, err := chat.CancelTask(context.Background(), &core.CancelTaskRequest{ID: id}); !errors.Is(err, core.ErrTaskNotFound) {
				t.Errorf("CancelTask(%.20q): %v, want TaskNotFound", id, err)
			}
		}
		// A task of another agent is not found here.
		other := send(t, sum, core.NewMessage(core.MessageRoleUser, core.NewDataPart(map[string]any{"a": 1})), nil)
		if _, err := chat.GetTask(context.Background(), &core.GetTaskRequest{ID: other.ID}); !errors.Is(err, core.ErrTaskNotFound) {
			t.Errorf("GetTask of another graph's task: %v", err)
		}
		msg := core.NewMessage(core.MessageRoleUser, core.NewTextPart("x"))
		msg.TaskID = "nope"
		if _, err := chat.SendMessage(context.Background(), &core.SendMessageRequest{Message: msg}); !errors.Is(err, core.ErrTaskNotFound) {
			t.Errorf("message for an unknown task: %v", err)
		}
	})

	if e.streaming {
		t.Run("streaming", func(t *testing.T) { testStreaming(t, chat, version) })
	}
}

// collect gathers a stream's events.
func collect(t testing.TB, seq func(yield func(core.Event, error) bool)) []core.Event {
	t.Helper()
	var out []core.Event
	for ev, err := range seq {
		if err != nil {
			t.Fatalf("stream error after %d events: %v", len(out), err)
		}
		out = append(out, ev)
	}
	return out
}

func lastStatus(t testing.TB, evs []core.Event) core.TaskState {
	t.Helper()
	switch ev := evs[len(evs)-1].(type) {
	case *core.TaskStatusUpdateEvent:
		return ev.Status.State
	case *core.Task:
		return ev.Status.State
	}
	t.Fatalf("last event is %T", evs[len(evs)-1])
	return ""
}

func testStreaming(t *testing.T, chat *a2aclient.Client, version string) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	evs := collect(t, chat.SendStreamingMessage(ctx, &core.SendMessageRequest{Message: text("stream me")}))
	first, ok := evs[0].(*core.Task)
	if !ok {
		t.Fatalf("first event is %T, want the task", evs[0])
	}
	if got := lastStatus(t, evs); got != core.TaskStateCompleted {
		t.Fatalf("stream ended with %s: %v", got, evs)
	}
	var artifact *core.Artifact
	if len(first.Artifacts) == 1 {
		artifact = first.Artifacts[0] // finished before the stream began
	}
	progress := 0
	for _, ev := range evs {
		switch ev := ev.(type) {
		case *core.TaskArtifactUpdateEvent:
			if ev.TaskID != first.ID {
				t.Errorf("artifact of task %s in the stream of %s", ev.TaskID, first.ID)
			}
			artifact = ev.Artifact
		case *core.TaskStatusUpdateEvent:
			if ev.Status.State == core.TaskStateWorking && ev.Status.Message != nil && strings.Contains(ev.Status.Message.Parts[0].Text(), "answer") {
				progress++
			}
		}
	}
	if artifact == nil {
		t.Fatalf("no artifact for task %s in %v", first.ID, evs)
	}
	if m, _ := artifact.Parts[0].Data().(map[string]any); m["reply"] != "STREAM ME" {
		t.Errorf("artifact %v", artifact.Parts[0].Data())
	}
	if progress == 0 {
		t.Errorf("no node progress in %d events", len(evs))
	}

	// A stream ends when the task asks for input; the answer continues it.
	evs = collect(t, chat.SendStreamingMessage(ctx, &core.SendMessageRequest{Message: text("ask")}))
	if got := lastStatus(t, evs); got != core.TaskStateInputRequired {
		t.Fatalf("stream ended with %s", got)
	}
	task := evs[0].(*core.Task)
	evs = collect(t, chat.SendStreamingMessage(ctx, &core.SendMessageRequest{Message: core.NewMessageForTask(core.MessageRoleUser, task, core.NewTextPart("ann"))}))
	if got := lastStatus(t, evs); got != core.TaskStateCompleted {
		t.Fatalf("resumed stream ended with %s", got)
	}

	// Resubscribing sends the task as it stands first, then its updates.
	slow := send(t, chat, text("slow"), &core.SendMessageConfig{ReturnImmediately: true})
	waitState(t, chat, slow.ID, core.TaskStateWorking)
	seq := chat.SubscribeToTask(ctx, &core.SubscribeToTaskRequest{ID: slow.ID})
	var got []core.Event
	for ev, err := range seq {
		if err != nil {
			t.Fatalf("resubscribe: %v", err)
		}
		got = append(got, ev)
		if len(got) == 1 {
			tk, ok := ev.(*core.Task)
			if !ok || tk.ID != slow.ID || tk.Status.State != core.TaskStateWorking {
				t.Fatalf("first resubscribe event %#v, want the working task", ev)
			}
			if _, err := chat.CancelTask(ctx, &core.CancelTaskRequest{ID: slow.ID}); err != nil {
				t.Fatalf("cancel: %v", err)
			}
		}
	}
	if st := lastStatus(t, got); st != core.TaskStateCanceled {
		t.Errorf("resubscribed stream ended with %s", st)
	}
	// Subscribing to a finished task is an unsupported operation (spec
	// 1.0 §3.1.6).
	for ev, err := range chat.SubscribeToTask(ctx, &core.SubscribeToTaskRequest{ID: slow.ID}) {
		if !errors.Is(err, core.ErrUnsupportedOperation) {
			t.Errorf("resubscribe to a canceled task: %v, %v; want UnsupportedOperation", ev, err)
		}
	}
}

func TestListTasks(t *testing.T) {
	e := newEnv(t, envConfig{events: true})
	c := e.client(t, "chat", "1.0")
	ctxID := "conversation-1"
	var ids []core.TaskID
	for _, m := range []string{"one", "ask", "two"} {
		msg := text(m)
		msg.ContextID = ctxID
		task := send(t, c, msg, nil)
		if task.ContextID != ctxID {
			t.Fatalf("context %q, want %q", task.ContextID, ctxID)
		}
		ids = append(ids, task.ID)
	}
	send(t, c, text("elsewhere"), nil)
	ctx := context.Background()
	resp, err := c.ListTasks(ctx, &core.ListTasksRequest{ContextID: ctxID})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Tasks) != 3 || resp.Tasks[0].ID != ids[2] {
		t.Fatalf("listed %d tasks (first %v), want 3 newest first", len(resp.Tasks), resp.Tasks)
	}
	resp, err = c.ListTasks(ctx, &core.ListTasksRequest{ContextID: ctxID, Status: core.TaskStateInputRequired})
	if err != nil || len(resp.Tasks) != 1 || resp.Tasks[0].ID != ids[1] {
		t.Fatalf("input-required tasks: %v %v", resp, err)
	}
	resp, err = c.ListTasks(ctx, &core.ListTasksRequest{PageSize: 2, IncludeArtifacts: true, Status: core.TaskStateCompleted})
	if err != nil || len(resp.Tasks) != 2 || resp.NextPageToken == "" || len(resp.Tasks[0].Artifacts) != 1 {
		t.Fatalf("first page: %+v %v", resp, err)
	}
	next, err := c.ListTasks(ctx, &core.ListTasksRequest{PageSize: 2, PageToken: resp.NextPageToken, Status: core.TaskStateCompleted})
	if err != nil || len(next.Tasks) != 1 {
		t.Fatalf("second page: %+v %v", next, err)
	}
	if _, err := c.ListTasks(ctx, &core.ListTasksRequest{PageSize: 1000}); !errors.Is(err, core.ErrInvalidParams) {
		t.Errorf("page size 1000: %v", err)
	}
	// totalSize is the number of matching tasks, not the page's.
	if resp.TotalSize != 3 || next.TotalSize != 3 {
		t.Errorf("totalSize %d and %d for 3 completed tasks in pages of 2, want 3", resp.TotalSize, next.TotalSize)
	}
	all, err := c.ListTasks(ctx, &core.ListTasksRequest{PageSize: 1})
	if err != nil || len(all.Tasks) != 1 || all.TotalSize != 4 {
		t.Fatalf("page of 1: %d tasks, totalSize %d, %v; want 1 of 4", len(all.Tasks), all.TotalSize, err)
	}
	// statusTimestampAfter includes a task updated at that very time.
	at := *all.Tasks[0].Status.Timestamp
	same, err := c.ListTasks(ctx, &core.ListTasksRequest{StatusTimestampAfter: &at})
	if err != nil || len(same.Tasks) == 0 || same.Tasks[0].ID != all.Tasks[0].ID {
		t.Errorf("statusTimestampAfter = the newest task's time: %+v, %v; want it listed (>=)", same, err)
	}
}

func TestStreamingDisabled(t *testing.T) {
	e := newEnv(t, envConfig{})
	c := e.client(t, "chat", "1.0")
	// The SDK client reads streaming: false from the card and sends a
	// plain message instead.
	evs := collect(t, c.SendStreamingMessage(context.Background(), &core.SendMessageRequest{Message: text("x")}))
	if len(evs) != 1 || lastStatus(t, evs) != core.TaskStateCompleted {
		t.Fatalf("fallback: %v", evs)
	}
	for _, m := range []string{"SendStreamingMessage", "SubscribeToTask", "message/stream", "tasks/resubscribe"} {
		resp := rpc(t, e.agentURL("chat"), `{"jsonrpc":"2.0","id":1,"method":"`+m+`","params":{"id":"x","message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]}}}`)
		if resp.code() != -32004 {
			t.Errorf("%s without streaming: %s", m, resp.raw)
		}
	}
}

func TestResumeByInterruptID(t *testing.T) {
	e := newEnv(t, envConfig{events: true})
	c := e.client(t, "chat", "1.0")
	task := send(t, c, text("ask"), nil)
	wantState(t, task, core.TaskStateInputRequired)
	meta, _ := task.Status.Message.Metadata[a2a.MetadataKey].(map[string]any)
	pending, _ := meta["interrupts"].([]any)
	if len(pending) != 1 {
		t.Fatalf("pending interrupts %v", meta)
	}
	id, _ := pending[0].(map[string]any)["id"].(string)

	wrong := core.NewMessageForTask(core.MessageRoleUser, task, core.NewTextPart("x"))
	wrong.Metadata = map[string]any{a2a.InterruptIDKey: "nope.0"}
	if _, err := c.SendMessage(context.Background(), &core.SendMessageRequest{Message: wrong}); !errors.Is(err, core.ErrInvalidParams) {
		t.Fatalf("resume of an unknown interrupt: %v", err)
	}
	right := core.NewMessageForTask(core.MessageRoleUser, task, core.NewDataPart("eve"))
	right.Metadata = map[string]any{a2a.InterruptIDKey: id}
	done := send(t, c, right, nil)
	wantState(t, done, core.TaskStateCompleted)
	if got := stateData(t, done)["reply"]; got != "hello eve" {
		t.Errorf("reply %v", got)
	}
}

func TestTextChannelOption(t *testing.T) {
	e := newEnv(t, envConfig{opts: []a2a.Option{a2a.WithTextChannel("chat", "")}})
	c := e.client(t, "chat", "1.0")
	if _, err := c.SendMessage(context.Background(), &core.SendMessageRequest{Message: text("hi")}); !errors.Is(err, core.ErrUnsupportedContentType) || !strings.Contains(err.Error(), "takes no text") {
		t.Errorf("text for a graph without a text channel: %v, want ContentTypeNotSupported", err)
	}
	task := send(t, c, core.NewMessage(core.MessageRoleUser, core.NewDataPart(map[string]any{"message": "hi"})), nil)
	wantState(t, task, core.TaskStateCompleted)
}

// TestBlockingSendOutlivesAPIGatewayLimit: a blocking send waits for a
// task longer than API Gateway's limit (the "slow" message takes 30s)
// until it completes, unless WithBlockingTimeout says otherwise.
func TestBlockingSendOutlivesAPIGatewayLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("takes 30s; run without -short")
	}
	t.Parallel()
	e := newEnv(t, envConfig{events: true})
	c := e.client(t, "chat", "0.3")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := c.SendMessage(ctx, &core.SendMessageRequest{Message: text("slow")})
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*core.Task)
	if !ok {
		t.Fatalf("result %T", res)
	}
	wantState(t, task, core.TaskStateCompleted)

	bounded := newEnv(t, envConfig{events: true, opts: []a2a.Option{a2a.WithBlockingTimeout(200 * time.Millisecond)}})
	start := time.Now()
	task = send(t, bounded.client(t, "chat", "1.0"), text("slow"), nil)
	wantState(t, task, core.TaskStateWorking)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("WithBlockingTimeout(200ms): answered after %v", d)
	}
}

// TestHistoryKeepsClientMessages: a task's history holds the client's
// first message and its answers to input-required, as sent (ids, parts),
// in both protocol versions; historyLength keeps the newest.
func TestHistoryKeepsClientMessages(t *testing.T) {
	e := newEnv(t, envConfig{events: true})
	for _, version := range []string{"1.0", "0.3"} {
		t.Run(version, func(t *testing.T) {
			c := e.client(t, "chat", version)
			first := text("ask")
			task := send(t, c, first, nil)
			wantState(t, task, core.TaskStateInputRequired)
			answer := core.NewMessageForTask(core.MessageRoleUser, task, core.NewTextPart("eve"))
			done := send(t, c, answer, nil)
			wantState(t, done, core.TaskStateCompleted)
			got, err := c.GetTask(context.Background(), &core.GetTaskRequest{ID: task.ID})
			if err != nil {
				t.Fatal(err)
			}
			if len(got.History) != 2 {
				t.Fatalf("history of %d messages, want the question's and the answer's: %+v", len(got.History), got.History)
			}
			for i, want := range []*core.Message{first, answer} {
				m := got.History[i]
				if m.ID != want.ID || m.Role != core.MessageRoleUser || len(m.Parts) != 1 || m.Parts[0].Text() != want.Parts[0].Text() || m.TaskID != task.ID {
					t.Errorf("history[%d] = %+v, want the client's message %q (%s)", i, m, want.Parts[0].Text(), want.ID)
				}
			}
			one := 1
			got, err = c.GetTask(context.Background(), &core.GetTaskRequest{ID: task.ID, HistoryLength: &one})
			if err != nil || len(got.History) != 1 || got.History[0].ID != answer.ID {
				t.Errorf("historyLength 1: %+v, %v; want the answer", got, err)
			}
		})
	}
}
