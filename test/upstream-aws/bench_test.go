package upstreamaws

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// The sweep benchmark's cluster: its VPC holds vpcInstances instances, the
// cluster's nodes among them but for every peeredEvery-th node, which is in
// a peered VPC.
const (
	vpcInstances = 20000
	peeredEvery  = 10
	peeredVPC    = "vpc-0peered"
	// ourTTL is our instance cache's TTL in the benchmark: one sweep is
	// served by one listing; the next, after the TTL, lists again, as a
	// sweep every 5 minutes does with the default TTL of 1 minute.
	ourTTL = 3 * time.Second
)

// sweepEnv seeds the fake with the sweep benchmark's VPC and nodes.
func sweepEnv(b *testing.B, nodes int) (*env, []*v1.Node) {
	fake := awsfake.New(region)
	seeded := fake.Seed(awsfake.SeedSpec{ClusterID: clusterID, NodeSecurityGroup: true})
	var ns []*v1.Node
	inVPC := 0
	for k := range nodes {
		in := sweepInstance(seeded, fmt.Sprintf("i-0a%015x", k), 110+k/250, 1+k%250)
		in.Tags = map[string]string{"kubernetes.io/cluster/" + clusterID: "owned"}
		if k%peeredEvery == peeredEvery-1 {
			in.VPCID, in.SubnetID = peeredVPC, "subnet-0peered"
		} else {
			inVPC++
		}
		fake.AddInstance(in)
		seeded.Instances = append(seeded.Instances, in)
		ns = append(ns, readyNode(in))
	}
	for j := range vpcInstances - inVPC {
		fake.AddInstance(sweepInstance(seeded, fmt.Sprintf("i-0b%015x", j), 140+j/250, 1+j%250))
	}
	srv := httptest.NewServer(fake)
	b.Cleanup(srv.Close)
	return &env{fake: fake, seeded: seeded, cloud: upstreamCloud(b, srv.URL, seeded.VPCID, seeded.PrivateSubnets[0]), url: srv.URL}, ns
}

func sweepInstance(s awsfake.Seeded, id string, third, fourth int) awsfake.Instance {
	ip := fmt.Sprintf("10.0.%d.%d", third, fourth)
	return awsfake.Instance{ID: id, InstanceType: "m5.large", Zone: region + "a", ZoneID: "euw1-az1", VPCID: s.VPCID, SubnetID: s.PrivateSubnets[0],
		State: "running", PrivateIPs: []string{ip}, PrivateDNSName: fmt.Sprintf("ip-10-0-%d-%d.%s.compute.internal", third, fourth, region),
		SourceDestCheck: true, SecurityGroups: []string{s.NodeSecurityGroup}}
}

// BenchmarkSweep is the node controllers' full sweep, upstream's provider
// beside ours on the same fake in the same run: InstanceExists and
// InstanceShutdown (node-lifecycle controller) and InstanceMetadata (node
// controller) for every node, at 50, 1,000 and 5,000 nodes in a VPC of
// 20,000 instances, a tenth of the nodes in a peered VPC. Reported:
// DescribeInstances and all EC2 calls per sweep. Goal for ours: at most
// ⌈nodes/1000⌉+1 DescribeInstances.
//
//   - upstream/1-worker: one node after another, as upstream's controllers
//     sweep by default. Upstream batches the DescribeInstances calls that
//     arrive within ~100 ms of each other, so one caller waits ~100 ms a
//     call: beyond upstreamSample nodes the sweep is measured on that many
//     and scaled to all (it costs the same per node, 3 calls, at any size).
//   - upstream/64-workers: the whole sweep from 64 goroutines at once, upstream's
//     batcher at its best.
//   - ours: as the CCM runs it, with the Node informer, one node after
//     another; two sweeps, the first after a start, the second after its
//     cache's TTL.
//
// Run it with -benchtime 1x (hack/bench.sh does): an iteration is whole
// sweeps.
func BenchmarkSweep(b *testing.B) {
	for _, nodes := range []int{50, 1000, 5000} {
		e, ns := sweepEnv(b, nodes)
		b.Run(fmt.Sprintf("nodes=%d/upstream/1-worker", nodes), func(b *testing.B) {
			i, _ := e.cloud.InstancesV2()
			sample := ns[:min(len(ns), upstreamSample)]
			e.fake.ResetCalls()
			for b.Loop() {
				sweep(b, i, sample, 1)
			}
			reportSweeps(b, e.fake, float64(b.N)*float64(len(sample))/float64(len(ns)))
		})
		b.Run(fmt.Sprintf("nodes=%d/upstream/64-workers", nodes), func(b *testing.B) {
			i, _ := e.cloud.InstancesV2()
			e.fake.ResetCalls()
			for b.Loop() {
				sweep(b, i, ns, 64)
			}
			reportSweeps(b, e.fake, float64(b.N))
		})
		b.Run(fmt.Sprintf("nodes=%d/ours", nodes), func(b *testing.B) {
			mine := ourCloud(b, e.url, e.seeded.VPCID, fmt.Sprintf(`"instanceCacheTTL": %q`, ourTTL))
			watchNodes(b, mine, ns)
			i, _ := mine.InstancesV2()
			e.fake.ResetCalls()
			for b.Loop() {
				sweep(b, i, ns, 1)
				b.StopTimer()
				time.Sleep(ourTTL + 100*time.Millisecond)
				b.StartTimer()
				sweep(b, i, ns, 1)
			}
			reportSweeps(b, e.fake, 2*float64(b.N))
			if got, goal := e.fake.Calls("DescribeInstances"), 2*b.N*((nodes+999)/1000+1); got > goal {
				b.Errorf("ours: %d DescribeInstances in %d sweeps of %d nodes; goal at most %d", got, 2*b.N, nodes, goal)
			}
		})
	}
}

