package runs_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

func TestServiceReject(t *testing.T) {
	reg, err := runs.NewRegistry(loopGraph(t, "loop", 5, nil))
	if err != nil {
		t.Fatal(err)
	}
	svc := &runs.Service{Graphs: reg, Runs: runs.NewMemoryStore(), Checkpoints: pregel.NewMemoryStore(), Dispatcher: &nopDispatcher{fail: true}}
	req := runs.CreateRequest{RunID: "r1", ContextID: "c1", Input: json.RawMessage(`{"count": "x"}`)}
	r, err := svc.Reject(t.Context(), "loop", req, "count must be a number")
	if err != nil {
		t.Fatalf("Reject: %v (it must not dispatch)", err)
	}
	if r.Status != pregel.RunFailed || !r.Rejected || r.Error != "count must be a number" || r.ContextID != "c1" || string(r.Input) != `{"count":"x"}` {
		t.Errorf("rejected run = %+v", r)
	}
	checkEvents(t, r, wantEvent{runs.EventCreated, pregel.RunPending, 0, ""}, wantEvent{runs.EventFailed, pregel.RunFailed, 0, "count must be a number"})
	got, err := svc.Get(t.Context(), "r1")
	if err != nil || !got.Rejected {
		t.Errorf("Get = %+v, %v; want the rejected run", got, err)
	}
	page, err := svc.List(t.Context(), runs.Filter{Graph: "loop", Status: pregel.RunFailed})
	if err != nil || len(page.Runs) != 1 || page.Runs[0].ID != "r1" {
		t.Errorf("List(failed) = %+v, %v; want the rejected run", page, err)
	}
	if _, err := svc.Cancel(t.Context(), "r1"); !errors.Is(err, runs.ErrInvalidState) {
		t.Errorf("Cancel = %v, want ErrInvalidState", err)
	}
	if _, err := svc.Resume(t.Context(), "r1", runs.ResumeRequest{Value: json.RawMessage(`1`)}); !errors.Is(err, runs.ErrInvalidState) {
		t.Errorf("Resume = %v, want ErrInvalidState", err)
	}
	if again, err := svc.Reject(t.Context(), "loop", req, "count must be a number"); err != nil || again.Version != r.Version {
		t.Errorf("Reject again = %+v, %v; want the stored run", again, err)
	}
	if _, err := svc.Reject(t.Context(), "loop", runs.CreateRequest{RunID: "r1", Input: json.RawMessage(`{}`)}, "no"); !errors.Is(err, runs.ErrConflict) {
		t.Errorf("Reject with other input = %v, want ErrConflict", err)
	}
	if _, err := svc.Reject(t.Context(), "nope", runs.CreateRequest{}, "no"); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("Reject for unknown graph = %v, want ErrNotFound", err)
	}
}

func TestServiceMessages(t *testing.T) {
	reg, err := runs.NewRegistry(loopGraph(t, "loop", 5, nil))
	if err != nil {
		t.Fatal(err)
	}
	svc := &runs.Service{Graphs: reg, Runs: runs.NewMemoryStore(), Checkpoints: pregel.NewMemoryStore(), Dispatcher: &nopDispatcher{}}
	r, _, err := svc.Create(t.Context(), "loop", runs.CreateRequest{Input: json.RawMessage(`{"count":0}`), Message: json.RawMessage(`{"m":0}`)})
	if err != nil {
		t.Fatal(err)
	}
	big := json.RawMessage(`"` + strings.Repeat("x", runs.MaxMessageBytes) + `"`)
	for i := 1; i <= runs.MaxMessages+5; i++ {
		if _, err := runs.Mutate(t.Context(), svc.Runs, r.ID, func(r *runs.Run) error { r.Status = pregel.RunDrained; return nil }); err != nil {
			t.Fatal(err)
		}
		msg := json.RawMessage(fmt.Sprintf(`{"m":%d}`, i))
		if i == runs.MaxMessages+5 {
			msg = big
		}
		if _, err := svc.Resume(t.Context(), r.ID, runs.ResumeRequest{Message: msg}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := svc.Get(t.Context(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Messages) != runs.MaxMessages || string(got.Messages[0]) != `{"m":0}` || string(got.Messages[1]) != `{"m":7}` {
		t.Fatalf("messages: %d, first %s, second %s; want %d, the first kept and the newest", len(got.Messages), got.Messages[0], got.Messages[1], runs.MaxMessages)
	}
	if last := string(got.Messages[len(got.Messages)-1]); !strings.Contains(last, `"omitted"`) {
		t.Errorf("a message over MaxMessageBytes is kept as %.80s", last)
	}
	if got.Resume != nil && got.Resume.Message != nil {
		t.Error("the resume request's message is stored twice")
	}
}
