package jsonin_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/superstep/superstep/pkg/internal/jsonin"
)

// FuzzCheck: Check never panics on a request body; it refuses invalid
// UTF-8 and nesting past MaxDepth with a *jsonin.Error, and what it
// accepts that is valid JSON decodes. `go test` runs the seeds; longer:
// make fuzz FUZZ=FuzzCheck PKG=./pkg/internal/jsonin
func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"a":1,"b":[1,2,{"c":null}]}`, `{"id":1,"ID":2}`, `{"a":{"a":1},"a":2}`,
		`"\udfff"`, "{\"a\":\"\xff\"}", `[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`,
		`{"a":`, ``, `nul`, `1e999999`, `{"\u0041":1,"A":2}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := jsonin.Check(data)
		if !utf8.Valid(data) {
			var je *jsonin.Error
			if !errors.As(err, &je) {
				t.Fatalf("Check(%q) = %v, want a *jsonin.Error for invalid UTF-8", data, err)
			}
		}
		if err != nil {
			if jsonin.Explain(err) == "" {
				t.Fatalf("Explain(%v) is empty", err)
			}
			return
		}
		if json.Valid(data) {
			// Numbers as json.Number: a huge one (1e999999) is valid
			// JSON that only a float64 cannot hold.
			dec := json.NewDecoder(bytes.NewReader(data))
			dec.UseNumber()
			var v any
			if err := dec.Decode(&v); err != nil {
				t.Fatalf("Check accepted %q, which does not decode: %v", data, err)
			}
			if d := jsonin.Depth(data, jsonin.MaxDepth+1); d > jsonin.MaxDepth {
				t.Fatalf("Check accepted %q, nested %d deep (MaxDepth %d)", data, d, jsonin.MaxDepth)
			}
		}
	})
}
