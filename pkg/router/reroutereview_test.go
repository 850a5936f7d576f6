package router

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	servicehelper "k8s.io/cloud-provider/service/helpers"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// Review of issue 40's re-route (branch s51-reroute): where the router's
// own full sync of a re-route meets upstream's service controller.

// TestRerouteBeforeUpstreamFinalizerLeaks drives upstream's service
// controller (one worker) over a Reloadable. seed (load-balancer-backend
// a) holds that worker in a's ensure, so web, created next, waits in
// upstream's queue: upstream has not added its cleanup finalizer
// (service.kubernetes.io/load-balancer-cleanup) nor cached web. A reload
// moving the default a→b re-routes web: the router's own sync creates b's
// load balancer for a Service carrying no cleanup finalizer. web is then
// deleted (nothing keeps it) before upstream synced it: upstream never
// saw it, so nothing calls EnsureLoadBalancerDeleted and b's load
// balancer leaks. Before the change the re-route only wrote the record,
// and upstream's sync (finalizer first, then ensure) created it.
func TestRerouteBeforeUpstreamFinalizerLeaks(t *testing.T) {
	ca, cb := t.Name()+"/a", t.Name()+"/b"
	a, b := heldCloudState(ca, "198.51.100.1"), heldCloudState(cb, "198.51.100.2")
	a.reset()
	b.reset()
	bs := []heldBackend{{"a", ca, "198.51.100.1"}, {"b", cb, "198.51.100.2"}}
	c := startReloadCluster(t, heldConfig(t, "defaultBackend: a", bs...), newService("seed", withLBBackend("a")))
	a.hold("ensure")
	testutil.RunServiceController(t, c.rl, c.client, c.factory, cluster, 1)
	a.awaitEntered(t, "ensure") // upstream's only worker, in seed's sync
	released := false
	defer func() {
		if !released {
			a.releaseOne()
		}
	}()
	web, err := c.client.CoreV1().Services("default").Create(context.Background(), newService("web"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "web in the router's lister", func() bool {
		_, err := c.factory.Core().V1().Services().Lister().Services("default").Get("web")
		return err == nil
	})
	c.apply(t, heldConfig(t, "defaultBackend: b", bs...))
	// The window: give the re-route time to act before upstream syncs web.
	_ = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return b.has(web), nil
	})
	if b.has(web) {
		s := c.service(t, "web")
		if !servicehelper.HasLBFinalizer(s) {
			t.Errorf("b created web's load balancer before upstream added %s (finalizers %v)", servicehelper.LoadBalancerCleanupFinalizer, s.Finalizers)
		}
	}
	if err := c.client.CoreV1().Services("default").Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "web gone", func() bool { return c.serviceGone(t, "web") })
	a.releaseOne()
	released = true
	eventually(t, "seed on a", func() bool { return ingressIPs(c.service(t, "seed")) == "198.51.100.1" })
	err = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 15*time.Second, true, func(context.Context) (bool, error) {
		return !b.has(web), nil
	})
	if err != nil {
		t.Errorf("web deleted; b still holds its load balancer 15s later (leaked): deletes in b %d", b.count(&b.deletes))
	}
}
