package infra

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/superstep/superstep/internal/mototest"
	"github.com/superstep/superstep/internal/rietest"
	"github.com/superstep/superstep/internal/serverlesstest"
	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/serverless"
)

// TestBootstrapsUnderRuntimeEmulator runs the repository's Lambda
// bootstraps (functions/*, built for linux as the Makefile builds them)
// behind the Lambda runtime interface emulator, as `sam local invoke`
// does, against a table and queues on moto_server, and invokes each with
// every sample of events/ meant for it.
func TestBootstrapsUnderRuntimeEmulator(t *testing.T) {
	srv := mototest.Start(t)
	cfg, env := serverlesstest.Provision(t, srv, "rie")
	bin := t.TempDir()
	// One go build for the mains (their packages build once).
	rietest.BuildBootstrap(t, "..", "./functions/...", bin+string(os.PathSeparator))
	env = append(env, "SUPERSTEP_FUNCTION=") // the binaries name their function (WithFunction)
	sample := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("..", "events", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// Which function each sample is for, in an order that lets later
	// samples continue what earlier ones started.
	plan := []struct {
		event, function string
		check           func(t *testing.T, resp []byte)
	}{
		{"api-create-run.json", "api", func(t *testing.T, resp []byte) {
			var r struct {
				StatusCode int    `json:"statusCode"`
				Body       string `json:"body"`
			}
			if err := json.Unmarshal(resp, &r); err != nil || r.StatusCode != 202 || !strings.Contains(r.Body, "sample-counter") {
				t.Fatalf("create run: %s (%v), want a 202 naming sample-counter", resp, err)
			}
		}},
		{"eventbridge-start-run.json", "api", wantNull},
		{"sqs-start-run.json", "api", wantNoFailures},
		{"sqs-tick.json", "tick", wantNoFailures},
		{"sqs-node.json", "node", wantBatchResponse},
		// NODE_DISPATCH=invoke's event: a node task as the payload of an
		// asynchronous invocation. Its run does not exist: a late
		// duplicate, a no-op that succeeds (null).
		{"lambda-node-task.json", "node", wantNull},
		{"dynamodb-run-expired.json", "sweep", wantNoFailures},
		// The run is not going on (nothing polls the tick queue): the
		// stream ends before the function's timeout, cleanly.
		{"functionurl-stream-run.json", "stream", func(t *testing.T, resp []byte) {
			st := parseStreamed(t, resp)
			if st.StatusCode != 200 || st.Headers["Content-Type"] != "text/event-stream" ||
				!strings.Contains(st.body, ": stream of run sample-counter") || !strings.Contains(st.body, "Last-Event-ID") {
				t.Fatalf("stream: %d %v %q; want a 200 text/event-stream of sample-counter ending before the timeout", st.StatusCode, st.Headers, st.body)
			}
		}},
	}
	entries, _ := os.ReadDir("../events")
	for _, e := range entries {
		found := false
		for _, p := range plan {
			found = found || p.event == e.Name()
		}
		if !found {
			t.Errorf("events/%s is not invoked by this test: add it to the plan", e.Name())
		}
	}
	emulators := map[string]*rietest.Emulator{}
	for _, p := range plan {
		em := emulators[p.function]
		if em == nil {
			fenv := env
			if p.function == "stream" {
				fenv = append(slices.Clip(env), streamTimeoutEnv)
			}
			em = rietest.Start(t, filepath.Join(bin, p.function), fenv...)
			emulators[p.function] = em
		}
		t.Run(p.event, func(t *testing.T) {
			code, resp := em.Invoke(t, sample(p.event))
			if code != 200 || strings.Contains(string(resp), `"errorType"`) {
				t.Fatalf("%s: function error %s\n%s", p.function, resp, em.Logs())
			}
			p.check(t, resp)
		})
	}
	// The runs the samples created are in the table.
	app, err := serverless.New(serverless.Options{Config: cfg, AWS: srv.Config, Graphs: mustRegistry(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := app.Service.Get(t.Context(), "sample-counter"); err != nil {
		t.Errorf("run sample-counter, created through the api bootstrap: %v", err)
	}
	page, err := app.Service.List(t.Context(), runs.Filter{Limit: 10})
	if err != nil || len(page.Runs) < 3 {
		t.Errorf("runs in the table: %+v, %v; want the three the api samples start", page, err)
	}
}

// TestBootstrapWithoutFunction: a binary that serves every function
// (cmd/superstep), started by Lambda with no or an unknown
// SUPERSTEP_FUNCTION, fails its init with a message that says what to set.
func TestBootstrapWithoutFunction(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "bootstrap")
	rietest.BuildBootstrap(t, "..", "./cmd/superstep", bin)
	for _, tc := range []struct{ value, want string }{
		{"", "set SUPERSTEP_FUNCTION to one of api, tick, node, sweep"},
		{"ticker", `unknown function "ticker"`},
	} {
		t.Run("SUPERSTEP_FUNCTION="+tc.value, func(t *testing.T) {
			em := rietest.Start(t, bin, "SUPERSTEP_FUNCTION="+tc.value, "AWS_REGION=us-east-1")
			if code, resp := em.Invoke(t, []byte(`{}`)); code == 200 {
				t.Errorf("invoke answered %d %s, want the function's init to fail", code, resp)
			}
			// The emulator answers the invoke as the process exits; its
			// last lines may reach the log a moment later.
			for deadline := time.Now().Add(10 * time.Second); !strings.Contains(em.Logs(), tc.want) && time.Now().Before(deadline); {
				time.Sleep(20 * time.Millisecond)
			}
			if !strings.Contains(em.Logs(), tc.want) {
				t.Errorf("the function's log does not say %q within 10s:\n%s", tc.want, em.Logs())
			}
		})
	}
}

func mustRegistry(t *testing.T) *runs.Registry {
	t.Helper()
	reg, err := runs.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func wantNull(t *testing.T, resp []byte) {
	t.Helper()
	if strings.TrimSpace(string(resp)) != "null" {
		t.Errorf("response %s, want null (the event was accepted)", resp)
	}
}

// wantBatchResponse: an SQS or stream batch response.
func wantBatchResponse(t *testing.T, resp []byte) {
	t.Helper()
	var r map[string]json.RawMessage
	if err := json.Unmarshal(resp, &r); err != nil {
		t.Errorf("response %s (%v), want a batch response", resp, err)
	}
	if _, ok := r["batchItemFailures"]; !ok {
		t.Errorf("response %s, want a batch response", resp)
	}
}

func wantNoFailures(t *testing.T, resp []byte) {
	t.Helper()
	var r struct {
		Failures []json.RawMessage `json:"batchItemFailures"`
	}
	if err := json.Unmarshal(resp, &r); err != nil || len(r.Failures) != 0 {
		t.Errorf("response %s (%v), want no batchItemFailures", resp, err)
	}
}
