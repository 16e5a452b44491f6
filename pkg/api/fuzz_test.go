package api

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// FuzzLastEventID: whatever a client sends as Last-Event-ID (or
// last_event_id), the stream either resumes after a non-negative event id
// that is the number sent, or refuses with a problem naming the header or
// parameter; it never panics. `go test` runs the seeds; longer:
// make fuzz FUZZ=FuzzLastEventID PKG=./pkg/api
func FuzzLastEventID(f *testing.F) {
	for _, s := range []string{"", "0", "42", " 7 ", "-1", "+3", "1e3", "9223372036854775807", "9223372036854775808", "abc", "\x00", "\xed\xbf\xbf"} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, v string, header bool) {
		r := &http.Request{Header: http.Header{}, URL: &url.URL{Path: "/v1/runs/r/stream"}}
		if header {
			r.Header.Set("Last-Event-ID", v)
		} else {
			r.URL.RawQuery = url.Values{"last_event_id": {v}}.Encode()
		}
		n, err := lastEventID(r)
		sent := v
		if header {
			sent = r.Header.Get("Last-Event-ID")
		}
		switch {
		case err != nil:
			if n != 0 {
				t.Fatalf("lastEventID(%q) = %d with error %v", v, n, err)
			}
			if msg := err.Error(); !strings.Contains(msg, "Last-Event-ID") && !strings.Contains(msg, "last_event_id") {
				t.Fatalf("lastEventID(%q): error %q names neither the header nor the parameter", v, msg)
			}
		case sent == "":
			if n != 0 {
				t.Fatalf("lastEventID of nothing = %d, want 0", n)
			}
		default:
			want, perr := strconv.ParseInt(strings.TrimSpace(sent), 10, 64)
			if perr != nil || n != want || n < 0 {
				t.Fatalf("lastEventID(%q) = %d, want the number sent (%d, %v)", v, n, want, perr)
			}
		}
	})
}
