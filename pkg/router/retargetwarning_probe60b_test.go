package router

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestProbe60bOnlyKeyRetryKeepsReloadCause (review s60b, Warning wording):
// web is served by a and b; b is down. A reload turning
// targetOtherCCMsNodes on re-targets web: a is updated, b fails and is
// retried alone (only=b, from kept). Every Warning names b (never a, which
// answered) and the reload as the cause, retries included; once b answers
// both hold hc-1. Expected to pass.
func TestProbe60bOnlyKeyRetryKeepsReloadCause(t *testing.T) {
	c, a, b, web, _ := startTwoBackendWeb(t)
	c.createNode(t, newNode("hc-1", withPlatformAnnotation("hcloud"), func(n *corev1.Node) {
		n.Status.Addresses = []corev1.NodeAddress{internalIP("10.0.9.1")}
	}))
	settleResync(t, c)
	beforeA := a.count(&a.updates)
	b.setFail(errHeldDown, nil)
	bs := []heldBackend{{"a", t.Name() + "/a", "198.51.100.1"}, {"b", t.Name() + "/b", "198.51.100.2"}}
	c.apply(t, heldConfig(t, "defaultBackend: a, targetOtherCCMsNodes: true", bs...))
	eventually(t, "b failed three times", func() bool { return b.count(&b.updateFails) >= 3 })
	b.setFail(nil, nil)
	eventually(t, "hc-1 in both", func() bool {
		return a.targetsOf(web) == "hc-1=10.0.9.1,n1=10.0.0.1" && b.targetsOf(web) == "hc-1=10.0.9.1,n1=10.0.0.1"
	})
	settleResync(t, c)
	if got := a.count(&a.updates) - beforeA; got != 1 {
		t.Errorf("a updated %d times, want 1", got)
	}
	n := 0
	for _, e := range c.eventsOn(t, "web") {
		if e.Reason != reasonNodeResyncFailedProbe60 {
			continue
		}
		n++
		if !strings.Contains(e.Message, "backend b") || !strings.Contains(e.Message, "cloud-config reload") {
			t.Errorf("Warning does not name b and the reload: %q", e.Message)
		}
	}
	if n == 0 {
		t.Error("no LoadBalancerNodeResyncFailed Warning")
	}
}
