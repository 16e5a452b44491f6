//go:build !superstep.lambda

package superstep

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/superstep/superstep/internal/graphs"
	"github.com/superstep/superstep/internal/testkit"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/pregel"
)

// syncBuffer is a bytes.Buffer safe for concurrent writes and reads.
type syncBuffer = testkit.Buffer

// serverEnv is the Env of a server the test runs in process: no input,
// an empty environment, its output in out and errb, and its signals from
// the channel returned (send os.Interrupt or SIGTERM to stop it).
func serverEnv(out, errb *syncBuffer) (Env, chan os.Signal) {
	sigs := make(chan os.Signal, 2)
	return Env{Stdin: strings.NewReader(""), Stdout: out, Stderr: errb, Getenv: func(string) string { return "" },
		Signals: func() (<-chan os.Signal, func()) { return sigs, func() {} }}, sigs
}

// stopServer sends SIGTERM to a server started with serverEnv and fails
// the test unless it exits with ExitOK (code) within 10 s.
func stopServer(t *testing.T, sigs chan<- os.Signal, code <-chan int, errb *syncBuffer) {
	t.Helper()
	sigs <- syscall.SIGTERM
	select {
	case c := <-code:
		if c != ExitOK {
			t.Errorf("dev exited with %d:\n%s", c, errb.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("dev did not stop:\n%s", errb.String())
	}
}

// harness runs the superstep command in-process.
type harness struct {
	t       *testing.T
	dir     string
	store   string
	env     map[string]string
	stdin   string
	tty     bool
	signals chan os.Signal
	opts    []Option // after the test graphs
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	dir := t.TempDir()
	return &harness{t: t, dir: dir, store: filepath.Join(dir, "superstep.db"), env: map[string]string{}}
}

// result is what one command run produced.
type result struct {
	code           int
	stdout, stderr string
}

func (h *harness) run(args ...string) result {
	h.t.Helper()
	var out, errb syncBuffer
	env := Env{
		Stdin:      strings.NewReader(h.stdin),
		Stdout:     &out,
		Stderr:     &errb,
		Getenv:     func(k string) string { return h.env[k] },
		IsTerminal: func(io.Reader) bool { return h.tty },
	}
	if h.signals != nil {
		env.Signals = func() (<-chan os.Signal, func()) { return h.signals, func() {} }
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code := Run(ctx, env, args, append([]Option{testGraphs(env.Getenv)}, h.opts...)...)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// local runs a command against the harness's store.
func (h *harness) local(args ...string) result {
	h.t.Helper()
	return h.run(append(args, "--store", h.store)...)
}

func (r result) want(t *testing.T, code int) result {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
	return r
}

func decodeResult(t *testing.T, r result) runResult {
	t.Helper()
	var out runResult
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, r.stdout)
	}
	return out
}

func value[T any](t *testing.T, res runResult, ch string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(res.Values[ch], &v); err != nil {
		t.Fatalf("channel %q = %s: %v", ch, res.Values[ch], err)
	}
	return v
}

// runIDFrom finds the run id in the resume hint on stderr.
func runIDFrom(t *testing.T, stderr string) string {
	t.Helper()
	_, rest, ok := strings.Cut(stderr, "superstep resume ")
	if !ok {
		t.Fatalf("no resume hint in stderr:\n%s", stderr)
	}
	return strings.Fields(rest)[0]
}

func TestUsageErrors(t *testing.T) {
	h := newHarness(t)
	h.local("run", "counter", "--input", `{"limit": 1}`).want(t, ExitOK)
	tests := []struct {
		name string
		args []string
		msg  string
	}{
		{"unknown command", []string{"bogus"}, `unknown command "bogus"`},
		{"unknown flag", []string{"run", "counter", "--bogus"}, "unknown flag: --bogus"},
		{"run without graph", []string{"run"}, "missing GRAPH"},
		{"run with two graphs", []string{"run", "counter", "support-triage"}, "takes 1 argument(s)"},
		{"unknown graph", []string{"run", "nope", "--input", "{}"}, `graph "nope" is not registered; graphs are assistant, counter, support-triage`},
		{"invalid JSON", []string{"run", "counter", "--input", "{"}, "--input is not valid JSON"},
		{"empty input", []string{"run", "counter", "--input", " "}, "--input is empty"},
		{"missing input file", []string{"run", "counter", "--input", "@/no/such/file.json"}, "no such file"},
		{"input the graph rejects", []string{"run", "counter", "--input", `{"limit": 0}`}, "limit must be between 1 and 1000"},
		{"input naming no channel", []string{"run", "counter", "--input", `{"limt": 3}`}, `"limt" is not a channel`},
		{"bad run id", []string{"run", "counter", "--input", `{"limit": 1}`, "--run-id", "a b"}, "--run-id"},
		{"bad grace", []string{"run", "counter", "--grace", "soon"}, "invalid argument"},
		{"resume without id", []string{"resume"}, "missing RUN_ID"},
		{"resume unknown run", []string{"resume", "nope", "--store", h.store}, `run "nope" is not in`},
		{"resume without store", []string{"resume", "nope", "--store", filepath.Join(h.dir, "none.db")}, "no store at"},
		{"runs group", []string{"runs", "bogus"}, `unknown command "bogus" for "superstep runs"`},
		{"runs show without id", []string{"runs", "show"}, "missing RUN_ID"},
		{"bad server URL", []string{"runs", "list", "--server", "ftp://x"}, "is not an http(s) URL"},
		{"graph show unknown", []string{"graph", "show", "nope"}, `graph "nope" is not registered`},
		{"graph show unknown run", []string{"graph", "show", "counter", "--run", "nope", "--store", h.store}, `run "nope" is not in`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.run(tt.args...).want(t, ExitUsage)
			if !strings.Contains(r.stderr, tt.msg) {
				t.Errorf("stderr does not say %q:\n%s", tt.msg, r.stderr)
			}
			if strings.Count(r.stderr, "Error:") > 1 {
				t.Errorf("stderr repeats the error:\n%s", r.stderr)
			}
		})
	}
}

func TestGroupWithoutSubcommandPrintsHelp(t *testing.T) {
	r := newHarness(t).run("runs").want(t, ExitUsage)
	if !strings.Contains(r.stderr, "Available Commands") {
		t.Errorf("stderr has no help:\n%s", r.stderr)
	}
}

func TestRunHelpDocumentsExitCodes(t *testing.T) {
	for _, cmd := range []string{"run", "resume"} {
		r := newHarness(t).run(cmd, "--help").want(t, ExitOK)
		for _, s := range []string{"Exit codes:", "0  the run completed", "2  usage error", "3  the run is interrupted", "4  the run drained", "5  the run was cancelled", "--answer", "--grace"} {
			if !strings.Contains(r.stdout, s) {
				t.Errorf("%s --help does not mention %q", cmd, s)
			}
		}
	}
}

func TestExitCode(t *testing.T) {
	for s, want := range map[pregel.RunStatus]int{
		pregel.RunCompleted:   0,
		pregel.RunFailed:      1,
		pregel.RunInterrupted: 3,
		pregel.RunDrained:     4,
		pregel.RunCancelled:   5,
		pregel.RunRunning:     1,
	} {
		if got := ExitCode(s); got != want {
			t.Errorf("ExitCode(%s) = %d, want %d", s, got, want)
		}
	}
}

func TestRunCounterTable(t *testing.T) {
	h := newHarness(t)
	r := h.local("run", "counter", "--input", `{"limit": 3}`).want(t, ExitOK)
	lines := strings.Split(r.stdout, "\n")
	if !regexpMatch(`^STEP\s+NODE\s+STATUS\s+ATTEMPTS\s+REASON$`, lines[0]) {
		t.Fatalf("table header = %q", lines[0])
	}
	for i := 1; i <= 3; i++ {
		if !regexpMatch(`^`+string(rune('0'+i))+`\s+count\s+completed\s+1\s+-$`, lines[i]) {
			t.Errorf("row %d = %q", i, lines[i])
		}
	}
	for _, s := range []string{"State:\n{", `"count": 3`, "completed at step 3 (3 completed, 0 skipped, 0 cancelled, 0 failed)"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("stdout lacks %q:\n%s", s, r.stdout)
		}
	}
	for _, s := range []string{"of counter started", "step 1  1 task", "  count ", "step 3  committed in", "run completed at step 3 after"} {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("progress lacks %q:\n%s", s, r.stderr)
		}
	}
	q := h.local("run", "counter", "--input", `{"limit": 2}`, "--quiet").want(t, ExitOK)
	if q.stderr != "" {
		t.Errorf("--quiet printed on stderr:\n%s", q.stderr)
	}
}

