package assistant_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/superstep/superstep/examples/assistant"
	"github.com/superstep/superstep/pkg/a2a"
	"github.com/superstep/superstep/pkg/agent"
	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/embedded"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/store/sqlite"
)

// server is the assistant behind the HTTP API and A2A, as `superstep dev`
// serves it: the embedded scheduler over a SQLite file, on a loopback
// port.
type server struct {
	t    *testing.T
	url  string
	shop *assistant.Shop
}

func serve(t *testing.T) *server {
	t.Helper()
	shop := assistant.NewShop()
	g, err := assistant.New(assistant.ScriptedModel(), shop)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := runs.NewRegistry(g)
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "superstep.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	log := slog.New(slog.DiscardHandler)
	sched := embedded.NewScheduler(embedded.SchedulerConfig{Graphs: reg, Runs: st, Checkpoints: st, Logger: log})
	if err := sched.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	svc := &runs.Service{Graphs: reg, Runs: st, Checkpoints: st, Dispatcher: sched, Logger: log}
	h, err := api.New(api.Config{Service: svc, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	// The A2A routes, mounted as superstep dev mounts them.
	a, err := a2a.New(svc, a2a.WithEvents(sched), a2a.WithStreaming(true), a2a.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	h.Handle(a2a.Pattern, a)
	srv := httptest.NewServer(a.PublicCards(h))
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := sched.Shutdown(ctx, 100*time.Millisecond); err != nil {
			t.Error(err)
		}
	})
	return &server{t: t, url: srv.URL, shop: shop}
}

// do sends body as JSON and decodes the answer into out, checking its
// status.
func (s *server) do(method, path, body string, status int, out any) {
	s.t.Helper()
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	if res.StatusCode != status {
		s.t.Fatalf("%s %s: status %d, want %d: %s", method, path, res.StatusCode, status, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			s.t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
}

// await polls the run until it is want.
func (s *server) await(id string, want pregel.RunStatus) api.RunDetail {
	s.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var d api.RunDetail
		s.do("GET", "/v1/runs/"+id, "", http.StatusOK, &d)
		if d.Status == want {
			return d
		}
		if d.Status.Terminal() || time.Now().After(deadline) {
			s.t.Fatalf("run %s is %s, want %s: %+v", id, d.Status, want, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (s *server) refunded() int {
	o, err := s.shop.Lookup(context.Background(), assistant.LookupInput{OrderID: "A-1001"})
	if err != nil {
		s.t.Fatal(err)
	}
	return o.RefundedCents
}

// Approval over the API: the run stops before the refund showing the
// call, and the answer sent to POST /v1/runs/{id}/resume decides.
func TestApprovalOverTheAPI(t *testing.T) {
	for _, tc := range []struct {
		name, resume string
		refunded     int
		answer       string // in the model's final answer
		edited       string // the arguments the refund ran with, when edited
	}{
		{"approve", `{"resume": "approve"}`, 4500, "Done: refunded 45.00 on order A-1001 (customer request).", ""},
		{"approve object", `{"resume": {"decision": "approve"}}`, 4500, "Done: refunded 45.00 on order A-1001", ""},
		{"edit", `{"resume": {"decision": "edit", "input": {"order_id": "A-1001", "cents": 1000, "reason": "partial"}}}`, 1000,
			"Done: refunded 10.00 on order A-1001 (partial).", `{"order_id":"A-1001","cents":1000,"reason":"partial"}`},
		{"reject", `{"resume": {"decision": "reject", "message": "ask for a photo first"}}`, 0,
			"The refund did not go through (the user rejected this call: ask for a photo first).", ""},
		{"reject as text", `{"resume": "not without a photo"}`, 0,
			"The refund did not go through (the user rejected this call: not without a photo).", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := serve(t)
			var run api.Run
			s.do("POST", "/v1/graphs/assistant/runs",
				`{"input": "Hi! Where are my orders A-1001 and A-1002? And please refund A-1001, the teapot arrived broken."}`,
				http.StatusAccepted, &run)
			d := s.await(run.RunID, pregel.RunInterrupted)
			if len(d.Interrupts) != 1 || d.Interrupts[0].Node != agent.ToolsNode {
				t.Fatalf("interrupts %+v, want one, of the tools node", d.Interrupts)
			}
			var req agent.ApprovalRequest
			if err := json.Unmarshal(d.Interrupts[0].Value, &req); err != nil {
				t.Fatal(err)
			}
			if req.Kind != "tool_approval" || req.ToolCall.Name != "refund" || string(req.ToolCall.Input) != `{"order_id":"A-1001","cents":4500,"reason":"customer request"}` {
				t.Fatalf("the interrupt shows %s; want the refund call and its arguments", d.Interrupts[0].Value)
			}
			if s.refunded() != 0 {
				t.Fatal("refunded before the approval")
			}

			s.do("POST", "/v1/runs/"+run.RunID+"/resume", tc.resume, http.StatusAccepted, nil)
			d = s.await(run.RunID, pregel.RunCompleted)
			if got := s.refunded(); got != tc.refunded {
				t.Errorf("refunded %d cents, want %d", got, tc.refunded)
			}
			var msgs []agent.Message
			if err := json.Unmarshal(d.Values[agent.MessagesChannel], &msgs); err != nil {
				t.Fatal(err)
			}
			if a := msgs[len(msgs)-1]; a.Role != agent.RoleAssistant || !strings.Contains(a.Text(), tc.answer) {
				t.Errorf("final answer %q lacks %q", a.Text(), tc.answer)
			}
			var result *agent.ToolResult
			for _, m := range msgs {
				for _, b := range m.Content {
					if b.ToolResult != nil && b.ToolResult.ToolCallID == "refund-0" {
						result = b.ToolResult
					}
				}
			}
			switch {
			case result == nil:
				t.Fatal("no result for the refund call")
			case result.Error != (tc.refunded == 0):
				t.Errorf("refund result %+v: error %v, want %v", result, result.Error, tc.refunded == 0)
			case string(result.EditedInput) != tc.edited:
				t.Errorf("refund result records edited input %s, want %q", result.EditedInput, tc.edited)
			}
			// Three model turns: lookups, refund, answer (the scripted
			// model counts 20 output tokens a turn).
			if d.Usage == nil || d.Usage.Total.OutputTokens != 60 || d.Usage.ByNode[agent.ModelNode] != d.Usage.Total {
				t.Errorf("usage %+v, want the model's 60 output tokens over three turns, all of node model", d.Usage)
			}
		})
	}
}

// An answer that is no approval leaves the run waiting, asking again and
// saying why; so does an edit whose arguments do not fit the tool's schema.
func TestApprovalBadAnswers(t *testing.T) {
	s := serve(t)
	var run api.Run
	s.do("POST", "/v1/graphs/assistant/runs", `{"input": "please refund A-1001"}`, http.StatusAccepted, &run)
	first := s.await(run.RunID, pregel.RunInterrupted).Interrupts
	s.do("POST", "/v1/runs/"+run.RunID+"/resume", `{"resume": 42}`, http.StatusAccepted, nil)
	var again []pregel.InterruptInfo
	for deadline := time.Now().Add(10 * time.Second); ; {
		if again = s.await(run.RunID, pregel.RunInterrupted).Interrupts; len(again) == 1 && again[0].Error != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run does not ask again after an answer that is no approval: %+v", again)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("asked again: %s", again[0].Error)
	if again[0].ID != first[0].ID || !strings.Contains(again[0].Error, "number") || s.refunded() != 0 {
		t.Fatalf("asked again %+v (first %+v), refunded %d", again[0], first[0], s.refunded())
	}
	// An edit whose arguments do not fit the tool's schema is refused at
	// once, naming the field; the run still waits and nothing is refunded.
	s.do("POST", "/v1/runs/"+run.RunID+"/resume", `{"resume": {"decision": "edit", "input": {"order_id": "A-1001", "cents": "ten"}}}`, http.StatusAccepted, nil)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if again = s.await(run.RunID, pregel.RunInterrupted).Interrupts; len(again) == 1 && strings.Contains(again[0].Error, `"cents"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run does not ask again after an edit with a mistyped argument: %+v", again)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if again[0].ID != first[0].ID || !strings.Contains(again[0].Error, "integer") || s.refunded() != 0 {
		t.Fatalf("asked again %+v (first %+v), refunded %d", again[0], first[0], s.refunded())
	}
	s.do("POST", "/v1/runs/"+run.RunID+"/resume", `{"resume": {"decision": "reject", "message": "not today"}}`, http.StatusAccepted, nil)
	d := s.await(run.RunID, pregel.RunCompleted)
	if s.refunded() != 0 {
		t.Errorf("refunded %d cents after a rejection", s.refunded())
	}
	if !strings.Contains(string(d.Values[agent.MessagesChannel]), "not today") {
		t.Errorf("the model was not told why the call was rejected: %s", d.Values[agent.MessagesChannel])
	}
}
