package aws

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// dualStackSubnets gives the env's four subnets IPv6 blocks:
// 2001:db8:0:<n>::/64 for the subnet of 10.0.<n>.0/24.
func dualStackSubnets(e *env) {
	for i, z := range []string{"a", "b"} {
		e.fake.AddSubnet(awsfake.Subnet{ID: "subnet-0" + z, VPCID: testVPC, Zone: testRegion + z, ZoneID: fmt.Sprintf("euw1-az%d", i+1),
			CIDR: fmt.Sprintf("10.0.%d.0/24", i), IPv6CIDR: fmt.Sprintf("2001:db8:0:%d::/64", i), Tags: map[string]string{tagRoleELB: "1", "Name": "public-" + z}})
		e.fake.AddSubnet(awsfake.Subnet{ID: "subnet-1" + z, VPCID: testVPC, Zone: testRegion + z, ZoneID: fmt.Sprintf("euw1-az%d", i+1),
			CIDR: fmt.Sprintf("10.0.%d.0/24", 10+i), IPv6CIDR: fmt.Sprintf("2001:db8:0:%d::/64", 10+i), Tags: map[string]string{tagRoleInternalELB: "1"}})
	}
}

// ipv6Of is the IPv6 address of instance n's node, in its subnet's block.
func ipv6Of(n int) string { return fmt.Sprintf("2001:db8:0:%d::%x", 10+n%2, 100+n) }

// dualNode is the node of a new instance n, with an IPv6 InternalIP
// (ipv6Of) when v6.
func (e *env) dualNode(n int, v6 bool) *corev1.Node {
	in := e.addInstance(n)
	tweaks := []nodeTweak{testutil.WithProviderID(providerID(in.Zone, in.ID)), testutil.WithInternalIP(in.PrivateIPs[0])}
	if v6 {
		tweaks = append(tweaks, testutil.WithInternalIP(ipv6Of(n)))
	}
	return newNode(in.PrivateDNSName, tweaks...)
}

func ipv6Primary(s *corev1.Service) {
	policy := corev1.IPFamilyPolicyRequireDualStack
	s.Spec.IPFamilyPolicy = &policy
	s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}
}

// ipv6Only makes the Service single-stack IPv6 (the upstream service
// controller acts on a change of the families' count, not of their order:
// Kubernetes does not let a Service's primary family change).
func ipv6Only(s *corev1.Service) {
	policy := corev1.IPFamilyPolicySingleStack
	s.Spec.IPFamilyPolicy = &policy
	s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol}
}

func ipv4Primary(s *corev1.Service) {
	policy := corev1.IPFamilyPolicyRequireDualStack
	s.Spec.IPFamilyPolicy = &policy
	s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
}

// forwardsToGroup checks the only NLB's IP address type, that its port 80
// forwards to the only target group, named tg, of IP address type family,
// and that group's targets.
func forwardsToGroup(lbType, tg, family string, targets ...string) func(*env) error {
	return func(e *env) error {
		lbs, tgs := e.fake.LoadBalancers(), e.fake.TargetGroups()
		if len(lbs) != 1 || len(tgs) != 1 {
			return fmt.Errorf("%d load balancers and %d target groups, want one each", len(lbs), len(tgs))
		}
		if lbs[0].IPAddressType != lbType || strings.Join(lbs[0].Listeners, ",") != "TCP:80->"+tg {
			return fmt.Errorf("load balancer %s with listeners %v, want %s with TCP:80->%s", lbs[0].IPAddressType, lbs[0].Listeners, lbType, tg)
		}
		if tgs[0].Name != tg || tgs[0].IPAddressType != family || tgs[0].TargetType != targetIP {
			return fmt.Errorf("target group %s (%s, %s), want %s (%s, ip)", tgs[0].Name, tgs[0].IPAddressType, tgs[0].TargetType, tg, family)
		}
		targets = slices.Sorted(slices.Values(targets))
		if got := strings.Join(tgs[0].Targets, ","); got != strings.Join(targets, ",") {
			return fmt.Errorf("targets %s, want %s", got, strings.Join(targets, ","))
		}
		return nil
	}
}

// letsIn checks the ingress rules of the backend's only security group.
func letsIn(want ...string) func(*env) error {
	return func(e *env) error {
		sgs := e.fake.SecurityGroups()
		if len(sgs) != 1 {
			return fmt.Errorf("%d security groups, want 1", len(sgs))
		}
		if got, want := strings.Join(sgs[0].Ingress, ","), strings.Join(slices.Sorted(slices.Values(want)), ","); got != want {
			return fmt.Errorf("security group lets in %s, want %s", got, want)
		}
		return nil
	}
}

