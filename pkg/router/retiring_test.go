package router

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	utilt "github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// TestRetiringCountsCallsInFlight (chaos seed 631642365): a call in flight
// when a credential is rotated finishes on the replaced backend, with the
// old key, however long it takes (a throttled cloud's budget made one
// delete last 8.6 s, its DeleteLoadBalancer signed with the old key 6.2 s
// after the new one was applied). Retiring says when no call can use the
// replaced backend any more: 1 while the call is in flight, 0 once it
// returned and the backend was stopped; a reload with nothing in flight
// leaves it at 0.
func TestRetiringCountsCallsInFlight(t *testing.T) {
	registerGatedType()
	ctx := context.Background()
	rl, err := NewReloadable(ctx, parseReloadConfig(t, "r1", "{name: a, addresses: [192.0.2.0/30]}"))
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	rl.Initialize(clientBuilder{client: fake.NewClientset()}, stop)
	r1 := cloudWithToken("r1")
	node := newNode("n1", withProviderID(gatedType+"://n1"))

	inflight := make(chan error, 1)
	go func() {
		_, err := rl.InstanceExists(ctx, node)
		inflight <- err
	}()
	<-r1.entered
	if _, err := rl.Apply(ctx, parseReloadConfig(t, "r2", "{name: a, addresses: [192.0.2.0/30]}")); err != nil {
		t.Fatal(err)
	}
	close(cloudWithToken("r2").gate)
	if n := rl.Retiring(); n != 1 {
		t.Fatalf("Retiring() = %d while a call is in flight on the replaced configuration, want 1", n)
	}
	time.Sleep(50 * time.Millisecond) // the call goes on: nothing to wait for
	if n := rl.Retiring(); n != 1 {
		t.Fatalf("Retiring() = %d while the call is still in flight, want 1", n)
	}
	close(r1.gate)
	if err := <-inflight; err != nil {
		t.Fatalf("in-flight call: %v", err)
	}
	utilt.Eventually(t, 10*time.Second, "the replaced configuration ended", func() error {
		if n := rl.Retiring(); n != 0 {
			return fmt.Errorf("Retiring() = %d", n)
		}
		return nil
	})
	if !r1.stopped() {
		t.Error("Retiring() is 0 before the replaced backend was stopped")
	}

	if _, err := rl.Apply(ctx, parseReloadConfig(t, "r3", "{name: a, addresses: [192.0.2.0/30]}")); err != nil {
		t.Fatal(err)
	}
	utilt.Eventually(t, 10*time.Second, "a reload with nothing in flight ended at once", func() error {
		if n := rl.Retiring(); n != 0 {
			return fmt.Errorf("Retiring() = %d", n)
		}
		return nil
	})
}
