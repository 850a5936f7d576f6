package aws

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// instanceGroupHas checks that the only NLB's port 80 forwards to the
// Service's instance target group, and that group's targets.
func instanceGroupHas(svc *corev1.Service, ids ...string) func(*env) error {
	tg := namesFor(testCluster, svc).targetGroup(80, "TCP", targetInstance)
	return func(e *env) error {
		lbs, tgs := e.fake.LoadBalancers(), map[string]awsfake.TargetGroupView{}
		for _, g := range e.fake.TargetGroups() {
			tgs[g.Name] = g
		}
		if len(lbs) != 1 {
			return fmt.Errorf("%d load balancers, want one", len(lbs))
		}
		if got := lbs[0].Listeners; !slices.Contains(got, "TCP:80->"+tg) || slices.ContainsFunc(got, func(l string) bool { return strings.Contains(l, "k8s-") && l != "TCP:80->"+tg }) {
			return fmt.Errorf("listeners %s, want TCP:80->%s", got, tg)
		}
		for name := range tgs {
			if strings.HasPrefix(name, namesFor(testCluster, svc).tgPrefix()) && name != tg {
				return fmt.Errorf("target group %s of the Service is left", name)
			}
		}
		var want []string
		for _, id := range ids {
			want = append(want, id+":30080")
		}
		if got := strings.Join(tgs[tg].Targets, ","); tgs[tg].TargetType != targetInstance || got != strings.Join(want, ",") {
			return fmt.Errorf("target group %s (%s) with targets %s, want instance targets %s", tg, tgs[tg].TargetType, got, strings.Join(want, ","))
		}
		return nil
	}
}

// annotate sets one annotation on a Service read back from the clientset
// (its annotations may be nil).
func annotate(k, v string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[k] = v
	}
}

// TestGoneInstanceIsNoTarget: one instance terminated in a routine
// scale-in while its Node is still there is simply not a target: the next
// Ensure (an annotation edit, through the upstream service controller)
// deregisters it and nothing else; the Service keeps its instance target
// group, listener and the instances' rules. It used to switch the whole
// Service to IP targets (new groups, the listener moved, the instance
// group deleted) and back once the Node went.
func TestGoneInstanceIsNoTarget(t *testing.T) {
	e := newEnv(t, fastCache)
	nodes := e.awsNodes(1, 3)
	svc := newService("web")
	a := startDualStack(t, e, svc, instanceGroupHas(svc, instanceID(1), instanceID(2), instanceID(3)), nodes...)
	e.fake.SetInstanceState(instanceID(3), "terminated")
	eventually(t, "the backend's instance cache sees instance 3 terminated", func() error {
		if in, err := e.cloud.lb.instances.byInstanceID(context.Background(), instanceID(3)); err != nil || (in != nil && !isState(in, "terminated")) {
			return fmt.Errorf("instance 3: %v (%w)", in.State, err)
		}
		return nil
	})
	a.changeService("an annotation edited after instance 3 terminated", annotate("example.com/edited", "1"),
		instanceGroupHas(svc, instanceID(1), instanceID(2)), "DeregisterTargets")
	a.updateNodes(nodes[:2]...)
	e.assertNoMutation(t, "the node sync once the Node of the gone instance is deleted")
}

// handMadeTG makes a target group with no tags, as an operator would,
// and a listener on the NLB lbARN at port forwarding to it. It returns the
// group's ARN.
func handMadeTG(t *testing.T, e *env, lbARN string, port int32) string {
	t.Helper()
	ctx := context.Background()
	tg, err := e.cloud.lb.elb.CreateTargetGroup(ctx, &elbv2.CreateTargetGroupInput{Name: awssdk.String(fmt.Sprintf("by-hand-%d", port)), Protocol: elbtypes.ProtocolEnumTcp,
		Port: awssdk.Int32(9000), VpcId: awssdk.String(testVPC), TargetType: elbtypes.TargetTypeEnumIp})
	if err != nil {
		t.Fatal(err)
	}
	arn := tg.TargetGroups[0].TargetGroupArn
	if _, err := e.cloud.lb.elb.CreateListener(ctx, &elbv2.CreateListenerInput{LoadBalancerArn: awssdk.String(lbARN), Port: awssdk.Int32(port), Protocol: elbtypes.ProtocolEnumTcp,
		DefaultActions: []elbtypes.Action{{Type: elbtypes.ActionTypeEnumForward, TargetGroupArn: arn}}}); err != nil {
		t.Fatal(err)
	}
	return awssdk.ToString(arn)
}

