package agent

import (
	"encoding/json"
	"reflect"
	"testing"
)

func ids(ms []Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID + ":" + m.Text()
	}
	return out
}

func TestAddMessages(t *testing.T) {
	a, b, c := Message{ID: "a", Role: RoleUser, Content: []Block{{Text: "A"}}}, Message{ID: "b", Role: RoleAssistant, Content: []Block{{Text: "B"}}}, Message{ID: "c", Role: RoleUser, Content: []Block{{Text: "C"}}}
	b2 := Message{ID: "b", Role: RoleAssistant, Content: []Block{{Text: "B2"}}}
	anon := UserText("x")
	tests := []struct {
		name        string
		cur, update []Message
		want        []string
	}{
		{"append to empty", nil, []Message{a, b}, []string{"a:A", "b:B"}},
		{"append", []Message{a}, []Message{b, c}, []string{"a:A", "b:B", "c:C"}},
		{"no update keeps cur", []Message{a}, nil, []string{"a:A"}},
		{"same id replaces in place", []Message{a, b, c}, []Message{b2}, []string{"a:A", "b:B2", "c:C"}},
		{"messages without id append", []Message{anon}, []Message{anon}, []string{":x", ":x"}},
		{"removal deletes one", []Message{a, b, c}, []Message{RemoveMessage("b")}, []string{"a:A", "c:C"}},
		{"removal of unknown id is dropped", []Message{a}, []Message{RemoveMessage("zz")}, []string{"a:A"}},
		{"remove then add again", []Message{a, b}, []Message{RemoveMessage("a"), a}, []string{"b:B", "a:A"}},
		{"update replaces a message added by the same update", nil, []Message{b, b2}, []string{"b:B2"}},
		{"update with new ids appends", []Message{a}, []Message{b, anon, c}, []string{"a:A", "b:B", ":x", "c:C"}},
		{"append to an empty list", []Message{}, []Message{b}, []string{"b:B"}},
		{"replace in an update that also appends", []Message{a, b}, []Message{c, b2}, []string{"a:A", "b:B2", "c:C"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := ids(tt.cur)
			got := AddMessages(tt.cur, tt.update)
			if !reflect.DeepEqual(ids(got), tt.want) {
				t.Fatalf("got %v, want %v", ids(got), tt.want)
			}
			if !reflect.DeepEqual(ids(tt.cur), before) {
				t.Fatalf("cur was modified: %v, was %v", ids(tt.cur), before)
			}
			// The JSON reducer agrees, fast path or not.
			var cur json.RawMessage
			if tt.cur != nil {
				cur, _ = json.Marshal(tt.cur)
			}
			upd, _ := json.Marshal(tt.update)
			raw, err := MessagesReducer()(cur, upd)
			if err != nil {
				t.Fatal(err)
			}
			var viaJSON []Message
			if len(raw) > 0 {
				if err := json.Unmarshal(raw, &viaJSON); err != nil {
					t.Fatalf("reducer output %s: %v", raw, err)
				}
			}
			if !reflect.DeepEqual(ids(viaJSON), tt.want) {
				t.Fatalf("JSON reducer: got %v, want %v", ids(viaJSON), tt.want)
			}
		})
	}
}

func TestMessagesReducerJSON(t *testing.T) {
	r := MessagesReducer()
	cur, err := r(nil, json.RawMessage(`[{"id":"1","role":"user","content":[{"text":"hi"}]}]`))
	if err != nil {
		t.Fatal(err)
	}
	cur, err = r(cur, json.RawMessage(`[{"id":"2","role":"assistant","content":[{"tool_call":{"id":"t1","name":"f","input":{"x":1}}}]},{"id":"1","remove":true}]`))
	if err != nil {
		t.Fatal(err)
	}
	var got []Message
	if err := json.Unmarshal(cur, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != "2" || got[0].ToolCalls()[0].Name != "f" || string(got[0].ToolCalls()[0].Input) != `{"x":1}` {
		t.Fatalf("got %s", cur)
	}
	if _, err := r(cur, json.RawMessage(`{"not":"a list"}`)); err == nil {
		t.Fatal("an update that is not a list of messages was accepted")
	}
}

func TestAddUsage(t *testing.T) {
	u := AddUsage(UsageTotals{}, NodeUsage("model", Usage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15}))
	u = AddUsage(u, NodeUsage("model", Usage{InputTokens: 20, OutputTokens: 1, TotalTokens: 21}))
	u = AddUsage(u, NodeUsage("critic", Usage{InputTokens: 1, TotalTokens: 1}))
	want := UsageTotals{Total: Usage{InputTokens: 31, OutputTokens: 6, TotalTokens: 37}, ByNode: map[string]Usage{
		"model":  {InputTokens: 30, OutputTokens: 6, TotalTokens: 36},
		"critic": {InputTokens: 1, TotalTokens: 1},
	}}
	if !reflect.DeepEqual(u, want) {
		t.Fatalf("got %+v, want %+v", u, want)
	}
}

func TestTextInput(t *testing.T) {
	var st struct {
		Messages []Message `json:"messages"`
	}
	if err := json.Unmarshal(TextInput(`say "hi"`), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Messages) != 1 || st.Messages[0].Role != RoleUser || st.Messages[0].Text() != `say "hi"` {
		t.Fatalf("got %+v", st.Messages)
	}
}
