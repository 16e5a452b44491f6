package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// bigState is the state of the "big" graph: its node writes a value of
// Size bytes to Blob.
type bigState struct {
	Size  int    `json:"size,omitempty"`
	Note  string `json:"note,omitempty"`
	Blob  string `json:"blob,omitempty"`
	Small string `json:"small,omitempty"`
}

// blob is n bytes of text with characters JSON escapes.
func blob(n int) string {
	const unit = `abc"\<>é` + "\n"
	s := strings.Repeat(unit, n/len(unit)+1)
	return s[:n]
}

func bigGraph(t testing.TB) *pregel.Graph {
	t.Helper()
	b := pregel.NewGraph[bigState]("big")
	b.AddFunc("grow", func(ctx context.Context, s bigState) (bigState, error) {
		return bigState{Blob: blob(s.Size), Small: "kept"}, nil
	}, pregel.Writes("blob", "small"))
	b.AddEdge(pregel.Start, "grow").AddEdge("grow", pregel.End)
	g, err := b.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// lambdaLimit is AWS Lambda's response payload limit.
const lambdaLimit = 6_000_000

// TestLargeValues: with a 7 MB channel value (and a 1 MB input value),
// every response stays well under Lambda's 6 MB limit, large values are
// left out with a marker, and the values are retrievable whole.
func TestLargeValues(t *testing.T) {
	reg, err := runs.NewRegistry(bigGraph(t))
	if err != nil {
		t.Fatal(err)
	}
	cps := pregel.NewMemoryStore()
	svc := &runs.Service{Graphs: reg, Runs: runs.NewMemoryStore(), Checkpoints: cps, Dispatcher: &recordingDispatcher{}, Logger: testLogger(t)}
	e := startEnv(t, svc, cps, withMaxBody(4<<20))

	const size = 7 << 20
	note := strings.Repeat("n", 1<<20)
	e.create("big", api.CreateRunRequest{RunID: "b1", Input: json.RawMessage(fmt.Sprintf(`{"size":%d,"note":%q}`, size, note))})
	e.finish("b1")
	wantBlob, _ := json.Marshal(blob(size))

	get := func(path string, headers ...string) response {
		t.Helper()
		res := e.do("GET", path, nil, headers...)
		if len(res.body) >= lambdaLimit {
			t.Fatalf("GET %s: %d bytes, over Lambda's limit", path, len(res.body))
		}
		return res
	}
	checkMarker := func(what string, raw json.RawMessage, href string) {
		t.Helper()
		var m api.Omitted
		if err := json.Unmarshal(raw, &m); err != nil || m.Omitted.Href != href || m.Omitted.Bytes == 0 || m.Omitted.Reason == "" {
			t.Fatalf("%s: marker %.200s, want href %s", what, raw, href)
		}
	}

	var d api.RunDetail
	get("/v1/runs/b1").ok(t, http.StatusOK, &d)
	if d.Status != pregel.RunCompleted || fmt.Sprint(d.OmittedValues) != "[blob note]" || string(d.Values["small"]) != `"kept"` {
		t.Fatalf("run detail: status %s, omitted %v, small %s", d.Status, d.OmittedValues, d.Values["small"])
	}
	checkMarker("run values", d.Values["blob"], "/v1/runs/b1/checkpoints/1/values/blob")
	if fmt.Sprint(d.OmittedInput) != "[note]" {
		t.Fatalf("omitted input %v", d.OmittedInput)
	}
	var in map[string]json.RawMessage
	if err := json.Unmarshal(d.Input, &in); err != nil || string(in["size"]) != fmt.Sprint(size) {
		t.Fatalf("input %.200s", d.Input)
	}
	checkMarker("input", in["note"], "/v1/runs/b1/input/note")

	for _, step := range []string{"1", "latest"} {
		var cp api.Checkpoint
		get("/v1/runs/b1/checkpoints/"+step).ok(t, http.StatusOK, &cp)
		if fmt.Sprint(cp.OmittedValues) != "[blob note]" || cp.Step != 1 {
			t.Fatalf("checkpoint %s: omitted %v", step, cp.OmittedValues)
		}
		checkMarker("checkpoint "+step, cp.Values["blob"], "/v1/runs/b1/checkpoints/1/values/blob")
	}
	var list api.RunList
	get("/v1/runs").ok(t, http.StatusOK, &list)
	if len(list.Runs) != 1 || fmt.Sprint(list.Runs[0].OmittedInput) != "[note]" {
		t.Fatalf("list %+v", list.Runs)
	}

	// The input value, whole (1 MB fits one response).
	res := get("/v1/runs/b1/input/note")
	if res.status != http.StatusOK || string(res.body) != fmt.Sprintf("%q", note) {
		t.Fatalf("input/note: %d, %d bytes", res.status, len(res.body))
	}

	// The 7 MB value: too large for one response, so by parts.
	href := "/v1/runs/b1/checkpoints/1/values/blob"
	p := get(href).problem(t, http.StatusBadRequest, "Range: bytes=0-")
	if p.Type != "urn:superstep:problem:value-too-large" {
		t.Errorf("type %s", p.Type)
	}
	var got []byte
	for next := 0; ; {
		res := get(href, "Range", fmt.Sprintf("bytes=%d-", next))
		if res.status != http.StatusPartialContent {
			t.Fatalf("part from %d: status %d: %.300s", next, res.status, res.body)
		}
		var first, last, total int
		if _, err := fmt.Sscanf(res.header.Get("Content-Range"), "bytes %d-%d/%d", &first, &last, &total); err != nil || first != next || last-first+1 != len(res.body) {
			t.Fatalf("Content-Range %q for %d bytes", res.header.Get("Content-Range"), len(res.body))
		}
		got = append(got, res.body...)
		if next = last + 1; next >= total {
			break
		}
	}
	if string(got) != string(wantBlob) {
		t.Fatalf("joined parts: %d bytes, want the %d bytes of the value", len(got), len(wantBlob))
	}
	if res := get(href, "Range", "bytes=-10"); res.status != 206 || string(res.body) != string(wantBlob[len(wantBlob)-10:]) {
		t.Errorf("suffix range: %d %q", res.status, res.body)
	}
	for _, bad := range []string{"bytes=99999999-", "bytes=0-1,5-9", "items=0-1", "bytes=5-1"} {
		if res := get(href, "Range", bad); res.status != http.StatusRequestedRangeNotSatisfiable {
			t.Errorf("Range %s: %d", bad, res.status)
		}
	}
	get("/v1/runs/b1/checkpoints/1/values/nope").problem(t, http.StatusNotFound, `channel "nope" has no value at step 1`, "blob, note, size, small")
	get("/v1/runs/b1/checkpoints/9/values/blob").problem(t, http.StatusNotFound)
	get("/v1/runs/nope/checkpoints/1/values/blob").problem(t, http.StatusNotFound, `run "nope" does not exist`)
	// Small values are served whole.
	if res := get("/v1/runs/b1/checkpoints/latest/values/small"); res.status != 200 || string(res.body) != `"kept"` || res.header.Get("Content-Type") != "application/json" {
		t.Errorf("small: %d %s", res.status, res.body)
	}
}

// TestDeepStoredValue: a value nested deeper than the door allows (written
// by a node, or stored before the limit) is left out of responses with a
// marker, not answered with a 500.
func TestDeepStoredValue(t *testing.T) {
	b := pregel.NewGraph[struct {
		Tree json.RawMessage `json:"tree,omitempty"`
	}]("deep")
	b.AddFunc("nest", func(ctx context.Context, s struct {
		Tree json.RawMessage `json:"tree,omitempty"`
	}) (struct {
		Tree json.RawMessage `json:"tree,omitempty"`
	}, error) {
		s.Tree = json.RawMessage(deep(5000))
		return s, nil
	})
	b.AddEdge(pregel.Start, "nest").AddEdge("nest", pregel.End)
	g, err := b.Compile()
	if err != nil {
		t.Fatal(err)
	}
	reg, _ := runs.NewRegistry(g)
	cps := pregel.NewMemoryStore()
	svc := &runs.Service{Graphs: reg, Runs: runs.NewMemoryStore(), Checkpoints: cps, Dispatcher: &recordingDispatcher{}, Logger: testLogger(t)}
	e := startEnv(t, svc, cps)
	e.create("deep", api.CreateRunRequest{RunID: "d1"})
	e.finish("d1")
	var d api.RunDetail
	e.do("GET", "/v1/runs/d1", nil).ok(t, http.StatusOK, &d)
	if fmt.Sprint(d.OmittedValues) != "[tree]" || !strings.Contains(string(d.Values["tree"]), "nested deeper than 64 levels") {
		t.Fatalf("run detail: omitted %v, tree %.200s", d.OmittedValues, d.Values["tree"])
	}
	if res := e.do("GET", "/v1/runs/d1/checkpoints/latest/values/tree", nil); res.status != 200 || len(res.body) != 10000 {
		t.Fatalf("the value itself: %d, %d bytes", res.status, len(res.body))
	}
}

// TestLargeInterrupt: a large question is left out of the run with a
// marker and served whole from the interrupt's endpoint.
func TestLargeInterrupt(t *testing.T) {
	question := strings.Repeat("q", 1<<20)
	b := pregel.NewGraph[echoState]("bigask")
	b.AddFunc("ask", func(ctx context.Context, s echoState) (echoState, error) {
		name, err := pregel.Interrupt[string](ctx, map[string]string{"question": question})
		return echoState{Text: name}, err
	}, pregel.Writes("text"))
	b.AddEdge(pregel.Start, "ask").AddEdge("ask", pregel.End)
	g, err := b.Compile()
	if err != nil {
		t.Fatal(err)
	}
	reg, _ := runs.NewRegistry(g)
	cps := pregel.NewMemoryStore()
	svc := &runs.Service{Graphs: reg, Runs: runs.NewMemoryStore(), Checkpoints: cps, Dispatcher: &recordingDispatcher{}, Logger: testLogger(t)}
	e := startEnv(t, svc, cps)
	e.create("bigask", api.CreateRunRequest{RunID: "q1"})
	e.finish("q1")

	var d api.RunDetail
	e.do("GET", "/v1/runs/q1", nil).ok(t, http.StatusOK, &d)
	if d.Status != pregel.RunInterrupted || len(d.Interrupts) != 1 || fmt.Sprint(d.OmittedInterrupts) != "["+d.Interrupts[0].ID+"]" {
		t.Fatalf("run: %s, interrupts %d, omitted %v", d.Status, len(d.Interrupts), d.OmittedInterrupts)
	}
	in := d.Interrupts[0]
	var m api.Omitted
	if err := json.Unmarshal(in.Value, &m); err != nil || m.Omitted.Href != "/v1/runs/q1/interrupts/"+in.ID {
		t.Fatalf("marker %.200s", in.Value)
	}
	res := e.do("GET", m.Omitted.Href, nil)
	want, _ := json.Marshal(map[string]string{"question": question})
	if res.status != http.StatusOK || string(res.body) != string(want) {
		t.Fatalf("payload: %d, %d bytes", res.status, len(res.body))
	}
	e.do("GET", "/v1/runs/q1/interrupts/nope", nil).problem(t, http.StatusNotFound, "waits on "+in.ID)
}