// hasTG reports whether the fake holds the target group arn.
func hasTG(e *env, arn string) bool {
	for _, tg := range e.fake.TargetGroups() {
		if tg.ARN == arn {
			return true
		}
	}
	return false
}

// TestHandMadeListenerIsNeverTouched: a listener someone added by hand to
// the Service's NLB, on a port the Service does not have, forwarding to a
// target group of theirs, is a stranger (DESIGN.md §3.13, as OpenStack
// keeps hand-made listeners): Ensure, Update and a repair pass leave it and
// its group as they are, with no mutating call; a port the Service drops
// still loses the Service's own listener; the Service's deletion takes the
// listener with the NLB and leaves the group. Before, the next Ensure
// deleted the hand-made listener as drift.
func TestHandMadeListenerIsNeverTouched(t *testing.T) {
	e := newEnv(t, fastCache)
	nodes := e.awsNodes(1, 2)
	svc := newService("web")
	e.ensure(t, svc, nodes)
	theirs := handMadeTG(t, e, e.onlyLB(t).ARN, 9000)
	listeners := func() string { return strings.Join(e.onlyLB(t).Listeners, ",") }
	want := listeners()
	if !strings.Contains(want, "TCP:9000->by-hand-9000") {
		t.Fatalf("listeners %s, want the hand-made one", want)
	}
	lbi, _ := e.cloud.LoadBalancer()
	ctx := context.Background()
	e.fake.ResetCalls()
	e.ensure(t, svc, nodes)
	if err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, nodes[:1]); err != nil {
		t.Fatal(err)
	}
	if m := e.fake.MutatingCalls(); strings.Join(m, ",") != "DeregisterTargets" {
		t.Errorf("Ensure, then Update with a node fewer, beside a hand-made listener: mutating calls %v, want DeregisterTargets", m)
	}
	pctx, end, err := e.cloud.lb.BeginRepairPass(ctx, testCluster)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lbi.EnsureLoadBalancer(pctx, testCluster, svc, nodes); err != nil {
		t.Fatal(err)
	}
	end()
	if got := listeners(); got != want {
		t.Errorf("listeners after Ensure, Update and a repair pass = %s, want %s", got, want)
	}
	more := svc.DeepCopy()
	more.Spec.Ports = append(more.Spec.Ports, corev1.ServicePort{Name: "extra", Protocol: corev1.ProtocolTCP, Port: 8080, NodePort: 30880})
	e.ensure(t, more, nodes)
	e.ensure(t, svc, nodes)
	if got := listeners(); got != want {
		t.Errorf("listeners after a port added and removed = %s, want %s (the Service's listener of 8080 gone, the hand-made one kept)", got, want)
	}
	if err := lbi.EnsureLoadBalancerDeleted(ctx, testCluster, svc); err != nil {
		t.Fatal(err)
	}
	if n := len(e.fake.LoadBalancers()); n != 0 || !hasTG(e, theirs) {
		t.Errorf("after the delete: %d load balancers, the hand-made target group kept: %v; want 0 and true", n, hasTG(e, theirs))
	}
}

// TestAdoptedSchemeChangeLeaksNothing: a scheme change replaces an
// adopted NLB; CreateLoadBalancer failing once after the adopted NLB was
// deleted leaves none of the upstream provider's target groups behind
// (they are deleted with the NLB they served, before the create), and the
// Service's deletion leaves nothing.
func TestAdoptedSchemeChangeLeaksNothing(t *testing.T) {
	e := newEnv(t)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance), withAnnotation(AnnotationScheme, "internal"))
	upstreamNLB(t, e, svc, e.addInstance(1).ID)
	upstreamTG := e.targetGroups(t)["k8s-default-web-0a1b2c3d4e"].ARN
	e.fake.FailNext("CreateLoadBalancer", "InternalFailure")
	client := testutil.NewClientset(svc)
	runServiceController(t, e.cloud, client)
	eventually(t, "the NLB replaced by an internal one of the backend's", func() error {
		lbs := e.fake.LoadBalancers()
		if len(lbs) != 1 || lbs[0].Scheme != "internal" || lbs[0].Name != namesFor(testCluster, svc).lb {
			return fmt.Errorf("load balancers %+v", lbs)
		}
		if hasTG(e, upstreamTG) {
			return fmt.Errorf("the upstream provider's target group is still there")
		}
		return nil
	})
	deleteService(t, client, "web")
	eventually(t, "nothing left in AWS", func() error {
		if n := e.fake.ResourceCount(); n != 0 {
			return fmt.Errorf("%d resources left", n)
		}
		return nil
	})
}