// upstreamSample is how many nodes upstream's one-worker sweep is measured
// on (see BenchmarkSweep).
const upstreamSample = 100

// watchNodes hands cloud a Node informer over ns, as the CCM does.
func watchNodes(b *testing.B, cloud cloudprovider.Interface, ns []*v1.Node) {
	objs := make([]runtime.Object, len(ns))
	for i, n := range ns {
		objs[i] = n
	}
	f := informers.NewSharedInformerFactory(testutil.NewClientset(objs...), 0)
	cloud.(cloudprovider.InformerUser).SetInformers(f)
	stop := make(chan struct{})
	b.Cleanup(func() { close(stop); f.Shutdown() })
	f.Start(stop)
	f.WaitForCacheSync(stop)
}

// sweep asks about every node, from workers goroutines.
func sweep(b *testing.B, i cloudprovider.InstancesV2, ns []*v1.Node, workers int) {
	ctx := context.Background()
	var g errgroup.Group
	g.SetLimit(workers)
	for _, n := range ns {
		g.Go(func() error {
			if ok, err := i.InstanceExists(ctx, n); err != nil || !ok {
				return fmt.Errorf("InstanceExists(%s) = %v, %v", n.Name, ok, err)
			}
			if _, err := i.InstanceShutdown(ctx, n); err != nil {
				return err
			}
			_, err := i.InstanceMetadata(ctx, n)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
}

func reportSweeps(b *testing.B, fake *awsfake.Server, sweeps float64) {
	b.ReportMetric(float64(fake.Calls("DescribeInstances"))/sweeps, "DescribeInstances/sweep")
	b.ReportMetric(float64(fake.TotalCalls())/sweeps, "calls/sweep")
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/sweeps, "ms/sweep")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkNLBCreate counts the calls upstream's provider and ours make to
// create an NLB for a one-port Service on three nodes, to ensure it again
// with nothing changed (goal for ours: no more calls than upstream's to
// create, 0 mutating calls unchanged), and to delete it, on the same fake.
func BenchmarkNLBCreate(b *testing.B) {
	e := newEnv(b, 3)
	mine := ourCloud(b, e.url, e.seeded.VPCID)
	upstream := -1.0
	b.Run("upstream", func(b *testing.B) {
		lb, _ := e.cloud.LoadBalancer()
		upstream = nlbLifecycle(b, e, lb)
	})
	b.Run("ours", func(b *testing.B) {
		lb, _ := mine.LoadBalancer()
		if ours := nlbLifecycle(b, e, lb); upstream >= 0 && ours > upstream {
			b.Errorf("ours: %.1f calls to create an NLB; upstream's %.1f", ours, upstream)
		}
	})
}

// nlbPerIteration is how many Services an iteration of BenchmarkNLBCreate
// takes through their lifecycle: the first NLB a provider makes costs it
// one-time reads, averaged over these.
const nlbPerIteration = 10

// nlbLifecycle creates, ensures and deletes NLBs, reports the calls per
// NLB and returns the calls per create.
func nlbLifecycle(b *testing.B, e *env, lb cloudprovider.LoadBalancer) float64 {
	ctx := context.Background()
	var creates, again, mutating, deletes int
	n := 0
	step := func(count *int, f func() error) {
		e.fake.ResetCalls()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		*count += e.fake.TotalCalls()
	}
	for b.Loop() {
		for range nlbPerIteration {
			svc := nlbService(fmt.Sprintf("bench%d", n), 80)
			n++
			ensure := func() error {
				_, err := lb.EnsureLoadBalancer(ctx, clusterID, svc, e.nodes())
				return err
			}
			step(&creates, ensure)
			step(&again, ensure)
			mutating += len(e.fake.MutatingCalls())
			step(&deletes, func() error { return lb.EnsureLoadBalancerDeleted(ctx, clusterID, svc) })
		}
	}
	if lbs := e.fake.LoadBalancers(); len(lbs) != 0 {
		b.Fatalf("load balancers left: %v", lbs)
	}
	per := float64(n)
	b.ReportMetric(float64(creates)/per, "calls/create")
	b.ReportMetric(float64(again)/per, "calls/unchanged-ensure")
	b.ReportMetric(float64(mutating)/per, "mutating/unchanged-ensure")
	b.ReportMetric(float64(deletes)/per, "calls/delete")
	b.ReportMetric(0, "ns/op")
	if mutating != 0 {
		b.Errorf("%d mutating calls in %d unchanged ensures", mutating, n)
	}
	return float64(creates) / per
}
