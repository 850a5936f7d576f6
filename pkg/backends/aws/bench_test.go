package aws

import (
	"context"
	"fmt"
	"sort"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// expire makes the next lookup refresh the instance listing, as the first
// lookup of a sweep does (a sweep every 5 minutes, a cache TTL of 1).
func (c *instanceCache) expire() { c.snaps.Invalidate() }

// sweepEnv adds n instances with unique addresses and returns their Nodes.
func sweepEnv(b *testing.B, n int) (*env, []*corev1.Node) {
	e := newEnv(b)
	nodes := make([]*corev1.Node, n)
	for i := range n {
		in := e.addInstance(i, func(in *awsfake.Instance) {
			in.PrivateIPs = []string{fmt.Sprintf("10.0.%d.%d", 20+i/250, 1+i%250)}
			in.PrivateDNSName = fmt.Sprintf("ip-10-0-%d-%d.eu-west-1.compute.internal", 20+i/250, 1+i%250)
		})
		nodes[i] = newNode(in.PrivateDNSName, testutil.WithProviderID(providerID(in.Zone, in.ID)))
	}
	e.cloud.instances.setNodeLister(nodeLister(b, nodes...))
	return e, nodes
}

// BenchmarkNodeSweep is the cloud-node controller's periodic sweep:
// InstanceMetadata for every node. "cached" is the backend (bulk,
// paginated DescribeInstances behind singleflight); "per-node" is one
// DescribeInstances per node, as a provider without a cache makes, over the
// same fake in the same run. Goal: cached makes at most ceil(N/1000)+1
// DescribeInstances calls per sweep.
func BenchmarkNodeSweep(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		e, nodes := sweepEnv(b, n)
		inst := e.cloud.instances
		ctx := context.Background()
		b.Run(fmt.Sprintf("nodes=%d/cached", n), func(b *testing.B) {
			e.fake.ResetCalls()
			for b.Loop() {
				inst.cache.expire()
				for _, node := range nodes {
					if _, err := inst.InstanceMetadata(ctx, node); err != nil {
						b.Fatal(err)
					}
				}
			}
			reportSweep(b, e.fake)
		})
		b.Run(fmt.Sprintf("nodes=%d/per-node", n), func(b *testing.B) {
			client := e.cloud.lb.ec2
			e.fake.ResetCalls()
			for b.Loop() {
				for _, node := range nodes {
					id, err := parseProviderID(node.Spec.ProviderID)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := client.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}}); err != nil {
						b.Fatal(err)
					}
				}
			}
			reportSweep(b, e.fake)
		})
	}
}

func reportSweep(b *testing.B, fake *awsfake.Server) {
	sweeps := float64(b.N)
	b.ReportMetric(float64(fake.Calls("DescribeInstances"))/sweeps, "DescribeInstances/sweep")
	b.ReportMetric(float64(fake.TotalCalls())/sweeps, "calls/sweep")
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/sweeps, "ms/sweep")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkLoadBalancers100 creates load balancers for 100 Services (port
// 80/TCP, targets: two EC2 instances and two vSphere VMs, so IP targets),
// then resyncs all 100 with nothing changed, as the service controller does
// on a node sync (UpdateLoadBalancer) and on a restart (EnsureLoadBalancer).
// It reports the AWS calls of the creation by operation and the calls,
// and mutating calls, of the resync. Goal: 0 mutating calls.
func BenchmarkLoadBalancers100(b *testing.B) {
	const services = 100
	var create, resync map[string]int
	var resyncMutating int
	for b.Loop() {
		e := newEnv(b)
		nodes := append(e.awsNodes(1, 2), otherNodes(2)...)
		lb := e.cloud.lb
		ctx := context.Background()
		svcs := make([]*corev1.Service, services)
		for i := range svcs {
			svcs[i] = newService(fmt.Sprintf("svc-%03d", i))
		}
		e.fake.ResetCalls()
		for _, svc := range svcs {
			if _, err := lb.EnsureLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
				b.Fatal(err)
			}
		}
		create = e.fake.CallCounts()
		e.fake.ResetCalls()
		for _, svc := range svcs {
			if err := lb.UpdateLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
				b.Fatal(err)
			}
			if _, err := lb.EnsureLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
				b.Fatal(err)
			}
		}
		resync = e.fake.CallCounts()
		resyncMutating = len(e.fake.MutatingCalls())
	}
	total := 0
	for _, op := range sortedOps(create) {
		b.ReportMetric(float64(create[op]), "create:"+op)
		total += create[op]
	}
	b.ReportMetric(float64(total), "create:calls")
	total = 0
	for _, n := range resync {
		total += n
	}
	b.ReportMetric(float64(total), "resync:calls")
	b.ReportMetric(float64(resyncMutating), "resync:mutating-calls")
	b.ReportMetric(0, "ns/op")
	if resyncMutating != 0 {
		b.Errorf("steady-state resync made %d mutating calls: %v", resyncMutating, resync)
	}
}

