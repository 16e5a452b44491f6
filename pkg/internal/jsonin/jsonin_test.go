package jsonin_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/superstep/superstep/pkg/internal/jsonin"
)

func nested(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // substring of the error; "" accepts
	}{
		{"object", `{"input":{"a":[1,2,{"b":null}]},"run_id":"r1"}`, ""},
		{"scalar", `"x"`, ""},
		{"empty", ``, ""},
		{"same key in sibling objects", `{"a":{"k":1},"b":{"k":2}}`, ""},
		{"same key at different depths", `{"k":{"k":1}}`, ""},
		{"syntax error left to the decoder", `{"a":`, ""},
		{"depth at the limit", `{"a":` + nested(jsonin.MaxDepth-1) + `}`, ""},
		{"depth over the limit", `{"a":` + nested(jsonin.MaxDepth) + `}`, "more than 64 levels deep; flatten it at $.a" + strings.Repeat("[0]", jsonin.MaxDepth-2)},
		{"10000 levels", nested(10000), "more than 64 levels deep"},
		{"duplicate key", `{"input":{"a":1},"input":{"a":2}}`, `key "input" is repeated; send each key once at $`},
		{"case variant", `{"method":"GetTask","Method":"SendMessage"}`, `key "Method" repeats key "method" in another case`},
		{"nested duplicate", `{"params":{"parts":[{},{"text":"a","text":"b"}]}}`, `key "text" is repeated; send each key once at $.params.parts[1]`},
		{"odd key path", `{"a b":{"x":1,"X":2}}`, `at $["a b"]`},
		{"unicode case variant", `{"straße":1,"STRASSE":2,"ǅ":1,"ǆ":2}`, `key "ǆ" repeats key "ǅ"`},
		{"invalid utf-8 in a string", "{\"a\":\"\xff\"}", "not valid UTF-8 (byte offset 6)"},
		{"invalid utf-8 in a key", "{\"\xc3\":1}", "not valid UTF-8"},
		{"lone low surrogate", `{"a":"\udfff"}`, `surrogate with no partner (\udfff at byte offset 6)`},
		{"lone high surrogate at the end", `{"a":"x\uD83D"}`, `(\uD83D at byte offset 7)`},
		{"high surrogate then a letter", `{"a":"\ud83dx"}`, `surrogate with no partner`},
		{"two high surrogates", `["\ud83d\ud83d\ude00"]`, `byte offset 2`},
		{"lone surrogate in a key", `{"\udc00":1}`, `surrogate with no partner`},
		{"surrogate pair", `{"a":"\ud83d\ude00","b":"\u00e9\\udfff"}`, ""},
		{"escaped backslash before u", `["\\udfff","\"\\"]`, ""},
		{"surrogate-like text outside strings is left to the decoder", `[1]`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := jsonin.Check([]byte(tt.in))
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Check = %v, want nil", err)
			case tt.want != "" && err == nil:
				t.Fatalf("Check = nil, want an error with %q", tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Fatalf("Check = %q, want it to contain %q", err, tt.want)
			}
			if err != nil {
				if _, ok := errors.AsType[*jsonin.Error](err); !ok {
					t.Fatalf("Check error is %T, want *jsonin.Error", err)
				}
			}
		})
	}
}

func TestDepth(t *testing.T) {
	tests := []struct {
		in          string
		limit, want int
	}{
		{`1`, 0, 0},
		{`{"a":"[[[[{{"}`, 0, 1},
		{`{"a":"\"[["}`, 0, 1},
		{`[[],[[1]]]`, 0, 3},
		{nested(500), 10, 11},
		{nested(500), 0, 500},
	}
	for _, tt := range tests {
		if got := jsonin.Depth([]byte(tt.in), tt.limit); got != tt.want {
			t.Errorf("Depth(%.20q, %d) = %d, want %d", tt.in, tt.limit, got, tt.want)
		}
	}
}

func TestExplain(t *testing.T) {
	type ticket struct {
		ID    string `json:"id"`
		Count uint   `json:"count"`
		Tags  []string
	}
	for _, tc := range []struct{ in, want string }{
		{`"x"`, `the value must be an object, not a string`},
		{`{"id":5}`, `field "id" must be a string, not a number`},
		{`{"count":-1}`, `field "count" must be a whole number of 0 or more, not -1`},
		{`{"Tags":{}}`, `field "Tags" must be an array, not an object`},
	} {
		var v ticket
		err := json.Unmarshal([]byte(tc.in), &v)
		got := jsonin.Explain(fmt.Errorf("invalid input: channel %q: %w", "ticket", err))
		if want := `invalid input: channel "ticket": ` + tc.want; got != want {
			t.Errorf("Explain(%s) = %q, want %q", tc.in, got, want)
		}
		if strings.Contains(got, "Go ") || strings.Contains(got, "jsonin_test") {
			t.Errorf("Explain(%s) = %q names Go types", tc.in, got)
		}
	}
	if got := jsonin.Explain(errors.New("plain")); got != "plain" {
		t.Errorf("Explain(plain) = %q", got)
	}
}

func TestExplainFlattened(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`invalid input: decode channel "text": json: cannot unmarshal number into Go value of type string: invalid request`, `invalid input: decode channel "text": the value must be a string, not a number: invalid request`},
		{`decode channel "ticket": json: cannot unmarshal string into Go value of type triage.Ticket`, `decode channel "ticket": the value cannot be a string`},
		{`invalid params: cannot unmarshal number into Go struct field GetTaskRequest.id of type a2a.TaskID`, `invalid params: field "id" cannot be a number`},
		{`cannot unmarshal number -1 into Go struct field T.a.b of type uint`, `field "a.b" must be a whole number of 0 or more, not -1`},
	} {
		if got := jsonin.Explain(errors.New(tc.in)); got != tc.want {
			t.Errorf("Explain(%q)\n = %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

// BenchmarkCheck measures the check on a request body of about 1 MiB of
// ordinary JSON (objects, arrays, strings, numbers).
func BenchmarkCheck(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"input":{"items":[`)
	for i := 0; sb.Len() < 1<<20; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"id":%d,"name":"item %d","tags":["a","b"],"ok":true}`, i, i)
	}
	sb.WriteString(`]}}`)
	body := []byte(sb.String())
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := jsonin.Check(body); err != nil {
			b.Fatal(err)
		}
	}
}
