package router

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestProbe60bRetargetCountsServicesLeftToOthers (review s60b,
// Changes.Retargeted): with no loadBalancer.defaultBackend, a Service
// without the backend annotation is answered ImplementedElsewhere and
// "left to whatever else serves them" (docs/configuration.md): the router
// holds no load balancer of it and never will under this configuration.
// Retarget filters other controllers' classes (ownClass) but not these:
// "other" is queued, counted in Changes.Retargeted and in the --v=2 line
// "Re-targeting the load balancers of the Services upstream's service
// controller serves", and re-synced (lister reads and its lock) for
// nothing. In a cluster where only a few Services opt in by annotation,
// every node-target reload reports thousands of re-targets. An operator
// reading the count expects the Services whose load balancers the router
// holds (1 here: web). Fix idea: skip a Service the configuration in use
// gives no target (targetName "" or refused) or that has no load balancer
// recorded (EnsuredIn/UnpublishedIn empty under cur).
func TestProbe60bRetargetCountsServicesLeftToOthers(t *testing.T) {
	ca := t.Name() + "/a"
	a := heldCloudState(ca, "198.51.100.1")
	a.reset()
	bs := heldBackend{"a", ca, "198.51.100.1"}
	c := startReloadCluster(t, heldConfig(t, "", bs), newService("web", withLBBackend("a")), newService("other"))
	c.runServiceController(t)
	eventually(t, "web's address from a", func() bool { return ingressIP(c.service(t, "web")) == "198.51.100.1" })
	settleResync(t, c)
	if a.has(c.service(t, "other")) {
		t.Fatal("premise: other has a load balancer in a")
	}
	ch := c.apply(t, heldConfig(t, "targetOtherCCMsNodes: true", bs))
	if ch.Retargeted != 1 {
		t.Errorf("Changes.Retargeted = %d, want 1 (web; other has no target under this configuration, it is left to others)", ch.Retargeted)
	}
}

// TestProbe60bRetargetCountsOurClassWithoutController (review s60b,
// classed Services of a class we serve, no controller of ours running):
// under upstream's service controller alone (no SetServed: pkg/lbcontroller
// is not running), a Service of our class example.com/x has no load
// balancer: upstream's controller never serves a classed Service, and
// nothing else here does. Retarget (ownClass: the class is ours) still
// queues it and counts it among "the Services upstream's service
// controller serves". Same cause and fix idea as
// TestProbe60bRetargetCountsServicesLeftToOthers: count only Services
// with a load balancer recorded under cur.
func TestProbe60bRetargetCountsOurClassWithoutController(t *testing.T) {
	ca := t.Name() + "/a"
	a := heldCloudState(ca, "198.51.100.1")
	a.reset()
	bs := heldBackend{"a", ca, "198.51.100.1"}
	routing := "defaultBackend: a, classes: [{name: example.com/x, backend: a}]"
	c := startReloadCluster(t, heldConfig(t, routing, bs), newService("web"), newService("x", func(s *corev1.Service) {
		class := "example.com/x"
		s.Spec.LoadBalancerClass = &class
	}))
	c.runServiceController(t)
	eventually(t, "web's address from a", func() bool { return ingressIP(c.service(t, "web")) == "198.51.100.1" })
	settleResync(t, c)
	if a.has(c.service(t, "x")) {
		t.Fatal("premise: x has a load balancer in a")
	}
	ch := c.apply(t, heldConfig(t, routing+", targetOtherCCMsNodes: true", bs))
	if ch.Retargeted != 1 {
		t.Errorf("Changes.Retargeted = %d, want 1 (web; x's class is served by no controller running here and x has no load balancer)", ch.Retargeted)
	}
}
