package runstest

import (
	"os"
	"strconv"
)

// LinearizableSize returns the size of a linearizability check: a short
// one (a few seconds a store) unless SUPERSTEP_LINEARIZABLE_OPS asks for
// at least that many operations (the long run: 10000), spread over
// threads of SUPERSTEP_LINEARIZABLE_CLIENTS clients (default 3) making
// 40 operations each.
//
// Few clients a thread and many threads is what keeps the check
// tractable: porcupine checks each thread's history on its own, and its
// search grows with the number of operations in flight at once on one
// thread. With 8 clients a thread (up to 8 operations overlapping on a
// loaded machine) most 200-operation histories got no verdict in 20 s;
// with at most 5 overlapping every one was decided in under 7 s.
func LinearizableSize() (threads, clients, ops int) {
	n, _ := strconv.Atoi(os.Getenv("SUPERSTEP_LINEARIZABLE_OPS"))
	if n <= 0 {
		return 2, 3, 5
	}
	clients = 3
	if c, _ := strconv.Atoi(os.Getenv("SUPERSTEP_LINEARIZABLE_CLIENTS")); c > 0 {
		clients = c
	}
	const opsPerClient = 40
	perThread := clients * opsPerClient
	return (n + perThread - 1) / perThread, clients, opsPerClient
}
