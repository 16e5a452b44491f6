package a2a_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/agent"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// refunds records the calls of the refund tool.
type refunds struct {
	mu    sync.Mutex
	calls []string
}

func (r *refunds) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

// refundAgent is the prebuilt agent with a refund tool whose calls wait
// for approval; its model asks for a refund of 500 cents on A-1.
func refundAgent(t *testing.T, rec *refunds) *pregel.Graph {
	t.Helper()
	type refundIn struct {
		OrderID string `json:"order_id"`
		Cents   int    `json:"cents"`
	}
	tool, err := agent.NewTool("refund", "Refunds an order", func(_ context.Context, in refundIn) (string, error) {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		rec.calls = append(rec.calls, fmt.Sprintf("%s:%d", in.OrderID, in.Cents))
		return "refunded", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	model := agent.ScriptedTurns(
		agent.Response{Message: agent.Message{Content: []agent.Block{{ToolCall: &agent.ToolCall{ID: "t1", Name: "refund", Input: json.RawMessage(`{"order_id":"A-1","cents":500}`)}}}}},
		agent.Response{Message: agent.Message{Content: []agent.Block{{Text: "Done."}}}},
	)
	g, err := agent.New(agent.Config{Name: "refunds", Model: model, Tools: []agent.Tool{tool}, Approve: []string{"refund"}})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestConcurrentAnswers: 20 clients answer the same approval at once,
// each with its own edit, over the HTTP API and over A2A, on each store.
// Exactly one answer is applied; every other client gets a conflict that
// names the answer applied; the tool runs once, with exactly the
// arguments of that answer.
func TestConcurrentAnswers(t *testing.T) {
	const clients = 20
	for _, store := range []string{"memory", "sqlite", "dynamo"} {
		for _, via := range []string{"api", "a2a"} {
			t.Run(store+"/"+via, func(t *testing.T) {
				var rec refunds
				e := newEnv(t, envConfig{sqlite: store == "sqlite", dynamo: store == "dynamo", graphs: []*pregel.Graph{refundAgent(t, &rec)}})
				ctx := t.Context()
				input, _ := json.Marshal(agent.TextInput("refund A-1"))
				r, _, err := e.svc.Create(ctx, "refunds", runs.CreateRequest{RunID: "refund-1", Input: input})
				if err != nil {
					t.Fatal(err)
				}
				waitStatus(t, e.svc, r.ID, pregel.RunInterrupted)

				type outcome struct {
					status int    // HTTP status (api) or 200 + JSON-RPC error code (a2a)
					code   int    // JSON-RPC error code, 0 for none
					text   string // the refusal
				}
				outcomes := make([]outcome, clients)
				start := make(chan struct{})
				var wg sync.WaitGroup
				for i := range clients {
					wg.Go(func() {
						decision := fmt.Sprintf(`{"decision":"edit","input":{"order_id":"A-1","cents":%d}}`, 100+i)
						var req *http.Request
						if via == "api" {
							req, _ = http.NewRequest(http.MethodPost, e.url+"/v1/runs/"+r.ID+"/resume", strings.NewReader(`{"resume":`+decision+`}`))
						} else {
							body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"SendMessage","params":{"configuration":{"returnImmediately":true},"message":{"messageId":"m-%d","taskId":%q,"role":"ROLE_USER","parts":[{"data":%s}]}}}`, i, i, r.ID, decision)
							req, _ = http.NewRequest(http.MethodPost, e.agentURL("refunds"), strings.NewReader(body))
						}
						req.Header.Set("Content-Type", "application/json")
						<-start
						resp, err := http.DefaultClient.Do(req)
						if err != nil {
							t.Error(err)
							return
						}
						raw, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						o := outcome{status: resp.StatusCode, text: string(raw)}
						if via == "a2a" {
							var env struct {
								Error *struct {
									Code    int    `json:"code"`
									Message string `json:"message"`
								} `json:"error"`
							}
							if err := json.Unmarshal(raw, &env); err != nil {
								t.Errorf("client %d: not JSON-RPC: %s", i, raw)
							}
							if env.Error != nil {
								o.code, o.text = env.Error.Code, env.Error.Message
							}
						}
						outcomes[i] = o
					})
				}
				close(start)
				wg.Wait()

				winner := -1
				for i, o := range outcomes {
					applied := (via == "api" && o.status == http.StatusAccepted) || (via == "a2a" && o.status == http.StatusOK && o.code == 0)
					if applied {
						if winner >= 0 {
							t.Fatalf("clients %d and %d were both applied", winner, i)
						}
						winner = i
					}
				}
				if winner < 0 {
					t.Fatalf("no answer applied: %+v", outcomes)
				}
				// The winner's name as the losers are told it.
				name := fmt.Sprintf(`"cents":%d}`, 100+winner)
				if via == "a2a" {
					name = fmt.Sprintf(`message "m-%d"`, winner)
				}
				for i, o := range outcomes {
					if i == winner {
						continue
					}
					switch {
					case via == "api" && o.status != http.StatusConflict:
						t.Errorf("client %d: status %d, want 409: %s", i, o.status, o.text)
					case via == "a2a" && o.code != -32004:
						t.Errorf("client %d: code %d, want -32004 (UnsupportedOperation): %s", i, o.code, o.text)
					case !strings.Contains(o.text, "already") || !strings.Contains(o.text, strings.ReplaceAll(name, `"`, `\"`)) && !strings.Contains(o.text, name):
						t.Errorf("client %d: %s\nwant it to name the answer applied (%s)", i, o.text, name)
					}
				}
				done := waitStatus(t, e.svc, r.ID, pregel.RunCompleted)
				if got, want := rec.get(), []string{fmt.Sprintf("A-1:%d", 100+winner)}; fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("refund calls %v, want exactly %v (the applied answer's arguments)", got, want)
				}
				if done.Status != pregel.RunCompleted {
					t.Fatalf("run %s", done.Status)
				}
			})
		}
	}
}

// waitStatus waits until run id has status want.
func waitStatus(t *testing.T, svc *runs.Service, id string, want pregel.RunStatus) runs.Run {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		r, err := svc.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status == want {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %s, want %s: %+v", id, r.Status, want, r.Interrupts)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
