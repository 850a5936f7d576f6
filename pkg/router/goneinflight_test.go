package router

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	clienttesting "k8s.io/client-go/testing"
	cloudprovider "k8s.io/cloud-provider"
)

// blockingLB is an lbCloud whose EnsureLoadBalancer, for the Service with
// uid (every Service when uid is empty), says it was entered and then
// waits to be released.
type blockingLB struct {
	*lbCloud
	uid     types.UID
	entered chan struct{}
	release chan struct{}
}

func newBlockingLB(name, ip string, uid types.UID) *blockingLB {
	return &blockingLB{lbCloud: newLBCloud(name, ip), uid: uid, entered: make(chan struct{}, 1), release: make(chan struct{})}
}

func (c *blockingLB) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return c, true }

func (c *blockingLB) EnsureLoadBalancer(ctx context.Context, cluster string, s *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	if c.uid == "" || s.UID == c.uid {
		c.entered <- struct{}{}
		<-c.release
	}
	return c.lbCloud.EnsureLoadBalancer(ctx, cluster, s, nodes)
}

// startWatchedCluster is startCluster with its informers started and
// synced (the router's forget handler among them) and the Services
// informer's watch in place, and a context that ends with the test. The
// fake clientset delivers no event to a watch not yet made: a Service
// deleted between the informer's list and its watch would never reach
// the router's forget handler (a test failed so, once in a few runs).
func startWatchedCluster(t *testing.T, r *Router, objs ...runtimeObject) (*fakeCluster, context.Context) {
	t.Helper()
	c := startCluster(t, r, objs...)
	watching := make(chan struct{})
	var once sync.Once
	c.client.PrependWatchReactor("services", func(a clienttesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := a.(clienttesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		w, err := c.client.Tracker().Watch(a.GetResource(), a.GetNamespace(), opts)
		if err == nil {
			once.Do(func() { close(watching) })
		}
		return true, w, err
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c.factory.Start(ctx.Done())
	c.factory.WaitForCacheSync(ctx.Done())
	select {
	case <-watching:
	case <-time.After(time.Minute):
		t.Fatal("the Services informer made no watch")
	}
	return c, ctx
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
	b := newBlockingLB("a", "192.0.2.1", "")
	r := mustRouter(t, testConfig(), Backend{Name: "a", Type: "test", Scheme: "baremetal", Cloud: b})
	c, ctx := startWatchedCluster(t, r, newService("s", withLBBackend("a")))
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
