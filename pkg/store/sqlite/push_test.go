package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/superstep/superstep/pkg/runs"
	"github.com/superstep/superstep/pkg/runs/runstest"
)

func TestPushStoreConformance(t *testing.T) {
	runstest.PushStores(t, func(t *testing.T) runs.PushStore {
		return open(t, filepath.Join(t.TempDir(), "superstep.db"))
	}, nil)
}

// TestPushConfigsSurviveReopen: configs, with their cursor, are in the
// file, not in the Store: another Store on the file reads them.
func TestPushConfigsSurviveReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "superstep.db")
	first := open(t, path)
	if err := first.PutPushConfig(ctx, runs.PushConfig{RunID: "r1", ID: "h", Config: []byte(`{"url":"https://example.com"}`)}); err != nil {
		t.Fatal(err)
	}
	if err := first.AdvancePushConfig(ctx, "r1", "h", 3, "input-required"); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	c, err := open(t, path).GetPushConfig(ctx, "r1", "h")
	if err != nil || string(c.Config) != `{"url":"https://example.com"}` || c.Seen != 3 || c.Last != "input-required" {
		t.Fatalf("after reopening: %+v, %v", c, err)
	}
}
