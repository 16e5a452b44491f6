package runstest

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/agent"
	"github.com/superstep/superstep/pkg/embedded"
	"github.com/superstep/superstep/pkg/runs"
)

// WatchedTurnsEnv sets how many turns WatchedTurnBytes holds (the
// issue's figure: 100); unset, the short version's.
const WatchedTurnsEnv = "SUPERSTEP_WATCHED_TURNS"

// WatchedTurns returns the turns of WatchedTurnBytes: WatchedTurnsEnv,
// or short.
func WatchedTurns(t testing.TB, short int) int {
	if v := os.Getenv(WatchedTurnsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a number of turns", WatchedTurnsEnv, v)
		}
		return n
	}
	return short
}

// WatchedTurnBytes holds a conversation of turns turns on one thread with
// the prebuilt agent, every run's events logged (embedded.EventsOn: what
// a watched run stores), each answer words tokens ("tok17 "), streamed a
// token a message_delta event, and returns what the thread stores in all
// (Service.ThreadStorage) and the answers' text bytes. It logs the
// figures per turn.
func WatchedTurnBytes(t *testing.T, turns, words int, st FlatStores) (runs.Storage, int64) {
	t.Helper()
	ctx := t.Context()
	script := make([][]agent.Response, turns)
	var text int64
	for i := range script {
		var b strings.Builder
		for k := range words {
			fmt.Fprintf(&b, "tok%d ", (i*words+k)%1000)
		}
		text += int64(b.Len())
		script[i] = []agent.Response{{Message: agent.AssistantText(b.String()), StopReason: agent.StopEndTurn, Usage: agent.Usage{InputTokens: 1000, OutputTokens: words}}}
	}
	g, err := agent.New(agent.Config{Name: "chat", Model: agent.ScriptedConversation(script...)})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := runs.NewRegistry(g)
	if err != nil {
		t.Fatal(err)
	}
	svc := &runs.Service{Graphs: reg, Runs: st.Runs, Checkpoints: st.Checkpoints, Threads: st.Threads}
	sched := embedded.NewScheduler(embedded.SchedulerConfig{Graphs: reg, Runs: st.Runs, Checkpoints: st.Checkpoints, Events: st.Events,
		EventsMode: embedded.EventsOn, OnStop: svc.RunStopped, StartThreadRun: svc.StartThreadRun})
	svc.Dispatcher = sched
	if err := sched.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sched.Shutdown(t.Context(), time.Second) })
	if _, _, err := svc.CreateThread(ctx, runs.CreateThreadRequest{ThreadID: "conv"}); err != nil {
		t.Fatal(err)
	}
	var prev runs.Storage
	for i := range turns {
		in, _ := json.Marshal(agent.State{Messages: []agent.Message{agent.UserText(fmt.Sprintf("Turn %d: go on.", i+1))}})
		r, _, err := svc.CreateOnThread(ctx, "conv", runs.ThreadRunRequest{Graph: "chat", Input: in})
		if err != nil {
			t.Fatalf("turn %d: %v", i+1, err)
		}
		waitThreadIdle(t, svc, "conv", r.ID)
		if err := sched.WaitIdle(ctx); err != nil {
			t.Fatal(err)
		}
		if i == 0 || i >= turns-2 {
			now, err := svc.ThreadStorage(ctx, "conv")
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 || i == turns-1 {
				t.Logf("turn %d: %d bytes stored (events %d)", i+1, now.TotalBytes-prev.TotalBytes, now.EventBytes-prev.EventBytes)
			}
			prev = now
		}
	}
	total, err := svc.ThreadStorage(ctx, "conv")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d watched turns of %d tokens (%d bytes of text in all): %d bytes stored, %d a turn; events %d, %d a turn; %+v",
		turns, words, text, total.TotalBytes, total.TotalBytes/int64(turns), total.EventBytes, total.EventBytes/int64(turns), total)
	return total, text
}
