package runstest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/agent"
	"github.com/superstep/superstep/pkg/embedded"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// FlatTurnsEnv is the variable that sets how many turns FlatBytesPerTurn
// holds (default 30; the figure is 100).
const FlatTurnsEnv = "SUPERSTEP_FLAT_TURNS"

// FlatTurns returns the turns FlatBytesPerTurn holds: FlatTurnsEnv, or
// 30, at least 30.
func FlatTurns(t testing.TB) int {
	n := 30
	if v := os.Getenv(FlatTurnsEnv); v != "" {
		k, err := strconv.Atoi(v)
		if err != nil || k < 30 {
			t.Fatalf("%s=%q: want a number of turns, 30 or more", FlatTurnsEnv, v)
		}
		n = k
	}
	return n
}

// FlatStores are the stores of a FlatBytesPerTurn test; each must be a
// runs.StorageMeter for its part (the checkpointer and the event log).
type FlatStores struct {
	Runs        runs.Store
	Threads     runs.ThreadStore
	Checkpoints pregel.Checkpointer
	Events      runs.EventLog
	// Turn, if set, is called before each turn's run is created
	// (finished false) and after it has finished (finished true), turns
	// counted from 1, with no measuring in between: for figures of the
	// store's own, such as its requests a turn.
	Turn func(turn int, finished bool)
}

