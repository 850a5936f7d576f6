package router

import (
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// TestGoneServiceRecreatedUnderItsNameKeepsNewState_review72: a Service
// deleted (its finalizer removed by hand) and created again under the same
// name, with a new UID, while an Ensure for the old one is still in the
// backend. The old one's gone mark is for its UID only: the new Service's
// record and shown addresses are kept; the old one's addresses are not,
// and a delete with the old copy removes the old load balancer only.
func TestGoneServiceRecreatedUnderItsNameKeepsNewState_review72(t *testing.T) {
	old := newService("s", withLBBackend("a"))
	b := newBlockingLB("a", "192.0.2.1", old.UID)
	r := mustRouter(t, testConfig(), Backend{Name: "a", Type: "test", Scheme: "baremetal", Cloud: b})
	c, ctx := startWatchedCluster(t, r, old)
	oldCopy := c.service(t, "s")

	dctx, _ := DeferServedAnnotations(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := r.EnsureLoadBalancer(dctx, cluster, oldCopy, nil)
		done <- err
	}()
	<-b.entered
	services := c.client.CoreV1().Services("default")
	if err := services.Delete(ctx, "s", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the router to see the old Service gone", func() bool { return r.st.Gone() == 1 })

	fresh := newService("s", withLBBackend("a"))
	fresh.UID = "uid-s-2"
	if _, err := services.Create(ctx, fresh, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fresh = c.service(t, "s")
	if _, err := r.EnsureLoadBalancer(ctx, cluster, fresh, nil); err != nil {
		t.Fatal(err)
	}
	shownBefore, ok := r.st.ShownOf(fresh.UID)
	if !ok {
		t.Fatal("the new Service's shown addresses are not kept")
	}

	close(b.release)
	if err := <-done; err != nil {
		t.Logf("the Ensure of the old Service: %v", err)
	}
	if shown, ok := r.st.ShownOf(oldCopy.UID); ok {
		t.Errorf("the router keeps the addresses %v of the old, gone Service", shown)
	}
	if shown, ok := r.st.ShownOf(fresh.UID); !ok || len(shown["a"]) != len(shownBefore["a"]) {
		t.Errorf("the new Service's shown addresses = %v (%v), want %v", shown, ok, shownBefore)
	}
	if rec, _ := r.st.RecordedOf(fresh.UID); !slices.Equal(rec, []string{"a"}) {
		t.Errorf("the new Service's record in memory = %v, want [a]", rec)
	}
	if got := c.record(t, "s"); got != "a" {
		t.Errorf("the new Service's record annotation = %q, want a", got)
	}
	if _, ok := c.service(t, "s").Annotations[string(annotation.LoadBalancerServedBy)]; !ok {
		t.Error("the new Service's served-by annotation was not written")
	}

	if err := r.EnsureLoadBalancerDeleted(ctx, cluster, oldCopy); err != nil {
		t.Fatal(err)
	}
	if b.holds(oldCopy) {
		t.Error("the delete with the old copy left the old load balancer")
	}
	if !b.holds(fresh) {
		t.Error("the delete with the old copy removed the new Service's load balancer")
	}
	if rec, ok := r.st.RecordedOf(oldCopy.UID); ok {
		t.Errorf("the old Service's record %v is kept after its delete", rec)
	}
	if rec, _ := r.st.RecordedOf(fresh.UID); !slices.Equal(rec, []string{"a"}) {
		t.Errorf("after the old one's delete, the new Service's record in memory = %v, want [a]", rec)
	}
	// The new Service syncs again: nothing of the old one's mark is in its way.
	if _, err := r.EnsureLoadBalancer(ctx, cluster, c.service(t, "s"), nil); err != nil {
		t.Fatal(err)
	}
}

var errReview72Down = errors.New("review72: backend down")

// TestDeleteWithOldCopyAfterGoneKeepsFailedBackend_review72: a Service
// recorded in a and b goes without the router's delete; this process also
// wrote b to the record after the copy upstream still holds (which names
// only a). The delete with that old copy removes a's load balancer and
// fails in b: what the router remembers must still name b, so that the
// retry, with the same old copy, reaches b; after it, nothing is left.
func TestDeleteWithOldCopyAfterGoneKeepsFailedBackend_review72(t *testing.T) {
	r, a, b := twoClouds(t)
	svc := newService("s", withLBBackend("a"), func(s *corev1.Service) {
		s.Annotations[string(annotation.LoadBalancerBackends)] = "a"
	})
	c, ctx := startWatchedCluster(t, r, svc)
	oldCopy := c.service(t, "s")
	// Both hold a load balancer; this process recorded both.
	for _, lb := range []*lbCloud{a, b} {
		if _, err := lb.EnsureLoadBalancer(ctx, cluster, oldCopy, nil); err != nil {
			t.Fatal(err)
		}
	}
	r.st.Remember(oldCopy.UID, []string{"a", "b"})

	if err := c.client.CoreV1().Services("default").Delete(ctx, "s", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the router to see the Service gone", func() bool { return r.st.Gone() == 1 })
	if rec, _ := r.st.RecordedOf(oldCopy.UID); !slices.Equal(rec, []string{"a", "b"}) {
		t.Fatalf("the record of the gone Service = %v, want [a b] kept", rec)
	}

	b.setFail(errReview72Down)
	if err := r.EnsureLoadBalancerDeleted(ctx, cluster, oldCopy); err == nil {
		t.Fatal("the delete succeeded with b down")
	}
	if a.holds(oldCopy) {
		t.Error("a's load balancer was left")
	}
	if !b.holds(oldCopy) {
		t.Fatal("b's load balancer went while b was down")
	}
	if rec, _ := r.st.RecordedOf(oldCopy.UID); !slices.Contains(rec, "b") {
		t.Errorf("after the failed delete the remembered record = %v, want it to name b", rec)
	}
	if r.st.WasDeleted(oldCopy.UID) {
		t.Error("a delete that failed marked the Service deleted")
	}

	b.setFail(nil)
	if err := r.EnsureLoadBalancerDeleted(ctx, cluster, oldCopy); err != nil {
		t.Fatal(err)
	}
	if b.holds(oldCopy) {
		t.Error("the retry left b's load balancer")
	}
	if n := serviceState(r); n != 0 {
		t.Errorf("after the delete the router keeps %d entries for the gone Service, want 0", n)
	}
}

// TestDeleteWithOldCopyBeingDeletedAfterGone_review72: the Service goes
// while upstream's copy is marked for deletion (its finalizer then removed
// by hand). The delete with that copy removes the load balancer and marks
// the Service deleted (MarkDeleted), alongside its gone mark (Forget): an
// Ensure queued behind the delete with the same copy creates nothing
// again, and nothing of the gone Service's shown addresses is kept.
func TestDeleteWithOldCopyBeingDeletedAfterGone_review72(t *testing.T) {
	r, a, _ := twoClouds(t)
	svc := newService("s", withLBBackend("a"), func(s *corev1.Service) {
		s.Annotations[string(annotation.LoadBalancerBackends)] = "a"
	})
	c, ctx := startWatchedCluster(t, r, svc)
	oldCopy := c.service(t, "s")
	if _, err := r.EnsureLoadBalancer(ctx, cluster, oldCopy, nil); err != nil {
		t.Fatal(err)
	}
	oldCopy = c.service(t, "s")
	now := metav1.Now()
	oldCopy.DeletionTimestamp = &now
	if err := c.client.CoreV1().Services("default").Delete(ctx, "s", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the router to see the Service gone", func() bool { return r.st.Gone() == 1 })
	if err := r.EnsureLoadBalancerDeleted(ctx, cluster, oldCopy); err != nil {
		t.Fatal(err)
	}
	if a.holds(oldCopy) {
		t.Error("a's load balancer was left")
	}
	// A node sync with the old copy, queued behind the delete.
	if _, err := r.EnsureLoadBalancer(ctx, cluster, oldCopy, nil); err == nil && a.holds(oldCopy) {
		t.Error("an Ensure with the old copy after its delete created the load balancer again")
	}
	if a.holds(oldCopy) {
		t.Error("a load balancer for the gone Service was created again")
	}
	if _, ok := r.st.ShownOf(oldCopy.UID); ok {
		t.Error("the gone Service's shown addresses are kept")
	}
}
