package a2a_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	core "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"

	"github.com/superstep/superstep/pkg/a2a"
	"github.com/superstep/superstep/pkg/pregel"
)

// CallerState is the state of graphs that call a remote agent.
type CallerState struct {
	Ask    string `json:"ask"`
	Answer string `json:"answer,omitempty"`
}

// callerGraph calls the agent at cardURL with the text of Ask and stores
// its answer: the reply channel of a superstep agent's final state, or the
// text of any other agent's answer.
func callerGraph(t testing.TB, cardURL string, opts ...a2a.RemoteOption) (*pregel.Graph, *a2a.RemoteNode[CallerState]) {
	t.Helper()
	node := a2a.RemoteAgent(cardURL,
		func(ctx context.Context, s CallerState) (*a2a.Message, error) {
			return a2a.TextMessage(s.Ask), nil
		},
		func(ctx context.Context, s CallerState, res *a2a.RemoteResult) (CallerState, error) {
			var st struct {
				Reply string `json:"reply"`
			}
			if err := res.Data(&st); err == nil && st.Reply != "" {
				return CallerState{Answer: st.Reply}, nil
			}
			return CallerState{Answer: res.Text()}, nil
		}, opts...)
	b := pregel.NewGraph[CallerState]("caller")
	b.AddNode("remote", node, pregel.WithTimeout(20*time.Second))
	b.AddEdge(pregel.Start, "remote")
	b.AddEdge("remote", pregel.End)
	g, err := b.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return g, node
}

// remoteCases drives a caller graph through the three paths: completed,
// failed, input-required then resumed. ask maps a path to the message that
// takes the remote agent there; want* are the expected answers.
type remoteCases struct {
	cardURL                  string
	complete, fail, question string
	wantComplete             string
	wantFailure              string // in the node's error
	wantQuestion             string // in the interrupt payload
	answer, wantAnswer       string
	// auth: the message "auth" makes the agent ask for a token
	// (auth-required); the answer X gives "token X".
	auth bool
	// listable: the agent lists tasks (A2A 1.0), so that a fresh node
	// finds the remote task waiting for its answer.
	listable bool
	opts     []a2a.RemoteOption
}

