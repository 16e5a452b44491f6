//go:build !unix

package sqlite_test

import "time"

// cpuTime returns 0: the CPU time of the process is read on Unix only.
func cpuTime() time.Duration { return 0 }
