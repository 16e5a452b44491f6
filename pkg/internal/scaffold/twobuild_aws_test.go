package scaffold

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/superstep/superstep/internal/mototest"
	"github.com/superstep/superstep/internal/rietest"
	"github.com/superstep/superstep/pkg/serverless"
)

// A change to the starter graph made by a v2 build: its edits to the
// scaffolded main.go (each old string must occur exactly count times),
// and what it does to each kind of run in flight, as pkg/pregel/VERSIONS.md
// says: "" continues (to completion, answering review when asked), else
// the run stops drained with a reason holding that text. For the thread,
// the text is what the 409 refusing the thread's next run names.
type change struct {
	name  string
	edits []edit
	// interrupted: v1's run waiting at review, resumed on v2 with the
	// answer. drained: drained by v1 after its first step (checks planned
	// next), resumed on v2. queued: v1 committed the checks; the tick of
	// the step running review is in the queue for v2's tick function.
	// thread: v2 starts the next run of a thread whose first run v1
	// completed.
	interrupted, drained, queued, thread string
	// decided: completed runs carry decision "approved" (review ran;
	// the thread's run always does: its first run's decision).
	decided bool
}

type edit struct {
	old, new string
	count    int
}

const (
	stopReview = `node "review"`
	stopChecks = `channel "checks"`
	stopAmount = `channel "amount"`
)

// v2Changes are the kinds of change the proof names.
func v2Changes() []change {
	renamed := []edit{{`"review"`, `"approval"`, 3}}
	checkType := []edit{
		{"Checks   []string `json:\"checks,omitempty\" reduce:\"append\"`", "Checks   []Check `json:\"checks,omitempty\" reduce:\"append\"`", 1},
		{"[]string{fmt.Sprintf(", "[]Check{{Text: fmt.Sprintf(", 2},
		{")}}, nil", ")}}}, nil", 2},
		{"func validate(", "// Check is one check's finding.\ntype Check struct {\n\tText string `json:\"text\"`\n}\n\nfunc validate(", 1},
	}
	migrated := append(slices.Clone(checkType),
		edit{"\"context\"\n", "\"context\"\n\t\"encoding/json\"\n", 1},
		edit{"\treturn g.Compile()", "\tg.Migrate(\"v1\", migrateChecks)\n\treturn g.Compile()", 1},
		edit{"func validate(", migrateChecksSrc + "\nfunc validate(", 1},
	)
	return []change{
		{name: "add-node", decided: true, edits: []edit{
			{"\tg.AddEdge(\"review\", pregel.End)", "\tg.AddFunc(\"notify\", notify)\n\tg.AddEdge(\"review\", \"notify\")\n\tg.AddEdge(\"notify\", pregel.End)", 1},
			{"func validate(", "func notify(context.Context, State) (State, error) { return State{}, nil }\n\nfunc validate(", 1},
		}},
		{name: "rename", decided: true, edits: renamed, interrupted: stopReview, queued: stopReview},
		{name: "rename-declared", decided: true, edits: append(slices.Clone(renamed),
			edit{"\treturn g.Compile()", "\tg.RenameNode(\"review\", \"approval\")\n\treturn g.Compile()", 1})},
		{name: "remove", edits: []edit{
			{"\tg.AddFunc(\"review\", review, pregel.Writes(\"decision\"))\n", "", 1},
			{"\tg.AddJoin(\"review\", \"check_budget\", \"check_policy\")", "\tg.AddEdge(\"check_budget\", pregel.End)\n\tg.AddEdge(\"check_policy\", pregel.End)", 1},
			{"\tg.AddEdge(\"review\", pregel.End)\n", "", 1},
		}, interrupted: stopReview, queued: stopReview},
		{name: "channel-type", decided: true, edits: checkType, interrupted: stopChecks, queued: stopChecks},
		{name: "channel-type-migrated", decided: true, edits: migrated},
		{name: "reducer", decided: true, edits: []edit{{"`json:\"amount\"`", "`json:\"amount\" reduce:\"sum\"`", 1}},
			interrupted: stopAmount, drained: stopAmount, queued: stopAmount, thread: stopAmount},
	}
}

// migrateChecksSrc is v2's migration from v1: each check's text becomes a
// Check.
const migrateChecksSrc = `func migrateChecks(_ context.Context, old map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	raw, ok := old["checks"]
	if !ok || string(raw) == "null" {
		return old, nil
	}
	var texts []string
	if err := json.Unmarshal(raw, &texts); err != nil {
		return nil, err
	}
	checks := make([]Check, len(texts))
	for i, s := range texts {
		checks[i] = Check{Text: s}
	}
	b, err := json.Marshal(checks)
	if err != nil {
		return nil, err
	}
	old["checks"] = b
	return old, nil
}
`