func TestRunJSON(t *testing.T) {
	h := newHarness(t)
	in := filepath.Join(h.dir, "in.json")
	if err := os.WriteFile(in, []byte(`{"limit": 4}`), 0o644); err != nil {
		t.Fatal(err)
	}
	r := h.local("run", "counter", "--input", "@"+in, "--json", "--run-id", "r-json").want(t, ExitOK)
	res := decodeResult(t, r)
	if res.RunID != "r-json" || res.Graph != "counter" || res.Status != pregel.RunCompleted || res.Step != 4 || res.Counters.Completed != 4 || len(res.Nodes) != 4 {
		t.Errorf("result = %+v", res)
	}
	if got := value[[]int](t, res, "ticks"); !slices.Equal(got, []int{1, 2, 3, 4}) {
		t.Errorf("ticks = %v", got)
	}
	// The same run id again is refused.
	r = h.local("run", "counter", "--input", `{"limit": 1}`, "--run-id", "r-json").want(t, ExitUsage)
	if !strings.Contains(r.stderr, "already exists") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
	// Input from stdin.
	h.stdin = `{"limit": 2}`
	res = decodeResult(t, h.local("run", "counter", "--input", "-", "--json", "-q").want(t, ExitOK))
	if res.Step != 2 {
		t.Errorf("stdin input: step %d", res.Step)
	}
}

