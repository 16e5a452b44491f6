package inspector_test

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// checkLongRunPages (part of TestInspectorInBrowser, whose browser it
// shares): the run page of a long run shows the newest 100 steps the
// run's view lists, says how many older ones are not loaded, and loads
// them a page at a time from /checkpoints, until step 0; an older step
// loaded can be shown like any other.
func checkLongRunPages(t *testing.T, b *browser, srv *httptest.Server, svc *runs.Service) {
	const limit = 250 // steps 0 to 250
	if _, _, err := svc.Create(t.Context(), "counter", runs.CreateRequest{RunID: "long", Input: json.RawMessage(fmt.Sprintf(`{"limit": %d}`, limit))}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := svc.Get(t.Context(), "long")
		if err != nil {
			t.Fatal(err)
		}
		if r.Status == pregel.RunCompleted && r.Step == limit {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the counter run is %s at step %d after 30 s; want completed at step %d", r.Status, r.Step, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}

	b.run("open the long run", chromedp.Navigate(srv.URL+"/#/runs/long"),
		chromedp.WaitVisible(chromedp.CSS(`#run-status [data-status="completed"]`)),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#timeline tr[data-step="%d"]`, limit))))
	rows := func() (first, n int) {
		got := read(b, "read the timeline", chromedp.Evaluate[[]int](`[...document.querySelectorAll('#timeline tr[data-step]')].map((tr) => Number(tr.dataset.step))`))
		for i := 1; i < len(got); i++ {
			if got[i] != got[i-1]+1 {
				t.Fatalf("the timeline's steps are not consecutive: %v", got)
			}
		}
		if len(got) == 0 || got[len(got)-1] != limit {
			t.Fatalf("the timeline's steps %v do not end at step %d", got, limit)
		}
		return got[0], len(got)
	}
	if first, n := rows(); first != limit-99 || n != 100 {
		t.Errorf("the timeline shows %d steps from %d; want the newest 100, from %d", n, first, limit-99)
	}
	b.waitText(`#older-steps`, "151 older steps of 251 not loaded")

	b.run("load older steps", chromedp.Click(chromedp.CSS(`#load-older`)),
		chromedp.WaitVisible(chromedp.CSS(`#timeline tr[data-step="51"]`)))
	if first, n := rows(); first != 51 || n != 200 {
		t.Errorf("after one load the timeline shows %d steps from %d; want 200 from 51", n, first)
	}
	b.waitText(`#older-steps`, "51 older steps of 251 not loaded")
	b.run("load the oldest steps", chromedp.Click(chromedp.CSS(`#load-older`)),
		chromedp.WaitVisible(chromedp.CSS(`#timeline tr[data-step="0"]`)))
	if first, n := rows(); first != 0 || n != limit+1 {
		t.Errorf("after two loads the timeline shows %d steps from %d; want all %d from 0", n, first, limit+1)
	}
	if left := read(b, "look for the older-steps note", chromedp.Evaluate[int](`document.querySelectorAll('#older-steps').length`)); left != 0 {
		t.Errorf("every step is loaded, yet the page still offers older ones")
	}
	// An older step shows like a recent one: the graph and the state at it.
	b.showStep(3)
	b.checkNodes(3, map[string]string{"count": "completed"})
	state := read(b, "read the state", chromedp.Text(chromedp.CSS(`#state-json`)))
	if want := `"count": 3`; !strings.Contains(state, want) {
		t.Errorf("the state after step 3 lacks %s: %s", want, state)
	}
	b.clean("long run")
}
