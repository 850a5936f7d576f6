package router

import (
	"slices"
	"testing"
	"time"
)

// TestDeleteInStepsFailedSyncFollowsTheStep_review72 checks the premise of
// the wait TestReloadDuringDeleteInSteps ("backend removed, then added
// back") now makes: a Warning SyncLoadBalancerFailed on web shows that the
// held step returned. None may be there before the step is released (not
// from the fixture's syncs, nor from the reload, which upstream's worker,
// held in the step, cannot act on), and once one is there the step has
// been answered.
func TestDeleteInStepsFailedSyncFollowsTheStep_review72(t *testing.T) {
	c, a, _, _, _ := deletingInSteps(t)
	cb := t.Name() + "/b"
	c.apply(t, heldConfig(t, "defaultBackend: b", heldBackend{"b", cb, "198.51.100.2"}))
	// Time for any event already emitted to reach the API server.
	time.Sleep(time.Second)
	if evs := c.events(t, "web"); slices.Contains(evs, "Warning/SyncLoadBalancerFailed") {
		t.Fatalf("a Warning SyncLoadBalancerFailed before the held step was released: %v", evs)
	}
	if n := a.count(&a.stepped); n != 0 {
		t.Fatalf("%d steps answered before the release", n)
	}
	a.releaseOne()
	eventually(t, "the service controller's failed sync", func() bool {
		return slices.Contains(c.events(t, "web"), "Warning/SyncLoadBalancerFailed")
	})
	if n := a.count(&a.stepped); n != 1 {
		t.Errorf("when the failed sync is seen, %d steps were answered, want 1", n)
	}
}
