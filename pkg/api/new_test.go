package api_test

import (
	"context"
	"strings"
	"testing"

	"github.com/superstep/superstep/pkg/api"
	"github.com/superstep/superstep/pkg/pregel"
	"github.com/superstep/superstep/pkg/runs"
)

// emptyLog is an event source with no events.
type emptyLog struct{}

func (emptyLog) EventsSince(context.Context, string, int64, int) (runs.EventPage, error) {
	return runs.EventPage{}, nil
}

// eventDispatcher is a dispatcher that is also an event source (as the
// Scheduler is).
type eventDispatcher struct {
	recordingDispatcher
	runs.EventReader
}

// TestNewReportsWhatIsMissing: a misconfigured handler fails in New with
// an error naming each missing part, instead of answering 501 or 500 on
// some later request.
func TestNewReportsWhatIsMissing(t *testing.T) {
	reg, err := runs.NewRegistry(echoGraph(t))
	if err != nil {
		t.Fatal(err)
	}
	mem := runs.NewMemoryStore()
	cps := pregel.NewMemoryStore()
	// Stores that cannot delete runs (DeleteRun hidden).
	noDeleteRuns := struct{ runs.Store }{mem}
	noDeleteCheckpoints := struct{ pregel.Checkpointer }{cps}
	streaming := &eventDispatcher{EventReader: emptyLog{}}
	svc := func(edit func(*runs.Service)) *runs.Service {
		s := &runs.Service{Graphs: reg, Runs: mem, Checkpoints: cps, Dispatcher: streaming}
		if edit != nil {
			edit(s)
		}
		return s
	}
	for _, tc := range []struct {
		name string
		cfg  api.Config
		want []string // each in the error; none: New succeeds
	}{
		{"complete", api.Config{Service: svc(nil)}, nil},
		{"no service", api.Config{}, []string{"Config.Service is nil"}},
		{"service without parts", api.Config{Service: &runs.Service{}},
			[]string{"Service.Graphs is nil", "Service.Runs is nil", "Service.Checkpoints is nil", "Service.Dispatcher is nil"}},
		{"streams without an event source", api.Config{Service: svc(func(s *runs.Service) { s.Dispatcher = &recordingDispatcher{} })},
			[]string{"streams need an event source", "Config.Events", "Config.NoStreams"}},
		{"event source given", api.Config{Service: svc(func(s *runs.Service) { s.Dispatcher = &recordingDispatcher{} }), Events: emptyLog{}}, nil},
		{"no streams on purpose", api.Config{Service: svc(func(s *runs.Service) { s.Dispatcher = &recordingDispatcher{} }), NoStreams: true}, nil},
		{"threads", api.Config{Service: svc(func(s *runs.Service) { s.Threads = mem })}, nil},
		{"threads, runs store cannot delete", api.Config{Service: svc(func(s *runs.Service) { s.Threads, s.Runs = mem, noDeleteRuns })},
			[]string{"Threads is set but Runs", "DeleteRun"}},
		{"threads, checkpointer cannot delete", api.Config{Service: svc(func(s *runs.Service) { s.Threads, s.Checkpoints = mem, noDeleteCheckpoints })},
			[]string{"Threads is set but Checkpoints", "DeleteRun"}},
		{"everything at once", api.Config{Service: svc(func(s *runs.Service) {
			s.Threads, s.Checkpoints, s.Dispatcher = mem, noDeleteCheckpoints, &recordingDispatcher{}
		})}, []string{"Threads is set but Checkpoints", "streams need an event source"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := api.New(tc.cfg)
			if len(tc.want) == 0 {
				if err != nil || h == nil {
					t.Fatalf("New: %v; want a handler", err)
				}
				return
			}
			if err == nil || h != nil {
				t.Fatalf("New returned %v, %v; want an error naming %q", h, err, tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("New: %v; want it to say %q", err, w)
				}
			}
		})
	}
}

// TestNoStreamsIgnoresTheDispatcher: NoStreams serves no streams even with
// a dispatcher that could.
func TestNoStreamsIgnoresTheDispatcher(t *testing.T) {
	e := newEnv(t, func(c *api.Config) {
		c.NoStreams = true
		c.Service.Dispatcher = &eventDispatcher{EventReader: emptyLog{}}
	})
	e.do("POST", "/v1/graphs/echo/runs", `{"run_id": "n1"}`)
	if resp := e.do("GET", "/v1/runs/n1/stream", nil); resp.status != 501 {
		t.Errorf("stream with NoStreams: %d %s; want 501", resp.status, resp.body)
	}
}
