package baremetal

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// TestReview66ReloadKeepsRestingAddresses: after a restart "up" moved off
// metal and its 192.0.2.1 rests (released ahead of the cursor). The
// operator then reloads the config with a change that does not touch the
// auto pool (a pool for another namespace is added). docs/baremetal.md
// says a reload is applied in place and the allocator keeps every lease;
// an operator expects it to keep its next-fit state too, so the next
// Service still gets 192.0.2.3 as it would have without the reload (and
// as `plan`, made before the reload, said). withPools builds a fresh
// allocator and carries holdings and requests only: the resting address
// (and the cursor) are lost.
func TestReview66ReloadKeepsRestingAddresses(t *testing.T) {
	ctx := context.Background()
	c := newTestCloud(t, carryOnSection)
	lb := c.lb
	lb.Seed([]*corev1.Service{newService("up", withStatus("192.0.2.1")), newService("b", withStatus("192.0.2.2"))})
	if err := lb.EnsureLoadBalancerDeleted(ctx, "c1", newService("up", withStatus("192.0.2.1"))); err != nil {
		t.Fatal(err)
	}
	s, errs := parseYAML(t, carryOnSection+`
- name: other
  addresses: ["198.51.100.1-198.51.100.9"]
  namespaces: [other]
`)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	_, apply, err := c.PrepareReconfigure(ctx, backends.Options{Name: "metal", ClusterID: "c1", Settings: s})
	if err != nil {
		t.Fatal(err)
	}
	apply()
	st, err := lb.EnsureLoadBalancer(ctx, "c1", newService("x"), nil)
	if err != nil || ingressIPs(st) != "192.0.2.3" {
		t.Errorf("after a reload that left the auto pool alone, EnsureLoadBalancer(x) = %q, %v; want 192.0.2.3 (192.0.2.1 still rests)", ingressIPs(st), err)
	}
}
