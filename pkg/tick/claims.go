package tick

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"
)

// Claims leases tasks to one executor at a time, so that a duplicate
// delivery does not execute a task that another handler is executing. A
// lease that ran out (its holder crashed) can be taken over; leases must be
// shorter than the queue's visibility timeout, so that a redelivered
// message finds the lease of its crashed holder expired.
type Claims interface {
	// Claim leases task taskID of step of the run to owner until until,
	// if no other owner holds an unexpired lease at now. It reports
	// whether owner holds the lease, and the owner of the expired lease
	// it took over, if any.
	Claim(ctx context.Context, runID string, step int, taskID, owner string, now, until time.Time) (ok bool, tookOver string, err error)
}

// ErrClaimed is returned when another handler holds a task's lease: the
// message should be delivered again later.
var ErrClaimed = errors.New("tick: task is being executed by another handler")

// MemoryClaims is Claims for one process.
type MemoryClaims struct {
	mu     sync.Mutex
	leases map[string]lease
}

type lease struct {
	owner string
	until time.Time
}

// Claim implements Claims.
func (m *MemoryClaims) Claim(_ context.Context, runID string, step int, taskID, owner string, now, until time.Time) (bool, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.leases == nil {
		m.leases = make(map[string]lease)
	}
	key := runID + "\x00" + strconv.Itoa(step) + "\x00" + taskID
	l, held := m.leases[key]
	if held && l.owner != owner && l.until.After(now) {
		return false, "", nil
	}
	m.leases[key] = lease{owner: owner, until: until}
	if held && l.owner != owner {
		return true, l.owner, nil
	}
	return true, "", nil
}
