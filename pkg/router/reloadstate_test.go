package router

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/lifecycle"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/process"
)

// These tests drive upstream's service controller over a Reloadable while
// configurations are applied between and during its calls (#24): the
// per-Service state lives for the process, not for a configuration.

// reloadFixture starts a Reloadable over clouds a (and b), default a, with
// one classless Service "web", runs the service controller, and waits for
// the Service's address from a.
func reloadFixture(t *testing.T) (c *reloadCluster, a, b *heldState, reload func(routing string, withB bool)) {
	t.Helper()
	ca, cb := t.Name()+"/a", t.Name()+"/b"
	a, b = heldCloudState(ca, "198.51.100.1"), heldCloudState(cb, "198.51.100.2")
	a.reset()
	b.reset()
	conf := func(routing string, withB bool) *configOf {
		bs := []heldBackend{{"a", ca, "198.51.100.1"}}
		if withB {
			bs = append(bs, heldBackend{"b", cb, "198.51.100.2"})
		}
		return &configOf{routing: routing, bs: bs}
	}
	first := conf("defaultBackend: a", false)
	c = startReloadCluster(t, heldConfig(t, first.routing, first.bs...), newService("web"))
	c.runServiceController(t)
	eventually(t, "web's address from a", func() bool { return ingressIP(c.service(t, "web")) == "198.51.100.1" })
	return c, a, b, func(routing string, withB bool) {
		cf := conf(routing, withB)
		c.apply(t, heldConfig(t, cf.routing, cf.bs...))
	}
}

type configOf struct {
	routing string
	bs      []heldBackend
}

// TestReloadLockOutlivesGeneration (#24 defect 1): an EnsureLoadBalancer
// still creating on the configuration a reload retired, and the service
// controller's delete on the new one, take the same lock: the delete waits,
// then removes what the create made. Before, the delete ran at once, the
// finalizer came off, and the create then finished: a leaked load balancer.
func TestReloadLockOutlivesGeneration(t *testing.T) {
	c, a, _, reload := reloadFixture(t)
	stale := c.service(t, "web")
	a.hold("ensure")
	done := make(chan error, 1)
	go func() { // a drift repair or node sync with the Service as it was.
		_, err := c.rl.EnsureLoadBalancer(context.Background(), cluster, stale, nil)
		done <- err
	}()
	a.awaitEntered(t, "ensure")
	reload("defaultBackend: a", true)
	c.markDeleted(t, "web")
	eventually(t, "the delete waiting for the in-flight create, or done", func() bool {
		return c.rl.st.Waiters(stale.UID) >= 2 || c.serviceGone(t, "web")
	})
	a.releaseOne()
	if err := <-done; err != nil {
		t.Logf("the stale Ensure that was in flight: %v", err)
	}
	eventually(t, "web deleted", func() bool { return c.serviceGone(t, "web") })
	if a.has(stale) {
		t.Error("a load balancer was left for the deleted Service")
	}
}

// TestReloadKeepsDeletionMark (#24 defect 2): a delete in flight across a
// reload marks the Service deleted for the process; a node sync or repair
// pass holding an older copy of the Service, on the new configuration,
// does not create its load balancer again.
func TestReloadKeepsDeletionMark(t *testing.T) {
	c, a, _, reload := reloadFixture(t)
	stale := c.service(t, "web")
	a.hold("delete")
	c.markDeleted(t, "web")
	a.awaitEntered(t, "delete")
	reload("defaultBackend: a", true)
	a.releaseOne()
	eventually(t, "web deleted", func() bool { return c.serviceGone(t, "web") })
	if _, err := c.rl.EnsureLoadBalancer(context.Background(), cluster, stale, nil); err == nil {
		t.Error("EnsureLoadBalancer with the deleted Service's older copy succeeded")
	}
	if a.has(stale) {
		t.Error("the deleted Service's load balancer was created again")
	}
}

// TestReloadKeepsPendingNodeResync (#24 defect 3): a node-address re-sync
// that failed and waits for its retry survives a reload: once the cloud
// answers again, the load balancer gets the node's new address.
func TestReloadKeepsPendingNodeResync(t *testing.T) {
	c, a, _, reload := reloadFixture(t)
	web := c.service(t, "web")
	node := c.createNode(t, newNode("n1"))
	eventually(t, "n1 targeted", func() bool { return a.targetsOf(web) == "n1=" })
	a.setFail(errHeldDown, nil)
	c.setInternalIP(t, node, "10.0.0.1")
	eventually(t, "a failed re-sync", func() bool { return a.count(&a.updateFails) >= 1 })
	reload("defaultBackend: a", true)
	a.setFail(nil, nil)
	eventually(t, "the retried re-sync to hand over n1's address", func() bool { return a.targetsOf(web) == "n1=10.0.0.1" })
}

