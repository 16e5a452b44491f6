//go:build unix

package sqlite_test

import (
	"syscall"
	"time"
)

// cpuTime returns the CPU time (user and system, all threads) the process
// has used, or 0 if it cannot tell.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
