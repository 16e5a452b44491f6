package inspector_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/superstep/superstep/examples"
	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/embedded"
	"github.com/superstep/superstep/pkg/inspector"
	"github.com/superstep/superstep/pkg/longterm"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/schedule"
)

const token = "s3cret-inspector"

// Node fills as the page's stylesheet gives them (style.css).
var fills = map[string]string{
	"completed":   "rgb(200, 230, 201)",
	"skipped":     "rgb(238, 238, 238)",
	"interrupted": "rgb(187, 222, 251)",
	"failed":      "rgb(255, 205, 210)",
	"":            "rgb(255, 255, 255)", // not run (yet)
}

// devServer serves the inspector over the API, as `superstep dev` does,
// with the example graphs run by a real scheduler on in-memory stores,
// threads included.
func devServer(t *testing.T) (*httptest.Server, *runs.Service) {
	t.Helper()
	graphs, err := examples.All()
	if err != nil {
		t.Fatal(err)
	}
	reg, err := runs.NewRegistry(append(graphs, nestedGraphs(t)...)...)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	records, cps := runs.NewMemoryStore(), pregel.NewMemoryStore()
	svc := &runs.Service{Graphs: reg, Runs: records, Checkpoints: cps, Threads: records, Logger: logger}
	sched := embedded.NewScheduler(embedded.SchedulerConfig{Graphs: reg, Runs: records, Checkpoints: cps, Logger: logger, OnStop: svc.RunStopped, StartThreadRun: svc.StartThreadRun})
	svc.Dispatcher = sched
	ctx, cancel := context.WithCancel(context.Background())
	if err := sched.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = sched.Shutdown(context.Background(), 0)
		cancel()
	})
	// Schedules, fired as `superstep dev` fires them (on a memory store).
	schedules := &schedule.Service{Runs: svc, Backend: schedule.NewMemoryStore()}
	runner := schedule.NewRunner(schedules, schedule.RunnerConfig{Logger: logger})
	runnerCtx, stopRunner := context.WithCancel(context.Background())
	runnerDone := make(chan struct{})
	go func() {
		defer close(runnerDone)
		_ = runner.Run(runnerCtx)
	}()
	t.Cleanup(func() {
		stopRunner()
		<-runnerDone
	})
	apiHandler, err := api.New(api.Config{Service: svc, Token: token, Logger: logger, LongTerm: longterm.New(longterm.NewMemory()), Schedules: schedules})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(inspector.New(apiHandler))
	t.Cleanup(srv.Close)
	return srv, svc
}

type nested struct {
	N   int      `json:"n"`
	Log []string `json:"log,omitempty" reduce:"append"`
}

// nestedGraphs are "nested", which runs "child" as a subgraph node and
// routes a failing node to an error handler, and "child" itself.
func nestedGraphs(t *testing.T) []*pregel.Graph {
	t.Helper()
	cb := pregel.NewGraph[nested]("child")
	cb.AddFunc("inc", func(_ context.Context, s nested) (nested, error) { return nested{N: s.N + 1}, nil })
	cb.AddEdge(pregel.Start, "inc").AddEdge("inc", pregel.End)
	child, err := cb.Compile()
	if err != nil {
		t.Fatal(err)
	}
	pb := pregel.NewGraph[nested]("nested")
	pb.AddNode("sub", pregel.Subgraph(child, func(s nested) nested { return s }, func(_ nested, c nested) nested { return nested{N: c.N, Log: []string{"sub"}} }))
	pb.AddFunc("risky", func(context.Context, nested) (nested, error) { return nested{}, errors.New("always fails") }, pregel.OnError("recover"))
	pb.AddFunc("recover", func(context.Context, nested) (nested, error) { return nested{Log: []string{"recovered"}}, nil })
	pb.AddEdge(pregel.Start, "sub").AddEdge("sub", "risky").AddEdge("risky", pregel.End).AddEdge("recover", pregel.End)
	parent, err := pb.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return []*pregel.Graph{child, parent}
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// chromium finds the browser, or skips (fails under CI=true).
func chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	msg := "SKIPPING the browser test of the inspector: chromium is not installed; install it with `apt-get update && apt-get install -y chromium`"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// browser drives one headless Chromium tab and records what its console
// reports as errors.
type browser struct {
	t    *testing.T
	ctx  context.Context
	out  string // screenshot directory
	mu   sync.Mutex
	errs []string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	exe := chromium(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTime := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() {
		cancelTime()
		cancelTab()
		cancelAlloc()
	})
	out := filepath.Join("testdata", "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	b := &browser{t: t, ctx: ctx, out: out}
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start chromium: %v", err)
	}
	go b.watchConsole(chromedp.Console(ctx))
	return b
}

// watchConsole records the console's errors and uncaught exceptions. The
// browser logs every 4xx answer as a network error; the page provokes some
// on purpose (401 before the token, 404 for an unknown run), so those are
// not counted: what the page makes of them is checked on the page.
func (b *browser) watchConsole(msgs iter.Seq2[chromedp.ConsoleMessage, error]) {
	for m, err := range msgs {
		if err != nil {
			return
		}
		if (m.Type == chromedp.ConsoleError || m.IsException()) && m.Source != "network" {
			b.recordErr(m.String())
		}
	}
}

func (b *browser) recordErr(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.errs = append(b.errs, s)
}

// run runs actions, failing the test with what the page shows on error.
func (b *browser) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	read(b, what, chromedp.Steps(actions...))
}

