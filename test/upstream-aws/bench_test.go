package upstreamaws

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkUpstreamSweep measures upstream's node sweep on the fake: the
// node-lifecycle controller's InstanceExists and InstanceShutdown and the
// node controller's InstanceMetadata for every node, as ours is measured in
// pkg/backends/aws (BenchmarkSweep). Reported: DescribeInstances and all
// EC2 calls per full sweep.
func BenchmarkUpstreamSweep(b *testing.B) {
	for _, nodes := range []int{50, 200} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			e := newEnv(b, nodes)
			i, _ := e.cloud.InstancesV2()
			ns := e.nodes()
			ctx := context.Background()
			e.fake.ResetCalls()
			for b.Loop() {
				for _, n := range ns {
					if ok, err := i.InstanceExists(ctx, n); err != nil || !ok {
						b.Fatalf("InstanceExists(%s) = %v, %v", n.Name, ok, err)
					}
					if _, err := i.InstanceShutdown(ctx, n); err != nil {
						b.Fatal(err)
					}
					if _, err := i.InstanceMetadata(ctx, n); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(e.fake.Calls("DescribeInstances"))/float64(b.N), "DescribeInstances/sweep")
			b.ReportMetric(float64(e.fake.TotalCalls())/float64(b.N), "calls/sweep")
		})
	}
}

// BenchmarkUpstreamNLBCreate measures the calls upstream makes to create an
// NLB for a one-port Service on three nodes, and to ensure it again with
// nothing changed.
func BenchmarkUpstreamNLBCreate(b *testing.B) {
	e := newEnv(b, 3)
	lb, _ := e.cloud.LoadBalancer()
	ctx := context.Background()
	var creates, mutating, again int
	n := 0
	for b.Loop() {
		svc := nlbService(fmt.Sprintf("bench%d", n), 80)
		n++
		e.fake.ResetCalls()
		if _, err := lb.EnsureLoadBalancer(ctx, clusterID, svc, e.nodes()); err != nil {
			b.Fatal(err)
		}
		creates += e.fake.TotalCalls()
		e.fake.ResetCalls()
		if _, err := lb.EnsureLoadBalancer(ctx, clusterID, svc, e.nodes()); err != nil {
			b.Fatal(err)
		}
		again += e.fake.TotalCalls()
		mutating += len(e.fake.MutatingCalls())
		if err := lb.EnsureLoadBalancerDeleted(ctx, clusterID, svc); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(creates)/float64(b.N), "calls/create")
	b.ReportMetric(float64(again)/float64(b.N), "calls/unchanged-ensure")
	b.ReportMetric(float64(mutating)/float64(b.N), "mutating/unchanged-ensure")
}
