package testkit

import (
	"strings"
	"sync"
	"testing"
)

// TestBufferConcurrent: writes from many goroutines all land, whole, while
// the test reads (run with -race).
func TestBufferConcurrent(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				_, _ = b.Write([]byte("line\n"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if n := strings.Count(b.String(), "line\n"); n != 800 {
		t.Errorf("%d lines; want 800", n)
	}
}
