package openstack

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestTargetsByAddress: a pool's members are the nodes' addresses, so the
// router must re-target an Octavia load balancer when the address of a
// node it can target changes (and need not when only its providerID
// does): TargetsByAddress is true for every node and Service, and the
// member address follows the node's InternalIP, never its providerID.
func TestTargetsByAddress(t *testing.T) {
	l := newLoadBalancer("os", "c1", &LoadBalancerSettings{}, nil)
	fresh := newNode("fresh", withInternalIP("10.1.0.7"))
	for _, tt := range []struct {
		name             string
		svc              *corev1.Service
		node, changed    *corev1.Node
		wantMemberChange bool
	}{
		{"its InternalIP changed", newService("a"), fresh, newNode("fresh", withInternalIP("10.1.0.8")), true},
		{"its InternalIP arrived", newService("b"), newNode("fresh"), fresh, true},
		{"its providerID written", newService("c"), fresh, newNode("fresh", withProviderID("openstack:///7a1c"), withInternalIP("10.1.0.7")), false},
		{"another cloud's node, its address changed", newService("d"),
			newNode("bm", withProviderID("baremetal://bm"), withInternalIP("10.2.0.1")), newNode("bm", withProviderID("baremetal://bm"), withInternalIP("10.2.0.2")), true},
		{"dual-stack, its primary family's address changed", newService("e", withFamilies(v6v4...)),
			newNode("d", withInternalIP("10.1.0.7"), withInternalIP("fd00::7")), newNode("d", withInternalIP("10.1.0.7"), withInternalIP("fd00::8")), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if !l.TargetsByAddress(tt.svc, tt.node) || !l.TargetsByAddress(tt.svc, tt.changed) {
				t.Error("TargetsByAddress = false, want true: members are node addresses")
			}
			if changed := memberAddress(tt.svc, tt.node) != memberAddress(tt.svc, tt.changed); changed != tt.wantMemberChange {
				t.Errorf("member address changed = %v, want %v", changed, tt.wantMemberChange)
			}
		})
	}
}
