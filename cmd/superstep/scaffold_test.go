package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/superstep/superstep/internal/mototest"
	"github.com/superstep/superstep/internal/rietest"
	"github.com/superstep/superstep/internal/serverlesstest"
	"github.com/superstep/superstep/pkg/api"
)

// TestScaffoldedProject is what a new user does: `superstep init` a
// project outside this repository (its go.mod replaced to this checkout),
// run its `make test`, build it, run its starter graph through its own
// CLI to completion (answering the review), serve it with dev and read
// its A2A card and graphs, run it with dev --aws against moto_server, and
// invoke its Lambda bootstrap, built by its own Makefile target, under the
// Lambda runtime interface emulator with its sample events.
func TestScaffoldedProject(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a project: not with -short")
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if rel, err := filepath.Rel(repo, root); err == nil && !strings.HasPrefix(rel, "..") {
		t.Fatalf("the temporary directory %s is inside the repository", root)
	}
	proj := filepath.Join(root, "orders")
	o := runBinary(t, nil, "init", proj, "--module", "example.com/orders", "--replace", repo).want(t, 0)
	if !strings.Contains(o.stdout, "main.go") {
		t.Fatalf("init said:\n%s", o.stdout)
	}
	// Resolve the project's dependencies from the module cache, as this
	// repository's: go.sum from the checkout, go.mod completed by -mod=mod
	// (where a user would run go mod tidy).
	sum, err := os.ReadFile(filepath.Join(repo, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proj, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
	goEnv := append(cleanEnv(), "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -mod=mod"))
	sh := func(t *testing.T, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = proj
		cmd.Env = goEnv
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	t.Run("make test", func(t *testing.T) {
		out := sh(t, "make", "test")
		if !strings.Contains(out, "ok  \texample.com/orders") {
			t.Errorf("make test ran no tests of the project:\n%s", out)
		}
	})
	sh(t, "make", "build")
	program := filepath.Join(proj, "orders")
	store := filepath.Join(root, "state", "orders.db")
	run := func(args ...string) outcome {
		t.Helper()
		cmd := exec.Command(program, args...)
		cmd.Dir = proj
		cmd.Env = cleanEnv()
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		o := outcome{stdout: out.String(), stderr: errb.String()}
		if ee, ok := err.(*exec.ExitError); ok {
			o.code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return o
	}

	t.Run("run and resume", func(t *testing.T) {
		run("run", "starter", "--input", `{"request": "laptop", "amount": 1200}`, "--run-id", "po-1", "--store", store, "--json").want(t, 3)
		r := run("resume", "po-1", "--answer", "approve", "--store", store, "--json").want(t, 0).result(t)
		if got := channel[string](t, r.Values, "decision"); got != "approved" {
			t.Errorf("decision %q, want approved", got)
		}
		if got := channel[[]string](t, r.Values, "checks"); len(got) != 2 {
			t.Errorf("checks %q, want both (the join)", got)
		}
		if o := run("run", "counter", "--input", "{}", "--store", store); o.code != 2 || !strings.Contains(o.stderr, `graph "counter" is not registered; graphs are starter`) {
			t.Errorf("an example graph in the user's binary: exit %d, %s", o.code, o.stderr)
		}
	})

	t.Run("dev", func(t *testing.T) {
		d := startServer(t, program, proj, nil, "dev", "--addr", "127.0.0.1:0", "--dir", filepath.Join(root, "dev"))
		var card struct {
			Name string `json:"name"`
		}
		if code := d.call("GET", "/a2a/starter/.well-known/agent-card.json", nil, &card); code != 200 || card.Name == "" {
			t.Errorf("agent card: %d %+v", code, card)
		}
		var graphs api.GraphList
		if code := d.call("GET", "/v1/graphs", nil, &graphs); code != 200 || len(graphs.Graphs) != 1 || graphs.Graphs[0].Name != "starter" {
			t.Errorf("/v1/graphs: %d %+v", code, graphs)
		}
		if code := d.stop(os.Interrupt); code != 0 {
			t.Errorf("dev exited %d", code)
		}
	})

	t.Run("dev --aws", func(t *testing.T) {
		srv := mototest.Start(t)
		d := startServer(t, program, proj, nil, "dev", "--aws", "--endpoint", srv.URL, "--create", "--prefix", "orders",
			"--addr", "127.0.0.1:0", "--wait-time", "0", "--grace", "2s")
		var created api.Run
		if code := d.call("POST", "/v1/graphs/starter/runs", map[string]any{"input": map[string]any{"request": "pens", "amount": 20}, "run_id": "aws-1"}, &created); code != 202 {
			t.Fatalf("create: %d\n%s", code, d.stderr)
		}
		var got api.RunDetail
		waitFor(t, "the run to complete on the serverless handlers", func() bool {
			d.call("GET", "/v1/runs/aws-1", nil, &got)
			return got.Status == "completed" || got.Status == "failed"
		})
		if got.Status != "completed" {
			t.Fatalf("run %+v", got)
		}
		if code := d.stop(os.Interrupt); code != 0 {
			t.Errorf("dev --aws exited %d", code)
		}
	})

	t.Run("Lambda runtime emulator", func(t *testing.T) {
		srv := mototest.Start(t)
		_, env := serverlesstest.Provision(t, srv, "orders")
		artifacts := filepath.Join(root, "artifacts")
		sh(t, "make", "build-ApiFunction", "ARTIFACTS_DIR="+artifacts, "LAMBDA_GOARCH="+runtime.GOARCH)
		bootstrap := filepath.Join(artifacts, "bootstrap")
		emulators := map[string]*rietest.Emulator{}
		for _, tc := range []struct{ event, function, want string }{
			{"api-create-run.json", "api", `"statusCode":202`},
			{"eventbridge-start-run.json", "api", "null"},
			{"sqs-start-run.json", "api", `"batchItemFailures"`},
			{"sqs-tick.json", "tick", `"batchItemFailures"`},
			{"dynamodb-run-expired.json", "sweep", `"batchItemFailures"`},
		} {
			em := emulators[tc.function]
			if em == nil {
				em = rietest.Start(t, bootstrap, append(env, "SUPERSTEP_FUNCTION="+tc.function)...)
				emulators[tc.function] = em
			}
			b, err := os.ReadFile(filepath.Join(proj, "events", tc.event))
			if err != nil {
				t.Fatal(err)
			}
			// A batch response must report no failed item.
			if code, resp := em.Invoke(t, b); code != 200 || !strings.Contains(string(resp), tc.want) || strings.Contains(string(resp), "itemIdentifier") {
				t.Errorf("%s to %s: %d %s, want %s\n%s", tc.event, tc.function, code, resp, tc.want, em.Logs())
			}
		}
		entries, _ := os.ReadDir(filepath.Join(proj, "events"))
		if len(entries) != 5 {
			t.Errorf("the project has %d sample events; this test invokes 5", len(entries))
		}
	})
}
