package router

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestForeignAddressInOurPoolKept (issue 40, defect 8) drives upstream's
// service controller with no defaultBackend: a classless Service with no
// annotation and no record, whose address another controller (MetalLB)
// wrote and which lies in the bare-metal backend's pool, is someone
// else's: the router answers ImplementedElsewhere and keeps its address,
// and the bare-metal backend releases nothing. The router used to ask
// every backend, bare metal reported holding the address (its allocator
// takes every pool address a status shows), and the router released it
// and cleared it from the status.
func TestForeignAddressInOurPoolKept(t *testing.T) {
	r := metalRouter(t, "error")
	svc := newService("metallb")
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.200"}}
	c := startCluster(t, r, svc)
	c.factory.Start(make(chan struct{}))
	c.factory.WaitForCacheSync(make(chan struct{}))
	eventually(t, "bare metal taking the shown address", func() bool { return metalHolds(t, r, c.service(t, "metallb")) })
	runServiceController(t, c)
	// The service controller syncs the Service once at its start; a
	// second Service created after it, synced after the first, tells that
	// the first sync is over.
	c.createService(t, newService("marker", withLBBackend("metal")))
	eventually(t, "the marker Service addressed", func() bool { return ingressIP(c.service(t, "marker")) != "" })
	time.Sleep(200 * time.Millisecond) // a state that must last: no condition to wait for
	s := c.service(t, "metallb")
	if got := ingressIPs(s); got != "192.0.2.200" {
		t.Errorf("status = %q, want MetalLB's 192.0.2.200 kept", got)
	}
	if !metalHolds(t, r, s) {
		t.Error("bare metal released the address another controller shows")
	}
}
