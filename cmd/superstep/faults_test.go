package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/superstep/superstep/internal/graphs"
	"github.com/superstep/superstep/pkg/runs/runstest"
)

// TestDevKillLinearizable checks thread histories with SIGKILLs of the
// server inside them: clients drive threads over HTTP on a real dev
// server (the built binary, its SQLite store in a temp dir), while the
// test kills it with SIGKILL at random moments and starts it again on the
// same directory; the clients keep going (a request refused while it is
// down is tried again; a create, cancel or resume cut by the kill is
// asked again after the restart, a create with the same run_id, until its
// outcome is known: runstest.CheckFaults). Every run must end after the
// last restart, and the whole history must be linearizable against the
// model of runstest.Linearizable: a run cut by a kill is recovered and
// ends as the model allows, its writes in its thread once.
//
// Short by default (3 threads × 3 clients × 8 operations, 2 or 3 kills);
// SUPERSTEP_FAULTS_OPS=N makes N operations (at least) on N/120 threads of
// 3 clients (51 clients for N=2040), SUPERSTEP_FAULTS_KILL_MS the mean
// time between kills (pkg/runs/README.md).
func TestDevKillLinearizable(t *testing.T) {
	threads, clients, ops := 3, 3, 8
	gap := 250 * time.Millisecond
	minKills, maxKills := 2, 3
	if n, _ := strconv.Atoi(os.Getenv("SUPERSTEP_FAULTS_OPS")); n > 0 {
		ops = 40
		threads = (n + clients*ops - 1) / (clients * ops)
		gap, minKills, maxKills = time.Second, 5, 1<<30
	}
	if ms, _ := strconv.Atoi(os.Getenv("SUPERSTEP_FAULTS_KILL_MS")); ms > 0 {
		gap = time.Duration(ms) * time.Millisecond
	}
	dir := t.TempDir()
	env := []string{graphs.ThreadChatEnv + "=2"}
	args := []string{"dev", "--addr", "127.0.0.1:0", "--dir", dir, "--grace", "5s", "--concurrency", "64"}
	srv, err := startKillable(env, args)
	if err != nil {
		t.Fatal(err)
	}
	var cur atomic.Pointer[killable]
	cur.Store(srv)
	t.Cleanup(func() { cur.Load().kill() })
	api := &runstest.HTTPThreads{URL: func() string { return cur.Load().url }, Graph: graphs.ThreadChatGraph}

	var kills, restarts atomic.Int64
	var downtime atomic.Int64
	var fail atomic.Pointer[error]
	disturb := func(ctx context.Context, rng *rand.Rand) {
		for {
			wait := gap/2 + time.Duration(rng.Int64N(int64(gap)))
			select {
			case <-ctx.Done():
				if kills.Load() >= int64(minKills) {
					return
				}
			case <-time.After(wait):
			}
			if kills.Load() >= int64(maxKills) {
				<-ctx.Done() // enough for a short run: a restart can take seconds on a loaded machine
				return
			}
			s := cur.Load()
			down := time.Now()
			s.kill()
			kills.Add(1)
			// Down a while: requests are refused, some cut.
			time.Sleep(time.Duration(rng.Int64N(int64(50 * time.Millisecond))))
			next, err := startKillable(env, args)
			if err != nil {
				fail.Store(&err)
				return
			}
			cur.Store(next)
			restarts.Add(1)
			downtime.Add(int64(time.Since(down)))
		}
	}
	start := time.Now()
	res := runstest.CheckFaults(t, runstest.FaultConfig{Threads: threads, Clients: clients, Ops: ops, Disturb: disturb, Strict: true, Settle: 60 * time.Second}, api)
	if p := fail.Load(); p != nil {
		t.Fatalf("restart: %v", *p)
	}
	t.Logf("dev SIGKILLed %d times (down %v in all), %d clients on %d threads: %s; test %v",
		kills.Load(), time.Duration(downtime.Load()).Round(time.Millisecond), threads*clients, threads, res, time.Since(start).Round(time.Millisecond))
	if kills.Load() < int64(minKills) {
		t.Errorf("only %d kills", kills.Load())
	}
	if res.Verdict != porcupine.Ok {
		t.Errorf("thread histories with SIGKILLs of dev are not linearizable: %s\nlast server's log:\n%s", res.Verdict, cur.Load().stderr.String())
	}
}

// killable is a dev server the fault test kills.
type killable struct {
	cmd    *exec.Cmd
	url    string
	stderr *lockedBuffer
	done   chan struct{}
}

// startKillable starts the binary with args and waits until it serves.
func startKillable(env, args []string) (*killable, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(cleanEnv(), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	k := &killable{cmd: cmd, stderr: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stderr = k.stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "superstep dev: serving "); ok {
				urls <- u
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() {
		_ = cmd.Wait()
		close(k.done)
	}()
	select {
	case k.url = <-urls:
		return k, nil
	case <-k.done:
		return nil, fmt.Errorf("dev exited before serving:\n%s", k.stderr)
	case <-time.After(30 * time.Second):
		k.kill()
		return nil, fmt.Errorf("dev did not serve within 30s:\n%s", k.stderr)
	}
}

// kill sends SIGKILL and waits until the process is gone.
func (k *killable) kill() {
	_ = k.cmd.Process.Kill()
	<-k.done
}
