package router

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestCallCtx(t *testing.T) {
	t.Run("deadline without Done", func(t *testing.T) {
		cc := newCallCtx(context.Background(), time.Now(), time.Millisecond)
		defer cc.release()
		if d, ok := cc.Deadline(); !ok || d.IsZero() {
			t.Fatal("no deadline")
		}
		time.Sleep(5 * time.Millisecond)
		if !errors.Is(cc.Err(), context.DeadlineExceeded) {
			t.Fatalf("Err = %v after the deadline", cc.Err())
		}
		select {
		case <-cc.Done():
		default:
			t.Fatal("Done not closed after the deadline")
		}
	})
	t.Run("Done closes at the deadline", func(t *testing.T) {
		cc := newCallCtx(context.Background(), time.Now(), 20*time.Millisecond)
		defer cc.release()
		select {
		case <-cc.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("Done never closed")
		}
		if !errors.Is(cc.Err(), context.DeadlineExceeded) {
			t.Fatalf("Err = %v", cc.Err())
		}
	})
	t.Run("parent cancel", func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		cc := newCallCtx(parent, time.Now(), time.Hour)
		defer cc.release()
		done := cc.Done()
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("Done not closed when the parent was cancelled")
		}
		if !errors.Is(cc.Err(), context.Canceled) {
			t.Fatalf("Err = %v", cc.Err())
		}
	})
	t.Run("earlier parent deadline wins", func(t *testing.T) {
		parent, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cc := newCallCtx(parent, time.Now(), time.Hour)
		defer cc.release()
		pd, _ := parent.Deadline()
		if d, _ := cc.Deadline(); !d.Equal(pd) {
			t.Fatalf("Deadline = %v, want the parent's %v", d, pd)
		}
	})
	t.Run("release", func(t *testing.T) {
		cc := newCallCtx(context.Background(), time.Now(), time.Hour)
		done := cc.Done()
		cc.release()
		<-done
		if !errors.Is(cc.Err(), context.Canceled) {
			t.Fatalf("Err = %v after release", cc.Err())
		}
		cc.release() // twice is harmless
		cc2 := newCallCtx(context.Background(), time.Now(), time.Hour)
		cc2.release()
		<-cc2.Done() // Done after release is already closed
	})
	t.Run("values pass through", func(t *testing.T) {
		type key struct{}
		cc := newCallCtx(context.WithValue(context.Background(), key{}, "v"), time.Now(), time.Hour)
		defer cc.release()
		if cc.Value(key{}) != "v" {
			t.Fatal("value lost")
		}
	})
}

func TestLabelCache(t *testing.T) {
	c := newLabelCache("metal")
	if got := c.get("n", nil); len(got) != 1 || got["multicloud-ccm.io/backend"] != "metal" {
		t.Fatalf("no labels: %v", got)
	}
	in := map[string]string{"a": "1"}
	first := c.get("n", in)
	if len(in) != 1 {
		t.Fatal("backend's map changed")
	}
	if first["a"] != "1" || first["multicloud-ccm.io/backend"] != "metal" || len(first) != 2 {
		t.Fatalf("labels = %v", first)
	}
	again := c.get("n", map[string]string{"a": "1"})
	if len(again) != 2 {
		t.Fatalf("labels = %v", again)
	}
	changed := c.get("n", map[string]string{"a": "2"})
	if changed["a"] != "2" {
		t.Fatalf("changed labels not seen: %v", changed)
	}
	other := c.get("m", map[string]string{"b": "1"})
	if _, leaked := other["a"]; leaked || other["b"] != "1" {
		t.Fatalf("labels of another node: %v", other)
	}
}
