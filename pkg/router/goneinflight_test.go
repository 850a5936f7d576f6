package router

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"
)

// blockingLB is an lbCloud whose EnsureLoadBalancer says it was entered
// and then waits to be released.
type blockingLB struct {
	*lbCloud
	entered chan struct{}
	release chan struct{}
}

func (c *blockingLB) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return c, true }

func (c *blockingLB) EnsureLoadBalancer(ctx context.Context, cluster string, s *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	c.entered <- struct{}{}
	<-c.release
	return c.lbCloud.EnsureLoadBalancer(ctx, cluster, s, nodes)
}

// TestEnsureInFlightWhenServiceGoesKeepsNoState: an Ensure under
// DeferServedAnnotations (as our controller calls it) is still in the
// backend when its Service goes without the router's delete (its finalizer
// removed by hand). What that Ensure learns afterwards (the addresses the
// backend shows) is not kept for a Service that is gone, where nothing
// would ever remove it; the record naming the backend is kept, so that a
// delete with the old copy of the Service still reaches the load balancer,
// and goes with it.
func TestEnsureInFlightWhenServiceGoesKeepsNoState(t *testing.T) {
	b := &blockingLB{lbCloud: newLBCloud("a", "192.0.2.1"), entered: make(chan struct{}, 1), release: make(chan struct{})}
	r := mustRouter(t, testConfig(), Backend{Name: "a", Type: "test", Scheme: "baremetal", Cloud: b})
	c := startCluster(t, r, newService("s", withLBBackend("a")))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.factory.Start(ctx.Done())
	c.factory.WaitForCacheSync(ctx.Done())
	svc := c.service(t, "s")

	dctx, _ := DeferServedAnnotations(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := r.EnsureLoadBalancer(dctx, cluster, svc, nil)
		done <- err
	}()
	<-b.entered
	if err := c.client.CoreV1().Services("default").Delete(ctx, "s", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the router to see the Service gone", func() bool { return r.st.Gone() == 1 })
	close(b.release)
	if err := <-done; err != nil {
		t.Logf("the Ensure of the gone Service: %v", err)
	}
	if shown, ok := r.st.ShownOf(svc.UID); ok {
		t.Errorf("the router keeps the addresses %v of a Service that is gone", shown)
	}
	if rec, _ := r.st.RecordedOf(svc.UID); len(rec) != 1 || rec[0] != "a" {
		t.Errorf("the record of the gone Service = %v, want a: a delete with its old copy must reach a", rec)
	}
	if !b.holds(svc) {
		t.Fatal("a holds no load balancer to delete")
	}

	if err := r.EnsureLoadBalancerDeleted(ctx, cluster, svc); err != nil {
		t.Fatal(err)
	}
	if b.holds(svc) {
		t.Error("the delete with the old copy left the load balancer in a")
	}
	if n := serviceState(r); n != 0 {
		t.Errorf("after the delete the router keeps %d entries for the gone Service, want 0", n)
	}
}