func triageInput(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs("../../examples/triage/input.json")
	if err != nil {
		t.Fatal(err)
	}
	return "@" + p
}

func TestRunTriageWithAnswer(t *testing.T) {
	h := newHarness(t)
	for answer, outcome := range map[string]string{"approve": "sent", `{"approved": false, "note": "no"}`: "escalated"} {
		r := h.local("run", "support-triage", "--input", triageInput(t), "--answer", answer, "--json").want(t, ExitOK)
		res := decodeResult(t, r)
		if got := value[string](t, res, "outcome"); got != outcome {
			t.Errorf("--answer %s: outcome %q, want %q", answer, got, outcome)
		}
		if !strings.Contains(r.stderr, "answering review") {
			t.Errorf("stderr does not say it answered:\n%s", r.stderr)
		}
	}
}

func assistantInput(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs("../../examples/assistant/input.json")
	if err != nil {
		t.Fatal(err)
	}
	return "@" + p
}

// assistantTokens is the token table of an approved run of the assistant
// (its scripted model counts 440 input and 60 output tokens).
const assistantTokens = `(?m)^Tokens:\nNODE\s+INPUT\s+OUTPUT\s+TOTAL\nmodel\s+440\s+60\s+500\n\(run\)\s+440\s+60\s+500$`

func TestRunShowsTokenUsage(t *testing.T) {
	h := newHarness(t)
	r := h.local("run", "assistant", "--input", assistantInput(t), "--answer", "approve", "-q").want(t, ExitOK)
	if !regexpMatch(assistantTokens, r.stdout) {
		t.Errorf("no token table:\n%s", r.stdout)
	}
	res := decodeResult(t, h.local("run", "assistant", "--input", assistantInput(t), "--answer", "approve", "--json", "-q").want(t, ExitOK))
	want := pregel.TokenUsage{InputTokens: 440, OutputTokens: 60, TotalTokens: 500}
	if res.Usage == nil || res.Usage.Total != want || res.Usage.ByNode["model"] != want {
		t.Errorf("--json usage = %+v, want %+v in total and for model", res.Usage, want)
	}
	// A graph without a usage channel shows none.
	r = h.local("run", "counter", "--input", `{"limit": 1}`, "-q").want(t, ExitOK)
	if strings.Contains(r.stdout, "Tokens:") || decodeResult(t, h.local("run", "counter", "--input", `{"limit": 1}`, "--json", "-q").want(t, ExitOK)).Usage != nil {
		t.Errorf("counter shows token usage:\n%s", r.stdout)
	}
}

func TestInterruptedThenResume(t *testing.T) {
	h := newHarness(t)
	r := h.local("run", "support-triage", "--input", triageInput(t)).want(t, ExitInterrupted)
	id := runIDFrom(t, r.stderr)
	for _, s := range []string{"Waiting for an answer:", "review (interrupt ", `"question":`, "interrupted at step 6"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("stdout lacks %q:\n%s", s, r.stdout)
		}
	}
	if !regexpMatch(`(?m)^7\s+review\s+interrupted\s+1\s+-$`, r.stdout) {
		t.Errorf("table lacks the interrupted review:\n%s", r.stdout)
	}
	// Without an answer, resume is refused.
	r = h.local("resume", id).want(t, ExitUsage)
	if !strings.Contains(r.stderr, "waits for an answer to review") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
	res := decodeResult(t, h.local("resume", id, "--answer", "approve", "--json").want(t, ExitOK))
	if res.Status != pregel.RunCompleted || value[string](t, res, "outcome") != "sent" {
		t.Errorf("resumed: %+v", res)
	}
	if res.Counters.Completed != 10 || res.Counters.Skipped != 1 {
		t.Errorf("counters %+v", res.Counters)
	}
	// The graph, coloured by the run.
	g := h.local("graph", "show", "support-triage", "--run", id).want(t, ExitOK)
	for _, s := range []string{"flowchart TD", "class translate skipped", "class review completed", "class send_reply completed"} {
		if !strings.Contains(g.stdout, s) {
			t.Errorf("diagram lacks %q:\n%s", s, g.stdout)
		}
	}
}

