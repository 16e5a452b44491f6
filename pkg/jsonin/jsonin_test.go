package jsonin_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/superstep/superstep/pkg/jsonin"
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
