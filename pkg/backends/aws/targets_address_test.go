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
		return func(s *corev1.Service) { lb.targetTypes.remember(s, tt, true) }
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
		{"default, instance targets chosen: a node with no providerID yet", newService("e"), chose(targetInstance), fresh, false},
		{"default, IP targets chosen: a node with no providerID yet", newService("e2"), chose(targetIP), fresh, true},
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
// no target type annotated, an EC2 node is reached by its instance ID when
// only instances are handed, by its address once a node of another cloud
// makes every target an IP target, still by its address when that node
// leaves (IP targets are kept), and once the load balancer is deleted
// (nothing chosen).
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
	if !lb.TargetsByAddress(svc, ec2[0]) {
		t.Error("IP targets kept once the other cloud's node left: TargetsByAddress of an EC2 node = false, want true")
	}
	if err := lbi.EnsureLoadBalancerDeleted(ctx, testCluster, svc); err != nil {
		t.Fatal(err)
	}
	if !lb.TargetsByAddress(svc, ec2[0]) {
		t.Error("deleted: TargetsByAddress of an EC2 node = false, want true (nothing chosen)")
	}
}

// TestJoiningNodeKeepsInstanceTargets: a node joining the cluster has no
// providerID for its first seconds (until the node controller initialises
// it), and upstream's node sync hands it to the NLB at once. It must not
// choose the target type: the NLB keeps its instance target group (before,
// it was replaced by an IP target group and back once the node was
// initialised: the listeners moved twice, ten calls each way), and the
// node becomes a target once its providerID names its instance. Beside a
// node of another cloud (IP targets), the joining node is an IP target.
func TestJoiningNodeKeepsInstanceTargets(t *testing.T) {
	e := newEnv(t)
	lbi, _ := e.cloud.LoadBalancer()
	ctx := context.Background()
	svc := newService("web")
	nodes := e.awsNodes(1, 2)
	e.ensure(t, svc, nodes)
	tgs := e.fake.TargetGroups()
	if len(tgs) != 1 || tgs[0].TargetType != targetInstance {
		t.Fatalf("target groups %+v, want one of instance targets", tgs)
	}
	joined := e.awsNodes(3, 1)[0]
	pid := joined.Spec.ProviderID
	joined.Spec.ProviderID = ""
	creates, deletes := e.fake.Calls("CreateTargetGroup"), e.fake.Calls("DeleteTargetGroup")
	if err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, append(nodes, joined)); err != nil {
		t.Fatal(err)
	}
	if _, err := lbi.EnsureLoadBalancer(ctx, testCluster, svc, append(nodes, joined)); err != nil {
		t.Fatal(err)
	}
	if got := e.fake.TargetGroups(); len(got) != 1 || got[0].ARN != tgs[0].ARN || got[0].TargetType != targetInstance || len(got[0].Targets) != 2 {
		t.Errorf("after a node without a providerID joined: target groups %+v, want the same instance target group, its two targets", got)
	}
	if c, d := e.fake.Calls("CreateTargetGroup")-creates, e.fake.Calls("DeleteTargetGroup")-deletes; c != 0 || d != 0 {
		t.Errorf("%d target groups created and %d deleted for a joining node, want none", c, d)
	}
	if e.cloud.lb.TargetsByAddress(svc, joined) {
		t.Error("TargetsByAddress of the joining node beside instance targets = true, want false")
	}

	joined.Spec.ProviderID = pid
	if err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, append(nodes, joined)); err != nil {
		t.Fatal(err)
	}
	if got := e.fake.TargetGroups(); len(got) != 1 || got[0].ARN != tgs[0].ARN {
		t.Errorf("after the node was initialised: target groups %+v", got)
	}
	if got := e.fake.TargetGroups(); len(got) != 1 || len(got[0].Targets) != 3 {
		t.Errorf("targets once the node was initialised: %+v, want 3", got)
	}

	// Beside another cloud's node the targets are IP targets, the joining
	// node's address among them.
	joined.Spec.ProviderID = ""
	if _, err := lbi.EnsureLoadBalancer(ctx, testCluster, svc, append(append(nodes, otherNodes(1)...), joined)); err != nil {
		t.Fatal(err)
	}
	got := e.fake.TargetGroups()
	if len(got) != 1 || got[0].TargetType != targetIP {
		t.Fatalf("beside another cloud's node: target groups %+v, want one of IP targets", got)
	}
	if n := len(got[0].Targets); n != 4 {
		t.Errorf("IP targets %v, want 4 (two instances, the VM, the joining node)", got[0].Targets)
	}
}
