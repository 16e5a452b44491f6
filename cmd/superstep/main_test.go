package main

// End-to-end tests: they build the superstep binary and drive it as a user
// would, through its arguments, exit codes, output, signals and HTTP API.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/superstep/superstep/internal/graphs"
	"github.com/superstep/superstep/internal/testkit"
	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/store/sqlite"
	cli "github.com/superstep/superstep/pkg/superstep"
)

// bin is the superstep binary built by TestMain.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "superstep-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "superstep")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build superstep:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// outcome is what one invocation of the binary produced.
type outcome struct {
	code           int
	stdout, stderr string
}

// runBinary runs the binary to its end.
func runBinary(t *testing.T, env []string, args ...string) outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(cleanEnv(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	o := outcome{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		o.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("superstep %s: %v", strings.Join(args, " "), err)
	}
	return o
}

// cleanEnv is the test's environment without superstep's variables.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SUPERSTEP_") {
			out = append(out, kv)
		}
	}
	return out
}

func (o outcome) want(t *testing.T, code int) outcome {
	t.Helper()
	if o.code != code {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", o.code, code, o.stdout, o.stderr)
	}
	return o
}

// runJSON is the part of `superstep run --json` the tests read.
type runJSON struct {
	RunID       string                     `json:"run_id"`
	Status      pregel.RunStatus           `json:"status"`
	Step        int                        `json:"step"`
	Values      map[string]json.RawMessage `json:"values"`
	Counters    pregel.Counters            `json:"counters"`
	Interrupts  []pregel.InterruptInfo     `json:"interrupts"`
	DrainReason string                     `json:"drain_reason"`
}

func (o outcome) result(t *testing.T) runJSON {
	t.Helper()
	var r runJSON
	if err := json.Unmarshal([]byte(o.stdout), &r); err != nil {
		t.Fatalf("stdout is not a JSON result: %v\n%s", err, o.stdout)
	}
	return r
}

func channel[T any](t *testing.T, values map[string]json.RawMessage, ch string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(values[ch], &v); err != nil {
		t.Fatalf("channel %q = %s: %v", ch, values[ch], err)
	}
	return v
}

const triageInput = "@../../examples/triage/input.json"

func TestRunCounter(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.db")
	o := runBinary(t, nil, "run", "counter", "--input", `{"limit": 3}`, "--store", store).want(t, 0)
	for _, s := range []string{"STEP  NODE   STATUS     ATTEMPTS  REASON\n1     count  completed  1         -\n", `"count": 3`, "completed at step 3"} {
		if !strings.Contains(o.stdout, s) {
			t.Errorf("stdout lacks %q:\n%s", s, o.stdout)
		}
	}
	if !strings.Contains(o.stderr, "step 3  committed in") {
		t.Errorf("no progress on stderr:\n%s", o.stderr)
	}
	runBinary(t, nil, "run", "counter", "--input", `{"limit": 0}`, "--store", store).want(t, 2)
}

func TestRunTriageWithAnswer(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.db")
	r := runBinary(t, nil, "run", "support-triage", "--input", triageInput, "--answer", "approve", "--store", store, "--json").want(t, 0).result(t)
	if r.Status != pregel.RunCompleted || channel[string](t, r.Values, "outcome") != "sent" {
		t.Errorf("result %+v", r)
	}
}

func TestInterruptedRunResumes(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.db")
	o := runBinary(t, nil, "run", "support-triage", "--input", triageInput, "--store", store, "--json").want(t, 3)
	r := o.result(t)
	if r.Status != pregel.RunInterrupted || len(r.Interrupts) != 1 || r.Interrupts[0].Node != "review" {
		t.Fatalf("result %+v", r)
	}
	if hint := "superstep resume " + r.RunID + " --store " + store + " --answer VALUE"; !strings.Contains(o.stderr, hint) {
		t.Errorf("stderr lacks %q:\n%s", hint, o.stderr)
	}
	r = runBinary(t, nil, "resume", r.RunID, "--answer", `{"approved": false, "note": "too terse"}`, "--store", store, "--json").want(t, 0).result(t)
	if channel[string](t, r.Values, "outcome") != "escalated" || !strings.Contains(channel[string](t, r.Values, "escalation"), "too terse") {
		t.Errorf("result %+v", r)
	}
}