// startDualStack starts the service controller on a backend with events,
// creates svc, then the nodes, and waits for check.
//
// The nodes come one at a time once the Service's first sync is done, each
// after the node sync of the one before has reached the backend (an
// UpdateLoadBalancer with it done): upstream's node and service workers never run
// together then. They share state without a lock (serviceCache.allServices
// against cachedService.state), which -race reports, and would reconcile
// the Service at once with different nodes.
func startDualStack(t *testing.T, e *env, svc *corev1.Service, check func(*env) error, nodes ...*corev1.Node) *annotated {
	t.Helper()
	client := testutil.NewClientset()
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	e.cloud.Initialize(testutil.NewClientBuilder(client), stop)
	cloud := &handingCloud{Cloud: e.cloud}
	testutil.StartServiceController(t, cloud, client, testCluster, 2)
	a := startAnnotatedOn(t, e, client, svc)
	for i, n := range nodes {
		createNodes(t, client, n)
		eventually(t, "the node sync of "+n.Name+" at the backend", func() error {
			if got := cloud.handed.Load(); got != int32(i+1) {
				return fmt.Errorf("the last node sync handed %d nodes", got)
			}
			return nil
		})
	}
	eventually(t, "the NLB is made as the Service asks", func() error { return check(e) })
	a.lbARN = e.onlyLB(t).ARN
	return a
}

// changeService changes the Service with mutate and waits for check; the
// NLB and its DNS name must stay, and the change make exactly the mutating
// calls calls, in that order.
func (a *annotated) changeService(what string, mutate func(*corev1.Service), check func(*env) error, calls ...string) {
	a.t.Helper()
	ctx := context.Background()
	before := a.e.onlyLB(a.t)
	a.e.fake.ResetCalls()
	s, err := a.client.CoreV1().Services(a.svc.Namespace).Get(ctx, a.svc.Name, metav1.GetOptions{})
	if err != nil {
		a.t.Fatal(err)
	}
	mutate(s)
	if _, err := a.client.CoreV1().Services(a.svc.Namespace).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		a.t.Fatal(err)
	}
	eventually(a.t, what, func() error { return check(a.e) })
	if after := a.e.onlyLB(a.t); after.ARN != before.ARN || after.DNSName != before.DNSName {
		a.t.Fatalf("%s replaced the NLB: %s (%s) -> %s (%s)", what, before.ARN, before.DNSName, after.ARN, after.DNSName)
	}
	if got := a.e.fake.MutatingCalls(); !slices.Equal(got, calls) {
		a.t.Errorf("%s made mutating calls %v, want %v", what, got, calls)
	}
}

// update runs UpdateLoadBalancer as the router does on a node address
// change, with the Service as it is now.
func (a *annotated) updateNodes(nodes ...*corev1.Node) {
	a.t.Helper()
	s, err := a.client.CoreV1().Services(a.svc.Namespace).Get(context.Background(), a.svc.Name, metav1.GetOptions{})
	if err != nil {
		a.t.Fatal(err)
	}
	a.e.fake.ResetCalls()
	if err := a.e.cloud.lb.UpdateLoadBalancer(context.Background(), testCluster, s, nodes); err != nil {
		a.t.Fatal(err)
	}
}