func TestPrompt(t *testing.T) {
	h := newHarness(t)
	h.tty, h.stdin = true, "approve\n"
	r := h.local("run", "support-triage", "--input", triageInput(t), "--json").want(t, ExitOK)
	if !strings.Contains(r.stderr, "answer (JSON, or text sent as a string; empty to stop):") {
		t.Errorf("no prompt:\n%s", r.stderr)
	}
	if got := value[string](t, decodeResult(t, r), "outcome"); got != "sent" {
		t.Errorf("outcome %q", got)
	}
	h.stdin = "\n"
	h.local("run", "support-triage", "--input", triageInput(t)).want(t, ExitInterrupted)
	h.stdin = "approve\n"
	r = h.local("run", "support-triage", "--input", triageInput(t), "--no-input").want(t, ExitInterrupted)
	if strings.Contains(r.stderr, "answer (JSON") {
		t.Errorf("--no-input prompted:\n%s", r.stderr)
	}
}

// waitForLine waits until the file has a line containing s.
func waitForLine(t *testing.T, path, s string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(path)
		if strings.Contains(string(b), s) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s never had a line with %q", path, s)
}

// execLog reads the test graph's log: how many times each task ran.
func execLog(t *testing.T, path string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for l := range strings.Lines(string(b)) {
		if f := strings.Fields(l); len(f) == 3 {
			out[f[0]+" "+f[1]]++
		}
	}
	return out
}

func TestSignalDrains(t *testing.T) {
	h := newHarness(t)
	log := filepath.Join(h.dir, "exec.log")
	h.env[graphs.ExecLogEnv] = log
	h.signals = make(chan os.Signal, 2)
	go func() {
		waitForLine(t, log, " slow 2")
		h.signals <- syscall.SIGTERM
	}()
	r := h.local("run", graphs.ExecLogGraph, "--input", `{"rounds": 3, "slow_ms": 100}`, "--json").want(t, ExitDrained)
	res := decodeResult(t, r)
	if res.DrainReason != "signal: terminated" || res.Step != 2 {
		t.Errorf("drained: reason %q at step %d, want signal: terminated at 2", res.DrainReason, res.Step)
	}
	if !strings.Contains(r.stderr, "signal: terminated: draining run") || !strings.Contains(r.stderr, "superstep resume "+res.RunID) {
		t.Errorf("stderr:\n%s", r.stderr)
	}
	h.signals = nil
	res = decodeResult(t, h.local("resume", res.RunID, "--json").want(t, ExitOK))
	if got := value[int](t, res, "round"); got != 4 || len(value[[]string](t, res, "done")) != 6 {
		t.Errorf("resumed: %+v", res)
	}
	for task, n := range execLog(t, log) {
		if n != 1 {
			t.Errorf("task %s ran %d times", task, n)
		}
	}
}

func TestSignalCancelsAfterGrace(t *testing.T) {
	h := newHarness(t)
	log := filepath.Join(h.dir, "exec.log")
	h.env[graphs.ExecLogEnv] = log
	h.signals = make(chan os.Signal, 2)
	go func() {
		waitForLine(t, log, " slow 2")
		// Let the fast task finish, so its result is recorded.
		time.Sleep(50 * time.Millisecond)
		h.signals <- syscall.SIGINT
	}()
	r := h.local("run", graphs.ExecLogGraph, "--input", `{"rounds": 1, "fast_ms": 1, "slow_ms": 20000}`, "--grace", "10ms", "--json").want(t, ExitCancelled)
	res := decodeResult(t, r)
	if res.Status != pregel.RunCancelled || res.Step != 1 {
		t.Errorf("cancelled: %+v", res)
	}
	if !strings.Contains(r.stderr, "did not drain within 10ms: cancelling it") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
	h.signals = nil
	h.local("resume", res.RunID, "--json", "-q").want(t, ExitOK)
	// The recorded fast task did not run again; the cancelled slow one did.
	var fast, slow int
	for task, n := range execLog(t, log) {
		switch {
		case strings.HasSuffix(task, " fast"):
			fast = n
		case strings.HasSuffix(task, " slow"):
			slow = n
		}
	}
	if fast != 1 || slow != 2 {
		t.Errorf("fast ran %d times, slow %d; want 1 and 2", fast, slow)
	}
}