// FlatBytesPerTurn holds a conversation of turns turns with the prebuilt
// agent (a scripted model answering ~2 KB per turn, streamed a word a
// token event) on one thread, events logged by mode (embedded.EventsOn: every
// run's, the most a run stores; EventsWatched: what `superstep dev`
// stores of runs nobody watches), and checks
// with margins that what the thread stores, all of it (checkpoints,
// segments, events, run and thread records: Service.ThreadStorage), grows
// by the same per turn late as early: the mean of the last 10 turns at
// most 1.1 times the mean of the first 10. It also checks that each turn
// stores at most 2 KB per superstep plus the bytes of the values its
// steps wrote, except under EventsOn, where each turn's token events
// (one an answered word) are stored too. It logs the figures.
func FlatBytesPerTurn(t *testing.T, turns int, mode embedded.EventsMode, st FlatStores) {
	t.Helper()
	ctx := t.Context()
	script := make([][]agent.Response, turns)
	for i := range script {
		text := fmt.Sprintf("Answer %d. ", i+1) + strings.Repeat("The order ships on Tuesday; ", 70)
		script[i] = []agent.Response{{Message: agent.AssistantText(text), StopReason: agent.StopEndTurn, Usage: agent.Usage{InputTokens: 1000, OutputTokens: 500}}}
	}
	g, err := agent.New(agent.Config{Name: "chat", Model: agent.ScriptedConversation(script...)})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := runs.NewRegistry(g)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	svc := &runs.Service{Graphs: reg, Runs: st.Runs, Checkpoints: st.Checkpoints, Threads: st.Threads, Logger: log}
	sched := embedded.NewScheduler(embedded.SchedulerConfig{Graphs: reg, Runs: st.Runs, Checkpoints: st.Checkpoints, Events: st.Events, Logger: log,
		EventsMode: mode, OnStop: svc.RunStopped, StartThreadRun: svc.StartThreadRun})
	svc.Dispatcher = sched
	if err := sched.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, stop := context.WithTimeout(context.Background(), 10*time.Second)
		defer stop()
		_ = sched.Shutdown(ctx, time.Second)
	})
	if _, _, err := svc.CreateThread(ctx, runs.CreateThreadRequest{ThreadID: "conv"}); err != nil {
		t.Fatal(err)
	}
	total := func() runs.Storage {
		t.Helper()
		s, err := svc.ThreadStorage(ctx, "conv")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	threadRecord := func() int64 {
		t.Helper()
		th, err := svc.GetThread(ctx, "conv")
		if err != nil {
			t.Fatal(err)
		}
		rec, err := json.Marshal(th)
		if err != nil {
			t.Fatal(err)
		}
		return int64(len(rec))
	}
	// What the thread stores is measured whole (ThreadStorage, every run
	// read) every 10 turns and at turns-10: that is what the windows and
	// the budget below hold. Each turn in between is measured by what it
	// added (its run's storage and the thread record's change), which
	// must sum to the whole measure's change: a turn changes nothing
	// earlier runs store. Measuring the whole thread every turn would
	// read O(turns²) runs, most of a 100-turn run's time on moto.
	full := map[int]runs.Storage{0: total()}
	record, prevFull := threadRecord(), 0
	perTurn, limits := make([]int64, turns), make([]int64, turns)
	runTime, measureTime := make([]time.Duration, turns), make([]time.Duration, turns)
	for i := range turns {
		if st.Turn != nil {
			st.Turn(i+1, false)
		}
		start := time.Now()
		user := fmt.Sprintf("Turn %d: where is my order A-%04d, and when will it arrive?", i+1, i+1)
		in, _ := json.Marshal(agent.State{Messages: []agent.Message{agent.UserText(user)}})
		r, _, err := svc.CreateOnThread(ctx, "conv", runs.ThreadRunRequest{Graph: "chat", Input: in})
		if err != nil {
			t.Fatalf("turn %d: %v", i+1, err)
		}
		waitThreadIdle(t, svc, "conv", r.ID)
		if err := sched.WaitIdle(ctx); err != nil { // its events are logged
			t.Fatal(err)
		}
		runTime[i] = time.Since(start)
		if st.Turn != nil {
			st.Turn(i+1, true)
		}
		start = time.Now()
		rs, err := svc.RunStorage(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		rec := threadRecord()
		perTurn[i] = rs.TotalBytes + rec - record
		record = rec
		if n := i + 1; n%10 == 0 || n == turns-10 || n == turns {
			full[n] = total()
			var sum int64
			for _, x := range perTurn[prevFull:n] {
				sum += x
			}
			if d := full[n].TotalBytes - full[prevFull].TotalBytes; d != sum {
				t.Errorf("turns %d-%d: the thread's storage grew by %d bytes, the turns' runs and the thread record by %d: a turn changed what earlier runs store", prevFull+1, n, d, sum)
			}
			prevFull = n
		}
		measureTime[i] = time.Since(start)
		written, steps := writtenBytes(t, svc, r.ID, 2*i)
		limits[i] = int64(steps)*2048 + written
	}
	last := full[turns]
	// Amortized: a step that merges a conversation's small segments into
	// one (every 8 turns or so here) writes again what earlier steps
	// wrote (pregel's segment layout), so one turn may store more than
	// its limit; the turns in all may not.
	var limit, worst int64
	stored := last.TotalBytes - full[0].TotalBytes
	for i := range turns {
		limit += limits[i]
		if perTurn[i]-limits[i] > worst {
			worst = perTurn[i] - limits[i]
		}
	}
	if mode != embedded.EventsOn {
		t.Logf("per turn: %d bytes stored for a limit of %d on average (2 KB a superstep + the values written); the most over it in one turn: %d", stored/int64(turns), limit/int64(turns), worst)
		if stored > limit {
			t.Errorf("the %d turns stored %d bytes; want at most 2 KB a superstep + the bytes of the values they wrote (%d); per turn: %v, limits %v", turns, stored, limit, perTurn, limits)
		}
	}
	meanTime := func(xs []time.Duration) time.Duration {
		var s time.Duration
		for _, x := range xs {
			s += x
		}
		return s / time.Duration(len(xs))
	}
	t.Logf("time a turn: run %v at turns 1-10, %v at %d-%d; measuring the thread %v, %v",
		meanTime(runTime[:10]), meanTime(runTime[turns-10:]), turns-9, turns, meanTime(measureTime[:10]), meanTime(measureTime[turns-10:]))
	early := float64(full[10].TotalBytes-full[0].TotalBytes) / 10
	late := float64(last.TotalBytes-full[turns-10].TotalBytes) / 10
	t.Logf("%d turns: %.0f bytes a turn at turns 1-10, %.0f at %d-%d (×%.2f); in all %d bytes: %+v", turns, early, late, turns-9, turns, late/early, last.TotalBytes, last)
	// Issue 29's budget: a 100-turn conversation (here ~150K tokens of
	// usage, ~200 KB of answers) stores at most 5 MB in all, 50 KB a turn.
	if budget := int64(turns) * 50_000; mode != embedded.EventsOn && last.TotalBytes > budget {
		t.Errorf("the %d turns store %d bytes in all; want at most %d (5 MB for 100 turns)", turns, last.TotalBytes, budget)
	}
	if late > 1.1*early {
		t.Errorf("stored bytes per turn grew from %.0f (turns 1-10) to %.0f (turns %d-%d): ×%.2f, want at most ×1.1; per turn: %v", early, late, turns-9, turns, late/early, perTurn)
	}
}

// waitThreadIdle waits until run id completed and the thread is free.
func waitThreadIdle(t *testing.T, svc *runs.Service, thread, id string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		// The record, not Service.Get: that reads a running run's
		// checkpoint (the whole conversation) for its usage.
		r, err := svc.Runs.GetRun(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status == pregel.RunFailed || r.Status == pregel.RunCancelled || r.Status == pregel.RunInterrupted {
			t.Fatalf("run %s ended %s: %s", id, r.Status, r.Error)
		}
		if r.Status == pregel.RunCompleted {
			th, err := svc.GetThread(t.Context(), thread)
			if err != nil {
				t.Fatal(err)
			}
			if th.Active == "" {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s: %s after 20 s; want it completed and thread %s free", id, r.Status, thread)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// writtenBytes returns the bytes of the values run id's steps wrote (for
// the messages channel, the messages it added to the had it started with)
// and its number of steps.
func writtenBytes(t *testing.T, svc *runs.Service, id string, had int) (int64, int) {
	t.Helper()
	last, err := svc.Checkpoint(t.Context(), id, pregel.Latest)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	before := had
	for step := 0; step <= last.Step; step++ {
		cp, err := svc.Checkpoint(t.Context(), id, step)
		if err != nil {
			t.Fatal(err)
		}
		for ch, v := range cp.Versions {
			if v != step {
				continue
			}
			if ch == "messages" {
				var msgs []json.RawMessage
				if err := json.Unmarshal(cp.Values[ch], &msgs); err != nil {
					t.Fatal(err)
				}
				for _, m := range msgs[min(before, len(msgs)):] {
					n += int64(len(m))
				}
				before = len(msgs)
				continue
			}
			n += int64(len(cp.Values[ch]))
		}
		if v, ok := cp.Values["messages"]; ok && cp.Versions["messages"] != step {
			var msgs []json.RawMessage
			_ = json.Unmarshal(v, &msgs)
			before = len(msgs)
		}
	}
	return n, last.Step + 1
}