func sortedOps(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// BenchmarkRepairPass is one drift-repair pass over 1,000 load balancers
// with nothing changed: BeginRepairPass, then EnsureLoadBalancer for every
// Service under its ctx ("snapshot"), beside the same 1,000 Ensures with
// per-Service reads ("per-service"), over the same fake in the same run.
// Each Service has port 80/TCP and two EC2 instance targets whose security
// group holds the backend's rules. It reports the read and mutating calls
// per pass (goal: 0 mutating calls) and the snapshot's bulk reads apart
// from the reads that remain per load balancer.
func BenchmarkRepairPass(b *testing.B) {
	const services = 1000
	e, svcs, nodes := repairEnv(b, services)
	lb := e.cloud.lb
	b.Run(fmt.Sprintf("lbs=%d/snapshot", services), func(b *testing.B) {
		e.fake.ResetCalls()
		for b.Loop() {
			ctx, end, err := lb.BeginRepairPass(context.Background(), testCluster)
			if err != nil {
				b.Fatal(err)
			}
			ensureEach(ctx, b, lb, svcs, nodes)
			end()
		}
		reportPass(b, e.fake)
	})
	b.Run(fmt.Sprintf("lbs=%d/per-service", services), func(b *testing.B) {
		e.fake.ResetCalls()
		for b.Loop() {
			ensureEach(context.Background(), b, lb, svcs, nodes)
		}
		reportPass(b, e.fake)
	})
}

// repairEnv creates n Services' load balancers, eight at a time.
func repairEnv(b *testing.B, n int) (*env, []*corev1.Service, []*corev1.Node) {
	e := newEnv(b)
	// Every Service adds a rule to the nodes' group: 1,000 of them need
	// the rules-per-group quota at AWS's maximum (1,000, with one group
	// per network interface); lifted here.
	e.fake.SetRulesPerSecurityGroup(0)
	sg, err := e.cloud.lb.ec2.CreateSecurityGroup(context.Background(), &ec2.CreateSecurityGroupInput{GroupName: awssdk.String("nodes"),
		Description: awssdk.String("the nodes'"), VpcId: awssdk.String(testVPC)})
	if err != nil {
		b.Fatal(err)
	}
	var nodes []*corev1.Node
	for i := 1; i <= 2; i++ {
		in := e.addInstance(i, func(in *awsfake.Instance) { in.SecurityGroups = []string{awssdk.ToString(sg.GroupId)} })
		nodes = append(nodes, newNode(in.PrivateDNSName, testutil.WithProviderID(providerID(in.Zone, in.ID)), testutil.WithInternalIP(in.PrivateIPs[0])))
	}
	svcs := make([]*corev1.Service, n)
	for i := range svcs {
		svcs[i] = newService(fmt.Sprintf("svc-%04d", i))
	}
	var g errgroup.Group
	g.SetLimit(8)
	for _, svc := range svcs {
		g.Go(func() error {
			_, err := e.cloud.lb.EnsureLoadBalancer(context.Background(), testCluster, svc, nodes)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	return e, svcs, nodes
}

func ensureEach(ctx context.Context, b *testing.B, lb *LoadBalancer, svcs []*corev1.Service, nodes []*corev1.Node) {
	for _, svc := range svcs {
		if _, err := lb.EnsureLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
			b.Fatal(err)
		}
	}
}

// bulkReads are the calls of BeginRepairPass.
var bulkReads = map[string]bool{"DescribeLoadBalancers": true, "DescribeTags": true, "DescribeTargetGroups": true, "DescribeSecurityGroups": true}

func reportPass(b *testing.B, fake *awsfake.Server) {
	passes := float64(b.N)
	var reads, bulk int
	for op, n := range fake.CallCounts() {
		if awsfake.IsMutating(op) {
			continue
		}
		reads += n
		if bulkReads[op] {
			bulk += n
		}
		b.ReportMetric(float64(n)/passes, op+"/pass")
	}
	mutating := len(fake.MutatingCalls())
	b.ReportMetric(float64(reads)/passes, "read-calls/pass")
	b.ReportMetric(float64(bulk)/passes, "bulk-reads/pass")
	b.ReportMetric(float64(reads-bulk)/passes, "per-LB-reads/pass")
	b.ReportMetric(float64(mutating)/passes, "mutating-calls/pass")
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/passes, "ms/pass")
	b.ReportMetric(0, "ns/op")
	if mutating != 0 {
		b.Errorf("a pass with nothing changed made %d mutating calls: %v", mutating, fake.CallCounts())
	}
}

// BenchmarkCanTarget5000 is the router's filter of 5,000 nodes for a
// Service with target-node-labels (a 1,000-node subset), which every
// EnsureLoadBalancer and UpdateLoadBalancer runs several times: 3.5 ms a
// pass while the annotation was parsed for each node, 1.0 ms with it parsed
// once per value (on a loaded 2-core machine).
func BenchmarkCanTarget5000(b *testing.B) {
	lb := &LoadBalancer{}
	svc := newService("web", withAnnotation(AnnotationTargetNodeLabels, "scale.example/target=yes"))
	nodes := make([]*corev1.Node, 0, 5000)
	for i := range 5000 {
		n := newNode(fmt.Sprintf("n%d", i), testutil.WithProviderID(fmt.Sprintf("aws:///eu-west-1a/i-%012d", i)), testutil.WithInternalIP("10.0.1.1"))
		// The labels an initialised node of the 5,000-node cell carries:
		// the kubelet's, the node controller's and the router's; each
		// node's map its own, as the informer's objects.
		n.Labels = map[string]string{
			"kubernetes.io/hostname": n.Name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
			"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
			"node.kubernetes.io/instance-type": "m5.large", "beta.kubernetes.io/instance-type": "m5.large",
			"topology.kubernetes.io/region": "eu-west-1", "failure-domain.beta.kubernetes.io/region": "eu-west-1",
			"topology.kubernetes.io/zone": "eu-west-1a", "failure-domain.beta.kubernetes.io/zone": "eu-west-1a",
			"node.cloudprovider.kubernetes.io/platform": "aws",
		}
		if i < 1000 {
			n.Labels["scale.example/target"] = "yes"
		}
		nodes = append(nodes, n)
	}
	b.ResetTimer()
	for range b.N {
		for _, n := range nodes {
			lb.CanTarget(svc, n)
		}
	}
}

// TestTargetNodeLabelsKeptByValue: the parsed target-node-labels follow
// the annotation's value (a changed value is parsed anew, an invalid one
// is nil), and the kept values are dropped all at once past their bound.
func TestTargetNodeLabelsKeptByValue(t *testing.T) {
	with := func(v string) *corev1.Service {
		return newService("web", withAnnotation(AnnotationTargetNodeLabels, v))
	}
	if got := targetNodeLabels(with("a=1,b")); len(got) != 2 || got["a"] != "1" || got["b"] != "" {
		t.Errorf("a=1,b: %v", got)
	}
	if got := targetNodeLabels(with("c=2")); len(got) != 1 || got["c"] != "2" {
		t.Errorf("c=2: %v", got)
	}
	if got := targetNodeLabels(with("=x")); got != nil {
		t.Errorf("an invalid value: %v, want nil", got)
	}
	if got := targetNodeLabels(newService("web")); got != nil {
		t.Errorf("no annotation: %v, want nil", got)
	}
	prev := maxNodeLabelsKept
	maxNodeLabelsKept = 2
	t.Cleanup(func() { maxNodeLabelsKept = prev })
	for i := range 5 {
		v := fmt.Sprintf("k%d=v", i)
		if got := targetNodeLabels(with(v)); got[fmt.Sprintf("k%d", i)] != "v" {
			t.Errorf("%s: %v", v, got)
		}
	}
	n := 0
	nodeLabelsParsed.Range(func(any, any) bool { n++; return true })
	if n > 2 {
		t.Errorf("%d values kept, want at most 2", n)
	}
}
