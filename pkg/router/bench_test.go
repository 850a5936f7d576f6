package router

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	cloudprovider "k8s.io/cloud-provider"
	upstreamfake "k8s.io/cloud-provider/fake"
)

// noopInstances answers at once, so a benchmark through it measures only
// the router's own overhead.
type noopInstances struct {
	*upstreamfake.Cloud
	md cloudprovider.InstanceMetadata
}

func (n *noopInstances) InstancesV2() (cloudprovider.InstancesV2, bool) { return n, true }
func (n *noopInstances) InstanceExists(context.Context, *corev1.Node) (bool, error) {
	return true, nil
}
func (n *noopInstances) InstanceShutdown(context.Context, *corev1.Node) (bool, error) {
	return false, nil
}
func (n *noopInstances) InstanceMetadata(context.Context, *corev1.Node) (*cloudprovider.InstanceMetadata, error) {
	md := n.md
	return &md, nil
}

// BenchmarkRouterOverhead compares each InstancesV2 call made through the
// router with the same call made on the backend directly. The difference
// per call is the router's overhead (goal: under 1µs and at most 2 extra
// allocations).
func BenchmarkRouterOverhead(b *testing.B) {
	backend := &noopInstances{Cloud: &upstreamfake.Cloud{DisableLoadBalancers: true, DisableRoutes: true},
		md: cloudprovider.InstanceMetadata{ProviderID: "baremetal://bm-1", InstanceType: "r650", Zone: "rack-a", Region: "dc-1",
			AdditionalLabels: map[string]string{"example.com/tier": "gold"}}}
	r := mustRouter(b, testConfig(),
		Backend{Name: "metal", Scheme: "baremetal", Cloud: backend},
		Backend{Name: "vs", Scheme: "vsphere", Cloud: instanceCloud(true, nil)},
		Backend{Name: "aws", Scheme: "aws", Cloud: instanceCloud(true, nil)},
	)
	node := newNode("bm-1", withProviderID("baremetal://bm-1"))
	ctx := context.Background()
	calls := []struct {
		name string
		fn   func(cloudprovider.InstancesV2) error
	}{
		{"InstanceExists", func(i cloudprovider.InstancesV2) error { _, err := i.InstanceExists(ctx, node); return err }},
		{"InstanceShutdown", func(i cloudprovider.InstancesV2) error { _, err := i.InstanceShutdown(ctx, node); return err }},
		{"InstanceMetadata", func(i cloudprovider.InstancesV2) error { _, err := i.InstanceMetadata(ctx, node); return err }},
	}
	for _, c := range calls {
		for _, via := range []struct {
			name string
			i    cloudprovider.InstancesV2
		}{{"direct", backend}, {"router", r}} {
			b.Run(c.name+"/"+via.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := c.fn(via.i); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkNodeSweep5000 is one full sweep of the node controllers over
// 5,000 nodes through the router (InstanceExists, InstanceShutdown and
// InstanceMetadata per node) with a backend answering from memory: the
// router's whole share of a sweep. Compare it with the cloud's share: at
// least one list call per 1,000 nodes, each tens of milliseconds.
func BenchmarkNodeSweep5000(b *testing.B) {
	benchmarkNodeSweep(context.Background(), b)
}

// BenchmarkNodeSweep5000Controllers is BenchmarkNodeSweep5000 with the
// contexts the upstream controllers pass: without leader election, one made
// by wait.ContextForChannel from the stop channel (a context.WithTimeout
// under it starts a goroutine); with it, the elector's context.WithCancel.
func BenchmarkNodeSweep5000Controllers(b *testing.B) {
	stop := make(chan struct{})
	defer close(stop)
	leader, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.Run("channel", func(b *testing.B) { benchmarkNodeSweep(wait.ContextForChannel(stop), b) })
	b.Run("leader", func(b *testing.B) { benchmarkNodeSweep(leader, b) })
}

func benchmarkNodeSweep(ctx context.Context, b *testing.B) {
	backend := &noopInstances{Cloud: &upstreamfake.Cloud{DisableLoadBalancers: true, DisableRoutes: true},
		md: cloudprovider.InstanceMetadata{ProviderID: "baremetal://bm", InstanceType: "r650", Zone: "rack-a", Region: "dc-1",
			AdditionalLabels: map[string]string{"example.com/tier": "gold"}}}
	r := mustRouter(b, testConfig(), Backend{Name: "metal", Scheme: "baremetal", Cloud: backend})
	nodes := make([]*corev1.Node, 5000)
	for i := range nodes {
		name := fmt.Sprintf("bm-%d", i)
		nodes[i] = newNode(name, withProviderID("baremetal://"+name))
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, node := range nodes {
			if _, err := r.InstanceExists(ctx, node); err != nil {
				b.Fatal(err)
			}
			if _, err := r.InstanceShutdown(ctx, node); err != nil {
				b.Fatal(err)
			}
			if _, err := r.InstanceMetadata(ctx, node); err != nil {
				b.Fatal(err)
			}
		}
	}
}
