package baremetal

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestReview66RequestedAddressRestsWhenReleased: after a restart (cursor
// at the pool's start) a Service "up" holding 192.0.2.1 goes away while
// b holds 192.0.2.2. An operator expects the next Service to get
// 192.0.2.3 whether or not up had requested its address (with
// load-balancer-ips, spec.loadBalancerIP or kube-vip's annotation):
// either way 192.0.2.1 was just released ahead of the cursor and must
// rest, or the switch's
// answer depends on the order of the release again (docs/baremetal.md,
// "Allocation is next-fit"). A requested address's lease is dropped while
// its reservation still holds it (mark sees it still taken), and the
// reservation ending later frees it with released=false: it never rests.
// Likewise a resting address that another Service requests for a while
// (say on another backend) is free at once when the request goes, though
// the cursor never passed it.
func TestReview66RequestedAddressRestsWhenReleased(t *testing.T) {
	ctx := context.Background()
	typeClusterIP := func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP }
	for _, tc := range []struct {
		name string
		tw   []svcTweak
		// gone ends up: deleted (Seed mode: EnsureLoadBalancerDeleted
		// then the informer's delete), or turned ClusterIP keeping its
		// annotation, its status cleared (informer mode).
		deleted bool
		// passing: up is unrequested and deleted; then another Service
		// requests 192.0.2.1 and drops the request again.
		passing bool
	}{
		{"unrequested, deleted", nil, true, false},
		{"load-balancer-ips, deleted", []svcTweak{withIPs("192.0.2.1")}, true, false},
		{"spec.loadBalancerIP, deleted", []svcTweak{func(s *corev1.Service) { s.Spec.LoadBalancerIP = "192.0.2.1" }}, true, false},
		{"kube-vip.io/loadbalancerIPs (reserved), deleted", []svcTweak{withAnnotation(kubeVIPLoadBalancerIPs, "192.0.2.1")}, true, false},
		{"unrequested, turned ClusterIP", nil, false, false},
		{"load-balancer-ips, turned ClusterIP", []svcTweak{withIPs("192.0.2.1")}, false, false},
		{"resting, requested by another Service for a while", nil, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lb := newTestLB(t, carryOnSection)
			up := newService("up", append([]svcTweak{withStatus("192.0.2.1")}, tc.tw...)...)
			lb.Seed([]*corev1.Service{up, newService("b", withStatus("192.0.2.2"))})
			if tc.deleted {
				if err := lb.EnsureLoadBalancerDeleted(ctx, "c1", up); err != nil {
					t.Fatal(err)
				}
				lb.onDelete(up)
			} else {
				lb.synced = func() bool { return true } // the informer reports the status change
				lb.onChange(newService("up", append([]svcTweak{typeClusterIP}, tc.tw...)...))
			}
			if tc.passing {
				lb.onChange(newService("other", withIPs("192.0.2.1")))
				lb.onChange(newService("other"))
			}
			st, err := lb.EnsureLoadBalancer(ctx, "c1", newService("x"), nil)
			if err != nil || ingressIPs(st) != "192.0.2.3" {
				t.Errorf("EnsureLoadBalancer(x) = %q, %v; want 192.0.2.3 (192.0.2.1, released ahead of the cursor, rests)", ingressIPs(st), err)
			}
		})
	}
}
