package openstack

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
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
// node) at 1,000 and 5,000 nodes: through the backend's cache (paginated
// list calls of 1,000 servers, Nova's default page) beside a per-node GET,
// in the same run. Reported: Nova calls per sweep; the cached sweep fails
// above the goal of ⌈nodes/1000⌉+1 (the +1: Nova answers a full last page
// with one more, empty page).
func BenchmarkNodeSweep(b *testing.B) {
	const page = 1000
	for _, n := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("cached-list/nodes=%d", n), func(b *testing.B) {
			f, nodes := sweepNodes(b, n)
			s := f.Settings(b)
			s.Instances.PageSize = page
			before := f.Lists.Load() + f.Gets.Load()
			for b.Loop() {
				c := fakeCloud(b, s) // A cold cache each sweep: the worst case.
				for _, node := range nodes {
					if _, err := c.instances.InstanceMetadata(context.Background(), node); err != nil {
						b.Fatal(err)
					}
				}
			}
			calls := float64(f.Lists.Load()+f.Gets.Load()-before) / float64(b.N)
			if goal := float64((n+page-1)/page + 1); calls > goal {
				b.Errorf("%v Nova calls per sweep of %d nodes, goal ≤ %v", calls, n, goal)
			}
			b.ReportMetric(calls, "nova-calls/sweep")
			b.ReportMetric(float64(n), "nodes")
		})
		b.Run(fmt.Sprintf("per-node-get/nodes=%d", n), func(b *testing.B) {
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
			b.ReportMetric(float64(n), "nodes")
		})
	}
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
func roundRobin(b testing.TB, what string, svcs []*corev1.Service, op func(*corev1.Service) error) {
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

// benchLoadBalancers is the number of load balancers BenchmarkRepairPass
// seeds: MCCM_BENCH_LOAD_BALANCERS, default 1,000.
func benchLoadBalancers(b *testing.B) int {
	n := 1000
	if v := os.Getenv("MCCM_BENCH_LOAD_BALANCERS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("MCCM_BENCH_LOAD_BALANCERS=%q: want a positive number", v)
		}
	}
	return n
}

// BenchmarkRepairPass is one drift-repair pass with nothing changed over
// 1,000 load balancers on the real Octavia (seeded by seedLoadBalancers):
// BeginRepairPass, then EnsureLoadBalancer for every Service under its
// ctx; beside it the same Ensures without the snapshot and the first pass
// of a backend just started (members not yet remembered: one member read
// per pool), in the same run. Reported per pass: OpenStack read calls and
// mutating calls (must be 0).
func BenchmarkRepairPass(b *testing.B) {
	n := benchLoadBalancers(b)
	s := realOctavia(b)
	cluster := "b" + randomID(b)
	c := newRealCloud(b, s, cluster)
	nodes := []*corev1.Node{newNode("n1", withInternalIP("10.6.1.1")), newNode("n2", withInternalIP("10.6.1.2"))}
	svcs := seedLoadBalancers(b, c, "pass", n, nodes)
	report := func(b *testing.B, reads, writes float64) {
		b.ReportMetric(reads/float64(b.N), "reads/pass")
		b.ReportMetric(writes/float64(b.N), "writes/pass")
		b.ReportMetric(float64(n), "load-balancers")
		if writes != 0 {
			b.Errorf("%v mutating calls with nothing changed, want 0", writes)
		}
	}
	b.Run("no-snapshot", func(b *testing.B) {
		var reads, writes float64
		for b.Loop() {
			r, w := repairPassOnce(b, c, svcs, nodes, false)
			reads, writes = reads+r, writes+w
		}
		report(b, reads, writes)
	})
	b.Run("snapshot", func(b *testing.B) {
		// Members remembered (here from no-snapshot's reads), as after the
		// controller's first sync.
		repairPassOnce(b, c, svcs, nodes, true)
		var reads, writes float64
		for b.Loop() {
			r, w := repairPassOnce(b, c, svcs, nodes, true)
			reads, writes = reads+r, writes+w
		}
		report(b, reads, writes)
		b.ReportMetric(float64(c.lb.pageSize), "page-size")
	})
	b.Run("snapshot-first-pass", func(b *testing.B) {
		var reads, writes float64
		for b.Loop() {
			fresh := newRealCloud(b, s, cluster)
			r, w := repairPassOnce(b, fresh, svcs, nodes, true)
			reads, writes = reads+r, writes+w
		}
		report(b, reads, writes)
	})
}

// repairPassOnce ensures every Service once, under a repair pass when
// snapshot is set, and returns the OpenStack reads and writes it took. A
// Service asked to retry or changed is a failure: nothing changed. The
// Services are ensured one after another: the test stack's Octavia API
// (two uwsgi processes, each held by one keep-alive connection) starves
// more concurrent clients into timeouts.
func repairPassOnce(b *testing.B, c *Cloud, svcs []*corev1.Service, nodes []*corev1.Node, snapshot bool) (reads, writes float64) {
	b.Helper()
	r0, w0 := apiCalls(b, c)
	ctx := context.Background()
	if snapshot {
		passCtx, end, err := c.BeginRepairPass(ctx, "kubernetes")
		if err != nil {
			b.Fatalf("BeginRepairPass: %v", err)
		}
		defer end()
		ctx = passCtx
	}
	for _, svc := range svcs {
		if err := ensureUnchanged(ctx, c, svc, nodes); err != nil {
			b.Fatal(err)
		}
	}
	r1, w1 := apiCalls(b, c)
	return r1 - r0, w1 - w0
}

// ensureUnchanged ensures a Service that should need no change.
func ensureUnchanged(ctx context.Context, c *Cloud, svc *corev1.Service, nodes []*corev1.Node) error {
	svcCtx, changes := backends.WithChangeReport(ctx)
	_, err := c.lb.EnsureLoadBalancer(svcCtx, "kubernetes", svc, nodes)
	for sqliteLocked(err) {
		_, err = c.lb.EnsureLoadBalancer(svcCtx, "kubernetes", svc, nodes)
	}
	if err != nil || len(changes()) > 0 {
		return fmt.Errorf("EnsureLoadBalancer %s with nothing changed: %w, changes %q", svc.Name, err, changes())
	}
	return nil
}