// TestReloadDefaultBackendMovesServices (#24 defect 4): a classless
// Service without the annotation follows loadBalancer.defaultBackend, as
// after a restart with the new configuration: the reload re-routes it (Changes.Rerouted),
// records the new default, and the service controller moves it. Until the
// move is done (here the new backend fails), node updates reach the load
// balancer that exists; before, they went to the new default, which held
// nothing, and the real load balancer was never updated again.
func TestReloadDefaultBackendMovesServices(t *testing.T) {
	c, a, b, reload := reloadFixture(t)
	web := c.service(t, "web")
	c.createNode(t, newNode("n1"))
	eventually(t, "n1 targeted", func() bool { return a.targetsOf(web) == "n1=" })
	reload("defaultBackend: a", true)

	b.setFail(nil, errHeldDown)
	ch, err := c.rl.Apply(context.Background(), heldConfig(t, "defaultBackend: b",
		heldBackend{"a", t.Name() + "/a", "198.51.100.1"}, heldBackend{"b", t.Name() + "/b", "198.51.100.2"}))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(ch.Rerouted, types.NamespacedName{Namespace: "default", Name: "web"}) {
		t.Errorf("Changes.Rerouted = %v, want default/web", ch.Rerouted)
	}
	eventually(t, "b recorded ahead of the move", func() bool { return c.record(t, "web") == "a,b" })
	c.createNode(t, newNode("n2"))
	eventually(t, "n2 handed to the load balancer in a", func() bool { return a.targetsOf(web) == "n1=,n2=" })

	b.setFail(nil, nil)
	eventually(t, "web moved to b", func() bool { return ingressIP(c.service(t, "web")) == "198.51.100.2" })
	eventually(t, "nothing left in a", func() bool { return !a.has(web) })
	if got := b.targetsOf(web); got != "n1=,n2=" {
		t.Errorf("b's targets = %q", got)
	}
}

// TestReloadAddedDefaultServesPendingService: a Service no backend served
// (no default, no annotation: upstream got ImplementedElsewhere and never
// retries) is served once a reload sets a default.
func TestReloadAddedDefaultServesPendingService(t *testing.T) {
	ca := t.Name() + "/a"
	a := heldCloudState(ca, "198.51.100.1")
	c := startReloadCluster(t, heldConfig(t, "", heldBackend{"a", ca, "198.51.100.1"}), newService("later"))
	c.runServiceController(t)
	eventually(t, "the service controller's first sync", func() bool { return len(c.events(t, "later")) > 0 })
	c.apply(t, heldConfig(t, "defaultBackend: a", heldBackend{"a", ca, "198.51.100.1"}))
	eventually(t, "later's address from a", func() bool { return ingressIP(c.service(t, "later")) == "198.51.100.1" })
	if !a.has(c.service(t, "later")) {
		t.Error("a holds no load balancer for later")
	}
}

// TestReloadReroutedListsClassedServices: Changes.Rerouted names a Service
// whose class a reload adds (for the load-balancer controller to serve at
// once) and one whose annotation names a backend the reload adds; a
// Service the reload does not concern is not listed.
func TestReloadReroutedListsClassedServices(t *testing.T) {
	ca, cb := t.Name()+"/a", t.Name()+"/b"
	a := heldBackend{"a", ca, "198.51.100.1"}
	c := startReloadCluster(t, heldConfig(t, "defaultBackend: a", a),
		newService("classed", func(s *corev1.Service) { class := "example.com/x"; s.Spec.LoadBalancerClass = &class }),
		newService("annotated", withLBBackend("b")), newService("plain"))
	c.run(t, func(context.Context) {})
	ch := c.apply(t, heldConfig(t, "defaultBackend: a, classes: [{name: example.com/x, backend: a}]", a, heldBackend{"b", cb, "198.51.100.2"}))
	got := map[string]bool{}
	for _, n := range ch.Rerouted {
		got[n.Name] = true
	}
	if !got["classed"] || !got["annotated"] || got["plain"] || len(got) != 2 {
		t.Errorf("Changes.Rerouted = %v, want classed and annotated", ch.Rerouted)
	}
}

