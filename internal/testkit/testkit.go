// Package testkit holds the small helpers the project's tests share, so
// that each is written once. (The moto emulator has its own package,
// internal/mototest.)
package testkit

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer safe for a writer (a command, a logger, a
// server) writing while the test reads. The zero value is ready to use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
