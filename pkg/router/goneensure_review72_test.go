package router

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Found by the review of 7e2a26e (failed before, on aa8d0c9 too).
// TestEnsureWithOldCopyAfterGoneDeleteCreatesNothing_review72: a Service
// deleted by hand (no finalizer: upstream's copy has no deletion
// timestamp) whose load balancer upstream's delete, with that copy,
// removed. A node sync or drift repair still holding the same copy then
// ensures it (it was queued behind the delete). The Service is gone, and
// known gone to the router (its gone mark): no load balancer may be
// created for it again, where nothing would ever delete it.
func TestEnsureWithOldCopyAfterGoneDeleteCreatesNothing_review72(t *testing.T) {
	r, a, _ := twoClouds(t)
	c, ctx := startWatchedCluster(t, r, newService("s", withLBBackend("a")))
	if _, err := r.EnsureLoadBalancer(ctx, cluster, c.service(t, "s"), nil); err != nil {
		t.Fatal(err)
	}
	oldCopy := c.service(t, "s")
	if got := c.record(t, "s"); got != "a" {
		t.Fatalf("record %q, want a", got)
	}
	if err := c.client.CoreV1().Services("default").Delete(ctx, "s", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the router to see the Service gone", func() bool { return r.st.Gone() == 1 })
	if err := r.EnsureLoadBalancerDeleted(ctx, cluster, oldCopy); err != nil {
		t.Fatal(err)
	}
	if a.holds(oldCopy) {
		t.Fatal("the delete left a's load balancer")
	}
	_, err := r.EnsureLoadBalancer(ctx, cluster, oldCopy, nil)
	t.Logf("Ensure with the old copy after the delete: %v", err)
	if a.holds(oldCopy) {
		t.Error("an Ensure with the old copy of a gone Service created its load balancer again, after its delete: leaked")
	}
	err = r.UpdateLoadBalancer(ctx, cluster, oldCopy, nil)
	t.Logf("Update with the old copy after the delete: %v", err)
	if a.holds(oldCopy) {
		t.Error("an Update with the old copy of a gone Service created its load balancer again: leaked")
	}
}
