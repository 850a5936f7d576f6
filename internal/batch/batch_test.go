package batch

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestBurstIsOneFlush: a burst of changes is one flush; a change after it
// is the next batch.
func TestBurstIsOneFlush(t *testing.T) {
	var flushes atomic.Int32
	done := make(chan struct{}, 10)
	b := &Timer{Quiet: 200 * time.Millisecond, Max: time.Minute, Flush: func() { flushes.Add(1); done <- struct{}{} }}
	for range 5 {
		b.Changed()
	}
	<-done
	// A later change is a batch of its own.
	b.Changed()
	<-done
	if got := flushes.Load(); got != 2 {
		t.Errorf("%d flushes, want 2", got)
	}
}

// TestMaxBoundsTheBatch: a steady stream of changes is flushed at the
// latest Max after the batch's first change.
func TestMaxBoundsTheBatch(t *testing.T) {
	done := make(chan time.Time, 10)
	b := &Timer{Quiet: 300 * time.Millisecond, Max: 500 * time.Millisecond, Flush: func() { done <- time.Now() }}
	start := time.Now()
	stop := time.After(10 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	b.Changed()
	for {
		select {
		case at := <-done:
			if d := at.Sub(start); d > 5*time.Second {
				t.Errorf("first flush %v after the first change, want about 500ms", d)
			}
			return
		case <-tick.C:
			b.Changed()
		case <-stop:
			t.Fatal("no flush within 10s of changes every 50ms (Max 500ms)")
		}
	}
}
