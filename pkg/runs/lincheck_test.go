package runs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/runs/runstest"
)

// lostUpdates is a thread store broken on purpose: its writes are not
// conditional (the last writer wins), and a read pauses before it
// answers, so that two claims of an idle thread both succeed.
type lostUpdates struct {
	runs.ThreadStore
}

func (s lostUpdates) GetThread(ctx context.Context, id string) (runs.Thread, error) {
	th, err := s.ThreadStore.GetThread(ctx, id)
	time.Sleep(2 * time.Millisecond)
	return th, err
}

func (s lostUpdates) UpdateThread(ctx context.Context, th runs.Thread) (runs.Thread, error) {
	for {
		cur, err := s.ThreadStore.GetThread(ctx, th.ID)
		if err != nil {
			return runs.Thread{}, err
		}
		th.Version = cur.Version
		out, err := s.ThreadStore.UpdateThread(ctx, th)
		if !errors.Is(err, runs.ErrConflict) {
			return out, err
		}
	}
}

// The checker itself can fail: against a thread store that loses updates
// (two runs active on one thread, a reject answered as if idle), the
// histories are not linearizable. A checker that says Ok to everything
// fails this test.
func TestLinearizabilityCheckerCatchesLostUpdates(t *testing.T) {
	for attempt := 1; attempt <= 3; attempt++ {
		res := runstest.CheckLinearizable(t, runstest.LinConfig{Threads: 1, Clients: 4, Ops: 5, Timeout: 15 * time.Second, Settle: 2 * time.Second}, func(*testing.T) runstest.ThreadEnv {
			m := runs.NewMemoryStore()
			return runstest.ThreadEnv{Runs: m, Threads: lostUpdates{m}, Checkpoints: pregel.NewMemoryStore()}
		})
		if res == porcupine.Illegal {
			return
		}
		t.Logf("attempt %d: %s", attempt, res)
	}
	t.Error("a thread store that loses updates gave linearizable histories 3 times; the checker should have found it")
}
