package examples

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	core "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"

	"github.com/superstep/superstep/examples/assistant"
	"github.com/superstep/superstep/examples/triage"
	"github.com/superstep/superstep/pkg/a2a"
	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/embedded"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// A chat client's first message to support-triage, plain text, is its
// ticket: the card says it takes text, and the task goes on to review.
func TestTriageTakesPlainTextOverA2A(t *testing.T) {
	graphs, err := All()
	if err != nil {
		t.Fatal(err)
	}
	reg, err := runs.NewRegistry(graphs...)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	records, cps := runs.NewMemoryStore(), pregel.NewMemoryStore()
	sched := embedded.NewScheduler(embedded.SchedulerConfig{Graphs: reg, Runs: records, Checkpoints: cps, Logger: log})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := sched.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sched.Shutdown(context.Background(), time.Second) }()
	svc := &runs.Service{Graphs: reg, Runs: records, Checkpoints: cps, Dispatcher: sched, Logger: log}
	h, err := api.New(api.Config{Service: svc, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	agents, err := a2a.New(svc, a2a.WithEvents(sched), a2a.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	h.Handle(a2a.Pattern, agents)
	srv := httptest.NewServer(h)
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/a2a/" + triage.Name + "/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	var card struct {
		DefaultInputModes []string `json:"defaultInputModes"`
	}
	err = json.NewDecoder(resp.Body).Decode(&card)
	resp.Body.Close()
	if err != nil || !slices.Contains(card.DefaultInputModes, "text/plain") {
		t.Fatalf("card input modes %v (%v), want text/plain", card.DefaultInputModes, err)
	}

	body := `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"text","text":"I was charged twice for my subscription, please refund"}]}}}`
	resp, err = http.Post(srv.URL+"/a2a/"+triage.Name, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Result struct {
			Status struct {
				State   string `json:"state"`
				Message struct {
					Parts []struct {
						Text string `json:"text"`
					} `json:"parts"`
				} `json:"message"`
			} `json:"status"`
		} `json:"result"`
		Error any `json:"error"`
	}
	err = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if err != nil || out.Error != nil || out.Result.Status.State != "input-required" {
		t.Fatalf("message/send of plain text: %+v, %v; want the task waiting for review", out, err)
	}
}

// A chat client holds a conversation with the assistant over A2A (a2a-go's
// client): its second message, in the context the first task gave, starts
// a task that sees the first turn; the task's history is the conversation.
func TestAssistantConversationOverA2A(t *testing.T) {
	graphs, err := All()
	if err != nil {
		t.Fatal(err)
	}
	reg, err := runs.NewRegistry(graphs...)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	store, cps := runs.NewMemoryStore(), pregel.NewMemoryStore()
	svc := &runs.Service{Graphs: reg, Runs: store, Checkpoints: cps, Threads: store, Logger: log}
	sched := embedded.NewScheduler(embedded.SchedulerConfig{Graphs: reg, Runs: store, Checkpoints: cps, Logger: log, OnStop: svc.RunStopped, StartThreadRun: svc.StartThreadRun})
	svc.Dispatcher = sched
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := sched.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sched.Shutdown(context.Background(), time.Second) }()
	h, err := api.New(api.Config{Service: svc, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	agents, err := a2a.New(svc, a2a.WithEvents(sched), a2a.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	h.Handle(a2a.Pattern, agents)
	srv := httptest.NewServer(h)
	defer srv.Close()

	card, err := agentcard.DefaultResolver.Resolve(ctx, srv.URL+"/a2a/"+assistant.Name)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(card.DefaultInputModes, "text/plain") {
		t.Errorf("card input modes %v, want text/plain", card.DefaultInputModes)
	}
	client, err := a2aclient.NewFromCard(ctx, card)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Destroy()
	say := func(text, contextID string) *core.Task {
		t.Helper()
		msg := core.NewMessage(core.MessageRoleUser, core.NewTextPart(text))
		msg.ContextID = contextID
		res, err := client.SendMessage(ctx, &core.SendMessageRequest{Message: msg})
		if err != nil {
			t.Fatalf("SendMessage %q: %v", text, err)
		}
		task, ok := res.(*core.Task)
		if !ok || task.Status.State != core.TaskStateCompleted {
			t.Fatalf("SendMessage %q: %+v, want a completed task", text, res)
		}
		return task
	}
	first := say("Where is my order A-1002?", "")
	second := say("And A-1003?", first.ContextID)
	var history []string
	for _, m := range second.History {
		var text strings.Builder
		for _, p := range m.Parts {
			text.WriteString(p.Text())
		}
		if text.Len() > 0 {
			history = append(history, string(m.Role)+": "+text.String())
		}
	}
	want := []string{
		"ROLE_USER: Where is my order A-1002?", "ROLE_AGENT: Let me look that up.", "ROLE_AGENT: Here is what I found. A-1002, your walnut tray, is shipped.",
		"ROLE_USER: And A-1003?", "ROLE_AGENT: Let me look that up.", "ROLE_AGENT: Here is what I found. A-1003, your linen apron, is processing.",
	}
	if !slices.Equal(history, want) {
		t.Errorf("the second task's history:\n%s\nwant\n%s", strings.Join(history, "\n"), strings.Join(want, "\n"))
	}
	if second.ContextID != first.ContextID || second.ID == first.ID {
		t.Errorf("second task %s in %s; want a new task in %s", second.ID, second.ContextID, first.ContextID)
	}
}
