package aws

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// The scale benchmark's AWS cell (test/scale, docs/scale.md) at the size
// of one Service: above AWS's quota of 1,000 targets per target group the
// first 1,000 nodes carry scaleTargetLabel and every Service targets them
// alone (aws-load-balancer-target-node-labels).
const (
	scaleTargetQuota = 1000
	scaleTargetLabel = "scale.multicloud-ccm.io/lb-target"
)

// scaleEnv is the scale cell's cloud at n nodes: one running instance per
// node in the nodes' security group, the instance cache warm (as after
// the node controller's sweep), the budget off.
func scaleEnv(b *testing.B, n int) (*env, []*corev1.Node) {
	e := newEnv(b, noBudget)
	e.fake.SetRulesPerSecurityGroup(0)
	sg, err := e.cloud.lb.ec2.CreateSecurityGroup(context.Background(), &ec2.CreateSecurityGroupInput{GroupName: awssdk.String("nodes"),
		Description: awssdk.String("the nodes'"), VpcId: awssdk.String(testVPC)})
	if err != nil {
		b.Fatal(err)
	}
	nodes := make([]*corev1.Node, n)
	for i := range n {
		ip := fmt.Sprintf("10.0.%d.%d", 10+i%2, 1+i/2%250)
		in := e.addInstance(i+1, func(in *awsfake.Instance) {
			in.PrivateIPs = []string{ip}
			in.PrivateDNSName = fmt.Sprintf("node-%05d.eu-west-1.compute.internal", i)
			in.SecurityGroups = []string{awssdk.ToString(sg.GroupId)}
		})
		nodes[i] = newNode(in.PrivateDNSName, testutil.WithProviderID(providerID(in.Zone, in.ID)), testutil.WithInternalIP(ip))
		if n > scaleTargetQuota && i < scaleTargetQuota {
			nodes[i].Labels = map[string]string{scaleTargetLabel: "true"}
		}
	}
	e.cloud.instances.setNodeLister(nodeLister(b, nodes...))
	for _, node := range nodes {
		if _, err := e.cloud.instances.InstanceMetadata(context.Background(), node); err != nil {
			b.Fatal(err)
		}
	}
	return e, nodes
}

// scaleService is the cell's i-th Service.
func scaleService(i, nodes int) *corev1.Service {
	svc := newService(fmt.Sprintf("svc-%05d", i))
	if nodes > scaleTargetQuota {
		svc.Annotations[string(AnnotationTargetNodeLabels)] = scaleTargetLabel + "=true"
	}
	return svc
}

// targetable is the router's Targetable: the nodes CanTarget keeps.
func targetable(lb *LoadBalancer, svc *corev1.Service, nodes []*corev1.Node) []*corev1.Node {
	var out []*corev1.Node
	for _, n := range nodes {
		if lb.CanTarget(svc, n) {
			out = append(out, n)
		}
	}
	return out
}

// BenchmarkEnsureAtNodes is one Service's creation as the scale cell makes
// it at 100 and 5,000 nodes (the 5,000-node cell's Services target 1,000
// of them): the router's Targetable over every node, then
// EnsureLoadBalancer of a new Service, budget off, against the fake in
// this process. Each op is one new NLB. It reports the cloud calls per
// Service and the targets each NLB registers; ns/op and allocs/op include
// the fake's share (the pprof profile of -cpuprofile separates it:
// internal/awsfake under ServeHTTP).
func BenchmarkEnsureAtNodes(b *testing.B) {
	for _, n := range []int{100, 5000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			e, nodes := scaleEnv(b, n)
			lb := e.cloud.lb
			ctx := context.Background()
			e.fake.ResetCalls()
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				svc := scaleService(i, n)
				i++
				if _, err := lb.EnsureLoadBalancer(ctx, testCluster, svc, targetable(lb, svc, nodes)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(e.fake.TotalCalls())/float64(i), "calls/Service")
			b.ReportMetric(float64(e.fake.Calls("DescribeInstances"))/float64(i), "DescribeInstances/Service")
		})
	}
}

// BenchmarkServiceMemory is the heap the backend keeps per Service after
// creating 100 Services' NLBs at 100 and at 5,000 nodes (1,000 targets
// each): the live bytes that EnsureLoadBalancer allocated, from the heap
// profile sampled every 64 bytes and scaled as pprof scales it (the fake's
// state, allocated by its handlers, is not among them).
func BenchmarkServiceMemory(b *testing.B) {
	const services = 100
	for _, n := range []int{100, 5000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			var kept int64
			for b.Loop() {
				e, nodes := scaleEnv(b, n)
				lb := e.cloud.lb
				ctx := context.Background()
				prev := runtime.MemProfileRate
				runtime.MemProfileRate = profileRate
				for i := range services {
					svc := scaleService(i, n)
					if _, err := lb.EnsureLoadBalancer(ctx, testCluster, svc, targetable(lb, svc, nodes)); err != nil {
						b.Fatal(err)
					}
				}
				runtime.MemProfileRate = prev
				kept = liveBytesUnder("(*LoadBalancer).EnsureLoadBalancer", profileRate)
				runtime.KeepAlive(lb)
			}
			b.ReportMetric(float64(kept)/services/1024, "kept-KiB/Service")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// profileRate is BenchmarkServiceMemory's heap-profile sampling rate.
const profileRate = 64

// liveBytesUnder estimates the live bytes allocated under a function whose
// name ends with fn, from the heap profile sampled at rate.
func liveBytesUnder(fn string, rate int) int64 {
	runtime.GC()
	runtime.GC() // the profile is as of the last GC that completed
	n, _ := runtime.MemProfile(nil, false)
	recs := make([]runtime.MemProfileRecord, n+50)
	n, _ = runtime.MemProfile(recs, false)
	var total int64
	for _, r := range recs[:n] {
		frames := runtime.CallersFrames(r.Stack())
		for {
			f, more := frames.Next()
			if strings.HasSuffix(f.Function, fn) {
				total += scaled(r, rate)
				break
			}
			if !more {
				break
			}
		}
	}
	return total
}

// scaled is a heap-profile record's live bytes scaled for its sampling,
// as pprof scales them.
func scaled(r runtime.MemProfileRecord, rate int) int64 {
	if r.InUseObjects() == 0 {
		return 0
	}
	avg := float64(r.InUseBytes()) / float64(r.InUseObjects())
	return int64(float64(r.InUseBytes()) / (1 - math.Exp(-avg/float64(rate))))
}
