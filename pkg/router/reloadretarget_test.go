package router

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// TestReloadTurningOtherCCMsNodesOnRetargetsUpstreamServices (review
// probe s59): under upstream's service controller, web's load balancer
// in a targets n1 alone; hc-1 is another CCM's node (the platform
// annotation hcloud, which no backend serves). A reload turning
// loadBalancer.targetOtherCCMsNodes on adds hc-1 to the targets, and one
// turning it off removes it, with no node change: the router's re-sync
// of the Services upstream's controller serves (lifecycle.Retarget).
// Before, upstream's controller, which updates a load balancer only when
// the set of nodes changes, left the old targets until some node changed
// or the CCM restarted. A reload changing nothing of the nodes queues
// nothing.
func TestReloadTurningOtherCCMsNodesOnRetargetsUpstreamServices(t *testing.T) {
	c, a, _, reload := reloadFixture(t)
	web := c.service(t, "web")
	c.createNode(t, newNode("n1"))
	c.createNode(t, newNode("hc-1", withPlatformAnnotation("hcloud")))
	eventually(t, "n1 alone targeted", func() bool { return a.targetsOf(web) == "n1=" })

	reload("defaultBackend: a, targetOtherCCMsNodes: true", false)
	eventually(t, "hc-1 targeted after the reload", func() bool { return a.targetsOf(web) == "hc-1=,n1=" })
	reload("defaultBackend: a", false)
	eventually(t, "hc-1 no longer targeted", func() bool { return a.targetsOf(web) == "n1=" })

	ch := c.apply(t, heldConfig(t, "defaultBackend: a, drainPeriod: 1m", heldBackend{"a", t.Name() + "/a", "198.51.100.1"}))
	if ch.Retargeted != 0 {
		t.Errorf("a reload changing the drain period queued %d Services for re-targeting, want 0", ch.Retargeted)
	}
}

// TestReloadLeavesTheControllersServicesToIt: a Service the controller
// that syncs Services itself serves (SetServed) is left to its node sync
// by a reload changing node targets: the router queues none of it, the
// others it does.
func TestReloadLeavesTheControllersServicesToIt(t *testing.T) {
	c, _, _, _ := reloadFixture(t)
	c.rl.SetServed(func(s *corev1.Service) bool { return s.Name == "web" })
	c.createService(t, testutil.NewService("api"))
	eventually(t, "api's address", func() bool { return ingressIP(c.service(t, "api")) != "" })
	ch := c.apply(t, heldConfig(t, "defaultBackend: a, targetOtherCCMsNodes: true", heldBackend{"a", t.Name() + "/a", "198.51.100.1"}))
	if ch.Retargeted != 1 {
		t.Errorf("queued %d Services for re-targeting, want 1 (api; web is the controller's)", ch.Retargeted)
	}
}
