package scaffold

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TwoBuildsEnv runs TestTwoBuilds: it builds a scaffolded project three
// times with `go build` (about 40 s a build on a busy 2-core machine), so
// it is not part of `make test`:
//
//	SUPERSTEP_TWO_BUILDS=1 go test -count=1 -run TestTwoBuilds -v ./pkg/internal/scaffold/
//
// The same compatibility rules are proven in process by `make test`
// (pkg/pregel TestGraphChangesTable, TestMigrationsAppliedOnce; pkg/runs
// TestSchedulerStopsIncompatibleRun; pkg/superstep TestResumeOnOtherCode).
const TwoBuildsEnv = "SUPERSTEP_TWO_BUILDS"

// scaffoldForBuilds writes a project as `superstep init` does, with this
// checkout as superstep, into a temporary directory, and returns the go
// command, the project's directory and its main.go.
func scaffoldForBuilds(t *testing.T) (gobin, proj string, mainGo []byte) {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go is not on PATH: %v", err)
	}
	repo, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	proj = filepath.Join(t.TempDir(), "orders")
	if _, err := Create(proj, Project{Module: "example.com/orders", Replace: repo}); err != nil {
		t.Fatal(err)
	}
	// The project's go.sum: superstep's (a superset); go build adds the
	// requirements it needs to go.mod from the module cache, as `go mod
	// tidy` would with the network.
	sum, err := os.ReadFile(filepath.Join(repo, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proj, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
	mainGo, err = os.ReadFile(filepath.Join(proj, "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	return gobin, proj, mainGo
}

// TestTwoBuilds is the deploy an operator makes while a run waits for a
// person: a project from `superstep init` (this package), built as v1, runs
// its starter graph to the review interrupt on SQLite. v2 renames review to
// approval without declaring it: resuming the run with the person's answer
// stops it drained, with a reason naming the node and both versions, the
// answer kept. v2 with the rename declared (Builder.RenameNode) resumes it:
// it completes with the answer given to the build that stopped it.
func TestTwoBuilds(t *testing.T) {
	if os.Getenv(TwoBuildsEnv) == "" {
		t.Skipf("set %s=1 to build a scaffolded project three times (about 2 minutes)", TwoBuildsEnv)
	}
	gobin, proj, src := scaffoldForBuilds(t)
	dir := filepath.Dir(proj) // the test's directory: builds and stores go beside the project
	main := string(src)
	const newGraph = `pregel.NewGraph[State]("starter").`
	if strings.Count(main, newGraph) != 1 || strings.Count(main, `"review"`) != 3 || !strings.Contains(main, "\treturn g.Compile()") {
		t.Fatalf("the scaffolded main.go changed; update this test's edits:\n%s", main)
	}
	v1 := strings.Replace(main, newGraph, newGraph+`Version("v1").`, 1)
	// v2: review renamed to approval (the one-line change, in three
	// places), without and with the declared rename.
	v2 := strings.ReplaceAll(strings.Replace(main, newGraph, newGraph+`Version("v2").`, 1), `"review"`, `"approval"`)
	v2renamed := strings.Replace(v2, "\treturn g.Compile()", "\tg.RenameNode(\"review\", \"approval\")\n\treturn g.Compile()", 1)

	// Each build in its own copy of the project; v2's two builds at once.
	build := func(name, code string) (string, error) {
		d := filepath.Join(dir, "src-"+name)
		if err := os.CopyFS(d, os.DirFS(proj)); err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(d, "main.go"), []byte(code), 0o644); err != nil {
			return "", err
		}
		bin := filepath.Join(dir, name)
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, gobin, "build", "-o", bin, ".")
		cmd.Dir = d
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "GOPROXY=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", errors.New("go build " + name + ": " + err.Error() + "\n" + string(out))
		}
		return bin, nil
	}
	start := time.Now()
	binV1, err := build("v1", v1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("v1 built in %s", time.Since(start).Round(time.Second))
	var (
		wg            sync.WaitGroup
		binV2, binV2R string
		errV2, errV2R error
		v2start       = time.Now()
	)
	wg.Add(2)
	go func() { defer wg.Done(); binV2, errV2 = build("v2", v2) }()
	go func() { defer wg.Done(); binV2R, errV2R = build("v2-renamed", v2renamed) }()
	wg.Wait()
	if err := errors.Join(errV2, errV2R); err != nil {
		t.Fatal(err)
	}
	t.Logf("both v2 builds in %s", time.Since(v2start).Round(time.Second))

	store := filepath.Join(dir, "runs.sqlite")
	type result struct {
		RunID       string                     `json:"run_id"`
		Status      string                     `json:"status"`
		DrainReason string                     `json:"drain_reason"`
		Values      map[string]json.RawMessage `json:"values"`
		Interrupts  []struct {
			Node string `json:"node"`
		} `json:"interrupts"`
	}
	run := func(bin string, wantCode int, args ...string) result {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append(args, "--store", store, "--json", "-q")...)
		cmd.Dir = dir
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%s %v: %v", filepath.Base(bin), args, err)
		}
		var r result
		if jerr := json.Unmarshal(stdout.Bytes(), &r); jerr != nil || code != wantCode {
			t.Fatalf("%s %v: exit %d (want %d), %v\nstdout:\n%s\nstderr:\n%s", filepath.Base(bin), args, code, wantCode, jerr, stdout.String(), stderr.String())
		}
		return r
	}

	// v1: the run waits at review.
	r := run(binV1, 3, "run", "starter", "--input", `{"request": "laptop", "amount": 1200}`)
	if r.Status != "interrupted" || len(r.Interrupts) != 1 || r.Interrupts[0].Node != "review" {
		t.Fatalf("v1 run: %+v", r)
	}
	id := r.RunID

	// v2 without the declared rename: drained before anything runs,
	// the reason naming the node and both versions.
	r = run(binV2, 4, "resume", id, "--answer", "approve")
	if r.Status != "drained" || !strings.Contains(r.DrainReason, `node "review"`) ||
		!strings.Contains(r.DrainReason, "v1 (") || !strings.Contains(r.DrainReason, "v2 (") {
		t.Fatalf("v2 resume: status %s, reason %q; want drained naming node \"review\", v1 and v2", r.Status, r.DrainReason)
	}
	if _, ok := r.Values["decision"]; ok {
		t.Fatalf("v2 ran something: %s", r.Values["decision"])
	}
	t.Logf("v2 stopped the run: %s", r.DrainReason)

	// v2 with the rename declared: no answer needed (v2 recorded it);
	// the run completes with the person's answer.
	r = run(binV2R, 0, "resume", id)
	if r.Status != "completed" || string(r.Values["decision"]) != `"approved"` {
		t.Fatalf("v2 with the declared rename: %+v", r)
	}
}