// TestIPv6PrimaryServiceGetsIPv6Targets drives an IPv6-primary dual-stack
// Service with ip-address-type dualstack through the upstream service
// controller: a dualstack NLB whose listener forwards to an IPv6 target
// group holding the nodes' IPv6 addresses in the VPC (not a node without
// one, nor one outside the VPC's IPv6 blocks); a second sync changes
// nothing; a node gaining or losing its IPv6 address is registered or
// deregistered; no node with one is a Warning naming the family; the
// annotation removed (or ipv4, or instance targets asked for) is a Warning
// naming it and the fix, and changes nothing.
func TestIPv6PrimaryServiceGetsIPv6Targets(t *testing.T) {
	e := newEnv(t)
	dualStackSubnets(e)
	n1, n2, n3 := e.dualNode(1, true), e.dualNode(2, true), e.dualNode(3, false)
	vm := newNode("vm-a", testutil.WithProviderID("vsphere://4201-a"), testutil.WithInternalIP("192.168.10.1"), testutil.WithInternalIP("fd00:10::1"))
	dual := map[annotation.Name]string{AnnotationIPAddressType: "dualstack"}
	svc := newService("web", ipv6Primary, withAnnotations(dual))
	tg6 := namesFor(testCluster, svc).targetGroupOf(80, "TCP", targetIP, familyIPv6)
	a := startDualStack(t, e, svc, forwardsToGroup("dualstack", tg6, familyIPv6, ipv6Of(1)+":30080", ipv6Of(2)+":30080"), n1, n2, n3, vm)
	if err := letsIn("tcp:80-80:0.0.0.0/0", "tcp:80-80:::/0")(e); err != nil {
		t.Error(err)
	}
	a.resyncChangesNothing()
	a.changeService("IPv4 and IPv6 source ranges", testutil.WithSourceRanges("2001:db8:ff::/48", "203.0.113.0/24"),
		letsIn("tcp:80-80:2001:db8:ff::/48", "tcp:80-80:203.0.113.0/24"), "RevokeSecurityGroupIngress", "AuthorizeSecurityGroupIngress")
	a.resyncChangesNothing()

	n3v6 := n3.DeepCopy()
	n3v6.Status.Addresses = append(n3v6.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ipv6Of(3)})
	a.updateNodes(n1, n2, n3v6, vm)
	if err := forwardsToGroup("dualstack", tg6, familyIPv6, ipv6Of(1)+":30080", ipv6Of(2)+":30080", ipv6Of(3)+":30080")(e); err != nil {
		t.Errorf("a node given an IPv6 address: %v", err)
	}
	if got := e.fake.MutatingCalls(); !slices.Equal(got, []string{"RegisterTargets"}) {
		t.Errorf("a node given an IPv6 address made %v, want RegisterTargets", got)
	}
	n1v4 := n1.DeepCopy()
	n1v4.Status.Addresses = n1v4.Status.Addresses[:1]
	a.updateNodes(n1v4, n2, n3v6, vm)
	if err := forwardsToGroup("dualstack", tg6, familyIPv6, ipv6Of(2)+":30080", ipv6Of(3)+":30080")(e); err != nil {
		t.Errorf("a node without its IPv6 address: %v", err)
	}
	if got := e.fake.MutatingCalls(); !slices.Equal(got, []string{"DeregisterTargets"}) {
		t.Errorf("a node without its IPv6 address made %v, want DeregisterTargets", got)
	}
	a.updateNodes(n1v4, n3, vm)
	a.event(corev1.EventTypeWarning, reasonNoTargets, "None of the 3 nodes has an IPv6 InternalIP", "spec.ipFamilies[0]")

	for _, bad := range []struct {
		name string
		ann  map[annotation.Name]string
		want []string
	}{
		{"no ip-address-type", nil, []string{string(AnnotationIPAddressType), "primary IP family", "set it to dualstack"}},
		{"ip-address-type ipv4", map[annotation.Name]string{AnnotationIPAddressType: "ipv4"}, []string{string(AnnotationIPAddressType) + `="ipv4"`, "set it to dualstack"}},
		{"instance targets", map[annotation.Name]string{AnnotationIPAddressType: "dualstack", AnnotationTargetType: targetInstance}, []string{string(AnnotationTargetType), "set it to ip or remove it"}},
	} {
		a.refused(bad.name, bad.ann, bad.want...)
		if err := forwardsToGroup("dualstack", tg6, familyIPv6)(e); err != nil {
			t.Errorf("%s changed the NLB: %v", bad.name, err)
		}
	}
}

// TestIPv6PrimaryWithoutDualStackMakesNothing: a new IPv6-primary Service
// without ip-address-type dualstack is an annotation error naming it and
// the fix, before any call that changes AWS.
func TestIPv6PrimaryWithoutDualStackMakesNothing(t *testing.T) {
	e := newEnv(t)
	dualStackSubnets(e)
	lb, _ := e.cloud.LoadBalancer()
	_, err := lb.EnsureLoadBalancer(context.Background(), testCluster, newService("web", ipv6Primary), []*corev1.Node{e.dualNode(1, true)})
	if ue, ok := backends.AsUserError(err); !ok || ue.Reason != annotation.ReasonInvalid || !strings.Contains(err.Error(), string(AnnotationIPAddressType)) || !strings.Contains(err.Error(), "set it to dualstack") {
		t.Fatalf("err = %v, want an %s error naming %s and the fix", err, annotation.ReasonInvalid, AnnotationIPAddressType)
	}
	e.assertNoMutation(t, "an IPv6-primary Service without dualstack")
}

