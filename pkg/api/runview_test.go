package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/pregel"
)

// longRun creates run id of graph echo and commits its steps 0 to
// steps-1 directly (those create did not) (the run record stays at step 0, as a record lagging
// its checkpoints would); task(i) gives step i's tasks.
func longRun(t *testing.T, e *env, id string, steps int, task func(i int) []pregel.TaskStatus) {
	t.Helper()
	e.create("echo", api.CreateRunRequest{RunID: id})
	first := 0 // create may have stored step 0
	if cp, err := e.cps.Load(t.Context(), id, pregel.Latest); err == nil {
		first = cp.Step + 1
	}
	for i := first; i < steps; i++ {
		cp := &pregel.Checkpoint{RunID: id, Graph: "echo", Step: i,
			Values:   map[string]json.RawMessage{"text": json.RawMessage(fmt.Sprintf(`"%d"`, i))},
			Versions: map[string]int{"text": i},
			Next:     []pregel.Trigger{{Node: "exclaim"}}}
		if task != nil {
			cp.Tasks = task(i)
		}
		if err := e.cps.Commit(t.Context(), cp); err != nil {
			t.Fatal(err)
		}
	}
}

func stepNumbers(steps []pregel.StepInfo) []int {
	out := []int{}
	for _, s := range steps {
		out = append(out, s.Step)
	}
	return out
}

func countDown(from, to int) []int {
	out := []int{}
	for i := from; i >= to; i-- {
		out = append(out, i)
	}
	return out
}

