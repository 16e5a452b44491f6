package pregel

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// RetryPolicy says how often and when a failing node is tried again. The
// zero policy tries once.
type RetryPolicy struct {
	// MaxAttempts counts the first attempt; values below 1 mean 1.
	MaxAttempts int
	// InitialInterval is the wait before the second attempt (default
	// 100ms); each further wait is multiplied by Multiplier (default 2)
	// up to MaxInterval (default 30s).
	InitialInterval time.Duration
	Multiplier      float64
	MaxInterval     time.Duration
	// Jitter, from 0 to 1, randomises each wait by up to that fraction.
	Jitter float64
	// RetryIf decides which errors are retried; nil retries all but
	// validation errors, interrupts and cancellation of the run.
	RetryIf func(error) bool
}

func (p RetryPolicy) attempts() int { return max(p.MaxAttempts, 1) }

// backoff returns the wait before attempt n+1, after n failed attempts.
func (p RetryPolicy) backoff(n int) time.Duration {
	d := p.InitialInterval
	if d <= 0 {
		d = 100 * time.Millisecond
	}
	m := p.Multiplier
	if m < 1 {
		m = 2
	}
	limit := p.MaxInterval
	if limit <= 0 {
		limit = 30 * time.Second
	}
	f := float64(d)
	for i := 1; i < n && f < float64(limit); i++ {
		f *= m
	}
	f = min(f, float64(limit))
	if j := min(max(p.Jitter, 0), 1); j > 0 {
		f *= 1 - j + 2*j*rand.Float64()
	}
	return time.Duration(f)
}

func (p RetryPolicy) retryable(err error) bool {
	var ie *InterruptError
	if errors.As(err, &ie) || errors.Is(err, context.Canceled) {
		return false
	}
	if p.RetryIf != nil {
		return p.RetryIf(err)
	}
	return true
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
