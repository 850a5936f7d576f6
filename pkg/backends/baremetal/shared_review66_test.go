package baremetal

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// TestReview66SharerJoinsAddressOfLeavingSharer: "up" holds 192.0.2.1 with
// allow-shared-ip key k and moves to another cloud; "s" (key k, another
// port) is new. `plan` releases nothing, so it says s joins 192.0.2.1
// (a Service with a key joins its key's address when it can). The switch
// gives the same when up's move off metal finishes after s's sync. When it
// finishes first, up was the last sharer: 192.0.2.1 rests, and s gets a
// fresh 192.0.2.3. Before aefd53b all three gave 192.0.2.1 (a free address
// ahead of the restart cursor was handed out); the rest makes the switch's
// answer depend on the order again, and differ from the plan. An operator
// expects the plan to say what the switch does (the guarantee this commit
// was made for), and a sharer to keep landing on its key's address.
func TestReview66SharerJoinsAddressOfLeavingSharer(t *testing.T) {
	seeded := func() []*corev1.Service {
		return []*corev1.Service{
			newService("up", withShared("k"), withStatus("192.0.2.1")),
			newService("b", withStatus("192.0.2.2")),
		}
	}
	s := newService("s", withShared("k"), withPorts(8080))
	run := func(ctx context.Context, releaseFirst bool) string {
		t.Helper()
		lb := newTestLB(t, carryOnSection)
		lb.Seed(seeded())
		release := func() {
			if err := lb.EnsureLoadBalancerDeleted(ctx, "c1", newService("up", withShared("k"), withStatus("192.0.2.1"))); err != nil {
				t.Fatal(err)
			}
		}
		if releaseFirst {
			release()
		}
		st, err := lb.EnsureLoadBalancer(ctx, "c1", s, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !releaseFirst {
			release()
		}
		return ingressIPs(st)
	}
	dry, _ := backends.WithDryRun(backends.WithCarryOn(context.Background()))
	plan := run(dry, true)
	after := run(context.Background(), false)
	first := run(context.Background(), true)
	if plan != after || plan != first {
		t.Errorf("s was given: plan %s, switch with up's release after s %s, switch with up's release first %s; want all the same", plan, after, first)
	}
}