// TestIPFamilyChangeReplacesTargetGroups: an IPv4-primary Service on a
// dualstack NLB keeps IPv4 target groups; its primary family turned to
// IPv6 (single-stack) moves the listener to a new IPv6 group (announced first) on the
// same NLB; back to IPv4 with ip-address-type ipv4 moves it to an IPv4
// group before the NLB goes back to ipv4 (AWS refuses the other order);
// the old groups are deleted each time.
func TestIPFamilyChangeReplacesTargetGroups(t *testing.T) {
	e := newEnv(t)
	dualStackSubnets(e)
	n1, n2 := e.dualNode(1, true), e.dualNode(2, true)
	vm := newNode("vm-a", testutil.WithProviderID("vsphere://4201-a"), testutil.WithInternalIP("192.168.10.1"))
	svc := newService("web", ipv4Primary, withAnnotation(AnnotationIPAddressType, "dualstack"))
	n := namesFor(testCluster, svc)
	tg4, tg6 := n.targetGroupOf(80, "TCP", targetIP, familyIPv4), n.targetGroupOf(80, "TCP", targetIP, familyIPv6)
	v4Targets := []string{"10.0.10.12:30080", "10.0.11.11:30080", "192.168.10.1:30080@all"}
	a := startDualStack(t, e, svc, forwardsToGroup("dualstack", tg4, familyIPv4, v4Targets...), n1, n2, vm)
	a.resyncChangesNothing()

	a.changeService("IPv6 primary", ipv6Only, forwardsToGroup("dualstack", tg6, familyIPv6, ipv6Of(1)+":30080", ipv6Of(2)+":30080"),
		"CreateTargetGroup", "RegisterTargets", "ModifyListener", "DeleteTargetGroup")
	a.event(corev1.EventTypeNormal, reasonTargetGroupsReplacing, "port 80 from "+tg4+" to "+tg6, "IP address type", "DNS name stay")
	a.resyncChangesNothing()

	a.changeService("IPv4 primary on an ipv4 NLB", func(s *corev1.Service) {
		ipv4Primary(s)
		s.Annotations[string(AnnotationIPAddressType)] = "ipv4"
	}, forwardsToGroup("ipv4", tg4, familyIPv4, v4Targets...),
		"RevokeSecurityGroupIngress", "CreateTargetGroup", "RegisterTargets", "ModifyListener", "DeleteTargetGroup", "SetIpAddressType")
	if err := letsIn("tcp:80-80:0.0.0.0/0")(e); err != nil {
		t.Error(err)
	}
	a.event(corev1.EventTypeNormal, reasonTargetGroupsReplacing, "port 80 from "+tg6+" to "+tg4)
	a.resyncChangesNothing()

	a.changeService("IPv6 primary on a dualstack NLB again", func(s *corev1.Service) {
		ipv6Primary(s)
		s.Annotations[string(AnnotationIPAddressType)] = "dualstack"
	}, forwardsToGroup("dualstack", tg6, familyIPv6, ipv6Of(1)+":30080", ipv6Of(2)+":30080"),
		"AuthorizeSecurityGroupIngress", "SetIpAddressType", "CreateTargetGroup", "RegisterTargets", "ModifyListener", "DeleteTargetGroup")
	if err := letsIn("tcp:80-80:0.0.0.0/0", "tcp:80-80:::/0")(e); err != nil {
		t.Error(err)
	}
}

// TestAdoptedGroupsFitTheFamily: an adopted NLB's upstream target group is
// kept only when its IP address type is the Service's family.
func TestAdoptedGroupsFitTheFamily(t *testing.T) {
	svc := newService("web", ipv6Primary)
	n := namesFor(testCluster, svc)
	listener := map[int32]*elbtypes.Listener{80: {Port: awssdk.Int32(80), DefaultActions: []elbtypes.Action{{Type: elbtypes.ActionTypeEnumForward, TargetGroupArn: awssdk.String("arn:up")}}}}
	for _, tc := range []struct {
		family, groupType string
		kept              bool
	}{
		{familyIPv6, "ipv6", true},
		{familyIPv6, "", false},
		{familyIPv4, "ipv6", false},
		{familyIPv4, "", true},
		{familyIPv4, "ipv4", true},
	} {
		own := n.targetGroupOf(80, "TCP", targetIP, tc.family)
		d := &desiredLB{names: n, targetType: targetIP, family: tc.family, ports: []desiredPort{{port: 80, protocol: "TCP", tgName: own}}}
		attached := map[string]elbtypes.TargetGroup{"k8s-tg-up": {TargetGroupArn: awssdk.String("arn:up"), TargetGroupName: awssdk.String("k8s-tg-up"), Protocol: elbtypes.ProtocolEnumTcp,
			TargetType: elbtypes.TargetTypeEnumIp, IpAddressType: elbtypes.TargetGroupIpAddressTypeEnum(tc.groupType), VpcId: awssdk.String(testVPC)}}
		keepUpstreamGroups(d, testVPC, listener, attached)
		if kept := d.ports[0].tgName == "k8s-tg-up"; kept != tc.kept {
			t.Errorf("family %s, upstream group %q: kept %v, want %v", tc.family, tc.groupType, kept, tc.kept)
		}
	}
}

