package runs

import (
	"errors"
	"testing"
)

// FuzzPageToken: a page token from a client either decodes to a key
// that encodes back to a token decoding to the same key, or is refused
// with ErrInvalid (a 400 saying to start the listing again); a token the
// server issued always decodes to its key. `go test` runs the seeds;
// longer: make fuzz FUZZ=FuzzPageToken PKG=./pkg/runs
func FuzzPageToken(f *testing.F) {
	f.Add("", int64(0), "r1")
	f.Add("MTcwMHxyMQ", int64(1700), "run|with|bars")
	f.Add("x", int64(-1), "")
	f.Add("MTcwMHw", int64(1<<62), "é")
	f.Fuzz(func(t *testing.T, tok string, created int64, id string) {
		if k, err := decodePageToken(tok); err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("decodePageToken(%q): %v, want ErrInvalid", tok, err)
			}
		} else if k2, err := decodePageToken(encodePageToken(k)); err != nil || k2 != k {
			t.Fatalf("token %q: key %+v re-encodes to %+v, %v", tok, k, k2, err)
		}
		if id == "" {
			return
		}
		k := listKey{created, id}
		if got, err := decodePageToken(encodePageToken(k)); err != nil || got != k {
			t.Fatalf("issued token of %+v decodes to %+v, %v", k, got, err)
		}
	})
}
