package aws

import (
	"fmt"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// TestCanTargetAllocatesNothing: the router asks CanTarget of every node
// (5,000 in the scale cell) for every call of every Service; with
// target-node-labels it allocated per node (a one-node slice and the
// filtered one), now nothing.
func TestCanTargetAllocatesNothing(t *testing.T) {
	lb := &LoadBalancer{}
	svc := newService("web", withAnnotation(AnnotationTargetNodeLabels, "scale.example/target=yes"))
	in := newNode("in", testutil.WithProviderID("aws:///eu-west-1a/i-0000000000000001"))
	in.Labels = map[string]string{"scale.example/target": "yes"}
	out := newNode("out", testutil.WithProviderID("aws:///eu-west-1a/i-0000000000000002"))
	if !lb.CanTarget(svc, in) || lb.CanTarget(svc, out) {
		t.Fatalf("CanTarget: labelled %v, unlabelled %v; want true, false", lb.CanTarget(svc, in), lb.CanTarget(svc, out))
	}
	if n := testing.AllocsPerRun(100, func() { lb.CanTarget(svc, in); lb.CanTarget(svc, out) }); n != 0 {
		t.Errorf("CanTarget allocated %.0f times for two nodes, want 0", n)
	}
}

// TestVerifiedViewsShareTargets: the verified view of a Service keeps its
// targets as one interned set, shared by every Service with the same
// targets, and the node sync reads them back as registered. It kept a map
// of target descriptions per group before, 175 KiB a Service at 1,000
// targets (BenchmarkServiceMemory), one copy per Service.
func TestVerifiedViewsShareTargets(t *testing.T) {
	d := &desiredLB{targetType: targetInstance, family: "ipv4", ports: []desiredPort{{port: 80, protocol: "TCP", nodePort: 30080}}}
	for i := range 1000 {
		d.targets = append(d.targets, target{id: fmt.Sprintf("i-%017x", i)})
	}
	d.targets = append(d.targets, target{id: "192.0.2.1", zone: "all"})
	lb := &elbtypes.LoadBalancer{LoadBalancerArn: awssdk.String("arn:lb")}
	arns := map[int32]string{80: "arn:tg"}
	first := reconciled(d, lb, arns)
	// Another Service with the same targets (its own slice) shares them.
	other := *d
	other.targets = append([]target(nil), d.targets...)
	if second := reconciled(&other, lb, arns); second.targets != first.targets {
		t.Errorf("two views of the same targets keep two copies")
	}
	if n := testing.AllocsPerRun(20, func() { reconciled(&other, lb, arns) }); n > 10 {
		t.Errorf("recording a view of 1,001 targets allocated %.0f times, want at most 10 (nothing per target once interned)", n)
	}
	have := first.targets.registeredOn(30080)
	add, remove := targetChanges(d, d.ports[0], have)
	if len(have) != 1001 || len(add) != 0 || len(remove) != 0 {
		t.Fatalf("the view reads back %d targets (%d to add, %d to remove), want 1,001, 0, 0", len(have), len(add), len(remove))
	}
	if td := have[targetKey("192.0.2.1", 30080)]; awssdk.ToString(td.AvailabilityZone) != "all" || awssdk.ToInt32(td.Port) != 30080 {
		t.Errorf("an IP target outside the VPC reads back as %+v, want zone all, port 30080", td)
	}
}
