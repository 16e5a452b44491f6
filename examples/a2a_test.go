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

	"github.com/superstep/superstep/examples/triage"
	"github.com/superstep/superstep/pkg/a2a"
	"github.com/superstep/superstep/pkg/api"
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
	sched := runs.NewScheduler(runs.SchedulerConfig{Graphs: reg, Runs: records, Checkpoints: cps, Logger: log})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := sched.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sched.Shutdown(context.Background(), time.Second) }()
	svc := &runs.Service{Graphs: reg, Runs: records, Checkpoints: cps, Dispatcher: sched, Logger: log}
	h := api.New(api.Config{Service: svc, Logger: log})
	h.Handle(a2a.Pattern, a2a.New(svc, a2a.WithEvents(sched), a2a.WithLogger(log)))
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
