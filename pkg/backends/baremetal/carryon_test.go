package baremetal

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// carryOnSection has one automatic pool of nine addresses.
const carryOnSection = `
addressPools:
- name: auto
  addresses: ["192.0.2.1-192.0.2.9"]
`

// TestPlanStepsGiveWhatTheSwitchGives: the switch's allocator hands out
// the next free address after the last it gave, so an address freed
// behind it (a Service refused, its status cleared) is not given to the
// next Service. Dry runs that are steps of one plan (backends.WithCarryOn)
// move the cursors on as those syncs do, so the plan gives the next
// Service what the switch gives it; a lone dry run (the router's, in a
// running CCM) leaves them (planswitch seed 1796342109047322123: the plan
// gave 192.0.2.1, freed behind the cursor, where the switch gave .5).
func TestPlanStepsGiveWhatTheSwitchGives(t *testing.T) {
	before := []*corev1.Service{newService("a", withStatus("192.0.2.1")), newService("b", withStatus("192.0.2.2"))}
	// run is the switch's sequence of syncs (or the plan's, under a dry
	// run, which shows each Service's new status as the plan does): s0
	// is given an address, a is refused and its status cleared, then c.
	run := func(ctx context.Context, lb *LoadBalancer) (s0, c string) {
		t.Helper()
		lb.Seed(before)
		st, err := lb.EnsureLoadBalancer(ctx, "c1", newService("s0"), nil)
		if err != nil {
			t.Fatal(err)
		}
		lb.Seed([]*corev1.Service{newService("s0", withStatus(ingressIPs(st))), newService("a")})
		st2, err := lb.EnsureLoadBalancer(ctx, "c1", newService("c"), nil)
		if err != nil {
			t.Fatal(err)
		}
		return ingressIPs(st), ingressIPs(st2)
	}
	live0, live := run(context.Background(), newTestLB(t, carryOnSection))
	if live0 != "192.0.2.3" || live != "192.0.2.4" {
		t.Fatalf("the switch gave s0 %s and c %s; want 192.0.2.3 and 192.0.2.4 (next free after the last given)", live0, live)
	}
	dry, _ := backends.WithDryRun(backends.WithCarryOn(context.Background()))
	if plan0, plan := run(dry, newTestLB(t, carryOnSection)); plan0 != live0 || plan != live {
		t.Errorf("the plan gave s0 %s and c %s; the switch %s and %s", plan0, plan, live0, live)
	}
	// A lone dry run moves nothing: the next one, and the next live
	// assignment, are given the same address.
	lb := newTestLB(t, carryOnSection)
	lb.Seed(before)
	lone, _ := backends.WithDryRun(context.Background())
	for _, ctx := range []context.Context{lone, lone, context.Background()} {
		if st, err := lb.EnsureLoadBalancer(ctx, "c1", newService("x"), nil); err != nil || ingressIPs(st) != "192.0.2.3" {
			t.Errorf("EnsureLoadBalancer(x) = %q, %v; want 192.0.2.3 (no dry run before moved the cursor)", ingressIPs(st), err)
		}
	}
}
