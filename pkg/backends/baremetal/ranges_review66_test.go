package baremetal

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestReview66RestingAcrossRangesAndPools: the promise of aefd53b is that
// which address the next Service gets no longer depends on whether another
// Service's move off metal (its release) finished before or after the
// others' assignments, so `plan` (which releases nothing) can say it. An
// operator whose pool is two CIDRs/ranges (or who has two auto pools)
// expects the same: after a restart the first range is full of seeded
// statuses, "up" moves to another cloud, and the next Services get the
// second range's addresses in both orders. With the release first, the
// first range's only free address is the resting one, so it is woken and
// handed out at once: the order decides again.
func TestReview66RestingAcrossRangesAndPools(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ name, section string }{
		{"two ranges in one pool", `
addressPools:
- name: auto
  addresses: ["192.0.2.1-192.0.2.3", "192.0.2.10-192.0.2.12"]
`},
		{"two pools", `
addressPools:
- name: first
  addresses: ["192.0.2.1-192.0.2.3"]
- name: second
  addresses: ["192.0.2.10-192.0.2.12"]
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gave := map[bool][]string{}
			for _, releaseFirst := range []bool{true, false} {
				lb := newTestLB(t, tc.section)
				lb.Seed([]*corev1.Service{
					newService("up", withStatus("192.0.2.1")),
					newService("b", withStatus("192.0.2.2")),
					newService("c", withStatus("192.0.2.3")),
				})
				release := func() {
					if err := lb.EnsureLoadBalancerDeleted(ctx, "c1", newService("up", withStatus("192.0.2.1"))); err != nil {
						t.Fatal(err)
					}
				}
				if releaseFirst {
					release()
				}
				for _, name := range []string{"x", "y"} {
					st, err := lb.EnsureLoadBalancer(ctx, "c1", newService(name), nil)
					if err != nil {
						t.Fatal(err)
					}
					gave[releaseFirst] = append(gave[releaseFirst], ingressIPs(st))
					if !releaseFirst && name == "x" {
						release()
					}
				}
			}
			if !slices.Equal(gave[true], gave[false]) {
				t.Errorf("release first gave %v, release after gave %v; want the same (192.0.2.1 rests: the order of the move off metal must not decide)", gave[true], gave[false])
			}
		})
	}
}
