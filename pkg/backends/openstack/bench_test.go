package openstack

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// sweepNodes is a cluster of n Nova servers and their nodes, half with a
// providerID and half found by name.
func sweepNodes(b *testing.B, n int) (*FakeOpenStack, []*corev1.Node) {
	f := NewFakeOpenStack(b)
	nodes := make([]*corev1.Node, n)
	for i := range n {
		id := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
		f.AddServer(FakeNovaServer{ID: id, Name: fmt.Sprintf("node-%d", i), Zone: "az-1", Flavor: "m1.medium",
			Addresses: map[string][]string{"private": {fmt.Sprintf("10.2.%d.%d", i/250, i%250+1)}}})
		nodes[i] = newNode(fmt.Sprintf("node-%d", i))
		if i%2 == 0 {
			nodes[i].Spec.ProviderID = "openstack:///" + id
		}
	}
	return f, nodes
}

// BenchmarkNodeSweep is one upstream sweep (InstanceMetadata for every
// node) at 1,000 nodes: through the backend's cache (a constant number of
// paginated list calls) beside a per-node GET, in the same run. Reported:
// Nova calls per sweep.
func BenchmarkNodeSweep(b *testing.B) {
	const n = 1000
	b.Run("cached-list", func(b *testing.B) {
		f, nodes := sweepNodes(b, n)
		s := f.Settings(b)
		s.Instances.PageSize = 500
		before := f.Lists.Load() + f.Gets.Load()
		for b.Loop() {
			c := fakeCloud(b, s) // A cold cache each sweep: the worst case.
			for _, node := range nodes {
				if _, err := c.instances.InstanceMetadata(context.Background(), node); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(f.Lists.Load()+f.Gets.Load()-before)/float64(b.N), "nova-calls/sweep")
		b.ReportMetric(n, "nodes")
	})
	b.Run("per-node-get", func(b *testing.B) {
		f, nodes := sweepNodes(b, n)
		c := fakeCloud(b, f.Settings(b))
		nv := c.instances.cache.src
		before := f.Lists.Load() + f.Gets.Load()
		for b.Loop() {
			for i := range nodes {
				if _, err := nv.getServer(context.Background(), fmt.Sprintf("00000000-0000-4000-8000-%012d", i)); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(f.Lists.Load()+f.Gets.Load()-before)/float64(b.N), "nova-calls/sweep")
		b.ReportMetric(n, "nodes")
	})
}

// BenchmarkServiceToAddress is the wall time from a new Service to its
// address on the real Octavia, calling Ensure again after each RetryError's
// delay as the service controller does. Reported: Ensure calls and
// OpenStack calls (reads, writes) per Service.
func BenchmarkServiceToAddress(b *testing.B) {
	s := realOctavia(b)
	c := newRealCloud(b, s, "b"+randomID(b))
	nodes := []*corev1.Node{newNode("n1", withInternalIP("10.5.0.1")), newNode("n2", withInternalIP("10.5.0.2"))}
	var calls int
	var reads, writes float64
	i := 0
	for b.Loop() {
		svc := newService(fmt.Sprintf("bench-%d", i))
		i++
		r0, w0 := apiCalls(b, c)
		_, n := ensureConverged(b, c.lb, svc, nodes)
		calls += n
		r1, w1 := apiCalls(b, c)
		reads += r1 - r0
		writes += w1 - w0
		b.StopTimer()
		deleteConverged(b, c.lb, svc)
		b.StartTimer()
	}
	b.ReportMetric(float64(calls)/float64(b.N), "ensure-calls/op")
	b.ReportMetric(float64(reads)/float64(b.N), "reads/op")
	b.ReportMetric(float64(writes)/float64(b.N), "writes/op")
}

// BenchmarkSteadyStateResync is a resync of 20 converged load balancers on
// the real Octavia (UpdateLoadBalancer for each, nothing changed). Goal:
// zero mutating calls.
func BenchmarkSteadyStateResync(b *testing.B) {
	s := realOctavia(b)
	c := newRealCloud(b, s, "b"+randomID(b))
	nodes := []*corev1.Node{newNode("n1", withInternalIP("10.6.0.1")), newNode("n2", withInternalIP("10.6.0.2"))}
	svcs := make([]*corev1.Service, 20)
	for i := range svcs {
		svcs[i] = newService(fmt.Sprintf("steady-%d", i), withLocalTraffic(32100))
	}
	b.Cleanup(func() {
		roundRobin(b, "delete", svcs, func(svc *corev1.Service) error {
			return c.lb.EnsureLoadBalancerDeleted(context.Background(), "kubernetes", svc)
		})
	})
	roundRobin(b, "ensure", svcs, func(svc *corev1.Service) error {
		_, err := c.lb.EnsureLoadBalancer(context.Background(), "kubernetes", svc, nodes)
		return err
	})
	r0, w0 := apiCalls(b, c)
	start := time.Now()
	for b.Loop() {
		for _, svc := range svcs {
			if err := c.lb.UpdateLoadBalancer(context.Background(), "kubernetes", svc, nodes); err != nil {
				b.Fatal(err)
			}
		}
	}
	r1, w1 := apiCalls(b, c)
	b.ReportMetric(float64(w1-w0)/float64(b.N), "writes/resync")
	b.ReportMetric(float64(r1-r0)/float64(b.N), "reads/resync")
	b.ReportMetric(time.Since(start).Seconds()/float64(b.N), "s/resync")
}

// roundRobin calls op for each Service in turn, as one controller worker
// would, until every one has returned nil; a RetryError means "again
// later". Octavia on sqlite (the test stack) answers 500 "database is
// locked" when its API and worker write at once; that is retried too, as
// the service controller would retry any error.
func roundRobin(b *testing.B, what string, svcs []*corev1.Service, op func(*corev1.Service) error) {
	b.Helper()
	pending := slices.Clone(svcs)
	deadline := time.Now().Add(10 * time.Minute)
	for len(pending) > 0 {
		var next []*corev1.Service
		for _, svc := range pending {
			err := op(svc)
			if err != nil && !isRetry(err) && !sqliteLocked(err) {
				b.Fatalf("%s %s: %v", what, svc.Name, err)
			}
			if err != nil {
				next = append(next, svc)
			}
		}
		pending = next
		if time.Now().After(deadline) {
			b.Fatalf("%s: %d Services still not done", what, len(pending))
		}
		if len(pending) > 0 {
			time.Sleep(300 * time.Millisecond)
		}
	}
}