// A real SIGINT drains `superstep run`; resume finishes the run.
func TestRunSignalDrains(t *testing.T) {
	dir := t.TempDir()
	store, log := filepath.Join(dir, "s.db"), filepath.Join(dir, "exec.log")
	env := []string{graphs.ExecLogEnv + "=" + log}
	cmd := exec.Command(bin, "run", graphs.ExecLogGraph, "--input", `{"rounds": 2, "slow_ms": 300}`, "--store", store, "--json")
	cmd.Env = append(cleanEnv(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first slow task", func() bool { return strings.Contains(readFile(log), " slow 2") })
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	o := outcome{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
	if err != nil && o.code < 0 {
		t.Fatal(err)
	}
	r := o.want(t, 4).result(t)
	if r.DrainReason != "signal: interrupt" || r.Step != 2 {
		t.Errorf("drained with %q at step %d, want signal: interrupt at step 2", r.DrainReason, r.Step)
	}
	r = runBinary(t, env, "resume", r.RunID, "--store", store, "--json").want(t, 0).result(t)
	if len(channel[[]string](t, r.Values, "done")) != 4 {
		t.Errorf("resumed: %+v", r)
	}
}

// dev is a running `superstep dev`.
type dev struct {
	t      *testing.T
	cmd    *exec.Cmd
	url    string
	stderr *lockedBuffer
	done   chan struct{}
}

// lockedBuffer is a bytes.Buffer safe for concurrent writes and reads.
type lockedBuffer = testkit.Buffer

// startDev starts `superstep dev` on a free port over dir and waits until
// it serves.
func startDev(t *testing.T, dir string, env ...string) *dev {
	t.Helper()
	return startServer(t, bin, "", env, "dev", "--addr", "127.0.0.1:0", "--dir", dir, "--grace", "5s")
}

// startServer starts program (with args, in workdir) and waits until it
// prints that it serves.
func startServer(t *testing.T, program, workdir string, env []string, args ...string) *dev {
	t.Helper()
	cmd := exec.Command(program, args...)
	cmd.Dir = workdir
	cmd.Env = append(cleanEnv(), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	d := &dev{t: t, cmd: cmd, stderr: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stderr = d.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
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
		close(d.done)
	}()
	t.Cleanup(func() {
		select {
		case <-d.done:
		default:
			_ = cmd.Process.Kill()
			<-d.done
		}
	})
	select {
	case d.url = <-urls:
	case <-d.done:
		t.Fatalf("dev exited before serving:\n%s", d.stderr)
	case <-time.After(15 * time.Second):
		t.Fatalf("dev did not serve within 15s:\n%s", d.stderr)
	}
	return d
}

// stop sends sig and waits for dev to exit.
func (d *dev) stop(sig os.Signal) int {
	d.t.Helper()
	if err := d.cmd.Process.Signal(sig); err != nil {
		d.t.Fatal(err)
	}
	select {
	case <-d.done:
	case <-time.After(15 * time.Second):
		d.t.Fatalf("dev did not exit within 15s of %v:\n%s", sig, d.stderr)
	}
	return d.cmd.ProcessState.ExitCode()
}

// call sends a request to the dev server and decodes its JSON answer.
func (d *dev) call(method, path string, body, out any) int {
	d.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			d.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, d.url+path, rd)
	if err != nil {
		d.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatalf("%s %s: %v\n%s", method, path, err, d.stderr)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		d.t.Fatal(err)
	}
	if resp.StatusCode >= 300 {
		d.t.Fatalf("%s %s: %s\n%s", method, path, resp.Status, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			d.t.Fatalf("%s %s: %v\n%s", method, path, err, data)
		}
	}
	return resp.StatusCode
}

func (d *dev) create(graph, runID, input string) api.Run {
	d.t.Helper()
	var r api.Run
	if code := d.call("POST", "/v1/graphs/"+graph+"/runs", api.CreateRunRequest{RunID: runID, Input: json.RawMessage(input)}, &r); code != http.StatusAccepted {
		d.t.Fatalf("create: status %d", code)
	}
	return r
}

func (d *dev) get(id string) api.RunDetail {
	d.t.Helper()
	var r api.RunDetail
	d.call("GET", "/v1/runs/"+id, nil, &r)
	return r
}

// waitStopped polls a run until it is neither pending nor running.
func (d *dev) waitStopped(id string) api.RunDetail {
	d.t.Helper()
	var r api.RunDetail
	waitFor(d.t, "run "+id+" to stop", func() bool {
		r = d.get(id)
		return r.Status != pregel.RunPending && r.Status != pregel.RunRunning
	})
	return r
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

func TestDevServesRuns(t *testing.T) {
	d := startDev(t, t.TempDir())
	r := d.create("counter", "c1", `{"limit": 3}`)
	got := d.waitStopped(r.RunID)
	if got.Status != pregel.RunCompleted || got.Step != 3 || channel[int](t, got.Values, "count") != 3 {
		t.Errorf("run %+v", got)
	}
	// The CLI talks to it too.
	env := []string{cli.ServerEnv + "=" + d.url}
	o := runBinary(t, env, "runs", "list").want(t, 0)
	if !strings.Contains(o.stdout, "c1") || !strings.Contains(o.stdout, "completed") {
		t.Errorf("runs list:\n%s", o.stdout)
	}
	o = runBinary(t, env, "runs", "create", "support-triage", "--input", triageInput, "--run-id", "t1", "--wait").want(t, 3)
	o = runBinary(t, env, "runs", "resume", "t1", "--answer", "approve", "--wait").want(t, 0)
	if !strings.Contains(o.stdout, "completed at step 8") {
		t.Errorf("runs resume:\n%s", o.stdout)
	}
	o = runBinary(t, env, "graph", "show", "support-triage", "--run", "t1").want(t, 0)
	if !strings.Contains(o.stdout, "class send_reply completed") {
		t.Errorf("graph show:\n%s", o.stdout)
	}
	runBinary(t, env, "runs", "show", "nope").want(t, 2)
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("dev exited with %d", code)
	}
}

// recorded lists the tasks of a run whose results the store holds: those
// of its committed steps and those recorded for its step in progress.
func recorded(t *testing.T, path, runID string) (ids map[string]bool, pending int) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ids = map[string]bool{}
	hist, err := st.History(ctx, runID)
	if err != nil {
		return ids, 0
	}
	for _, s := range hist {
		for _, task := range s.Tasks {
			ids[task.TaskID] = true
		}
	}
	open, err := st.PendingTasks(ctx, runID, hist[len(hist)-1].Step+1)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range open {
		if r.Final() {
			ids[r.TaskID] = true
			pending++
		}
	}
	return ids, pending
}

// execLines parses the test graph's log: "TASK_ID NODE STEP" per line.
func execLines(s string) [][3]string {
	var out [][3]string
	for l := range strings.Lines(s) {
		if f := strings.Fields(l); len(f) == 3 {
			out = append(out, [3]string{f[0], f[1], f[2]})
		}
	}
	return out
}

// Kill -9 in the middle of a step whose fast task is recorded and whose
// slow task runs; a new dev over the same directory finishes the run
// without executing again any task whose result was recorded.
func TestDevCrashRecovery(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "exec.log")
	env := graphs.ExecLogEnv + "=" + log
	d := startDev(t, dir, env)
	d.create(graphs.ExecLogGraph, "crash1", `{"rounds": 3, "fast_ms": 10, "slow_ms": 1500}`)

	waitFor(t, "a recorded task in a step in progress", func() bool {
		_, pending := recorded(t, filepath.Join(dir, cli.StoreFile), "crash1")
		return pending > 0
	})
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-d.done
	// What recorded results the crash left, and what ran before it.
	before, _ := recorded(t, filepath.Join(dir, cli.StoreFile), "crash1")
	ranBefore := len(execLines(readFile(log)))

	d = startDev(t, dir, env)
	got := d.waitStopped("crash1")
	if got.Status != pregel.RunCompleted || channel[int](t, got.Values, "round") != 4 || len(channel[[]string](t, got.Values, "done")) != 6 {
		t.Fatalf("recovered run: %+v\n%s", got, d.stderr)
	}
	after := execLines(readFile(log))[ranBefore:]
	if len(after) == 0 {
		t.Fatalf("nothing ran after the restart; the kill came too late")
	}
	for _, l := range after {
		if before[l[0]] {
			t.Errorf("task %s (%s, step %s) ran again although its result was recorded", l[0], l[1], l[2])
		}
	}
	seen := map[string]int{}
	for _, l := range execLines(readFile(log)) {
		seen[l[0]]++
	}
	again := 0
	for id, n := range seen {
		if n > 1 {
			again++
			if before[id] {
				t.Errorf("recorded task %s ran %d times", id, n)
			}
		}
	}
	if again == 0 {
		t.Errorf("no task ran twice: the kill did not interrupt a task (log:\n%s)", readFile(log))
	}
	d.stop(syscall.SIGTERM)
}

// SIGTERM drains the running runs of dev; after a restart they resume.
func TestDevSIGTERMDrains(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir)
	d.create("counter", "slow", `{"limit": 8, "delay_ms": 100}`)
	waitFor(t, "the run's first step", func() bool { return d.get("slow").Step >= 1 })
	if code := d.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("dev exited with %d:\n%s", code, d.stderr)
	}
	if !strings.Contains(d.stderr.String(), `reason="signal: terminated"`) {
		t.Errorf("dev did not log the drain:\n%s", d.stderr)
	}

	d = startDev(t, dir)
	got := d.get("slow")
	if got.Status != pregel.RunDrained || got.DrainReason != "signal: terminated" || got.Step < 1 || got.Step >= 8 {
		t.Fatalf("after SIGTERM: status %s (%q) at step %d, want drained by signal: terminated mid-run", got.Status, got.DrainReason, got.Step)
	}
	d.call("POST", "/v1/runs/slow/resume", struct{}{}, nil)
	got = d.waitStopped("slow")
	if got.Status != pregel.RunCompleted || channel[int](t, got.Values, "count") != 8 || len(channel[[]int](t, got.Values, "ticks")) != 8 {
		t.Errorf("resumed: %+v", got)
	}
	d.stop(syscall.SIGTERM)
}

