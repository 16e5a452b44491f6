package superstep

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// idleDispatcher executes nothing: the test commits the run's steps.
type idleDispatcher struct{}

func (idleDispatcher) Dispatch(context.Context, runs.Run) error { return nil }
func (idleDispatcher) Signal(context.Context, runs.Run)         {}

// TestRunsShowPagesSteps: runs show lists a long run's newest 100 steps
// and says how many older ones it left out; --steps N and --all-steps
// read the older ones from the server's pages, in the table and in
// --json.
func TestRunsShowPagesSteps(t *testing.T) {
	ctx := t.Context()
	g := pregel.NewGraph[struct {
		N int `json:"n"`
	}]("loop")
	g.AddFunc("tick", func(_ context.Context, s struct {
		N int `json:"n"`
	}) (struct {
		N int `json:"n"`
	}, error) {
		return s, nil
	})
	g.AddEdge(pregel.Start, "tick").AddEdge("tick", pregel.End)
	loop, err := g.Compile()
	if err != nil {
		t.Fatal(err)
	}
	reg, err := runs.NewRegistry(loop)
	if err != nil {
		t.Fatal(err)
	}
	cps := pregel.NewMemoryStore()
	svc := &runs.Service{Graphs: reg, Runs: runs.NewMemoryStore(), Checkpoints: cps, Dispatcher: idleDispatcher{}}
	const steps = 640
	if _, _, err := svc.Runs.CreateRun(ctx, runs.Run{ID: "long", Graph: "loop", Status: pregel.RunCompleted, Step: steps - 1}); err != nil {
		t.Fatal(err)
	}
	for i := range steps {
		cp := &pregel.Checkpoint{RunID: "long", Graph: "loop", Step: i,
			Values: map[string]json.RawMessage{"n": json.RawMessage(fmt.Sprint(i))}, Versions: map[string]int{"n": i}}
		if i > 0 {
			cp.Tasks = []pregel.TaskStatus{{TaskID: fmt.Sprint("t", i), Node: "tick", Status: pregel.NodeCompleted, Attempts: 1}}
		}
		if err := cps.Commit(ctx, cp); err != nil {
			t.Fatal(err)
		}
	}
	h, err := api.New(api.Config{Service: svc, NoStreams: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	hs := newHarness(t)
	hs.env[ServerEnv] = srv.URL

	// The step numbers of the node table, in order.
	tableSteps := func(out string) []int {
		var got []int
		for _, m := range regexp.MustCompile(`(?m)^(\d+)\s+tick\s+completed`).FindAllStringSubmatch(out, -1) {
			var n int
			fmt.Sscan(m[1], &n)
			got = append(got, n)
		}
		return got
	}
	upFrom := func(from int) string {
		var out []int
		for i := from; i < steps; i++ {
			out = append(out, i)
		}
		return fmt.Sprint(out)
	}
	for _, tc := range []struct {
		args  []string
		from  int
		older string // the note, or "" for none
	}{
		{nil, steps - 100, "(540 older steps not shown, of 640: superstep runs show long --steps N or --all-steps)"},
		{[]string{"--steps", "7"}, steps - 7, "(633 older steps not shown, of 640"},
		{[]string{"--steps", "600"}, steps - 600, "(40 older steps not shown, of 640"},
		{[]string{"--steps", "5000"}, 1, ""},
		{[]string{"--all-steps"}, 1, ""},
	} {
		r := hs.run(append([]string{"runs", "show", "long"}, tc.args...)...).want(t, ExitOK)
		if got := fmt.Sprint(tableSteps(r.stdout)); got != upFrom(tc.from) {
			t.Errorf("runs show %v: table steps %.80s…, want %d to %d", tc.args, got, tc.from, steps-1)
		}
		if tc.older != "" && !strings.Contains(r.stdout, tc.older) {
			t.Errorf("runs show %v lacks %q:\n%.2000s", tc.args, tc.older, r.stdout)
		}
		if tc.older == "" && strings.Contains(r.stdout, "older step") {
			t.Errorf("runs show %v says steps are left out, but shows them all", tc.args)
		}
	}

	for _, tc := range []struct {
		args      []string
		n         int
		truncated bool
	}{
		{nil, 100, true},
		{[]string{"--steps", "600"}, 600, true},
		{[]string{"--all-steps"}, steps, false},
	} {
		r := hs.run(append([]string{"runs", "show", "long", "--json"}, tc.args...)...).want(t, ExitOK)
		var d struct {
			api.RunDetail
			Events []api.Event `json:"events"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
			t.Fatalf("runs show --json %v: %v\n%.500s", tc.args, err, r.stdout)
		}
		ok := len(d.Steps) == tc.n && d.Steps[len(d.Steps)-1].Step == steps-1 && d.StepCount == steps && d.StepsTruncated == tc.truncated && (d.OlderStepsPageToken != "") == tc.truncated && d.Events != nil
		for i := 1; ok && i < len(d.Steps); i++ {
			ok = d.Steps[i].Step == d.Steps[i-1].Step+1
		}
		if !ok {
			t.Errorf("runs show --json %v: %d steps, step_count %d, truncated %v, token %q, events %v; want the newest %d in order, %d, %v", tc.args, len(d.Steps), d.StepCount, d.StepsTruncated, d.OlderStepsPageToken, d.Events != nil, tc.n, steps, tc.truncated)
		}
	}

	r := hs.run("runs", "show", "long", "--steps", "3", "--all-steps").want(t, ExitUsage)
	if !strings.Contains(r.stderr, "not both") {
		t.Errorf("--steps with --all-steps:\n%s", r.stderr)
	}
	r = hs.run("runs", "show", "long", "--steps", "-2").want(t, ExitUsage)
	if !strings.Contains(r.stderr, "--steps -2") {
		t.Errorf("--steps -2:\n%s", r.stderr)
	}
}
