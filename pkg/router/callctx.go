package router

import (
	"context"
	"sync"
	"time"
)

// callCtx is the context of one backend call: its parent with a deadline
// added. Unlike context.WithTimeout it starts no timer until someone asks
// for Done, so a backend answering from memory (a cache, an inventory) pays
// one small allocation for the deadline, while one that waits on the network
// gets the usual timer. Deadline and Err honour the deadline either way.
type callCtx struct {
	context.Context
	deadline time.Time

	mu         sync.Mutex
	done       chan struct{}
	err        error
	timer      *time.Timer
	stopParent func() bool
}

// newCallCtx returns parent with a deadline d after now (the caller's
// clock reading, which it also uses for metrics); release must be called
// when the call returns.
func newCallCtx(parent context.Context, now time.Time, d time.Duration) *callCtx {
	return &callCtx{Context: parent, deadline: now.Add(d)}
}

// Deadline returns the earlier of the parent's deadline and the call's.
func (c *callCtx) Deadline() (time.Time, bool) {
	if pd, ok := c.Context.Deadline(); ok && pd.Before(c.deadline) {
		return pd, true
	}
	return c.deadline, true
}

// Done returns a channel closed when the deadline passes, the parent is
// done, or the call is released. The timer starts on the first call.
func (c *callCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done != nil {
		return c.done
	}
	c.done = make(chan struct{})
	if c.err == nil {
		c.err = c.currentErr()
	}
	if c.err != nil {
		close(c.done)
		return c.done
	}
	c.timer = time.AfterFunc(time.Until(c.deadline), func() { c.cancel(context.DeadlineExceeded) })
	if c.Context.Done() != nil {
		c.stopParent = context.AfterFunc(c.Context, func() { c.cancel(c.Context.Err()) })
	}
	return c.done
}

// Err reports why the context is done, or nil.
func (c *callCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	return c.currentErr()
}

// currentErr is the parent's error, else DeadlineExceeded once the deadline
// has passed.
func (c *callCtx) currentErr() error {
	if err := c.Context.Err(); err != nil {
		return err
	}
	if !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// cancel ends the context with err, once.
func (c *callCtx) cancel(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil && c.done != nil {
		return
	}
	if c.err == nil {
		c.err = err
	}
	if c.done != nil {
		select {
		case <-c.done:
		default:
			close(c.done)
		}
	}
	if c.timer != nil {
		c.timer.Stop()
	}
	if c.stopParent != nil {
		c.stopParent()
	}
}

// release ends the context when the call returns, freeing its timer.
func (c *callCtx) release() { c.cancel(context.Canceled) }
