package baremetal

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-base/metrics/testutil"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// TestReview66RestingAddressIsFreeNotExhausted: a dual-stack pool whose
// only free addresses rest (after a restart, "up" moved off metal). An
// operator reading addresses_in_use_total and PoolUsage expects a resting
// address to count as free (no Service holds it), and a new Service to
// get it rather than AddressPoolExhausted; a lone dry run before that
// says the same and leaves it resting. Once it is taken the pool is
// exhausted, and the error counts 3 of 3 in use.
func TestReview66RestingAddressIsFreeNotExhausted(t *testing.T) {
	ctx := context.Background()
	lb := newTestLB(t, `
addressPools:
- name: ds
  addresses: ["192.0.2.1-192.0.2.3", "2001:db8::1-2001:db8::2"]
`)
	up := newService("up", withFamilies(dual, v4, v6), withStatus("192.0.2.1", "2001:db8::1"))
	lb.Seed([]*corev1.Service{up,
		newService("b", withFamilies(dual, v4, v6), withStatus("192.0.2.2", "2001:db8::2")),
		newService("c", withStatus("192.0.2.3")),
	})
	if err := lb.EnsureLoadBalancerDeleted(ctx, "c1", up); err != nil {
		t.Fatal(err)
	}
	gauge := func(fam string) float64 {
		v, _ := testutil.GetGaugeMetricValue(addressesInUse.WithLabelValues("metal", "ds", fam))
		return v
	}
	if g4, g6 := gauge("IPv4"), gauge("IPv6"); g4 != 2 || g6 != 1 {
		t.Errorf("addresses_in_use_total with 192.0.2.1 and 2001:db8::1 resting = %v (IPv4), %v (IPv6); want 2, 1", g4, g6)
	}
	if u := lb.poolUsage(); len(u) != 2 || u[0].Used != 2 || u[1].Used != 1 {
		t.Errorf("PoolUsage = %+v; want IPv4 2 of 3, IPv6 1 of 2", u)
	}
	x := newService("x", withFamilies(dual, v4, v6))
	dry, _ := backends.WithDryRun(ctx)
	for _, c := range []context.Context{dry, ctx} {
		st, err := lb.EnsureLoadBalancer(c, "c1", x, nil)
		if err != nil || ingressIPs(st) != "192.0.2.1,2001:db8::1" {
			t.Fatalf("EnsureLoadBalancer(x, dry run %v) = %q, %v; want 192.0.2.1,2001:db8::1 (only resting addresses are free: they wake)", backends.DryRun(c), ingressIPs(st), err)
		}
	}
	_, err := lb.EnsureLoadBalancer(ctx, "c1", newService("y"), nil)
	if ue, ok := backends.AsUserError(err); !ok || ue.Reason != ReasonAddressPoolExhausted || !strings.Contains(err.Error(), "ds (3 of 3 in use)") {
		t.Errorf("EnsureLoadBalancer(y) = %v; want %s naming ds (3 of 3 in use)", err, ReasonAddressPoolExhausted)
	}
}
