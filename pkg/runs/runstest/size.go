package runstest

import (
	"os"
	"strconv"
)

// LinearizableSize returns the size of a linearizability check: a short
// one (a few seconds a store) unless SUPERSTEP_LINEARIZABLE_OPS asks for
// at least that many operations (the long run: 10000), spread over 8
// clients a thread on as many threads as it takes.
func LinearizableSize() (threads, clients, ops int) {
	n, _ := strconv.Atoi(os.Getenv("SUPERSTEP_LINEARIZABLE_OPS"))
	if n <= 0 {
		return 2, 3, 5
	}
	const perThread = 8 * 25
	return (n + perThread - 1) / perThread, 8, 25
}