// Load: 200 runs created at once over HTTP on a real dev server, with its
// store in real files, all complete; none is lost.
func TestDevLoad(t *testing.T) {
	const n, clients = 200, 16
	d := startDev(t, t.TempDir())
	ids := make(chan int, n)
	for i := range n {
		ids <- i
	}
	close(ids)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for i := range ids {
				body := fmt.Sprintf(`{"run_id": "load-%03d", "input": {"limit": %d}}`, i, 1+i%4)
				resp, err := http.Post(d.url+"/v1/graphs/counter/runs", "application/json", strings.NewReader(body))
				if err != nil {
					errs <- err
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusAccepted {
					errs <- fmt.Errorf("create load-%03d: status %d", i, resp.StatusCode)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var list api.RunList
	waitFor(t, "200 runs to complete", func() bool {
		d.call("GET", "/v1/runs?graph=counter&status=completed&limit=500", nil, &list)
		return len(list.Runs) == n
	})
	seen := map[string]bool{}
	for _, r := range list.Runs {
		if seen[r.RunID] || !strings.HasPrefix(r.RunID, "load-") {
			t.Errorf("unexpected or repeated run %s", r.RunID)
		}
		seen[r.RunID] = true
	}
	d.call("GET", "/v1/runs?limit=500", nil, &list)
	if len(list.Runs) != n {
		t.Errorf("%d runs stored, want %d", len(list.Runs), n)
	}
}
