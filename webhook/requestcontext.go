package webhook

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// admissionContext is the context the server hands a controller: the
// request's context with the request's deadline (its ?timeout=), its
// requestState and its dry-run mark, in one allocation with the state.
// It behaves as WithDryRun(withRequestState(context.WithDeadline(parent,
// deadline), st), dryRun) would, and costs less on the path most
// admissions take, where the controller answers without asking for
// Done, Err or a value of the parent's: the deadline's context (a timer,
// a child registered with the parent) is made only when first asked for.
type admissionContext struct {
	context.Context // the request's, the parent

	state  requestState
	dryRun bool

	// deadline, when hasDeadline, is the request's own, and the
	// context.WithDeadline of it is made on first use (timed).
	deadline    time.Time
	hasDeadline bool
	timed       atomic.Pointer[context.Context]
	mu          sync.Mutex // guards the making of timed, cancel and stopped
	cancel      context.CancelFunc
	stopped     bool
}

// newAdmissionContext returns the context of a request to s, deadline
// being the request's own when hasDeadline. Call stop when the request is
// answered.
func (s *Server) newAdmissionContext(parent context.Context, deadline time.Time, hasDeadline bool) *admissionContext {
	c := &admissionContext{Context: parent, deadline: deadline, hasDeadline: hasDeadline}
	c.state.limits, c.state.names, c.state.budget = &s.opts.ObjectLimits, s.opts.SettingNames, s.budget
	return c
}

// withDeadline returns the parent bounded by the request's deadline: the
// parent itself without one, else the context.WithDeadline made on first
// call. Once stop has run, it is cancelled from the start, as the
// WithDeadline of a finished request would be.
func (c *admissionContext) withDeadline() context.Context {
	if !c.hasDeadline {
		return c.Context
	}
	if p := c.timed.Load(); p != nil {
		return *p
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.timed.Load(); p != nil {
		return *p
	}
	ctx, cancel := context.WithDeadline(c.Context, c.deadline)
	if c.stopped {
		cancel()
	}
	c.cancel = cancel
	c.timed.Store(&ctx)
	return ctx
}

// stop cancels the deadline's context, if one was made, as a deferred
// cancel of context.WithDeadline does when the request is answered.
func (c *admissionContext) stop() {
	if !c.hasDeadline {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	if c.cancel != nil {
		c.cancel()
	}
}

// Deadline is context.WithDeadline's: the parent's when earlier, else the
// request's; it makes no context.
func (c *admissionContext) Deadline() (time.Time, bool) {
	pd, ok := c.Context.Deadline()
	if !c.hasDeadline || (ok && pd.Before(c.deadline)) {
		return pd, ok
	}
	return c.deadline, true
}

func (c *admissionContext) Done() <-chan struct{} { return c.withDeadline().Done() }

func (c *admissionContext) Err() error { return c.withDeadline().Err() }

// Value answers the server's keys itself; any other key (the context
// package's own among them, for context.Cause and AfterFunc) is the
// deadline's context's.
func (c *admissionContext) Value(key any) any {
	switch key.(type) {
	case requestStateKey:
		return &c.state
	case dryRunKey:
		return c.dryRun
	}
	return c.withDeadline().Value(key)
}
