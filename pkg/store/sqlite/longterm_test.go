package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/superstep/superstep/pkg/longterm"
	"github.com/superstep/superstep/pkg/longterm/longtermtest"
	"github.com/superstep/superstep/pkg/store/sqlite"
)

// TestLongTermConformance runs the long-term store suite on one database
// file, shared by the sub-tests as a deployment shares it.
func TestLongTermConformance(t *testing.T) {
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "superstep.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	longtermtest.Run(t, func(*testing.T) longterm.Backend { return s.LongTerm() })
}
