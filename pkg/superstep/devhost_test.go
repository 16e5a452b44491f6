//go:build !superstep.lambda

package superstep

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestDevCardHostCheck: without a token, dev answers only requests
// addressed to this machine, and the agent cards (served before the
// API's routes, so that clients read them without a token) are no
// exception: a card never puts a Host an attacker chose in its url.
func TestDevCardHostCheck(t *testing.T) {
	base := startDev(t, "--token", "")
	for _, tt := range []struct {
		host string
		want int
	}{
		{"evil.example", http.StatusForbidden},
		{"evil.example:80", http.StatusForbidden},
		{"", http.StatusOK}, // the listener's address
		{"localhost", http.StatusOK},
	} {
		req, err := http.NewRequest(http.MethodGet, base+"/a2a/assistant/.well-known/agent-card.json", nil)
		if err != nil {
			t.Fatal(err)
		}
		if tt.host != "" {
			req.Host = tt.host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("Host %q: status %d, want %d: %s", tt.host, resp.StatusCode, tt.want, body)
		}
		if strings.Contains(string(body), "evil.example") {
			t.Errorf("Host %q: the answer echoes the host: %s", tt.host, body)
		}
	}
}