func runRemoteCases(t *testing.T, rc remoteCases) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g, _ := callerGraph(t, rc.cardURL, rc.opts...)

	t.Run("completed", func(t *testing.T) {
		res, err := g.Run(ctx, CallerState{Ask: rc.complete})
		if err != nil {
			t.Fatal(err)
		}
		var st CallerState
		if err := res.Decode(&st); err != nil {
			t.Fatal(err)
		}
		if res.Status != pregel.RunCompleted || st.Answer != rc.wantComplete {
			t.Fatalf("run %s, answer %q, want completed with %q", res.Status, st.Answer, rc.wantComplete)
		}
	})

	t.Run("failed", func(t *testing.T) {
		res, err := g.Run(ctx, CallerState{Ask: rc.fail})
		if err == nil || res.Status != pregel.RunFailed {
			t.Fatalf("run %v, err %v: want failed", res, err)
		}
		if !strings.Contains(err.Error(), rc.wantFailure) {
			t.Errorf("error %q does not carry the remote message %q", err, rc.wantFailure)
		}
	})

	resumeWith := func(t *testing.T, g *pregel.Graph, store *pregel.MemoryStore, res *pregel.Result) {
		t.Helper()
		res, err := g.Resume(ctx, res.RunID, pregel.WithStore(store), pregel.WithResume(rc.answer))
		if err != nil {
			t.Fatal(err)
		}
		var st CallerState
		if err := res.Decode(&st); err != nil {
			t.Fatal(err)
		}
		if res.Status != pregel.RunCompleted || st.Answer != rc.wantAnswer {
			t.Fatalf("resumed run %s, answer %q, want completed with %q", res.Status, st.Answer, rc.wantAnswer)
		}
	}
	interrupt := func(t *testing.T, g *pregel.Graph, store *pregel.MemoryStore) (*pregel.Result, core.TaskID) {
		t.Helper()
		res, err := g.Run(ctx, CallerState{Ask: rc.question}, pregel.WithStore(store))
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != pregel.RunInterrupted || len(res.Interrupts) != 1 {
			t.Fatalf("run %s with %d interrupts, want interrupted once", res.Status, len(res.Interrupts))
		}
		var payload map[string]any
		if err := json.Unmarshal(res.Interrupts[0].Value, &payload); err != nil {
			t.Fatal(err)
		}
		remote, _ := payload["remote_task_id"].(string)
		if q, _ := payload["question"].(string); !strings.Contains(q, rc.wantQuestion) || remote == "" || payload["remote_state"] != "input-required" {
			t.Fatalf("interrupt payload %v, want the remote question %q", payload, rc.wantQuestion)
		}
		return res, core.TaskID(remote)
	}

	if rc.auth {
		t.Run("auth-required then resume", func(t *testing.T) {
			store := pregel.NewMemoryStore()
			res, err := g.Run(ctx, CallerState{Ask: "auth"}, pregel.WithStore(store))
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != pregel.RunInterrupted {
				t.Fatalf("run %s, want interrupted", res.Status)
			}
			var payload map[string]any
			if err := json.Unmarshal(res.Interrupts[0].Value, &payload); err != nil {
				t.Fatal(err)
			}
			if payload["auth_required"] != true || payload["remote_state"] != "auth-required" {
				t.Fatalf("payload %v, want auth_required", payload)
			}
			res, err = g.Resume(ctx, res.RunID, pregel.WithStore(store), pregel.WithResume("xyz"))
			if err != nil {
				t.Fatal(err)
			}
			var st CallerState
			if err := res.Decode(&st); err != nil {
				t.Fatal(err)
			}
			if res.Status != pregel.RunCompleted || st.Answer != "token xyz" {
				t.Fatalf("resumed run %s, answer %q", res.Status, st.Answer)
			}
		})
	}

	t.Run("input-required then resume", func(t *testing.T) {
		store := pregel.NewMemoryStore()
		res, remote := interrupt(t, g, store)
		resumeWith(t, g, store, res)
		// The answer went to the remote task that asked.
		if st := remoteState(t, rc.cardURL, remote); st != core.TaskStateCompleted {
			t.Errorf("remote task %s is %s, want completed", remote, st)
		}
	})

	t.Run("resumed by another process", func(t *testing.T) {
		// A fresh node (as in another Lambda) finds the remote task
		// through tasks/list (1.0) or replays the conversation (0.3).
		store := pregel.NewMemoryStore()
		res, remote := interrupt(t, g, store)
		g2, _ := callerGraph(t, rc.cardURL, rc.opts...)
		resumeWith(t, g2, store, res)
		want := core.TaskStateInputRequired // replayed with a new task
		if rc.listable {
			want = core.TaskStateCompleted // continued
		}
		if st := remoteState(t, rc.cardURL, remote); st != want {
			t.Errorf("remote task %s is %s, want %s", remote, st, want)
		}
	})
}

