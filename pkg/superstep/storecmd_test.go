//go:build !superstep.lambda

package superstep

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestStoreCommands puts, gets, lists, searches and deletes items of a dev
// server's long-term store (its SQLite file) with 'superstep store'.
func TestStoreCommands(t *testing.T) {
	h := newHarness(t)
	h.env[ServerEnv] = startDev(t)
	h.env[TokenEnv] = "tok"

	wantOut(t, h.run("store", "put", "users/u-42/prefs", "drink", `{"text": "green tea", "kind": "pref"}`).want(t, ExitOK), "put users/u-42/prefs drink")
	h.run("store", "put", "users/u-42/facts", "city", `{"text": "Lisbon", "kind": "fact"}`, "--ttl", "24h").want(t, ExitOK)
	h.run("store", "put", "users/u-7", "drink", `{"text": "coffee"}`).want(t, ExitOK)

	r := h.run("store", "get", "users/u-42/prefs", "drink").want(t, ExitOK)
	wantOut(t, r, "users/u-42/prefs drink", `{"text":"green tea","kind":"pref"}`)
	r = h.run("store", "get", "users/u-42/facts", "city", "--json").want(t, ExitOK)
	var it struct {
		ExpiresAt string `json:"expires_at"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &it); err != nil || it.ExpiresAt == "" {
		t.Errorf("get --json of an item with a TTL: %v\n%s", err, r.stdout)
	}

	r = h.run("store", "ls", "users/u-42").want(t, ExitOK)
	wantOut(t, r, "users/u-42/prefs", "users/u-42/facts")
	if strings.Contains(r.stdout, "coffee") {
		t.Errorf("ls users/u-42 lists another user's item:\n%s", r.stdout)
	}
	r = h.run("store", "ls", "users/u-42", "--filter", `{"kind": "fact"}`).want(t, ExitOK)
	if !strings.Contains(r.stdout, "Lisbon") || strings.Contains(r.stdout, "green tea") {
		t.Errorf("ls --filter kind=fact:\n%s", r.stdout)
	}
	r = h.run("store", "ls", "users/u-42", "--limit", "1").want(t, ExitOK)
	wantOut(t, r, "more items: add --page-token")
	r = h.run("store", "ls", "--namespaces", "--max-depth", "2").want(t, ExitOK)
	if got := strings.Fields(r.stdout); strings.Join(got, " ") != "users/u-42 users/u-7" {
		t.Errorf("ls --namespaces --max-depth 2 = %q", got)
	}

	// No embedding model on this server: search says so.
	wantOut(t, h.run("store", "search", "users/u-42", "what do I drink?").want(t, ExitUsage), "embedding model")
	// Bad input: what to fix.
	wantOut(t, h.run("store", "put", "users//x", "k", `{}`).want(t, ExitUsage), "component 2 is empty")
	wantOut(t, h.run("store", "put", "users/u-1", "k", `[1]`).want(t, ExitUsage), "JSON object")
	wantOut(t, h.run("store", "ls").want(t, ExitUsage), "name the NAMESPACE")

	wantOut(t, h.run("store", "delete", "users/u-42/prefs", "drink").want(t, ExitOK), "deleted users/u-42/prefs drink")
	wantOut(t, h.run("store", "get", "users/u-42/prefs", "drink").want(t, ExitUsage), `no item "drink"`)
}
