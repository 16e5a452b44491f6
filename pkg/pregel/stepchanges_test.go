package pregel

import (
	"context"
	"encoding/json"
	"testing"
)

func TestAppendedTail(t *testing.T) {
	tests := []struct {
		name, old, next string
		want            string // "" when not an append
	}{
		{"append one", `[1,2]`, `[1,2,3]`, `[3]`},
		{"append several", `[{"a":1}]`, `[{"a":1},{"b":[2,3]},"x"]`, `[{"b":[2,3]},"x"]`},
		{"to an empty array", `[]`, `[1]`, `[1]`},
		{"white space", ` [ 1 ] `, `[ 1 , 2 ]`, `[ 2]`},
		{"nothing appended", `[1,2]`, `[1,2]`, ``},
		{"last element grown", `[1,2]`, `[1,23]`, ``},
		{"string grown", `["a"]`, `["ab"]`, ``},
		{"first replaced", `[1,2]`, `[9,2,3]`, ``},
		{"removed", `[1,2]`, `[1]`, ``},
		{"no old value", ``, `[1]`, ``},
		{"not arrays", `{"a":1}`, `{"a":1,"b":2}`, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var old json.RawMessage
			if tt.old != "" {
				old = json.RawMessage(tt.old)
			}
			got, ok := appendedTail(old, json.RawMessage(tt.next))
			if ok != (tt.want != "") || string(got) != tt.want {
				t.Fatalf("appendedTail(%s, %s) = %s, %v; want %q", tt.old, tt.next, got, ok, tt.want)
			}
			if ok {
				var v []any
				if err := json.Unmarshal(got, &v); err != nil {
					t.Fatalf("tail %s is not a JSON array: %v", got, err)
				}
			}
		})
	}
}

// TestStateUpdatedAppendsOnly checks that the state_updated event of a
// step that appends to an append channel carries only what it appended,
// and the other changed channels whole, so that a conversation's events
// do not copy it again at every turn.
func TestStateUpdatedAppendsOnly(t *testing.T) {
	type state struct {
		Log   []string `json:"log" reduce:"append"`
		Count int      `json:"count"`
	}
	b := NewGraph[state]("appends")
	b.AddFunc("step", func(_ context.Context, s state) (state, error) {
		return state{Log: []string{"entry"}, Count: s.Count + 1}, nil
	})
	b.AddEdge(Start, "step")
	b.AddConditionalEdges("step", func(_ context.Context, s state) ([]string, error) {
		if s.Count < 3 {
			return []string{"step"}, nil
		}
		return []string{End}, nil
	}, "step", End)
	g, err := b.Compile()
	if err != nil {
		t.Fatal(err)
	}
	var got []Event
	if _, err := g.Run(t.Context(), state{}, WithObserver(func(ev Event) {
		if ev.Type == EventStateUpdated {
			got = append(got, ev)
		}
	})); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("%d state_updated events, want 3", len(got))
	}
	for i, ev := range got {
		if i == 0 {
			// The log was null before: its first value is given whole.
			if string(ev.Values["log"]) != `["entry"]` {
				t.Errorf("step 1: log %s, want [\"entry\"]", ev.Values["log"])
			}
			continue
		}
		if string(ev.Appended["log"]) != `["entry"]` {
			t.Errorf("step %d: appended log %s, want [\"entry\"] (only what the step appended)", ev.Step, ev.Appended["log"])
		}
		if _, ok := ev.Values["log"]; ok {
			t.Errorf("step %d: the whole log is in values too", ev.Step)
		}
		if want := json.RawMessage(string(rune('1' + i))); string(ev.Values["count"]) != string(want) {
			t.Errorf("step %d: count %s, want %s", ev.Step, ev.Values["count"], want)
		}
	}
}