// counted wraps each node of a build's graph so that every execution
// that completes logs its task ("TASK <run> <node> <task id>") to the
// function's log: the test counts them to prove that no task ran twice
// across the two builds. Node bodies are not part of a graph's version.
var addFunc = regexp.MustCompile(`g\.AddFunc\("(\w+)", (\w+)([,)])`)

const countedSrc = `
// counted logs each completed execution of a task (the test counts them).
func counted(fn func(context.Context, State) (State, error)) func(context.Context, State) (State, error) {
	return func(ctx context.Context, s State) (State, error) {
		out, err := fn(ctx, s)
		if info, ok := pregel.TaskFrom(ctx); ok && err == nil {
			fmt.Fprintf(os.Stderr, "TASK %s %s %s\n", info.RunID, info.Node, info.TaskID)
		}
		return out, err
	}
}
`

func instrument(src string) (string, error) {
	if n := len(addFunc.FindAllString(src, -1)); n < 4 {
		return "", fmt.Errorf("main.go adds %d nodes by name; the scaffold changed: update this test", n)
	}
	src = addFunc.ReplaceAllString(src, `g.AddFunc("$1", counted($2)$3`)
	return applyEdits(src+countedSrc, []edit{{"\t\"fmt\"\n", "\t\"fmt\"\n\t\"os\"\n", 1}})
}

func applyEdits(src string, edits []edit) (string, error) {
	for _, e := range edits {
		if n := strings.Count(src, e.old); n != e.count {
			return "", fmt.Errorf("%q occurs %d times in main.go, want %d: the scaffold changed; update this test's edits", e.old, n, e.count)
		}
		src = strings.ReplaceAll(src, e.old, e.new)
	}
	return src, nil
}