func TestReadJSONArg(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "v.json")
	if err := os.WriteFile(file, []byte(" {\"a\": 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		value, stdin, want, err string
	}{
		{value: `{"a":1}`, want: `{"a":1}`},
		{value: "@" + file, want: `{"a": 1}`},
		{value: "-", stdin: "[1]", want: "[1]"},
		{value: "@-", stdin: "true", want: "true"},
		{value: "{", err: "--input is not valid JSON"},
		{value: "@" + file + ".none", err: "no such file"},
		{value: "-", stdin: "", err: "standard input is empty"},
	}
	for _, tt := range tests {
		got, err := readJSONArg("input", tt.value, strings.NewReader(tt.stdin))
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("readJSONArg(%q) error = %v, want %q", tt.value, err, tt.err)
			}
			continue
		}
		if err != nil || string(got) != tt.want {
			t.Errorf("readJSONArg(%q) = %s, %v; want %s", tt.value, got, err, tt.want)
		}
	}
}

func TestParseAnswer(t *testing.T) {
	for in, want := range map[string]string{
		"approve":               `"approve"`,
		"true":                  "true",
		"42":                    "42",
		`"quoted"`:              `"quoted"`,
		`{"approved": true}`:    `{"approved": true}`,
		"not { json":            `"not { json"`,
		"":                      `""`,
		`say "hi" <b>`:          `"say \"hi\" \u003cb\u003e"`,
		" {\"approved\":false}": `{"approved":false}`,
	} {
		if got := string(parseAnswer(in)); got != want {
			t.Errorf("parseAnswer(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestFormatting(t *testing.T) {
	if got := oneLine("a\n  b\tc", 10); got != "a b c" {
		t.Errorf("oneLine = %q", got)
	}
	if got := oneLine("abcdefghijkl", 5); got != "abcd…" {
		t.Errorf("oneLine = %q", got)
	}
	if got := shellQuote("a b'c"); got != `'a b'\''c'` {
		t.Errorf("shellQuote = %q", got)
	}
	if got := shellQuote("/tmp/x.db"); got != "/tmp/x.db" {
		t.Errorf("shellQuote = %q", got)
	}
	var b bytes.Buffer
	rows := taskRows([]pregel.StepInfo{{Step: 0}, {Step: 1, Tasks: []pregel.TaskStatus{{Node: "a", Status: pregel.NodeSkipped, Reason: "no need"}}}},
		[]pregel.TaskResult{{Node: "b", Status: pregel.NodeFailed, Attempts: 3, Error: "boom"}})
	if err := writeNodeTable(&b, rows); err != nil {
		t.Fatal(err)
	}
	want := "STEP  NODE  STATUS   ATTEMPTS  REASON\n1     a     skipped  0         no need\n2     b     failed   3         boom\n"
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestEventOutput(t *testing.T) {
	at := time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)
	evs := api.EventList{RunID: "r1", EventsDropped: 3, Events: []api.Event{
		{At: at, Type: "created", Status: pregel.RunPending},
		{At: at.Add(time.Second), Type: "drain_requested", Status: pregel.RunRunning, Step: 4, Detail: "deploy\nnow"},
		{At: at.Add(2 * time.Second), Type: "drained", Status: pregel.RunDrained, Step: 5, Detail: "deploy"},
	}}
	var b bytes.Buffer
	if err := writeEventTable(&b, evs); err != nil {
		t.Fatal(err)
	}
	tm := func(d time.Duration) string { return fmtTime(at.Add(d)) }
	want := "TIME                 TYPE             STATUS   STEP  DETAIL\n" +
		tm(0) + "  created          pending  0     -\n" +
		"...                  ...              ...      ...   (3 events dropped)\n" +
		tm(time.Second) + "  drain_requested  running  4     deploy now\n" +
		tm(2*time.Second) + "  drained          drained  5     deploy\n"
	if b.String() != want {
		t.Errorf("event table:\n%q\nwant:\n%q", b.String(), want)
	}

	for _, tc := range []struct {
		name, detail, want string
		evs                api.EventList
	}{
		{"object", `{"run_id": "r1", "steps": []}` + "\n", `{"run_id": "r1", "steps": [],"events":[{"at":"2025-03-14T15:09:26Z","type":"created","status":"pending","step":0}],"events_dropped":3}`, evs},
		{"no events", `{"run_id":"r1"}`, `{"run_id":"r1","events":[],"events_dropped":0}`, api.EventList{}},
		{"empty object", `{ }`, `{"events":[],"events_dropped":0}`, api.EventList{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "object" {
				tc.evs.Events = tc.evs.Events[:1]
			}
			got, err := withEvents([]byte(tc.detail), tc.evs, nil)
			if err != nil || string(got) != tc.want {
				t.Errorf("withEvents = %s, %v; want %s", got, err, tc.want)
			}
			if !json.Valid(got) {
				t.Errorf("withEvents returned invalid JSON: %s", got)
			}
		})
	}
	if _, err := withEvents([]byte(`[1]`), evs, nil); err == nil {
		t.Error("withEvents of an array: no error")
	}
}

func TestGraphCommands(t *testing.T) {
	h := newHarness(t)
	r := h.run("graph", "list").want(t, ExitOK)
	if !regexpMatch(`(?m)^counter\s+1\s+Count`, r.stdout) || !regexpMatch(`(?m)^support-triage\s+10\s+`, r.stdout) {
		t.Errorf("graph list:\n%s", r.stdout)
	}
	var list []graphSummary
	if err := json.Unmarshal([]byte(h.run("graph", "list", "--json").want(t, ExitOK).stdout), &list); err != nil || len(list) != 3 {
		t.Errorf("graph list --json: %v %+v", err, list)
	}
	h.env[graphs.ExecLogEnv] = filepath.Join(h.dir, "log")
	if r := h.run("graph", "list").want(t, ExitOK); !strings.Contains(r.stdout, graphs.ExecLogGraph) {
		t.Errorf("%s set, but the test graph is not listed:\n%s", graphs.ExecLogEnv, r.stdout)
	}
	r = h.run("graph", "show", "counter").want(t, ExitOK)
	if !strings.HasPrefix(r.stdout, "flowchart TD\n") || strings.Contains(r.stdout, "classDef") {
		t.Errorf("graph show:\n%s", r.stdout)
	}
}

// A fake server answering problems, to check how the client shows them.
func TestServerErrors(t *testing.T) {
	var gotAuth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth = r.Header.Get("Authorization")
		switch r.URL.Path {
		case "/v1/runs/missing":
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"type":"urn:superstep:problem:not-found","title":"Not found","status":404,"detail":"run \"missing\" does not exist; GET /v1/runs lists the runs"}`)
		case "/v1/runs":
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, "boom")
		}
	}))
	defer srv.Close()
	h := newHarness(t)
	h.env[ServerEnv] = srv.URL
	h.env[TokenEnv] = "s3cret"
	r := h.run("runs", "show", "missing").want(t, ExitUsage)
	if !strings.Contains(r.stderr, `Error: run "missing" does not exist; GET /v1/runs lists the runs`) {
		t.Errorf("stderr:\n%s", r.stderr)
	}
	if gotAuth != "Bearer s3cret" {
		t.Errorf("Authorization = %q", gotAuth)
	}
	r = h.run("runs", "list").want(t, ExitFailed)
	if !strings.Contains(r.stderr, "500 Internal Server Error: boom") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
	srv.Close()
	r = h.run("runs", "list").want(t, ExitFailed)
	if !strings.Contains(r.stderr, "cannot reach the server") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
}

func regexpMatch(pattern, s string) bool {
	return regexp.MustCompile(pattern).MatchString(s)
}

// dev in-process: serve, run through the client commands, stop on a
// signal.
func TestDevInProcess(t *testing.T) {
	dir := t.TempDir()
	var out, errb syncBuffer
	env, sigs := serverEnv(&out, &errb)
	code := make(chan int, 1)
	go func() {
		code <- Run(context.Background(), env, []string{"dev", "--addr", "127.0.0.1:0", "--dir", dir, "--token", "tok", "--grace", "2s"}, testGraphs(env.Getenv))
	}()
	url := waitServing(t, &out, &errb, code)
	h := newHarness(t)
	h.env[ServerEnv] = url
	r := h.run("runs", "list").want(t, ExitUsage)
	if !strings.Contains(r.stderr, "requires a bearer token") {
		t.Errorf("without a token:\n%s", r.stderr)
	}
	h.env[TokenEnv] = "tok"
	r = h.run("runs", "create", "counter", "--input", `{"limit": 2}`, "--run-id", "c1", "--wait").want(t, ExitOK)
	if !strings.Contains(r.stdout, "run c1 of counter created: completed at step 2") {
		t.Errorf("runs create:\n%s", r.stdout)
	}
	h.run("runs", "create", "counter", "--input", `{"limit": 50, "delay_ms": 100}`, "--run-id", "slow").want(t, ExitOK)
	h.run("runs", "create", "support-triage", "--input", triageInput(t), "--run-id", "t1", "--wait").want(t, ExitInterrupted)
	r = h.run("runs", "list", "--status", "interrupted").want(t, ExitOK)
	if !regexpMatch(`(?m)^t1\s+support-triage\s+[0-9a-f]{16}\s+interrupted\s+6\s+8/1/0/0\s+.*waiting on review$`, r.stdout) {
		t.Errorf("runs list:\n%s", r.stdout)
	}
	// The VERSION column shows what --version filters by.
	if fields := strings.Fields(strings.Split(r.stdout, "\n")[1]); len(fields) < 3 {
		t.Errorf("runs list:\n%s", r.stdout)
	} else if r := h.run("runs", "list", "--version", fields[2]).want(t, ExitOK); !regexpMatch(`(?m)^t1\s`, r.stdout) || regexpMatch(`(?m)^c1\s`, r.stdout) {
		t.Errorf("runs list --version %s: want t1 and not c1 (another graph):\n%s", fields[2], r.stdout)
	}
	r = h.run("runs", "show", "t1").want(t, ExitOK)
	for _, s := range []string{"Status:   interrupted", "6     draft_reply      completed", "Waiting for an answer", `"ticket": {`, "\nEvents:\nTIME ", "\nStored:   ", " KB (checkpoints "} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("runs show lacks %q:\n%s", s, r.stdout)
		}
	}
	if !regexpMatch(`(?m)^\S+ \S+\s+created\s+pending\s+0\s+-\n\S+ \S+\s+running\s+running\s+0\s+-\n\S+ \S+\s+interrupted\s+interrupted\s+6\s+\S+\.0\s*\z`, r.stdout) {
		t.Errorf("runs show: events table:\n%s", r.stdout)
	}
	r = h.run("runs", "resume", "t1").want(t, ExitUsage)
	if !strings.Contains(r.stderr, "waits for a value") {
		t.Errorf("resume without answer:\n%s", r.stderr)
	}
	h.run("runs", "resume", "t1", "--answer", "approve", "--wait").want(t, ExitOK)
	r = h.run("runs", "show", "t1", "--json").want(t, ExitOK)
	var shown struct {
		RunID  string            `json:"run_id"`
		Steps  []json.RawMessage `json:"steps"`
		Events []struct {
			Type   string           `json:"type"`
			Status pregel.RunStatus `json:"status"`
		} `json:"events"`
		EventsDropped *int `json:"events_dropped"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &shown); err != nil {
		t.Fatalf("runs show --json: %v\n%s", err, r.stdout)
	}
	var types []string
	for _, ev := range shown.Events {
		types = append(types, ev.Type+"/"+string(ev.Status))
	}
	wantTypes := []string{"created/pending", "running/running", "interrupted/interrupted", "resume_requested/pending", "running/running", "completed/completed"}
	if shown.RunID != "t1" || len(shown.Steps) == 0 || !slices.Equal(types, wantTypes) || shown.EventsDropped == nil || *shown.EventsDropped != 0 {
		t.Errorf("runs show --json: run %q, %d steps, events %v (dropped %v); want t1, steps, %v, 0", shown.RunID, len(shown.Steps), types, shown.EventsDropped, wantTypes)
	}
	r = h.run("graph", "show", "support-triage", "--run", "t1", "--json").want(t, ExitOK)
	var g struct {
		NodeStatuses map[string]pregel.NodeStatus `json:"node_statuses"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &g); err != nil || g.NodeStatuses["send_reply"] != pregel.NodeCompleted {
		t.Errorf("graph show --json: %v\n%s", err, r.stdout)
	}
	h.run("runs", "create", "assistant", "--input", assistantInput(t), "--run-id", "a1", "--wait").want(t, ExitInterrupted)
	h.run("runs", "resume", "a1", "--answer", "approve", "--wait").want(t, ExitOK)
	if r = h.run("runs", "show", "a1").want(t, ExitOK); !regexpMatch(assistantTokens, r.stdout) {
		t.Errorf("runs show: no token table:\n%s", r.stdout)
	}
	h.run("runs", "drain", "c1").want(t, ExitUsage)
	if r = h.run("runs", "show", "a1").want(t, ExitOK); !regexpMatch(`Version:\s+[0-9a-f]{16}`, r.stdout) {
		t.Errorf("runs show: no graph version:\n%s", r.stdout)
	}
	if r = h.run("runs", "list", "--version", "no-such-version", "--json").want(t, ExitOK); !strings.Contains(r.stdout, `"runs": []`) {
		t.Errorf("runs list --version unknown: want an empty list:\n%s", r.stdout)
	}
	h.run("runs", "drain", "--all").want(t, ExitUsage)
	h.run("runs", "drain", "c1", "--graph", "x").want(t, ExitUsage)
	h.run("runs", "resume", "--all").want(t, ExitUsage)
	h.run("runs", "resume", "--all", "--status", "interrupted").want(t, ExitUsage)
	if r = h.run("runs", "drain", "--all", "--graph", "support-triage", "--reason", "deploy").want(t, ExitOK); !strings.Contains(r.stdout, "run(s) drain requested") {
		t.Errorf("runs drain --all:\n%s", r.stdout)
	}
	if r = h.run("runs", "resume", "--all", "--status", "drained", "--graph", "support-triage").want(t, ExitOK); !strings.Contains(r.stdout, "run(s) resumed") {
		t.Errorf("runs resume --all:\n%s", r.stdout)
	}
	r = h.run("runs", "cancel", "slow", "--wait").want(t, ExitCancelled)
	if !strings.Contains(r.stdout, "cancelled") {
		t.Errorf("runs cancel:\n%s", r.stdout)
	}
	var list struct {
		Runs []struct {
			RunID string `json:"run_id"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(h.run("runs", "list", "--json", "--limit", "2").want(t, ExitOK).stdout), &list); err != nil || len(list.Runs) != 2 {
		t.Errorf("runs list --json: %v %+v", err, list)
	}

	stopServer(t, sigs, code, &errb)
	if !strings.Contains(errb.String(), `msg="stopping: draining running runs" reason="signal: terminated"`) {
		t.Errorf("log:\n%s", errb.String())
	}
}

// A signal ends a prompt that waits for a line.
func TestSignalEndsPrompt(t *testing.T) {
	h := newHarness(t)
	h.tty = true
	h.signals = make(chan os.Signal, 1)
	pr, pw := io.Pipe()
	defer pw.Close()
	var out, errb syncBuffer
	env := Env{
		Stdin: pr, Stdout: &out, Stderr: &errb,
		Getenv:     func(string) string { return "" },
		Signals:    func() (<-chan os.Signal, func()) { return h.signals, func() {} },
		IsTerminal: func(io.Reader) bool { return true },
	}
	code := make(chan int, 1)
	go func() {
		code <- Run(context.Background(), env, []string{"run", "support-triage", "--input", triageInput(t), "--store", h.store}, testGraphs(env.Getenv))
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(errb.String(), "empty to stop): ") {
		if time.Now().After(deadline) {
			t.Fatalf("no prompt:\n%s", errb.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	h.signals <- os.Interrupt
	select {
	case c := <-code:
		if c != ExitInterrupted {
			t.Errorf("exit code %d, want %d\n%s", c, ExitInterrupted, errb.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the prompt did not end on a signal:\n%s", errb.String())
	}
}

// testGraphs serves the example graphs, and the test graph when getenv
// names its log (graphs.ExecLogEnv).
func testGraphs(getenv func(string) string) Option {
	return WithGraphs(graphs.Graphs(getenv)...)
}

// An --answer the node refuses is not sent again and again: the command
// says why it was refused and stops, interrupted; a good answer then
// resumes the run.
func TestRunStopsOnARefusedAnswer(t *testing.T) {
	h := newHarness(t)
	r := h.local("run", "assistant", "--input", assistantInput(t), "--answer", `{"decision": "maybe"}`, "--run-id", "refused").want(t, ExitInterrupted)
	for _, want := range []string{
		`did not accept the last answer: the answer was refused: the decision "maybe" is not approve, edit or reject`,
		"--answer does not answer tools",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if n := strings.Count(r.stderr, "answering tools"); n != 1 {
		t.Errorf("answered %d times, want once:\n%s", n, r.stderr)
	}
	h.local("resume", "refused", "--answer", "approve", "-q").want(t, ExitOK)
}
