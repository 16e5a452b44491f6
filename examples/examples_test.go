package examples

import (
	"context"
	"slices"
	"testing"

	"github.com/superstep/superstep/examples/assistant"
	"github.com/superstep/superstep/examples/loop"
	"github.com/superstep/superstep/examples/triage"
	"github.com/superstep/superstep/pkg/pregel"
)

func TestAll(t *testing.T) {
	graphs, err := All()
	if err != nil {
		t.Fatalf("All: %v", err)
	}
	var names []string
	for _, g := range graphs {
		names = append(names, g.Name())
		if g.Description() == "" {
			t.Errorf("graph %q has no description", g.Name())
		}
	}
	if want := []string{triage.Name, loop.Name, assistant.Name}; !slices.Equal(names, want) {
		t.Errorf("names = %v, want %v", names, want)
	}
}

// Every example runs from the JSON a client would send.
func TestRunFromJSON(t *testing.T) {
	inputs := map[string]string{
		triage.Name:    `{"ticket": {"id": "T-1", "from": "ana@example.com", "body": "I was charged twice"}}`,
		loop.Name:      `{"limit": 3}`,
		assistant.Name: `{"messages": [{"role": "user", "content": [{"text": "refund A-1001"}]}]}`,
	}
	graphs, err := All()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range graphs {
		in, ok := inputs[g.Name()]
		if !ok {
			t.Errorf("no sample input for graph %q; add one to this test", g.Name())
			continue
		}
		res, err := g.Run(context.Background(), []byte(in))
		if err != nil || (res.Status != pregel.RunCompleted && res.Status != pregel.RunInterrupted) {
			t.Errorf("%s: Run = %+v, %v", g.Name(), res, err)
		}
	}
}