// TestTwoBuildsServerless is TestTwoBuilds on the serverless path: the
// Lambda bootstraps of a project from `superstep init` (one binary serves
// every function; SUPERSTEP_FUNCTION picks it), v1 and one v2 per kind of
// change, run behind the Lambda runtime interface emulator against one
// table and its queues on moto_server. The test is the event source
// mappings: it takes each tick message from the FIFO queue and invokes
// the tick function of the build being deployed with it, and sends the
// API's requests to the api function as API Gateway events.
//
// For each change, v1 starts a run into each state (interrupted at
// review; drained after its first step; the tick of its third step left
// in the queue; a thread whose first run completed); then v2 continues
// them: each run ends as pkg/pregel/VERSIONS.md's table says (completes,
// or stops drained with a reason naming the node or channel and both
// versions; a thread's next run refused with 409), and every run v2
// stopped completes under v1 again.
//
// The eight builds take minutes (5 on a loaded 2-core machine), hence
// the longer timeout:
//
//	SUPERSTEP_TWO_BUILDS=1 go test -count=1 -timeout 45m -run TestTwoBuildsServerless -v ./pkg/internal/scaffold/
func TestTwoBuildsServerless(t *testing.T) {
	if os.Getenv(TwoBuildsEnv) == "" {
		t.Skipf("set %s=1 to build a scaffolded project's bootstrap in 8 versions and run them under the Lambda runtime emulator (several minutes)", TwoBuildsEnv)
	}
	gobin, proj, src := scaffoldForBuilds(t)
	dir := filepath.Dir(proj) // the test's directory: builds and stores go beside the project
	const newGraph = `pregel.NewGraph[State]("starter").`
	versioned := func(v string) edit { return edit{newGraph, newGraph + `Version("` + v + `").`, 1} }

	// Each build is the project's main.go, edited, in a directory of its
	// own in the project's module: one `go build` builds them all, as
	// `make build-ApiFunction` builds the bootstrap (linux, lambda.norpc
	// and superstep.lambda, no cgo, its flags), compiling superstep once
	// and linking each.
	changes := v2Changes()
	builds := []string{"v1"}
	for _, c := range changes {
		builds = append(builds, "v2-"+c.name)
	}
	for i, name := range builds {
		edits := []edit{versioned("v1")}
		if i > 0 {
			edits = append([]edit{versioned("v2")}, changes[i-1].edits...)
		}
		code, err := applyEdits(string(src), edits)
		if err == nil {
			code, err = instrument(code)
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := os.MkdirAll(filepath.Join(proj, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proj, name, "main.go"), []byte(code), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "bin")
	start := time.Now()
	{
		ctx, cancel := context.WithTimeout(t.Context(), 40*time.Minute)
		args := []string{"build", "-tags", "lambda.norpc,superstep.lambda", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", bin + string(os.PathSeparator)}
		for _, b := range builds {
			args = append(args, "./"+b)
		}
		cmd := exec.CommandContext(ctx, gobin, args...)
		cmd.Dir = proj
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "GOPROXY=off",
			"GOOS=linux", "GOARCH="+runtime.GOARCH, "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	t.Logf("%d bootstraps built in %s", len(builds), time.Since(start).Round(time.Second))

	srv := mototest.Start(t)
	for i, c := range changes {
		t.Run(c.name, func(t *testing.T) {
			d := newDeployment(t, srv, fmt.Sprintf("two-builds-%d", i))
			v1 := d.build(filepath.Join(bin, "v1"))
			v2 := d.build(filepath.Join(bin, builds[i+1]))
			proveChange(t, d, v1, v2, c)
			d.checkTasks(map[string]int{})
		})
	}
	t.Run("fleet", func(t *testing.T) {
		d := newDeployment(t, srv, "two-builds-fleet")
		fleet(t, d, d.build(filepath.Join(bin, "v1")), d.build(filepath.Join(bin, "v2-add-node")))
	})
}

// fleet is the deploy of issue 23: 100 runs in flight on v1, drained all
// at once through v1's API (POST /v1/runs/drain, `superstep runs drain
// --all`), v2 deployed, all resumed through its API (POST
// /v1/runs/resume, `runs resume --all --status drained`): every run
// completes on v2, and no task completes twice on either build.
func fleet(t *testing.T, d *deployment, v1, v2 *build) {
	const n = 100
	start := time.Now()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("fleet-%03d", i)
		d.create(v1, ids[i], `{"request": "laptop", "amount": 1200}`)
	}
	// In flight: v1's tick function has taken 150 of the messages (each
	// run's first step, and the second of half of them).
	for range 150 {
		if !d.tick(v1) {
			t.Fatal("the tick queue emptied before the runs were in flight")
		}
	}
	var res struct {
		Runs    []string          `json:"runs"`
		Skipped map[string]string `json:"skipped"`
	}
	if err := json.Unmarshal([]byte(d.api(v1, "POST", "/v1/runs/drain", `{"reason": "deploy v2"}`, http.StatusAccepted)), &res); err != nil {
		t.Fatal(err)
	}
	d.settle(v1)
	steps := map[int]int{}
	for _, id := range ids {
		r := d.get(v1, id)
		if r.Status != "drained" || r.DrainReason != "deploy v2" {
			t.Fatalf("%s after the drain: %s (%q), want drained for the deploy", id, r.Status, r.DrainReason)
		}
		steps[r.Step]++
	}
	if len(res.Runs) != n {
		t.Errorf("the drain asked %d runs (skipped %v), want %d", len(res.Runs), res.Skipped, n)
	}
	t.Logf("drained %d runs (by step: %v) in %s", n, steps, time.Since(start).Round(time.Second))

	// Swap: v2's functions take over the table and queues.
	res.Runs = nil
	if err := json.Unmarshal([]byte(d.api(v2, "POST", "/v1/runs/resume", `{"status": "drained"}`, http.StatusAccepted)), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != n {
		t.Errorf("the resume took %d runs (skipped %v), want %d", len(res.Runs), res.Skipped, n)
	}
	d.finish(v2, ids...)
	for _, id := range ids {
		r := d.get(v2, id)
		if r.Status != "completed" || string(r.Values["decision"]) != `"approved"` || r.GraphVersion.Version != "v2" {
			t.Errorf("%s on v2: %s, decision %s, version %+v; want completed, approved, on v2", id, r.Status, r.Values["decision"], r.GraphVersion)
		}
	}
	// Each run: receive, the two checks and review, and v2's notify,
	// each once.
	d.checkTasks(map[string]int{"receive": n, "check_budget": n, "check_policy": n, "review": n, "notify": n})
	t.Logf("fleet of %d: drained on v1, completed on v2 in %s", n, time.Since(start).Round(time.Second))
}

// proveChange runs the four runs of c on v1, continues them on v2 and
// checks how each ends; it completes the stopped ones on v1 again.
func proveChange(t *testing.T, d *deployment, v1, v2 *build, c change) {
	const big = `{"request": "laptop", "amount": 1200}`
	// interrupted: waiting at review.
	d.create(v1, "interrupted", big)
	d.settle(v1)
	if r := d.get(v1, "interrupted"); r.Status != "interrupted" {
		t.Fatalf("v1's run is %s, want interrupted", r.Status)
	}
	// drained after its first step.
	d.create(v1, "drained", big)
	d.tick(v1)
	d.api(v1, "POST", "/v1/runs/drained/drain", `{"reason": "deploy"}`, http.StatusAccepted)
	d.settle(v1)
	if r := d.get(v1, "drained"); r.Status != "drained" || r.Step != 1 {
		t.Fatalf("v1's drained run is %s at step %d, want drained at step 1", r.Status, r.Step)
	}
	// a thread whose first run v1 completed (auto-approved).
	d.api(v1, "POST", "/v1/threads", `{"thread_id": "chat"}`, http.StatusCreated)
	first := d.threadRun(v1, "chat", `{"request": "pens", "amount": 20}`, http.StatusAccepted)
	d.settle(v1)
	if r := d.get(v1, first); r.Status != "completed" {
		t.Fatalf("v1's thread run is %s, want completed", r.Status)
	}
	// queued: steps 1 and 2 committed by v1, the tick of step 3 (review)
	// left in the queue.
	d.create(v1, "queued", big)
	d.tick(v1)
	d.tick(v1)
	if r := d.get(v1, "queued"); r.Status != "running" || r.Step != 2 || d.depth() != 1 {
		t.Fatalf("v1's queued run is %s at step %d with %d messages queued, want running at step 2 with its next tick queued", r.Status, r.Step, d.depth())
	}

	// Deploy v2: its tick function takes the queued tick; the others
	// continue through its API.
	d.settle(v2)
	d.api(v2, "POST", "/v1/runs/interrupted/resume", `{"resume": "approve"}`, http.StatusAccepted)
	d.api(v2, "POST", "/v1/runs/drained/resume", `{}`, http.StatusAccepted)
	want := map[string]string{"interrupted": c.interrupted, "drained": c.drained, "queued": c.queued}
	ids := []string{"interrupted", "drained", "queued"}
	if c.thread == "" {
		ids = append(ids, d.threadRun(v2, "chat", big, http.StatusAccepted))
		want[ids[3]] = ""
	} else {
		var p struct {
			Detail string `json:"detail"`
		}
		body := d.api(v2, "POST", "/v1/threads/chat/runs", `{"graph": "starter", "input": `+big+`}`, http.StatusConflict)
		if err := json.Unmarshal([]byte(body), &p); err != nil || !strings.Contains(p.Detail, c.thread) ||
			!strings.Contains(p.Detail, "v1 (") || !strings.Contains(p.Detail, "v2 (") {
			t.Errorf("the thread's next run on v2 was refused with %s; want it to name %s and both versions", body, c.thread)
		}
	}
	d.finish(v2, ids...)
	var stopped []string
	for _, id := range ids {
		r := d.get(v2, id)
		if want[id] == "" {
			// The thread's state holds its first run's decision.
			decided := c.decided || !slices.Contains([]string{"interrupted", "drained", "queued"}, id)
			if r.Status != "completed" || decided != (string(r.Values["decision"]) == `"approved"`) {
				t.Errorf("%s on v2: %s, decision %s; want completed (decided: %v)", id, r.Status, r.Values["decision"], c.decided)
			}
			continue
		}
		if r.Status != "drained" || !strings.Contains(r.DrainReason, want[id]) ||
			!strings.Contains(r.DrainReason, "v1 (") || !strings.Contains(r.DrainReason, "v2 (") {
			t.Errorf("%s on v2: %s, reason %q; want drained naming %s and both versions", id, r.Status, r.DrainReason, want[id])
			continue
		}
		if _, ok := r.Values["decision"]; ok {
			t.Errorf("%s: v2 ran review before stopping it: decision %s", id, r.Values["decision"])
		}
		stopped = append(stopped, id)
	}
	// v1 again: every run v2 stopped completes, with the answer given
	// to v2 where it was given.
	for _, id := range stopped {
		d.api(v1, "POST", "/v1/runs/"+id+"/resume", `{}`, http.StatusAccepted)
	}
	d.finish(v1, stopped...)
	for _, id := range stopped {
		if r := d.get(v1, id); r.Status != "completed" || string(r.Values["decision"]) != `"approved"` {
			t.Errorf("%s on v1 again: %s, decision %s; want completed, approved", id, r.Status, r.Values["decision"])
		}
	}
	t.Logf("%s: stopped by v2 and completed on v1 again: %v", c.name, stopped)
}

// deployment is a table and its queues on moto that the builds share.
type deployment struct {
	t   *testing.T
	srv *mototest.Server
	cfg serverless.Config
	sqs *sqs.Client
	env []string
	// builds are the builds deployed, for their logs.
	builds []*build
}

// checkTasks fails the test if a task completed more than once on the
// builds' tick functions, or (for each node named in want) if the node's
// tasks did not complete want times in all.
func (d *deployment) checkTasks(want map[string]int) {
	d.t.Helper()
	seen := map[string]int{}
	byNode := map[string]int{}
	for _, b := range d.builds {
		for _, line := range strings.Split(b.tick.Logs(), "\n") {
			f := strings.Fields(line)
			if len(f) == 4 && f[0] == "TASK" {
				seen[f[1]+" "+f[3]]++
				byNode[f[2]]++
			}
		}
	}
	if len(seen) == 0 {
		d.t.Fatal("no build logged a task: the instrumentation is missing")
	}
	for task, n := range seen {
		if n > 1 {
			d.t.Errorf("task %s completed %d times", task, n)
		}
	}
	for node, n := range want {
		if byNode[node] != n {
			d.t.Errorf("node %s completed %d tasks, want %d (all: %v)", node, byNode[node], n, byNode)
		}
	}
}

func newDeployment(t *testing.T, srv *mototest.Server, prefix string) *deployment {
	t.Helper()
	cfg, err := serverless.Provision(t.Context(), srv.Config, serverless.Resources{Prefix: prefix, VisibilityTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return &deployment{t: t, srv: srv, cfg: cfg, sqs: sqs.NewFromConfig(srv.Config), env: []string{
		serverless.EnvTable + "=" + cfg.Table,
		serverless.EnvTickQueue + "=" + cfg.TickQueueURL,
		serverless.EnvNodeQueue + "=" + cfg.NodeQueueURL,
		serverless.EnvStartQueue + "=" + cfg.StartQueueURL,
		"AWS_ENDPOINT_URL=" + srv.URL,
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
		"LOG_LEVEL=warn",
	}}
}

// build is one bootstrap deployed as the api and tick functions.
type build struct {
	name      string
	api, tick *rietest.Emulator
}

func (d *deployment) build(bootstrap string) *build {
	d.t.Helper()
	b := &build{
		name: filepath.Base(bootstrap),
		api:  rietest.Start(d.t, bootstrap, append(d.env, "SUPERSTEP_FUNCTION=api")...),
		tick: rietest.Start(d.t, bootstrap, append(d.env, "SUPERSTEP_FUNCTION=tick")...),
	}
	d.builds = append(d.builds, b)
	return b
}

// api sends an HTTP API request to b's api function as API Gateway does
// and returns the response's body; the status must be want.
func (d *deployment) api(b *build, method, path, body string, want int) string {
	d.t.Helper()
	ev := map[string]any{
		"version": "2.0", "routeKey": "$default", "rawPath": path, "rawQueryString": "",
		"headers": map[string]string{"content-type": "application/json", "host": "abc123.execute-api.us-east-1.amazonaws.com"},
		"requestContext": map[string]any{
			"accountId": "123456789012", "apiId": "abc123", "domainName": "abc123.execute-api.us-east-1.amazonaws.com",
			"http":      map[string]string{"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "203.0.113.7"},
			"requestId": "r", "routeKey": "$default", "stage": "$default",
		},
		"body": body, "isBase64Encoded": false,
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		d.t.Fatal(err)
	}
	code, raw := b.api.Invoke(d.t, payload)
	var resp struct {
		StatusCode      int    `json:"statusCode"`
		Body            string `json:"body"`
		IsBase64Encoded bool   `json:"isBase64Encoded"`
	}
	if err := json.Unmarshal(raw, &resp); err != nil || code != http.StatusOK {
		d.t.Fatalf("%s %s on %s: invoke %d %s (%v)\n%s", method, path, b.name, code, raw, err, b.api.Logs())
	}
	out := resp.Body
	if resp.IsBase64Encoded {
		dec, err := base64.StdEncoding.DecodeString(resp.Body)
		if err != nil {
			d.t.Fatal(err)
		}
		out = string(dec)
	}
	if resp.StatusCode != want {
		d.t.Fatalf("%s %s on %s: %d %s, want %d", method, path, b.name, resp.StatusCode, out, want)
	}
	return out
}

// runView is what the tests read of GET /v1/runs/{id}.
type runView struct {
	RunID        string                     `json:"run_id"`
	Status       string                     `json:"status"`
	Step         int                        `json:"step"`
	DrainReason  string                     `json:"drain_reason"`
	Values       map[string]json.RawMessage `json:"values"`
	GraphVersion struct {
		Version string `json:"version"`
	} `json:"graph_version"`
}

func (d *deployment) get(b *build, id string) runView {
	d.t.Helper()
	var r runView
	if err := json.Unmarshal([]byte(d.api(b, "GET", "/v1/runs/"+id, "", http.StatusOK)), &r); err != nil {
		d.t.Fatal(err)
	}
	return r
}

func (d *deployment) create(b *build, id, input string) {
	d.t.Helper()
	d.api(b, "POST", "/v1/graphs/starter/runs", `{"run_id": "`+id+`", "input": `+input+`}`, http.StatusAccepted)
}

// threadRun starts the thread's next run and returns its id.
func (d *deployment) threadRun(b *build, thread, input string, want int) string {
	d.t.Helper()
	var r runView
	if err := json.Unmarshal([]byte(d.api(b, "POST", "/v1/threads/"+thread+"/runs", `{"graph": "starter", "input": `+input+`}`, want)), &r); err != nil || r.RunID == "" {
		d.t.Fatalf("thread run: %+v %v", r, err)
	}
	return r.RunID
}

// tick takes one message of the tick queue and invokes b's tick function
// with it as the event source mapping does; it reports whether there was
// one. The function must not fail it.
func (d *deployment) tick(b *build) bool {
	d.t.Helper()
	ctx := d.t.Context()
	out, err := d.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(d.cfg.TickQueueURL), MaxNumberOfMessages: 1,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
	if err != nil {
		d.t.Fatal(err)
	}
	if len(out.Messages) == 0 {
		return false
	}
	m := out.Messages[0]
	attrs := map[string]string{}
	for k, v := range m.Attributes {
		attrs[k] = v
	}
	name := d.cfg.TickQueueURL[strings.LastIndex(d.cfg.TickQueueURL, "/")+1:]
	ev := map[string]any{"Records": []map[string]any{{
		"messageId": aws.ToString(m.MessageId), "receiptHandle": aws.ToString(m.ReceiptHandle), "body": aws.ToString(m.Body),
		"attributes": attrs, "messageAttributes": map[string]any{}, "eventSource": "aws:sqs",
		"eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:" + name, "awsRegion": "us-east-1",
	}}}
	payload, err := json.Marshal(ev)
	if err != nil {
		d.t.Fatal(err)
	}
	code, resp := b.tick.Invoke(d.t, payload)
	var r struct {
		BatchItemFailures []any `json:"batchItemFailures"`
	}
	if err := json.Unmarshal(resp, &r); code != http.StatusOK || err != nil || len(r.BatchItemFailures) > 0 {
		d.t.Fatalf("tick %s on %s: %d %s\n%s", aws.ToString(m.Body), b.name, code, resp, b.tick.Logs())
	}
	if _, err := d.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(d.cfg.TickQueueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
		d.t.Fatal(err)
	}
	return true
}

// depth is the number of messages in the tick queue.
func (d *deployment) depth() int {
	d.t.Helper()
	out, err := d.sqs.GetQueueAttributes(d.t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(d.cfg.TickQueueURL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		d.t.Fatal(err)
	}
	n := 0
	for _, v := range out.Attributes {
		var i int
		fmt.Sscan(v, &i)
		n += i
	}
	return n
}

// settle runs b's tick function until the tick queue is empty.
func (d *deployment) settle(b *build) {
	d.t.Helper()
	for n := 0; d.tick(b) || d.depth() > 0; n++ {
		if n > 200 {
			d.t.Fatal("tick messages never stop")
		}
	}
}

// finish settles each run on b, answering review with "approve", until
// it completes or stops (drained, failed, cancelled).
func (d *deployment) finish(b *build, ids ...string) {
	d.t.Helper()
	for range 10 {
		d.settle(b)
		waiting := 0
		for _, id := range ids {
			if d.get(b, id).Status == "interrupted" {
				d.api(b, "POST", "/v1/runs/"+id+"/resume", `{"resume": "approve"}`, http.StatusAccepted)
				waiting++
			}
		}
		if waiting == 0 {
			return
		}
	}
	d.t.Fatal(errors.New("runs are still interrupted after 10 answers"))
}
