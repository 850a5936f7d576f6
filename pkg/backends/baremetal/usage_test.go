package baremetal

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestPoolUsage: per pool and family, in config order, the addresses taken
// and usable, as the addresses metrics count them; a backend without pools
// reports none.
func TestPoolUsage(t *testing.T) {
	c := newTestCloud(t, lbSection)
	c.lb.Seed(nil)
	ctx := context.Background()
	for _, svc := range []*corev1.Service{
		newService("dual", withFamilies(corev1.IPFamilyPolicyRequireDualStack, corev1.IPv4Protocol, corev1.IPv6Protocol)),
		newService("fixed", withIPs("198.51.100.11")),
	} {
		if _, err := c.lb.EnsureLoadBalancer(ctx, "c", svc, nil); err != nil {
			t.Fatalf("%s: %v", svc.Name, err)
		}
	}
	got := fmt.Sprint(c.PoolUsage())
	want := "[{auto IPv4 1 2} {auto IPv6 1 2} {manual IPv4 1 3} {team IPv4 0 6}]"
	if got != want {
		t.Errorf("PoolUsage() = %s, want %s", got, want)
	}
	if u := newTestCloud(t, "inventory:\n- name: bm-1\n").PoolUsage(); u != nil {
		t.Errorf("PoolUsage() without pools = %v, want none", u)
	}
}