// read runs one action and returns its value, failing the test with what
// the page shows on error.
func read[T any](b *browser, what string, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.shot("failed")
		shown, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.querySelector('#error').textContent + ' | ' + location.hash`))
		b.t.Fatalf("%s: %v (page error | hash: %q)", what, err, shown)
	}
	return v
}

// clean fails the test if the page shows an error or the console logged one.
func (b *browser) clean(when string) {
	b.t.Helper()
	shown := read(b, "read the error banner", chromedp.Evaluate[string](`(() => { const e = document.querySelector('#error'); return e.hidden ? '' : e.textContent })()`))
	if shown != "" {
		b.shot("unexpected-error")
		b.t.Fatalf("%s: the page shows an error: %s", when, shown)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.errs) > 0 {
		b.t.Fatalf("%s: the browser console logged errors: %s", when, strings.Join(b.errs, "\n"))
	}
}

// expectError waits for the page to show an error containing want.
func (b *browser) expectError(want string) {
	b.t.Helper()
	b.run("wait for the error "+want, chromedp.WaitVisible(chromedp.CSS(`#error`)))
	shown := read(b, "read the error", chromedp.Text(chromedp.CSS(`#error`)))
	if !strings.Contains(shown, want) {
		b.t.Fatalf("the page shows %q, want it to contain %q", shown, want)
	}
}

func (b *browser) shot(name string) {
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	path := filepath.Join(b.out, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	b.t.Logf("screenshot: %s", path)
}

// setValue replaces the value of a form field.
func setValue(sel, v string) chromedp.Action[chromedp.Void] {
	return chromedp.SetValue(chromedp.CSS(sel), v)
}

// nodeState returns the data-status and the computed fill of a node of
// the drawn graph.
func (b *browser) nodeState(node string) (status, fill string) {
	b.t.Helper()
	res := read(b, "read node "+node, chromedp.Evaluate[[]string](fmt.Sprintf(`(() => {
		const g = document.querySelector('#run-graph g.node[data-node=%q]');
		if (!g) return ['missing', ''];
		return [g.dataset.status, getComputedStyle(g.querySelector('rect')).fill];
	})()`, node)))
	return res[0], res[1]
}

// checkNodes checks the colours of nodes at the step shown.
func (b *browser) checkNodes(step int, want map[string]string) {
	b.t.Helper()
	for node, status := range want {
		got, fill := b.nodeState(node)
		if got != status || fill != fills[status] {
			b.shot(fmt.Sprintf("step-%d-wrong", step))
			b.t.Errorf("step %d: node %s has status %q and fill %s, want %q and %s", step, node, got, fill, status, fills[status])
		}
	}
}

// showStep clicks a step of the timeline and waits for the graph to show it.
func (b *browser) showStep(step int) {
	b.t.Helper()
	b.run(fmt.Sprintf("show step %d", step),
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`#timeline tr[data-step="%d"]`, step))),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#timeline tr.selected[data-step="%d"]`, step))),
		chromedp.WaitVisible(fmt.Sprintf(`//h3[contains(., "State after step %d")]`, step)))
}

