package longterm_test

import (
	"testing"

	"github.com/superstep/superstep/pkg/longterm"
	"github.com/superstep/superstep/pkg/longterm/longtermtest"
)

func TestMemoryConformance(t *testing.T) {
	longtermtest.Run(t, func(*testing.T) longterm.Backend { return longterm.NewMemory() })
}

// TestSharedMemory runs the suite with every sub-test on one backend, as a
// deployment shares its store.
func TestSharedMemory(t *testing.T) {
	b := longterm.NewMemory()
	longtermtest.Run(t, func(*testing.T) longterm.Backend { return b })
}
