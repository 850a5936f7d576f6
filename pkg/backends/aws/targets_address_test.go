package aws

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// TestTargetsByAddress: the router re-targets a Service's NLB on a node's
// address change only when the NLB reaches that node by its address (IP
// targets), never for instance targets, which are registered by instance
// ID (at a churn, every registered node's addresses arrive once: that
// re-targeted every NLB, docs/scale.md). With no target type annotated
// the node set chooses it (targetsFor): the backend answers from the type
// it chose last, and until it chose one, by address.
func TestTargetsByAddress(t *testing.T) {
	e := newEnv(t)
	lb := e.cloud.lb
	ec2 := newNode("ec2", testutil.WithProviderID("aws:///eu-west-1a/i-0123"), testutil.WithInternalIP("10.0.10.5"))
	vm := newNode("vm", testutil.WithProviderID("vsphere://4201-a"), testutil.WithInternalIP("192.168.10.1"))
	fresh := newNode("fresh", testutil.WithInternalIP("10.0.10.6")) // no providerID yet
	chose := func(tt string) func(*corev1.Service) {
		return func(s *corev1.Service) { lb.targetTypes.remember(s, tt) }
	}
	for _, tc := range []struct {
		name  string
		svc   *corev1.Service
		chose func(*corev1.Service)
		node  *corev1.Node
		want  bool
	}{
		{"default, instance targets chosen: an EC2 instance", newService("a"), chose(targetInstance), ec2, false},
		{"default, IP targets chosen: an EC2 instance", newService("b"), chose(targetIP), ec2, true},
		{"default, nothing chosen yet: an EC2 instance", newService("c"), nil, ec2, true},
		{"default: another cloud's node", newService("d"), chose(targetInstance), vm, true},
		{"default: a node with no providerID yet", newService("e"), chose(targetInstance), fresh, true},
		{"instance: an EC2 instance", newService("f", withAnnotation(AnnotationTargetType, targetInstance)), chose(targetIP), ec2, false},
		{"ip: an EC2 instance", newService("g", withAnnotation(AnnotationTargetType, targetIP)), chose(targetInstance), ec2, true},
		{"ip: another cloud's node", newService("h", withAnnotation(AnnotationTargetType, targetIP)), nil, vm, true},
		{"a value desired refuses", newService("i", withAnnotation(AnnotationTargetType, "Instance")), nil, ec2, true},
		{"IPv6-primary: an EC2 instance", newService("j", ipv6Primary), chose(targetInstance), ec2, true},
		{"managed elsewhere", newService("k", withAnnotation(AnnotationType, typeExternal)), nil, vm, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.chose != nil {
				tc.chose(tc.svc)
			}
			if got := lb.TargetsByAddress(tc.svc, tc.node); got != tc.want {
				t.Errorf("TargetsByAddress(%s) = %v, want %v", tc.node.Name, got, tc.want)
			}
		})
	}
}

// TestTargetsByAddressFollowsTheChosenTargetType drives the backend: with
// no target type annotated, an EC2 node is reached by its address while a
// node of another cloud makes every target an IP target, by its instance
// ID when only instances are handed, and by its address again once the
// load balancer is deleted (nothing chosen).
func TestTargetsByAddressFollowsTheChosenTargetType(t *testing.T) {
	e := newEnv(t)
	lbi, _ := e.cloud.LoadBalancer()
	lb := e.cloud.lb
	svc := newService("web")
	ec2 := e.awsNodes(1, 2)
	ctx := context.Background()

	e.ensure(t, svc, ec2)
	if lb.TargetsByAddress(svc, ec2[0]) {
		t.Error("instance targets: TargetsByAddress of an EC2 node = true, want false")
	}
	if err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, append(ec2, otherNodes(1)...)); err != nil {
		t.Fatal(err)
	}
	if tg := e.fake.TargetGroups(); len(tg) != 1 || tg[0].TargetType != targetIP {
		t.Fatalf("target groups %+v, want one of IP targets", tg)
	}
	if !lb.TargetsByAddress(svc, ec2[0]) {
		t.Error("IP targets: TargetsByAddress of an EC2 node = false, want true")
	}
	if err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, ec2); err != nil {
		t.Fatal(err)
	}
	if lb.TargetsByAddress(svc, ec2[0]) {
		t.Error("instance targets again: TargetsByAddress of an EC2 node = true, want false")
	}
	if err := lbi.EnsureLoadBalancerDeleted(ctx, testCluster, svc); err != nil {
		t.Fatal(err)
	}
	if !lb.TargetsByAddress(svc, ec2[0]) {
		t.Error("deleted: TargetsByAddress of an EC2 node = false, want true (nothing chosen)")
	}
}