// TestCanTargetByFamily: for an IPv6-primary Service the router hands the
// backend other clouds' nodes with an IPv6 InternalIP only.
func TestCanTargetByFamily(t *testing.T) {
	e := newEnv(t)
	lb := e.cloud.lb
	v4 := newNode("vm-a", testutil.WithInternalIP("192.168.10.1"))
	both := newNode("vm-b", testutil.WithInternalIP("192.168.10.2"), testutil.WithInternalIP("2001:db8:0:10::5"))
	for _, tc := range []struct {
		svc  *corev1.Service
		node *corev1.Node
		want bool
	}{
		{newService("a", ipv6Primary), v4, false},
		{newService("b", ipv6Primary), both, true},
		{newService("c", ipv4Primary), v4, true},
		{newService("d"), both, true},
	} {
		if got := lb.CanTarget(tc.svc, tc.node); got != tc.want {
			t.Errorf("CanTarget(%s %v, %s) = %v, want %v", tc.svc.Name, tc.svc.Spec.IPFamilies, tc.node.Name, got, tc.want)
		}
	}
}

// TestCanTargetByNodeLabels: a Service with
// aws-load-balancer-target-node-labels is handed only the nodes carrying
// them (key=value, or key alone for any value), so a change of another node
// updates none of its NLBs; an invalid value hands every node, and desired
// reports it.
func TestCanTargetByNodeLabels(t *testing.T) {
	e := newEnv(t)
	lb := e.cloud.lb
	ec2Node := func(name string, labels map[string]string) *corev1.Node {
		n := newNode(name, testutil.WithInternalIP("10.0.1.9"))
		n.Spec.ProviderID = "aws:///eu-west-1a/i-0123456789abcdef0"
		n.Labels = labels
		return n
	}
	inSubset := ec2Node("in", map[string]string{"pool": "edge", "tier": "lb"})
	other := ec2Node("other", map[string]string{"pool": "batch"})
	bare := ec2Node("bare", nil)
	for _, tc := range []struct {
		labels string
		node   *corev1.Node
		want   bool
	}{
		{"pool=edge", inSubset, true},
		{"pool=edge", other, false},
		{"pool=edge", bare, false},
		{"pool=edge,tier", inSubset, true},
		{"pool", other, true},
		{"tier=lb", other, false},
		{"=edge", other, true},
		{"", other, true},
	} {
		svc := newService("web", withAnnotation(AnnotationTargetNodeLabels, tc.labels))
		if got := lb.CanTarget(svc, tc.node); got != tc.want {
			t.Errorf("target-node-labels %q: CanTarget(%s %v) = %v, want %v", tc.labels, tc.node.Name, tc.node.Labels, got, tc.want)
		}
	}
}

// TestDualStackNeedsIPv6Subnets: a new dualstack NLB in subnets without
// IPv6 blocks is refused by AWS; the error names the annotation and the
// fix, and no NLB is made.
func TestDualStackNeedsIPv6Subnets(t *testing.T) {
	e := newEnv(t)
	lb, _ := e.cloud.LoadBalancer()
	_, err := lb.EnsureLoadBalancer(context.Background(), testCluster, newService("web", withAnnotation(AnnotationIPAddressType, "dualstack")), nil)
	if ue, ok := backends.AsUserError(err); !ok || ue.Reason != annotation.ReasonInvalid || !strings.Contains(err.Error(), string(AnnotationIPAddressType)) || !strings.Contains(err.Error(), "IPv6 CIDRs on every subnet") {
		t.Fatalf("err = %v, want an %s error naming %s and the fix", err, annotation.ReasonInvalid, AnnotationIPAddressType)
	}
	if lbs := e.fake.LoadBalancers(); len(lbs) != 0 {
		t.Errorf("%d load balancers made", len(lbs))
	}
}
