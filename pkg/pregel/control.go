package pregel

import (
	"context"
	"sync"
)

// Control steers a running run from outside: drain it at the next
// superstep boundary or cancel it at once. The zero value is ready to use;
// a Control serves one run at a time.
type Control struct {
	mu        sync.Mutex
	drain     string
	draining  bool
	cancelled bool
	cancel    context.CancelFunc
}

// RequestDrain asks the run to stop at the next superstep boundary, once
// the step in progress is committed. Running nodes are not interrupted. If
// the run has nothing left to do it completes normally and the request
// stays visible in its result. The first reason given is kept.
func (c *Control) RequestDrain(reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.draining {
		c.drain, c.draining = reason, true
	}
}

// DrainRequested reports whether a drain was requested, and why.
func (c *Control) DrainRequested() (reason string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.drain, c.draining
}

// Cancel stops the run at once: running nodes see their context
// cancelled and nothing of the unfinished step is applied.
func (c *Control) Cancel() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cancelled = true
	if c.cancel != nil {
		c.cancel()
	}
}

// Cancelled reports whether Cancel was called.
func (c *Control) Cancelled() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cancelled
}

// bind derives the run's context, cancelled by Cancel.
func (c *Control) bind(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	c.mu.Lock()
	c.cancel = cancel
	if c.cancelled {
		cancel()
	}
	c.mu.Unlock()
	return ctx, cancel
}