func countUp(from, to int) []int {
	out := []int{}
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// TestRunViewCapsSteps: GET /v1/runs/{run_id} lists a long run's newest
// 100 steps (oldest first), says how many it has and that older ones
// exist, and its token pages the rest through /checkpoints?order=desc,
// each step once; ?steps= asks for 1 to 500.
func TestRunViewCapsSteps(t *testing.T) {
	e := newEnv(t)
	const steps = 230
	longRun(t, e, "long", steps, nil)

	var d api.RunDetail
	e.do("GET", "/v1/runs/long", nil).ok(t, http.StatusOK, &d)
	if got, want := fmt.Sprint(stepNumbers(d.Steps)), fmt.Sprint(countUp(steps-100, steps-1)); got != want {
		t.Fatalf("view's steps %s, want the newest 100 oldest first: %s", got, want)
	}
	if d.StepCount != steps || !d.StepsTruncated || d.OlderStepsPageToken == "" {
		t.Fatalf("step_count %d, steps_truncated %v, older_steps_page_token %q; want %d, true and a token", d.StepCount, d.StepsTruncated, d.OlderStepsPageToken, steps)
	}
	if d.Values["text"] == nil || string(d.Values["text"]) != fmt.Sprintf(`"%d"`, steps-1) {
		t.Errorf("values %s, want the latest step's", d.Values)
	}

	// The token pages the older steps newest first, each once: put
	// before the view's, they are every step in order.
	got := stepNumbers(d.Steps)
	tok := d.OlderStepsPageToken
	var sizes []int
	for tok != "" {
		var cl api.CheckpointList
		e.do("GET", "/v1/runs/long/checkpoints?order=desc&page_token="+url.QueryEscape(tok), nil).ok(t, http.StatusOK, &cl)
		sizes = append(sizes, len(cl.Checkpoints))
		older := stepNumbers(cl.Checkpoints)
		slices.Reverse(older)
		got = append(older, got...)
		tok = cl.NextPageToken
		if len(sizes) > steps {
			t.Fatal("the pages never end")
		}
	}
	if fmt.Sprint(sizes) != "[100 30]" {
		t.Errorf("older pages of %v steps, want [100 30]", sizes)
	}
	if fmt.Sprint(got) != fmt.Sprint(countUp(0, steps-1)) {
		t.Errorf("the view's steps and the older pages give %v, want 0 to %d once each", got, steps-1)
	}

	for _, tc := range []struct {
		query     string
		want      []int
		truncated bool
	}{
		{"steps=1", []int{steps - 1}, true},
		{"steps=230", countUp(0, steps-1), false},
		{"steps=500", countUp(0, steps-1), false},
		{"steps=229", countUp(1, steps-1), true},
	} {
		var d api.RunDetail
		e.do("GET", "/v1/runs/long?"+tc.query, nil).ok(t, http.StatusOK, &d)
		if fmt.Sprint(stepNumbers(d.Steps)) != fmt.Sprint(tc.want) || d.StepCount != steps || d.StepsTruncated != tc.truncated || (d.OlderStepsPageToken != "") != tc.truncated {
			t.Errorf("?%s: steps %v, step_count %d, truncated %v, token %q; want %v, %d, %v", tc.query, stepNumbers(d.Steps), d.StepCount, d.StepsTruncated, d.OlderStepsPageToken, tc.want, steps, tc.truncated)
		}
	}

	// A short run is whole, as before: no truncation, no token.
	longRun(t, e, "short", 3, nil)
	var s api.RunDetail
	e.do("GET", "/v1/runs/short", nil).ok(t, http.StatusOK, &s)
	if fmt.Sprint(stepNumbers(s.Steps)) != "[0 1 2]" || s.StepCount != 3 || s.StepsTruncated || s.OlderStepsPageToken != "" {
		t.Errorf("short run: steps %v, step_count %d, truncated %v, token %q", stepNumbers(s.Steps), s.StepCount, s.StepsTruncated, s.OlderStepsPageToken)
	}
	// A run just created: its input step, step_count 1.
	e.create("echo", api.CreateRunRequest{RunID: "fresh"})
	var f api.RunDetail
	e.do("GET", "/v1/runs/fresh", nil).ok(t, http.StatusOK, &f)
	if fmt.Sprint(stepNumbers(f.Steps)) != "[0]" || f.StepCount != 1 || f.StepsTruncated || f.OlderStepsPageToken != "" {
		t.Errorf("fresh run: steps %v, step_count %d, truncated %v", stepNumbers(f.Steps), f.StepCount, f.StepsTruncated)
	}

	for _, q := range []string{"steps=0", "steps=501", "steps=ten", "steps=-1"} {
		e.do("GET", "/v1/runs/long?"+q, nil).problem(t, http.StatusBadRequest, "must be a whole number between 1 and 500", "/checkpoints")
	}
	e.do("GET", "/v1/runs/long?limit=5", nil).problem(t, http.StatusBadRequest)
	e.do("GET", "/v1/runs/nope?steps=5", nil).problem(t, http.StatusNotFound)
}

// TestListCheckpointsNewestFirst: /checkpoints?order=desc pages a run's
// steps newest first; a token of one order is refused in the other with
// a detail saying which order it pages.
func TestListCheckpointsNewestFirst(t *testing.T) {
	e := newEnv(t)
	const steps = 230
	longRun(t, e, "long", steps, nil)
	for _, tc := range []struct {
		limit string
		sizes string
	}{
		{"", "[100 100 30]"},
		{"&limit=1", fmt.Sprint(func() []int {
			out := make([]int, steps)
			for i := range out {
				out[i] = 1
			}
			return out
		}())},
		{"&limit=115", "[115 115]"},
		{"&limit=500", "[230]"},
	} {
		var got, sizes []int
		tok := ""
		for range steps + 1 {
			q := "/v1/runs/long/checkpoints?order=desc" + tc.limit
			if tok != "" {
				q += "&page_token=" + url.QueryEscape(tok)
			}
			var cl api.CheckpointList
			e.do("GET", q, nil).ok(t, http.StatusOK, &cl)
			sizes = append(sizes, len(cl.Checkpoints))
			got = append(got, stepNumbers(cl.Checkpoints)...)
			if tok = cl.NextPageToken; tok == "" {
				break
			}
		}
		if fmt.Sprint(sizes) != tc.sizes {
			t.Errorf("order=desc%s: page sizes %v, want %s", tc.limit, sizes, tc.sizes)
		}
		if fmt.Sprint(got) != fmt.Sprint(countDown(steps-1, 0)) {
			t.Errorf("order=desc%s: steps %v, want %d down to 0 once each", tc.limit, got, steps-1)
		}
	}
	var asc, desc api.CheckpointList
	e.do("GET", "/v1/runs/long/checkpoints?limit=3", nil).ok(t, http.StatusOK, &asc)
	e.do("GET", "/v1/runs/long/checkpoints?order=desc&limit=3", nil).ok(t, http.StatusOK, &desc)
	e.do("GET", "/v1/runs/long/checkpoints?order=asc&page_token="+url.QueryEscape(desc.NextPageToken), nil).problem(t, http.StatusBadRequest, "pages the steps newest first", "add order=desc")
	e.do("GET", "/v1/runs/long/checkpoints?order=desc&page_token="+url.QueryEscape(asc.NextPageToken), nil).problem(t, http.StatusBadRequest, "pages the steps oldest first", "without order=desc")
	e.do("GET", "/v1/runs/long/checkpoints?order=newest", nil).problem(t, http.StatusBadRequest, `order "newest" must be asc`)
	var empty api.CheckpointList
	e.create("echo", api.CreateRunRequest{RunID: "fresh"})
	e.do("GET", "/v1/runs/fresh/checkpoints?order=desc", nil).ok(t, http.StatusOK, &empty)
	if fmt.Sprint(stepNumbers(empty.Checkpoints)) != "[0]" || empty.NextPageToken != "" {
		t.Errorf("a run of one step, newest first: %+v", empty)
	}
}

// TestGraphNodeStatusesLongRun: the diagram of a long run colours each
// node by its newest execution, even one that last ran more than a page
// of steps ago.
func TestGraphNodeStatusesLongRun(t *testing.T) {
	e := newEnv(t)
	done := func(node string) []pregel.TaskStatus {
		return []pregel.TaskStatus{{TaskID: fmt.Sprint(node), Node: node, Status: pregel.NodeCompleted, Attempts: 1}}
	}
	// upper last ran (skipped) at step 1, exclaim at every step after.
	longRun(t, e, "old", 1200, func(i int) []pregel.TaskStatus {
		switch {
		case i == 0:
			return nil
		case i == 1:
			return []pregel.TaskStatus{{TaskID: "u", Node: "upper", Status: pregel.NodeSkipped, Reason: "nothing to do"}}
		default:
			return done("exclaim")
		}
	})
	var g api.Graph
	e.do("GET", "/v1/graphs/echo?run=old", nil).ok(t, http.StatusOK, &g)
	if g.NodeStatuses["upper"] != pregel.NodeSkipped || g.NodeStatuses["exclaim"] != pregel.NodeCompleted {
		t.Errorf("node statuses %v, want upper skipped (step 1) and exclaim completed", g.NodeStatuses)
	}
	// The newest execution wins over an older one.
	longRun(t, e, "new", 600, func(i int) []pregel.TaskStatus {
		switch {
		case i == 1:
			return []pregel.TaskStatus{{TaskID: "u", Node: "upper", Status: pregel.NodeFailed, Error: "boom"}}
		case i == 599:
			return done("upper")
		case i > 1:
			return done("exclaim")
		}
		return nil
	})
	e.do("GET", "/v1/graphs/echo?run=new", nil).ok(t, http.StatusOK, &g)
	if g.NodeStatuses["upper"] != pregel.NodeCompleted || g.NodeStatuses["exclaim"] != pregel.NodeCompleted {
		t.Errorf("node statuses %v, want upper completed (step 599, not failed at step 1)", g.NodeStatuses)
	}
}