func runID(b *browser) string {
	hash := read(b, "read the run id", chromedp.Evaluate[string](`location.hash`))
	id, ok := strings.CutPrefix(strings.SplitN(hash, "?", 2)[0], "#/runs/")
	if !ok {
		b.t.Fatalf("not on a run page: %q", hash)
	}
	return id
}

// TestInspectorInBrowser drives the inspector in headless Chromium against
// a dev-style server: the token prompt, the support-triage run through its
// interrupt, node colours at two steps, a drain and a resume, and bad input
// that must leave the server unchanged. Screenshots go to testdata/out/.
func TestInspectorInBrowser(t *testing.T) {
	srv, svc := devServer(t)
	b := newBrowser(t)
	ctx := context.Background()

	// The token: asked once, a wrong one asked again.
	b.run("open the page", chromedp.Navigate(srv.URL+"/#/graphs"), chromedp.WaitVisible(chromedp.CSS(`#token-input`)))
	b.shot("01-token")
	b.run("give a wrong token", chromedp.SendKeys(chromedp.CSS(`#token-input`), "wrong"), chromedp.Click(chromedp.CSS(`#token-submit`)),
		chromedp.WaitVisible(`//p[@id="token-message"][contains(., "refused")]`))
	if n := read(b, "count cards", chromedp.Evaluate[int](`document.querySelectorAll('a.card').length`)); n != 0 {
		t.Fatalf("without the token the page shows %d graphs, want none", n)
	}
	b.run("give the token", chromedp.SendKeys(chromedp.CSS(`#token-input`), token), chromedp.Click(chromedp.CSS(`#token-submit`)),
		chromedp.WaitVisible(chromedp.CSS(`a.card[data-graph="support-triage"]`)))
	b.shot("02-graphs")
	b.clean("graphs")

	// The graph, drawn; bad input refused in the page.
	b.run("open support-triage", chromedp.Click(chromedp.CSS(`a.card[data-graph="support-triage"]`)),
		chromedp.WaitVisible(chromedp.CSS(`svg.graph g.node[data-node="search_kb"]`)))
	edges := read(b, "count edges", chromedp.Evaluate[int](`document.querySelectorAll('svg.graph g.edge').length`))
	if edges != 14 {
		t.Errorf("support-triage is drawn with %d edges, want 14", edges)
	}
	b.run("type invalid JSON", setValue(`#start-input`, `{"ticket": {"subject": `), chromedp.Click(chromedp.CSS(`#start-run`)))
	b.expectError("The input is not valid JSON")
	b.shot("03-bad-input")
	if page, err := svc.List(ctx, runs.Filter{}); err != nil || len(page.Runs) != 0 {
		t.Fatalf("after invalid input the server has %d runs (err %v), want none", len(page.Runs), err)
	}

	// The triage run: start it, see the interrupt, answer it.
	input, err := os.ReadFile(filepath.Join("..", "..", "examples", "triage", "input.json"))
	if err != nil {
		t.Fatal(err)
	}
	b.run("start the triage run", setValue(`#start-input`, string(input)), chromedp.Click(chromedp.CSS(`#start-run`)),
		chromedp.WaitVisible(chromedp.CSS(`#run-status [data-status="interrupted"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#interrupt-form .interrupt-payload`)))
	b.clean("triage interrupted")
	id := runID(b)
	payload := read(b, "read the interrupt payload", chromedp.Text(chromedp.CSS(`.interrupt-payload`)))
	if !strings.Contains(payload, "Send this reply?") || !strings.Contains(payload, "T-1042") {
		t.Errorf("the interrupt payload shown is %q, want the review question for T-1042", payload)
	}
	b.checkNodes(6, map[string]string{"review": "interrupted", "draft_reply": "completed", "send_reply": ""})
	b.shot("04-interrupted")

	before, err := svc.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if ver := read(b, "read the graph version", chromedp.Text(chromedp.CSS(`#graph-version`))); before.GraphVersion == nil || !strings.Contains(ver, before.GraphVersion.Fingerprint) {
		t.Errorf("the run view shows version %q, want the run's fingerprint %+v", ver, before.GraphVersion)
	}
	// What the run stores, from GET /v1/runs/{id}/storage.
	b.waitText(`#run-storage`, " KB (checkpoints ")
	b.run("answer with bare text as JSON", setValue(`textarea.answer`, `approve`), chromedp.Click(chromedp.CSS(`#answer`)))
	b.expectError("is not valid JSON")
	b.shot("05-bad-answer")
	if after, err := svc.Get(ctx, id); err != nil || after.Status != pregel.RunInterrupted || !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Fatalf("after a refused answer the run is %s (updated %v, was %v; err %v), want it unchanged", after.Status, after.UpdatedAt, before.UpdatedAt, err)
	}
	b.run("answer approve", setValue(`textarea.answer`, `"approve"`), chromedp.Click(chromedp.CSS(`#answer`)),
		chromedp.WaitVisible(chromedp.CSS(`#run-status [data-status="completed"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#event-table tr[data-event="completed"]`)))
	b.clean("triage completed")
	b.checkNodes(8, map[string]string{"review": "completed", "send_reply": "completed", "escalate": "", "translate": "skipped"})
	b.shot("06-completed")
	state := read(b, "read the final state", chromedp.Text(chromedp.CSS(`#state-json`)))
	if !strings.Contains(state, `"outcome": "sent"`) {
		t.Errorf("the final state shown lacks the outcome: %s", state)
	}

	// Node colours at two earlier steps.
	b.showStep(2)
	b.checkNodes(2, map[string]string{"detect_language": "completed", "translate": "skipped", "classify": "", "review": ""})
	diff := read(b, "read the diff", chromedp.Text(chromedp.CSS(`#state`)))
	if !strings.Contains(diff, "No channel changed") {
		t.Errorf("step 2 (translate skipped) should change nothing; the page shows %s", diff)
	}
	b.shot("07-step-2")
	b.showStep(5)
	b.checkNodes(5, map[string]string{"search_kb": "completed", "lookup_customer": "completed", "draft_reply": "", "translate": "skipped"})
	diff = read(b, "read the diff", chromedp.Text(chromedp.CSS(`#diff`)))
	if !strings.Contains(diff, "findings (added)") || !strings.Contains(diff, "customer") {
		t.Errorf("step 5 diff should add findings and change customer: %s", diff)
	}
	b.shot("08-step-5")
	b.clean("steps")

	// Drain a counter run from the page, then resume it.
	b.run("open counter", chromedp.Navigate(srv.URL+"/#/graphs/counter"), chromedp.WaitVisible(chromedp.CSS(`svg.graph g.node[data-node="count"]`)))
	b.run("start a slow counter", setValue(`#start-input`, `{"limit": 30, "delay_ms": 100}`), chromedp.Click(chromedp.CSS(`#start-run`)),
		chromedp.WaitVisible(chromedp.CSS(`#run-status [data-status="running"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#timeline tr[data-step="2"]`)))
	counter := runID(b)
	b.shot("09-running")
	b.run("drain it", setValue(`#drain-reason`, "inspector test"), chromedp.Click(chromedp.CSS(`#drain`)),
		chromedp.WaitVisible(chromedp.CSS(`#run-status [data-status="drained"]`)),
		chromedp.WaitVisible(`//tr[@data-event="drained"]/td[contains(., "inspector test")]`))
	b.shot("10-drained")
	drained, err := svc.Get(ctx, counter)
	if err != nil || drained.Status != pregel.RunDrained || drained.Step >= 30 {
		t.Fatalf("the counter run is %s at step %d (err %v), want drained before step 30", drained.Status, drained.Step, err)
	}
	b.run("resume it", chromedp.Click(chromedp.CSS(`#resume`)),
		chromedp.WaitVisible(chromedp.CSS(`#run-status [data-status="completed"]`)),
		chromedp.WaitVisible(`//pre[@id="state-json"][contains(., '"count": 30')]`))
	b.shot("11-resumed")
	if diff := read(b, "read the diff", chromedp.Text(chromedp.CSS(`#diff`))); !strings.Contains(diff, "ticks (appended)") || !strings.Contains(diff, "+ [\n  30\n]") {
		t.Errorf("the last step's diff should show tick 30 appended: %q", diff)
	}
	b.clean("drain and resume")
	var values struct {
		Count int   `json:"count"`
		Ticks []int `json:"ticks"`
	}
	state = read(b, "read the state", chromedp.Text(chromedp.CSS(`#state-json`)))
	if err := json.Unmarshal([]byte(state), &values); err != nil || values.Count != 30 || len(values.Ticks) != 30 {
		t.Errorf("the resumed counter's state shown is %s (err %v), want count 30 with 30 ticks", state, err)
	}

	// The runs list, filtered.
	b.run("list completed counter runs", chromedp.Navigate(srv.URL+"/#/runs?graph=counter&status=completed"),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#runs tr[data-run=%q]`, counter))))
	rows := read(b, "count rows", chromedp.Evaluate[int](`document.querySelectorAll('#runs tr[data-run]').length`))
	if rows != 1 {
		t.Errorf("the runs list filtered on counter/completed shows %d runs, want 1", rows)
	}
	b.shot("12-runs")
	b.clean("runs list")

	// Paging through a thread's runs: 26 runs, 25 a page.
	for i := range 26 {
		if _, _, err := svc.Create(ctx, "counter", runs.CreateRequest{Input: json.RawMessage(`{"limit": 1}`), ContextID: "batch", RunID: fmt.Sprintf("batch-%02d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	b.run("list the thread's runs", chromedp.Navigate(srv.URL+"/#/runs?context_id=batch"),
		chromedp.WaitVisible(chromedp.CSS(`#runs tr[data-run="batch-25"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#next-page`)))
	if rows := read(b, "count rows", chromedp.Evaluate[int](`document.querySelectorAll('#runs tr[data-run]').length`)); rows != 25 {
		t.Errorf("the first page of the thread shows %d runs, want 25", rows)
	}
	b.run("next page", chromedp.Click(chromedp.CSS(`#next-page`)),
		chromedp.WaitVisible(chromedp.CSS(`#runs tr[data-run="batch-00"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#first-page`)))
	if rows := read(b, "count rows", chromedp.Evaluate[int](`document.querySelectorAll('#runs tr[data-run]').length`)); rows != 1 {
		t.Errorf("the second page of the thread shows %d runs, want 1", rows)
	}
	b.clean("paging")

	// A subgraph node and an error handler: drawn, linked, coloured.
	b.run("open nested", chromedp.Navigate(srv.URL+"/#/graphs/nested"),
		chromedp.WaitVisible(chromedp.CSS(`svg.graph g.node.subgraph[data-node="sub"]`)),
		chromedp.WaitVisible(chromedp.CSS(`svg.graph g.edge.on_error[data-from="risky"][data-to="recover"]`)),
		chromedp.Click(chromedp.CSS(`svg.graph g.node[data-node="sub"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#node-details a[href="#/graphs/child"]`)),
		setValue(`#start-input`, `{"n": 1}`), chromedp.Click(chromedp.CSS(`#start-run`)),
		chromedp.WaitVisible(chromedp.CSS(`#run-status [data-status="completed"]`)))
	b.checkNodes(3, map[string]string{"sub": "completed", "risky": "failed", "recover": "completed"})
	b.shot("13-nested")
	b.clean("nested")

	// The assistant: answered in the page; then the time each task took,
	// the tokens per node and for the run, and the model's streamed text.
	ain, err := os.ReadFile(filepath.Join("..", "..", "examples", "assistant", "input.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.Create(ctx, "assistant", runs.CreateRequest{Input: ain, RunID: "a1"}); err != nil {
		t.Fatal(err)
	}
	b.run("open the assistant run", chromedp.Navigate(srv.URL+"/#/runs/a1"),
		chromedp.WaitVisible(chromedp.CSS(`#run-status [data-status="interrupted"]`)),
		chromedp.WaitVisible(`//div[@id="stream-output"]//span[@class="text"][contains(., "I will refund it in full.")]`))
	b.run("approve the refund", setValue(`textarea.answer`, `"approve"`), chromedp.Click(chromedp.CSS(`#answer`)),
		chromedp.WaitVisible(chromedp.CSS(`#run-status [data-status="completed"]`)),
		chromedp.WaitVisible(`//div[@id="stream-output"]//span[@class="text"][contains(., "Here is what I found.")]`),
		chromedp.WaitVisible(chromedp.CSS(`#usage tr[data-usage="(run)"]`)))
	b.clean("assistant completed")
	usage := read(b, "read the usage", chromedp.Evaluate[[][]string](`[...document.querySelectorAll('#usage tr[data-usage]')].map((tr) => [...tr.cells].map((c) => c.textContent))`))
	if want := [][]string{{"model", "440", "60", "500"}, {"(run)", "440", "60", "500"}}; fmt.Sprint(usage) != fmt.Sprint(want) {
		t.Errorf("the usage table shows %q, want %q", usage, want)
	}
	// Every task of the timeline shows how long it took, as the API says.
	detail, err := svc.History(ctx, "a1")
	if err != nil {
		t.Fatal(err)
	}
	type task struct {
		step int
		node string
	}
	wantTook := map[task][]int64{} // µs
	for _, s := range detail {
		for _, ts := range s.Tasks {
			if ts.Started.IsZero() || ts.Finished.Before(ts.Started) {
				t.Errorf("step %d task %s has no times: %+v", s.Step, ts.Node, ts)
			}
			k := task{s.Step, ts.Node}
			wantTook[k] = append(wantTook[k], ts.Duration().Microseconds())
		}
	}
	type chip struct {
		Step int    `json:"step,string"`
		Node string `json:"node"`
		Took int64  `json:"took,string"`
		Text string `json:"text"`
	}
	shown := read(b, "read the durations", chromedp.Evaluate[[]chip](`[...document.querySelectorAll('#timeline tr[data-step]')].flatMap((tr) =>
		[...tr.querySelectorAll('.chip[data-node]')].map((c) => ({step: tr.dataset.step, node: c.dataset.node, took: c.dataset.tookUs, text: c.textContent})))`))
	for _, sh := range shown {
		k := task{sh.Step, sh.Node}
		i := slices.IndexFunc(wantTook[k], func(us int64) bool { return max(us-sh.Took, sh.Took-us) <= 1 })
		if i < 0 {
			t.Errorf("the timeline shows step %d task %s took %dµs; the API says %v", sh.Step, sh.Node, sh.Took, wantTook[k])
			continue
		}
		wantTook[k] = slices.Delete(wantTook[k], i, i+1)
		if !regexp.MustCompile(`\d(µs|ms|s) `).MatchString(sh.Text + " ") {
			t.Errorf("the chip of step %d task %s shows no duration: %q", sh.Step, sh.Node, sh.Text)
		}
	}
	for k, left := range wantTook {
		if len(left) > 0 {
			t.Errorf("step %d task %s is not in the timeline (%v)", k.step, k.node, left)
		}
	}
	if cells := read(b, "read step durations", chromedp.Evaluate[int](`[...document.querySelectorAll('#timeline td.step-took')].filter((td) => /\d(µs|ms|s)$/.test(td.textContent)).length`)); cells < len(detail)-1 {
		t.Errorf("%d steps show how long they took, want %d", cells, len(detail)-1)
	}
	b.run("open the model node", chromedp.Click(chromedp.CSS(`#run-graph g.node[data-node="model"]`)),
		chromedp.WaitVisible(`//div[@id="node-details"]//h3[. = "Tokens"]`))
	if took := read(b, "read the model's executions", chromedp.Evaluate[int](`[...document.querySelectorAll('#node-details td.num')].filter((td) => /\d(µs|ms|s)$/.test(td.textContent)).length`)); took != 3 {
		t.Errorf("the model's executions show %d durations, want 3", took)
	}
	b.shot("14-assistant")
	b.clean("assistant")

	// An unknown run in the URL.
	b.run("open an unknown run", chromedp.Navigate(srv.URL+"/#/runs/no-such-run"))
	b.expectError(`run "no-such-run" does not exist`)
	b.shot("15-unknown-run")

	// The long-term store's page.
	checkStorePage(t, b, srv)

	// The schedules' page.
	checkSchedulesPage(t, b, srv)

	// A long run's steps, a page at a time.
	checkLongRunPages(t, b, srv, svc)
}