// TestAdoptedGroupReplacedLeaksNothing: the upstream provider's group of
// an adopted NLB that does not fit is replaced; its DeleteTargetGroup
// failing once (after the listener moved off it) leaves it unattached,
// recorded on the NLB before the listener moved: the service controller's
// retry (the next Ensure) deletes it and the record, with the Service
// still there. The Service's deletion would find it too (upstream's name
// for the Service, tagged as this cluster's and Service's; see
// TestAdoptedGroupLeftIsFoundOnDelete).
func TestAdoptedGroupReplacedLeaksNothing(t *testing.T) {
	e := newEnv(t)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetIP))
	upstreamNLB(t, e, svc, e.addInstance(1).ID)
	e.fake.FailNext("DeleteTargetGroup", "InternalFailure")
	client := testutil.NewClientset(svc)
	runServiceController(t, e.cloud, client)
	ours := namesFor(testCluster, svc).targetGroup(80, "TCP", targetIP)
	eventually(t, "the listener forwards to the backend's ip group; upstream's deleted by a later Ensure, the record removed", func() error {
		lb := e.onlyLB(t)
		if got := strings.Join(lb.Listeners, ","); got != "TCP:80->"+ours {
			return fmt.Errorf("listeners %s", got)
		}
		if _, left := e.targetGroups(t)["k8s-default-web-0a1b2c3d4e"]; left {
			return fmt.Errorf("the upstream provider's group is still there")
		}
		if v, ok := lb.Tags[tagDetachedGroups]; ok {
			return fmt.Errorf("the NLB still records %q", v)
		}
		return nil
	})
	if n := e.fake.Calls("DeleteTargetGroup"); n != 2 {
		t.Errorf("DeleteTargetGroup calls = %d, want 2 (the failed one, the retry's)", n)
	}
	deleteService(t, client, "web")
	eventually(t, "nothing left in AWS", func() error {
		if n := e.fake.ResourceCount(); n != 0 {
			return fmt.Errorf("%d resources left: %+v", n, e.fake.TargetGroups())
		}
		return nil
	})
}

// clusterNodeSG makes the cluster's node security group as eksctl or kops
// do (tagged kubernetes.io/cluster/<id>=owned) with a node-to-node rule,
// and a control-plane group allowing the nodes in; it returns the node
// group's ID and a fingerprint of both groups' rules.
func clusterNodeSG(t *testing.T, e *env) (string, func() string) {
	t.Helper()
	ctx := context.Background()
	mk := func(name string) *string {
		out, err := e.cloud.lb.ec2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: awssdk.String(name), Description: awssdk.String("eksctl: " + name),
			VpcId: awssdk.String(testVPC), TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeSecurityGroup,
				Tags: []ec2types.Tag{{Key: awssdk.String(tagClusterPrefix + testCluster), Value: awssdk.String("owned")}}}}})
		if err != nil {
			t.Fatal(err)
		}
		return out.GroupId
	}
	nodes, cp := mk("eksctl-c1-nodegroup-ng-1-SG"), mk("eksctl-c1-cluster-ControlPlaneSG")
	from := func(g *string) []ec2types.IpPermission {
		return []ec2types.IpPermission{{IpProtocol: awssdk.String("-1"), FromPort: awssdk.Int32(-1), ToPort: awssdk.Int32(-1), UserIdGroupPairs: []ec2types.UserIdGroupPair{{GroupId: g}}}}
	}
	for _, r := range []struct{ g, src *string }{{nodes, nodes}, {cp, nodes}} {
		if _, err := e.cloud.lb.ec2.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: r.g, IpPermissions: from(r.src)}); err != nil {
			t.Fatal(err)
		}
	}
	return awssdk.ToString(nodes), func() string {
		var out []string
		for _, sg := range e.fake.SecurityGroups() {
			if sg.ID == awssdk.ToString(nodes) || sg.ID == awssdk.ToString(cp) {
				out = append(out, fmt.Sprintf("%s %s %v", sg.ID, sg.Name, sg.Ingress))
			}
		}
		return strings.Join(out, "; ")
	}
}