// remoteState reads the state of a task of the agent at cardURL.
func remoteState(t testing.TB, cardURL string, id core.TaskID) core.TaskState {
	t.Helper()
	ctx := context.Background()
	if !strings.HasSuffix(cardURL, ".json") {
		cardURL += "/.well-known/agent-card.json"
	}
	resp, err := http.Get(cardURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	card, err := a2av0.NewAgentCardParser()(body)
	if err != nil {
		t.Fatal(err)
	}
	c, err := a2aclient.NewFromCard(ctx, card, a2av0.WithJSONRPCTransport(a2av0.JSONRPCTransportConfig{}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy()
	task, err := c.GetTask(ctx, &core.GetTaskRequest{ID: id})
	if err != nil {
		t.Fatalf("get remote task %s: %v", id, err)
	}
	return task.Status.State
}

// TestRemoteAgentSuperstep calls our own A2A server as a remote agent, over
// 1.0 and over 0.3 (a card that offers 0.3 only).
func TestRemoteAgentSuperstep(t *testing.T) {
	e := newEnv(t, envConfig{events: true})
	rc := remoteCases{
		complete: "hi", wantComplete: "HI",
		fail: "fail", wantFailure: "the task failed",
		question: "ask", wantQuestion: "what is your name?",
		answer: "bob", wantAnswer: "hello bob",
		auth: true,
	}
	t.Run("1.0", func(t *testing.T) {
		rc := rc
		rc.cardURL = e.agentURL("chat")
		rc.listable = true
		runRemoteCases(t, rc)
	})
	t.Run("0.3", func(t *testing.T) {
		rc := rc
		rc.cardURL = legacyCard(t, e.agentURL("chat"))
		runRemoteCases(t, rc)
	})
	t.Run("rejected", func(t *testing.T) {
		g, node := callerGraph(t, e.agentURL("chat"))
		// The node's own error is typed.
		_, err := node.Execute(context.Background(), CallerState{Ask: "invalid"})
		var re *a2a.RemoteError
		if !errors.As(err, &re) || !errors.Is(err, a2a.ErrRemoteTask) || re.State != "TASK_STATE_REJECTED" || !strings.Contains(re.Message, `message must not be "invalid"`) {
			t.Fatalf("err %v, want a RemoteError for the rejected task", err)
		}
		// The run fails with its message.
		if _, err := g.Run(context.Background(), CallerState{Ask: "invalid"}); err == nil || !strings.Contains(err.Error(), `rejected: invalid input: message must not be "invalid"`) {
			t.Fatalf("run error %v", err)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		g, _ := callerGraph(t, "http://127.0.0.1:1/a2a/x", a2a.ClientTimeout(time.Second))
		if _, err := g.Run(context.Background(), CallerState{Ask: "x"}); err == nil || !strings.Contains(err.Error(), "agent card") {
			t.Fatalf("err %v, want an agent card error", err)
		}
	})
}

// legacyCard serves the card of the agent at agentURL rewritten to offer
// A2A 0.3 only, as an agent that predates 1.0 would, and returns its URL.
func legacyCard(t testing.TB, agentURL string) string {
	t.Helper()
	resp, err := http.Get(agentURL + "/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var card map[string]any
	if err := json.Unmarshal(body, &card); err != nil {
		t.Fatal(err)
	}
	delete(card, "supportedInterfaces")
	raw, _ := json.Marshal(card)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(raw)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/.well-known/agent-card.json"
}

// TestRemoteAgentTimeoutRetry checks that the client timeout bounds each
// call and that pregel's retry policy retries a remote failure.
func TestRemoteAgentTimeoutRetry(t *testing.T) {
	e := newEnv(t, envConfig{events: true})
	calls := 0
	node := a2a.RemoteAgent(e.agentURL("chat"),
		func(ctx context.Context, s CallerState) (*a2a.Message, error) {
			calls++
			return a2a.TextMessage(s.Ask), nil
		}, nil, a2a.ClientTimeout(300*time.Millisecond))
	b := pregel.NewGraph[CallerState]("caller")
	b.AddNode("remote", node, pregel.WithRetry(pregel.RetryPolicy{MaxAttempts: 2, InitialInterval: 10 * time.Millisecond}))
	b.AddEdge(pregel.Start, "remote")
	b.AddEdge("remote", pregel.End)
	g, err := b.Compile()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = g.Run(context.Background(), CallerState{Ask: "slow"})
	if err == nil || !strings.Contains(err.Error(), "after 2 attempt(s)") || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Fatalf("err %v, want a timeout after 2 attempts", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s; the client timeout did not apply", d)
	}
	if calls != 2 {
		t.Errorf("%d messages sent, want 2 (one per attempt)", calls)
	}
	// Remote failures are retried too.
	calls = 0
	if _, err := g.Run(context.Background(), CallerState{Ask: "fail"}); err == nil || calls != 2 {
		t.Errorf("err %v after %d calls, want a failure after 2", err, calls)
	}
}
