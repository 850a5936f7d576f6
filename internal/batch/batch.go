// Package batch coalesces bursts of changes into one flush: a batch opens
// with its first change and is flushed once no change came for its quiet
// period, and at the latest its maximum after the first change. A node
// churn of many nodes is then a few flushes, not one per node change.
package batch

import (
	"sync"
	"time"
)

// Timer calls Flush, in its own goroutine, once per batch of Changed
// calls. The zero value is not usable: set Quiet, Max and Flush.
type Timer struct {
	// Quiet is how long after the last change a batch is flushed; Max
	// bounds how long after its first change.
	Quiet, Max time.Duration
	// Flush is called once per batch, after the batch closed: a change
	// arriving while it runs opens the next batch.
	Flush func()

	mu    sync.Mutex
	timer *time.Timer
	first time.Time
}

// Changed opens a batch, or pushes the open one's flush back by the quiet
// period (never beyond its maximum).
func (t *Timer) Changed() {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	if t.timer == nil {
		t.first = now
		t.timer = time.AfterFunc(t.Quiet, t.flush)
		return
	}
	if wait := min(t.Quiet, t.first.Add(t.Max).Sub(now)); wait > 0 {
		t.timer.Reset(wait)
	}
}

// Open reports whether a batch is open: a Flush is due that has not begun
// yet (it will see whatever changed before it begins).
func (t *Timer) Open() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.timer != nil
}

// flush closes the batch, then calls Flush.
func (t *Timer) flush() {
	t.mu.Lock()
	t.timer = nil
	t.mu.Unlock()
	t.Flush()
}