// TestReloadWithAddressBatchPending: a node's address changes, and before
// the router's address batch is flushed a reload moves the Service's
// default to backend b, which cannot create yet. The flushed batch runs on
// the new configuration and re-targets the load balancer where it is (a,
// still serving until the move is made) with the new address, once; the
// reload's own reroute updates nothing, and nothing is created in b. Once b answers, the move carries the new address
// there.
func TestReloadWithAddressBatchPending(t *testing.T) {
	quiet, maxWait := process.AddressBatchQuiet, process.AddressBatchMax
	process.AddressBatchQuiet, process.AddressBatchMax = 2*time.Second, time.Minute
	t.Cleanup(func() { process.AddressBatchQuiet, process.AddressBatchMax = quiet, maxWait })
	c, a, b, reload := reloadFixture(t)
	web := c.service(t, "web")
	reload("defaultBackend: a", true)
	// Created with its address: no address change before the one measured.
	n1 := c.createNode(t, newNode("n1", func(n *corev1.Node) { n.Status.Addresses = []corev1.NodeAddress{internalIP("10.0.0.1")} }))
	eventually(t, "n1 targeted in a", func() bool { return a.targetsOf(web) == "n1=10.0.0.1" })
	before := a.count(&a.updates)

	b.setFail(nil, errHeldDown)
	c.setAddresses(t, n1, internalIP("10.0.0.2"))
	start := time.Now()
	reload("defaultBackend: b", true)
	if waited := time.Since(start); waited >= process.AddressBatchQuiet {
		t.Skipf("the reload took %v, longer than the batch's quiet period: the batch may have been flushed before it", waited)
	}
	eventually(t, "n1's new address in a", func() bool { return a.targetsOf(web) == "n1=10.0.0.2" })
	eventually(t, "b recorded ahead of the move", func() bool { return c.record(t, "web") == "a,b" })
	// Past the batch's quiet period, and its queue drained: every update
	// the address change and the reload make has been made.
	time.Sleep(time.Until(start.Add(process.AddressBatchQuiet + time.Second)))
	resync := c.rl.Current().st.Resync.Load()
	eventually(t, "the re-sync queue drained", func() bool { return resync.Queue.Len() == 0 })
	time.Sleep(200 * time.Millisecond)
	// The reload's reroute records b and updates nothing: the nodes did not
	// change (before, it updated a with them, as a second update).
	if got := a.count(&a.updates) - before; got != 1 {
		t.Errorf("a updated %d times for one address change and a reload, want 1", got)
	}
	if b.has(web) {
		t.Error("the re-target created a load balancer in b, which failed to create")
	}

	b.setFail(nil, nil)
	eventually(t, "web moved to b", func() bool { return ingressIP(c.service(t, "web")) == "198.51.100.2" })
	eventually(t, "nothing left in a", func() bool { return !a.has(web) })
	if got := b.targetsOf(web); got != "n1=10.0.0.2" {
		t.Errorf("b's targets = %q, want n1=10.0.0.2", got)
	}
}

// deletingInSteps is reloadFixture with web being deleted by the service
// controller, in two steps, the first of them held in flight.
func deletingInSteps(t *testing.T) (c *reloadCluster, a, b *heldState, reload func(string, bool), web *corev1.Service) {
	t.Helper()
	c, a, b, reload = reloadFixture(t)
	web = c.service(t, "web")
	a.stepDeletes(2)
	a.hold("delete")
	c.markDeleted(t, "web")
	a.awaitEntered(t, "delete")
	return c, a, b, reload, web
}

// TestReloadDuringDeleteInSteps: a configuration applied while upstream's
// service controller deletes a load balancer in steps (a RetryError after
// each, which the router's view waits out within one sync). The view's
// next call runs on the new configuration:
//   - the default backend moved to b: the delete goes on in a, where the
//     load balancer is recorded, and b is never asked to create one for
//     the Service being deleted;
//   - a removed: the next call fails at once with UnknownLoadBalancerBackend
//     (no more waiting), the Service keeps its finalizer and a's load
//     balancer stays; with a added back, the delete finishes.
func TestReloadDuringDeleteInSteps(t *testing.T) {
	t.Run("default moved", func(t *testing.T) {
		c, a, b, reload, web := deletingInSteps(t)
		reload("defaultBackend: b", true)
		a.releaseOne()
		eventually(t, "web deleted", func() bool { return c.serviceGone(t, "web") })
		if a.has(web) || b.has(web) {
			t.Errorf("a load balancer was left: in a %v, in b %v", a.has(web), b.has(web))
		}
		if n := a.count(&a.stepped); n != 2 {
			t.Errorf("%d steps answered, want 2", n)
		}
		for _, e := range c.failedDeletes(t, "web") {
			t.Errorf("event %s: a delete in steps across a reload is no failure", e)
		}
	})

	t.Run("backend removed, then added back", func(t *testing.T) {
		c, a, _, reload, web := deletingInSteps(t)
		cb := t.Name() + "/b"
		c.apply(t, heldConfig(t, "defaultBackend: b", heldBackend{"b", cb, "198.51.100.2"}))
		a.releaseOne()
		// The reload itself warns (Rerouted), perhaps before the released
		// step returns. Upstream's Warning of a failed sync is what shows
		// that the step returned and the service controller's next call,
		// on the configuration without a, was made: its worker for web was
		// held in the step until then.
		eventually(t, "the service controller's failed sync", func() bool {
			return slices.Contains(c.events(t, "web"), "Warning/SyncLoadBalancerFailed")
		})
		eventually(t, "a Warning UnknownLoadBalancerBackend", func() bool {
			return slices.Contains(c.events(t, "web"), "Warning/"+lifecycle.ReasonUnknownLBBackend)
		})
		if c.serviceGone(t, "web") || !a.has(web) {
			t.Fatalf("with its backend removed: Service gone %v, load balancer in a %v; want both kept", c.serviceGone(t, "web"), a.has(web))
		}
		if n := a.count(&a.stepped); n != 1 {
			t.Errorf("%d steps answered, want 1 (none on the configuration without a)", n)
		}
		reload("defaultBackend: a", true)
		eventually(t, "web deleted", func() bool { return c.serviceGone(t, "web") })
		if a.has(web) {
			t.Error("a's load balancer was left")
		}
	})
}