// TestAdoptedNodeGroupIsOnlyDetached: under the upstream provider an NLB
// carried its own managed group and the cluster's node group (named by
// aws-load-balancer-extra-security-groups; eksctl and kops tag it
// kubernetes.io/cluster/<id>=owned). Adopted through the upstream service
// controller, the upstream group is deleted (its name and description are
// upstream's); the annotation removed then, the node group is detached
// from the NLB and nothing else: it stays, with its node-to-node rule and
// the control-plane rule whose source it is; so it does after the
// Service's deletion.
func TestAdoptedNodeGroupIsOnlyDetached(t *testing.T) {
	e := newEnv(t)
	nodeSG, fingerprint := clusterNodeSG(t, e)
	want := fingerprint()
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance), withAnnotation(AnnotationExtraSecurityGroups, nodeSG))
	theirs := upstreamManagedSG(t, e, svc)
	dns := upstreamNLBWithGroups(t, e, svc, []string{theirs, nodeSG}, e.addInstance(1).ID)
	svc.Finalizers = []string{"service.kubernetes.io/load-balancer-cleanup"}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: dns}}
	client := testutil.NewClientset(svc)
	runServiceController(t, e.cloud, client)
	a := &annotated{t: t, e: e, client: client, svc: svc}
	eventually(t, "the NLB has the backend's group and the node group; upstream's deleted", func() error {
		if err := nlbGroups("ours", nodeSG)(e); err != nil {
			return err
		}
		for _, sg := range e.fake.SecurityGroups() {
			if sg.ID == theirs {
				return fmt.Errorf("the upstream provider's group is still there")
			}
		}
		return nil
	})
	a.lbARN = e.onlyLB(t).ARN
	a.change("the extra-security-groups annotation removed", map[annotation.Name]string{AnnotationTargetType: targetInstance}, nlbGroups("ours"))
	if got := fingerprint(); got != want {
		t.Errorf("the cluster's node and control-plane groups changed:\n%s\nwant\n%s", got, want)
	}
	deleteService(t, client, "web")
	eventually(t, "the Service's NLB and group deleted", func() error {
		if n := len(e.fake.LoadBalancers()); n != 0 || e.fake.SecurityGroupCount() != 2 {
			return fmt.Errorf("%d load balancers, %d security groups", n, e.fake.SecurityGroupCount())
		}
		return nil
	})
	if got := fingerprint(); got != want {
		t.Errorf("after the delete, the cluster's node and control-plane groups changed:\n%s\nwant\n%s", got, want)
	}
}

// TestNonCanonicalNumbersConverge: attribute and health-check-port
// annotations with numbers AWS stores otherwise (0300, +30, 08080) are
// taken as the numbers they are: the Service converges (through the
// upstream service controller), and a resync makes no mutating call; they
// used to differ from what AWS answers on every Ensure.
func TestNonCanonicalNumbersConverge(t *testing.T) {
	svc := newService("web", withAnnotations(map[annotation.Name]string{
		AnnotationTargetGroupAttributes: "deregistration_delay.timeout_seconds=+30",
		AnnotationHealthCheckPort:       "030080",
	}))
	a := startAnnotated(t, svc, func(e *env) error {
		if err := attributesAre(map[string]string{"deregistration_delay.timeout_seconds": "30"})(e); err != nil {
			return err
		}
		if tg, err := onlyTG(e); err != nil || tg.HealthCheckPort != "30080" {
			return fmt.Errorf("health-check port %q (%w), want 30080", tg.HealthCheckPort, err)
		}
		return nil
	})
	a.resyncChangesNothing()
	a.change("the delay written 0300", map[annotation.Name]string{AnnotationTargetGroupAttributes: "deregistration_delay.timeout_seconds=0300", AnnotationHealthCheckPort: "030080"},
		attributesAre(map[string]string{"deregistration_delay.timeout_seconds": "300"}), "ModifyTargetGroupAttributes")
	a.resyncChangesNothing()
}

