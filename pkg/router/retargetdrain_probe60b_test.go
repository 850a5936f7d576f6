package router

import (
	"testing"
)

// TestProbe60bRerouteWithRetargetLeavesDrainingTargetsStale (review s60b,
// rerouted excluded): web is on a; drainPeriod 8s. One reload both moves
// the default to b and turns targetOtherCCMsNodes on. Retarget leaves web
// out (the reload re-routed it); the question is whether a's load
// balancer, draining and still carrying traffic, gets hc-1 too, as a
// draining one does when a later reload turns the setting on
// (TestProbe60RetargetDrainingAndRetired). It does (the move's sync
// updates the draining backend): passes.
func TestProbe60bRerouteWithRetargetLeavesDrainingTargetsStale(t *testing.T) {
	ca, cb := t.Name()+"/a", t.Name()+"/b"
	a, b := heldCloudState(ca, "198.51.100.1"), heldCloudState(cb, "198.51.100.2")
	a.reset()
	b.reset()
	bs := []heldBackend{{"a", ca, "198.51.100.1"}, {"b", cb, "198.51.100.2"}}
	c := startReloadCluster(t, heldConfig(t, "defaultBackend: a, drainPeriod: 8s", bs...), newService("web"))
	c.runServiceController(t)
	c.createNode(t, newNode("n1"))
	c.createNode(t, newNode("hc-1", withPlatformAnnotation("hcloud")))
	eventually(t, "web on a targeting n1", func() bool { return a.targetsOf(c.service(t, "web")) == "n1=" })
	web := c.service(t, "web")
	settleResync(t, c)

	ch := c.apply(t, heldConfig(t, "defaultBackend: b, drainPeriod: 8s, targetOtherCCMsNodes: true", bs...))
	t.Logf("rerouted %v, retargeted %d", ch.Rerouted, ch.Retargeted)
	eventually(t, "web on b with hc-1", func() bool { return b.targetsOf(web) == "hc-1=,n1=" })
	settleResync(t, c)
	if !a.has(web) {
		t.Skip("a's load balancer already gone: the drain is too short for this machine")
	}
	if got := a.targetsOf(web); got != "hc-1=,n1=" {
		t.Errorf("web's draining load balancer in a targets %q while the configuration in use (targetOtherCCMsNodes on) has it target hc-1=,n1=", got)
	}
}
