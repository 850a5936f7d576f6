package router

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	clienttesting "k8s.io/client-go/testing"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/lifecycle"
)

// Issue 40: nothing but a sync writes a Service. Under upstream's service
// controller the drain timer wrote on its own (the record, the draining
// annotation, a bare-metal drain's status) at a drain's end; it now only
// queues the Service for the router's re-sync, whose sync (the same
// EnsureLoadBalancer upstream's controller calls) ends the drain and writes.

// syncs are the router's calls a Service's sync makes; a write of a
// Service by the router from inside one of them is made inside a sync.
// The router's own full sync (Balancer.sync: a drain's end, a reload's
// re-route, under upstream's controller) is one: its EnsureLoadBalancer,
// then the status it answers published.
var syncs = []string{
	"/pkg/router/lifecycle.(*Balancer).sync(",
	"/pkg/router/lifecycle.(*Balancer).EnsureLoadBalancer(",
	"/pkg/router/lifecycle.(*Balancer).UpdateLoadBalancer(",
	"/pkg/router/lifecycle.(*Balancer).EnsureLoadBalancerDeleted(",
}

// routerWrites counts the writes of Services the router makes (every
// one goes through package lifecycle), by whether a sync made it: the
// reactor runs on the writer's goroutine, whose stack says which.
type routerWrites struct {
	mu      sync.Mutex
	inside  int
	outside []string
}

// countServiceWrites starts counting the router's Service writes through
// the cluster's client.
func countServiceWrites(c *fakeCluster) *routerWrites {
	w := &routerWrites{}
	for _, verb := range []string{"create", "update", "patch"} {
		testutil.PrependReactor(c.client, verb, "services", func(a clienttesting.Action) (bool, runtimeObject, error) {
			w.see(a)
			return false, nil, nil
		})
	}
	return w
}

func (w *routerWrites) see(a clienttesting.Action) {
	buf := make([]byte, 1<<20)
	stack := string(buf[:runtime.Stack(buf, false)])
	if !strings.Contains(stack, "/pkg/router/lifecycle.") {
		return // the user's, or upstream's controller's own
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range syncs {
		if strings.Contains(stack, s) {
			w.inside++
			return
		}
	}
	w.outside = append(w.outside, fmt.Sprintf("%s %s/%s:\n%s", a.GetVerb(), a.GetSubresource(), a.GetResource().Resource, stack))
}

func (w *routerWrites) counts() (inside int, outside []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.inside, append([]string(nil), w.outside...)
}

// TestDrainEndUnderUpstreamWritesInsideSync drives upstream's service
// controller over a Reloadable: web moves from a to b with a 2 s drain.
// At the drain's end the delete of a's load balancer is held, and a user
// edits the Service (an annotation, a label) meanwhile. The edit is kept,
// the drain ends (a's load balancer deleted, a out of the record, no
// draining annotation left), and every Service write the router made came
// from inside a sync (EnsureLoadBalancer, UpdateLoadBalancer,
// EnsureLoadBalancerDeleted): none from the drain timer.
func TestDrainEndUnderUpstreamWritesInsideSync(t *testing.T) {
	ca, cb := t.Name()+"/a", t.Name()+"/b"
	a, b := heldCloudState(ca, "198.51.100.1"), heldCloudState(cb, "198.51.100.2")
	a.reset()
	b.reset()
	bs := []heldBackend{{"a", ca, "198.51.100.1"}, {"b", cb, "198.51.100.2"}}
	c := startReloadCluster(t, heldConfig(t, "drainPeriod: 2s", bs...), newService("web", withLBBackend("a")))
	writes := countServiceWrites(c.fakeCluster)
	c.runServiceController(t)
	eventually(t, "web on a", func() bool { return ingressIPs(c.service(t, "web")) == "198.51.100.1" })
	web := c.service(t, "web")

	a.hold("delete")
	c.edit(t, "web", func(s *corev1.Service) { s.Annotations[string(annotation.LoadBalancerBackend)] = "b" })
	eventually(t, "web on b, a draining", func() bool {
		s := c.service(t, "web")
		return ingressIPs(s) == "198.51.100.2" && strings.HasPrefix(s.Annotations[string(annotation.LoadBalancerDraining)], "a=")
	})
	end := drainEndOf(t, c.service(t, "web"), "a")
	a.awaitHeld(t, "delete", time.Until(end)+60*time.Second)
	if time.Now().Before(end) {
		t.Fatalf("a's load balancer deleted %v before the drain's end", time.Until(end))
	}
	c.userPatch(t, "web", map[string]string{"example.com/owner": "team-blue"}, map[string]string{"tier": "front"})
	a.releaseOne()

	eventually(t, "the drain over: a's load balancer deleted, b alone recorded, no draining annotation", func() bool {
		s := c.service(t, "web")
		_, draining := s.Annotations[string(annotation.LoadBalancerDraining)]
		return !a.has(web) && b.has(web) && !draining && s.Annotations[string(annotation.LoadBalancerBackends)] == "b"
	})
	eventually(t, "a LoadBalancerDrained event", func() bool { return hasEvent(c.events(t, "web"), lifecycle.ReasonDrained) })
	s := c.service(t, "web")
	if s.Annotations["example.com/owner"] != "team-blue" || s.Labels["tier"] != "front" {
		t.Errorf("the user's edit was lost: annotations %v, labels %v", s.Annotations, s.Labels)
	}
	if ingressIPs(s) != "198.51.100.2" {
		t.Errorf("status %q, want b's address alone", ingressIPs(s))
	}
	inside, outside := writes.counts()
	if inside == 0 {
		t.Fatal("no Service write of the router seen: the count is blind")
	}
	if len(outside) > 0 {
		t.Errorf("%d Service writes made outside a sync (want 0; %d inside), the first:\n%s", len(outside), inside, outside[0])
	}
}