// TestNeverAdoptedDeleteKeepsMTURules: deleting a Service the upstream
// provider never served revokes none of its rules in the cluster's groups:
// an MTU rule there (upstream's for other NLBs, even one no client rule
// keeps any more) is not the Service's. (An adopted Service's delete
// revokes its own client and health rules and the MTU rules only they
// kept: TestAdoptedDeleteRevokesUpstreamInstanceRules.)
func TestNeverAdoptedDeleteKeepsMTURules(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	out, err := e.cloud.lb.ec2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: awssdk.String("nodes"), Description: awssdk.String("the cluster's nodes"),
		VpcId: awssdk.String(testVPC), TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeSecurityGroup,
			Tags: []ec2types.Tag{{Key: awssdk.String(tagClusterPrefix + testCluster), Value: awssdk.String("shared")}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.cloud.lb.ec2.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: out.GroupId, IpPermissions: []ec2types.IpPermission{
		{IpProtocol: awssdk.String("icmp"), FromPort: awssdk.Int32(3), ToPort: awssdk.Int32(4), IpRanges: []ec2types.IpRange{{CidrIp: awssdk.String("0.0.0.0/0"), Description: awssdk.String(upstreamMTURule)}}},
	}}); err != nil {
		t.Fatal(err)
	}
	svc := newService("web")
	client := testutil.NewClientset(svc)
	runServiceController(t, e.cloud, client)
	eventually(t, "the NLB created", func() error {
		if len(e.fake.LoadBalancers()) != 1 {
			return fmt.Errorf("no NLB yet")
		}
		return nil
	})
	deleteService(t, client, "web")
	eventually(t, "the Service's NLB and group deleted", func() error {
		if n := len(e.fake.LoadBalancers()); n != 0 || e.fake.SecurityGroupCount() != 1 {
			return fmt.Errorf("%d load balancers, %d security groups", n, e.fake.SecurityGroupCount())
		}
		return nil
	})
	if got := strings.Join(e.fake.SecurityGroupIngress(awssdk.ToString(out.GroupId)), ","); got != "icmp:3-4:0.0.0.0/0" {
		t.Errorf("the nodes' group allows %q after the delete, want its MTU rule kept", got)
	}
}

// TestSubnetNameOfSeveralSubnetsIsRefused: a subnets annotation giving a
// Name tag that several subnets carry is refused as the upstream provider
// refuses it, with a Warning naming the annotation, the subnets and the
// fix (their IDs); nothing changes. It used to take the lowest ID.
func TestSubnetNameOfSeveralSubnetsIsRefused(t *testing.T) {
	a := startAnnotatedWith(t, func(e *env) {
		e.fake.AddSubnet(awsfake.Subnet{ID: "subnet-2a", VPCID: testVPC, Zone: testRegion + "a", ZoneID: "euw1-az1", CIDR: "10.0.20.0/24", Tags: map[string]string{"Name": "public-a"}})
	}, newService("web"), func(*env) error { return nil })
	a.refused("a Name tag of two subnets", map[annotation.Name]string{AnnotationSubnets: "public-a,public-b"},
		string(AnnotationSubnets), "public-a names 2 subnets", "subnet-0a, subnet-2a", "by its ID")
}

// TestAdoptedGroupLeftIsFoundOnDelete: an upstream group of the Service
// left unattached (its replacement's DeleteTargetGroup failed, the record
// on the NLB lost with it) is found and deleted by the Service's deletion:
// upstream's name for the Service's groups and the cluster's and
// Service's tags; an unattached group of that name without the tags is
// left.
func TestAdoptedGroupLeftIsFoundOnDelete(t *testing.T) {
	e := newEnv(t)
	svc := newService("web")
	upstreamNLB(t, e, svc, e.addInstance(1).ID)
	ctx := context.Background()
	tags := []elbtypes.Tag{{Key: awssdk.String(tagService), Value: awssdk.String("default/web")}, {Key: awssdk.String(tagClusterPrefix + testCluster), Value: awssdk.String("owned")}}
	for name, tg := range map[string][]elbtypes.Tag{"k8s-default-web-1111111111": tags, "k8s-default-web-2222222222": nil} {
		if _, err := e.cloud.lb.elb.CreateTargetGroup(ctx, &elbv2.CreateTargetGroupInput{Name: awssdk.String(name), Protocol: elbtypes.ProtocolEnumTcp,
			Port: awssdk.Int32(30080), VpcId: awssdk.String(testVPC), TargetType: elbtypes.TargetTypeEnumInstance, Tags: tg}); err != nil {
			t.Fatal(err)
		}
	}
	lb, _ := e.cloud.LoadBalancer()
	if err := lb.EnsureLoadBalancerDeleted(ctx, testCluster, svc); err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, tg := range e.fake.TargetGroups() {
		left = append(left, tg.Name)
	}
	if strings.Join(left, ",") != "k8s-default-web-2222222222" {
		t.Errorf("target groups left %v, want only the untagged one", left)
	}
}
