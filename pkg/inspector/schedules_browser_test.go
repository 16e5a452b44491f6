package inspector_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// checkSchedulesPage creates a schedule in the browser (its token given
// already), sees its firing's run linked as the last firing, is refused
// bad expressions with the API's text, and pauses, resumes and deletes
// it: each change checked through the API. TestInspectorInBrowser runs
// it, on its browser.
func checkSchedulesPage(t *testing.T, b *browser, srv *httptest.Server) {
	type sched struct {
		Paused    bool   `json:"paused"`
		LastRunID string `json:"last_run_id"`
	}
	get := func(name string) (int, sched) {
		code, body := storeAPI(t, srv, "GET", "/v1/schedules/"+name, "")
		var sc sched
		if code == http.StatusOK {
			if err := json.Unmarshal([]byte(body), &sc); err != nil {
				t.Fatalf("GET schedule %s: %v in %s", name, err, body)
			}
		}
		return code, sc
	}
	row := `#schedules tr[data-schedule="tick"]`

	b.run("open the schedules", chromedp.Navigate(srv.URL+"/#/schedules"), chromedp.WaitVisible(chromedp.CSS(`#no-schedules`)))
	b.clean("schedules")

	// Refused with the API's text; nothing created.
	b.run("create with a bad cron", setValue(`#sched-name`, `bad`), setValue(`#sched-graph`, `counter`),
		setValue(`#sched-expr`, `0 25 * * *`), chromedp.Click(chromedp.CSS(`#create-schedule`)))
	b.expectError("not a valid cron expression")
	b.run("create with a bad zone", setValue(`#sched-expr`, `0 9 * * *`), setValue(`#sched-tz`, `Europe/Pariss`), chromedp.Click(chromedp.CSS(`#create-schedule`)))
	b.expectError("not an IANA time zone name")
	if code, _ := get("bad"); code != http.StatusNotFound {
		t.Errorf("a refused schedule exists: GET answers %d", code)
	}

	// A new rate fires at once; its run is the last firing, linked.
	b.run("create tick", setValue(`#sched-name`, `tick`), setValue(`#sched-expr`, `rate(1 hours)`), setValue(`#sched-tz`, `Europe/Paris`),
		setValue(`#sched-input`, `{"limit": 2}`), chromedp.Click(chromedp.CSS(`#create-schedule`)), chromedp.WaitVisible(chromedp.CSS(row)))
	var last string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, sc := get("tick"); sc.LastRunID != "" {
			last = sc.LastRunID
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the new rate schedule did not fire within 10 s (no last_run_id)")
		}
	}
	b.run("see the last firing", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(row+` a.last-run`)))
	if got := read(b, "read the last run", chromedp.Text(chromedp.CSS(row+` a.last-run`))); got != last {
		t.Errorf("the page links the last run %q, want %q", got, last)
	}
	if next := read(b, "read the next firing", chromedp.Text(chromedp.CSS(row+` td.next`))); next == "" {
		t.Error("an active schedule shows no next firing")
	}
	b.shot("18-schedules")
	b.run("open the last run", chromedp.Click(chromedp.CSS(row+` a.last-run`)),
		chromedp.WaitVisible(`//span[@id="run-id"][. = "`+last+`"]`))
	b.clean("last run")

	// Pause, resume, delete.
	b.run("pause tick", chromedp.Navigate(srv.URL+"/#/schedules"), chromedp.Click(chromedp.CSS(row+` button.pause-schedule`)),
		chromedp.WaitVisible(chromedp.CSS(`#schedules tr[data-schedule="tick"][data-paused="true"]`)))
	if _, sc := get("tick"); !sc.Paused {
		t.Error("after Pause the API says tick is not paused")
	}
	b.run("resume tick", chromedp.Click(chromedp.CSS(row+` button.resume-schedule`)),
		chromedp.WaitVisible(chromedp.CSS(`#schedules tr[data-schedule="tick"][data-paused="false"]`)))
	if _, sc := get("tick"); sc.Paused {
		t.Error("after Resume the API says tick is paused")
	}
	b.run("delete tick", chromedp.Click(chromedp.CSS(row+` button.delete-schedule`)), chromedp.WaitVisible(chromedp.CSS(`#no-schedules`)))
	if code, _ := get("tick"); code != http.StatusNotFound {
		t.Errorf("after Delete GET answers %d, want 404", code)
	}
	b.clean("schedules done")
}
