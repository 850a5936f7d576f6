package backends

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestServiceLocks(t *testing.T) {
	var s ServiceLocks
	a := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "a", UID: types.UID("uid-a")}}
	b := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "b", UID: types.UID("uid-b")}}

	// One Service: never two holders at once.
	var holders, most atomic.Int32
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			unlock, err := s.Lock(context.Background(), a)
			if err != nil {
				t.Error(err)
				return
			}
			n := holders.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(time.Millisecond)
			holders.Add(-1)
			unlock()
		})
	}
	wg.Wait()
	if most.Load() != 1 {
		t.Errorf("%d holders of one Service's lock at once, want 1", most.Load())
	}

	// Another Service is not held up; a caller whose context ends gives up
	// without holding it.
	unlock, err := s.Lock(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.Lock(context.Background(), b)
	if err != nil {
		t.Fatalf("another Service's lock: %v", err)
	}
	other()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Lock(ctx, a); err == nil {
		t.Error("a held lock taken by a caller whose context ended")
	}
	unlock()
	again, err := s.Lock(context.Background(), a)
	if err != nil {
		t.Fatalf("the lock after its holder and a cancelled waiter left: %v", err)
	}
	again()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.locks) != 0 {
		t.Errorf("%d locks kept with no caller", len(s.locks))
	}
}
