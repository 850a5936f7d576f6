package baremetal

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// BenchmarkAllocate measures one allocation (EnsureLoadBalancer of a new
// Service, then its release) in a pool where assigned addresses are already
// held. probes/op counts the addresses the allocator looked at.
func BenchmarkAllocate(b *testing.B) {
	for _, assigned := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("assigned=%d", assigned), func(b *testing.B) {
			benchAllocate(b, "addressPools: [{name: p, addresses: [10.0.0.0/16]}]", assigned)
		})
	}
	// The worst case of next-fit: one free address, just behind the cursor.
	b.Run("assigned=10000/free=1", func(b *testing.B) {
		benchAllocate(b, "addressPools: [{name: p, addresses: [10.0.0.1-10.0.39.17]}]", 10000)
	})
}

func benchAllocate(b *testing.B, section string, assigned int) {
	lb := newTestLB(b, section)
	ctx := context.Background()
	for i := range assigned {
		if _, err := lb.EnsureLoadBalancer(ctx, "c1", newService(fmt.Sprintf("held-%d", i)), nil); err != nil {
			b.Fatal(err)
		}
	}
	svcs := make([]*corev1.Service, 1024)
	for i := range svcs {
		svcs[i] = newService(fmt.Sprintf("bench-%d", i))
	}
	probes := lb.alloc.probes
	n := 0
	for i := 0; b.Loop(); i++ {
		n++
		svc := svcs[i%len(svcs)]
		if _, err := lb.EnsureLoadBalancer(ctx, "c1", svc, nil); err != nil {
			b.Fatal(err)
		}
		if err := lb.EnsureLoadBalancerDeleted(ctx, "c1", svc); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(lb.alloc.probes-probes)/float64(n), "probes/op")
}
