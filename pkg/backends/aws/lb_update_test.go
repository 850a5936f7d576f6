package aws

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// TestUpdateCallsPerNLB: a node sync excluding one node from 20
// instance-targeted and 20 ip-targeted NLBs costs, on a backend without
// a verified view of them (restarted), 5 AWS calls per NLB
// (DescribeLoadBalancers and DescribeTags to find the Service's NLB and
// check it is ours, DescribeTargetGroups by the NLB, DescribeTargetHealth,
// DeregisterTargets), not the 10 of a whole reconcile; the next node
// excluded costs the one DeregisterTargets per NLB (the view those
// Updates recorded).
func TestUpdateCallsPerNLB(t *testing.T) {
	const perKind = 20
	e := newEnv(t, noBudget)
	nodes := e.awsNodes(1, 3)
	var svcs []*corev1.Service
	for i := range perKind {
		svcs = append(svcs, newService(fmt.Sprintf("inst-%02d", i)),
			newService(fmt.Sprintf("ip-%02d", i), withAnnotation(AnnotationTargetType, targetIP)))
	}
	for _, svc := range svcs {
		e.ensure(t, svc, nodes)
	}
	restarted := buildCloud(t, e.url, noBudget)
	e.fake.ResetCalls()
	for _, svc := range svcs {
		if err := restarted.lb.UpdateLoadBalancer(context.Background(), testCluster, svc, nodes[1:]); err != nil {
			t.Fatal(err)
		}
	}
	counts := e.fake.CallCounts()
	t.Logf("calls of %d Updates: %v", len(svcs), counts)
	delete(counts, "DescribeInstances") // the restarted backend's caches, filled once
	delete(counts, "DescribeSubnets")
	want := map[string]int{"DescribeLoadBalancers": 1, "DescribeTags": 1, "DescribeTargetGroups": 1, "DescribeTargetHealth": 1, "DeregisterTargets": 1}
	for op := range want {
		want[op] *= len(svcs)
	}
	if !maps.Equal(counts, want) {
		t.Errorf("calls = %v (%.1f per NLB), want %v (5 per NLB)", counts, float64(e.fake.TotalCalls())/float64(len(svcs)), want)
	}
	for _, tg := range e.fake.TargetGroups() {
		if len(tg.Targets) != 2 {
			t.Errorf("target group %s: targets %v, want the 2 nodes left", tg.Name, tg.Targets)
		}
	}
	e.fake.ResetCalls()
	for _, svc := range svcs {
		if err := restarted.lb.UpdateLoadBalancer(context.Background(), testCluster, svc, nodes[2:]); err != nil {
			t.Fatal(err)
		}
	}
	if counts, want := e.fake.CallCounts(), map[string]int{"DeregisterTargets": len(svcs)}; !maps.Equal(counts, want) {
		t.Errorf("calls of the next node excluded = %v, want %v (1 per NLB)", counts, want)
	}
}

// TestUpdateConvergesLikeReconcile: UpdateLoadBalancer's fast path (no
// DescribeListeners: it reads no listener) registers and deregisters
// exactly what the whole reconcile would: an EnsureLoadBalancer right after
// it changes nothing. Instance targets, ip targets, several ports
// (TCP_UDP among them), and a hybrid node set (another cloud's VMs as IP
// targets in zone all).
func TestUpdateConvergesLikeReconcile(t *testing.T) {
	ports := func(s *corev1.Service) {
		withPort("dns", corev1.ProtocolTCP, 53, 30053)(s)
		withPort("dns-udp", corev1.ProtocolUDP, 53, 30053)(s)
		withPort("tls", corev1.ProtocolTCP, 443, 30443)(s)
	}
	for _, tc := range []struct {
		name   string
		tweaks []svcTweak
		// before and after are the nodes of the Ensure and of the Update.
		before, after func(e *env) []*corev1.Node
		wantType      string
	}{
		{"instance targets", nil, func(e *env) []*corev1.Node { return e.awsNodes(1, 3) },
			func(e *env) []*corev1.Node { return append(e.awsNodes(2, 2), e.awsNodes(4, 2)...) }, targetInstance},
		{"ip targets", []svcTweak{withAnnotation(AnnotationTargetType, targetIP)}, func(e *env) []*corev1.Node { return e.awsNodes(1, 3) },
			func(e *env) []*corev1.Node { return append(e.awsNodes(2, 2), e.awsNodes(4, 2)...) }, targetIP},
		{"several ports", []svcTweak{ports}, func(e *env) []*corev1.Node { return e.awsNodes(1, 3) },
			func(e *env) []*corev1.Node { return append(e.awsNodes(2, 2), e.awsNodes(4, 2)...) }, targetInstance},
		{"hybrid nodes", []svcTweak{ports}, func(e *env) []*corev1.Node { return append(e.awsNodes(1, 2), otherNodes(1)...) },
			func(e *env) []*corev1.Node { return append(e.awsNodes(2, 1), otherNodes(3)...) }, targetIP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, noBudget)
			svc := newService("web", tc.tweaks...)
			e.ensure(t, svc, tc.before(e))
			before := e.targetGroups(t)
			nodes := tc.after(e)
			e.fake.ResetCalls()
			if err := e.cloud.lb.UpdateLoadBalancer(context.Background(), testCluster, svc, nodes); err != nil {
				t.Fatal(err)
			}
			if n := e.fake.Calls("DescribeListeners"); n != 0 {
				t.Errorf("%d DescribeListeners: the whole reconcile ran, want the fast path (calls %v)", n, e.fake.CallCounts())
			}
			for _, m := range e.fake.MutatingCalls() {
				if m != "RegisterTargets" && m != "DeregisterTargets" {
					t.Errorf("mutating call %s, want only target changes", m)
				}
			}
			after := e.targetGroups(t)
			if !slices.Equal(slices.Sorted(maps.Keys(after)), slices.Sorted(maps.Keys(before))) {
				t.Fatalf("target groups %v, want the same %v", slices.Sorted(maps.Keys(after)), slices.Sorted(maps.Keys(before)))
			}
			for name, tg := range after {
				if tg.TargetType != tc.wantType || slices.Equal(tg.Targets, before[name].Targets) {
					t.Errorf("target group %s (%s): targets %v, want %s targets changed from %v", name, tg.TargetType, tg.Targets, tc.wantType, before[name].Targets)
				}
			}
			e.fake.ResetCalls()
			e.ensure(t, svc, nodes)
			e.assertNoMutation(t, "Ensure after the Update")
		})
	}
}

// TestUpdateFallsBack: when the NLB is not as the fast path expects, the
// Update runs the whole reconcile (DescribeListeners among its reads) and
// converges as before: a target group deleted out of band (its listener
// first, as AWS refuses otherwise) is made again with the nodes as targets
// and its listener; a Service that no longer has its NLB gets none.
func TestUpdateFallsBack(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, noBudget)
	nodes := e.awsNodes(1, 2)
	svc := newService("web")
	e.ensure(t, svc, nodes)
	lb := e.onlyLB(t)
	tgName := namesFor(testCluster, svc).targetGroup(80, "TCP", targetInstance)
	ls, err := e.cloud.lb.elb.DescribeListeners(ctx, &elbv2.DescribeListenersInput{LoadBalancerArn: awssdk.String(lb.ARN)})
	if err != nil || len(ls.Listeners) != 1 {
		t.Fatalf("DescribeListeners: %v", err)
	}
	if _, err := e.cloud.lb.elb.DeleteListener(ctx, &elbv2.DeleteListenerInput{ListenerArn: ls.Listeners[0].ListenerArn}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cloud.lb.elb.DeleteTargetGroup(ctx, &elbv2.DeleteTargetGroupInput{TargetGroupArn: awssdk.String(e.targetGroups(t)[tgName].ARN)}); err != nil {
		t.Fatal(err)
	}
	nodes = append(nodes, e.awsNodes(3, 1)...)
	e.fake.ResetCalls()
	if err := e.cloud.lb.UpdateLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
		t.Fatal(err)
	}
	if e.fake.Calls("DescribeListeners") == 0 || e.fake.Calls("CreateTargetGroup") != 1 || e.fake.Calls("CreateListener") != 1 {
		t.Errorf("calls %v, want the whole reconcile making the target group and its listener again", e.fake.CallCounts())
	}
	if tg := e.targetGroups(t)[tgName]; len(tg.Targets) != 3 {
		t.Errorf("target group %s: targets %v, want the 3 nodes", tgName, tg.Targets)
	}
	if got := e.onlyLB(t).Listeners; strings.Join(got, ",") != "TCP:80->"+tgName {
		t.Errorf("listeners %v, want TCP:80->%s", got, tgName)
	}
	e.fake.ResetCalls()
	e.ensure(t, svc, nodes)
	e.assertNoMutation(t, "Ensure after the fallback")

	other := newService("gone")
	e.fake.ResetCalls()
	if err := e.cloud.lb.UpdateLoadBalancer(ctx, testCluster, other, nodes); err != nil {
		t.Fatal(err)
	}
	e.assertNoMutation(t, "Update of a Service without an NLB")
}

// TestUpdateInstanceRulesFollowNodes: with the backend managing the
// instances' security-group rules (the default), a node whose instance is
// in a security group no other target is in makes the Update reconcile the
// whole load balancer, which allows the NodePort in that group; removing it
// again revokes the rule. Nodes in the groups already allowed take the fast
// path.
func TestUpdateInstanceRulesFollowNodes(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, noBudget)
	shared, own := userSG(t, e, "nodes"), userSG(t, e, "special")
	node := func(i int, sg string) *corev1.Node {
		in := e.addInstance(i, func(in *awsfake.Instance) { in.SecurityGroups = []string{sg} })
		return newNode(in.PrivateDNSName, testutil.WithProviderID(providerID(in.Zone, in.ID)), testutil.WithInternalIP(in.PrivateIPs[0]))
	}
	nodes := []*corev1.Node{node(1, shared), node(2, shared)}
	svc := newService("web")
	e.ensure(t, svc, nodes)
	lbSG := e.onlyLB(t).SecurityGroups[0]
	rule := "tcp:30080-30080:" + lbSG
	update := func(t *testing.T, nodes []*corev1.Node, wantListeners bool) {
		t.Helper()
		e.fake.ResetCalls()
		if err := e.cloud.lb.UpdateLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
			t.Fatal(err)
		}
		if got := e.fake.Calls("DescribeListeners") > 0; got != wantListeners {
			t.Errorf("whole reconcile = %v, want %v (calls %v)", got, wantListeners, e.fake.CallCounts())
		}
		e.fake.ResetCalls()
		e.ensure(t, svc, nodes)
		e.assertNoMutation(t, "Ensure after the Update")
	}
	update(t, append(nodes, node(3, shared)), false)
	update(t, append(nodes, node(4, own)), true)
	if got := e.fake.SecurityGroupIngress(own); !slices.Contains(got, rule) {
		t.Errorf("ingress of the new node's group = %v, want %s", got, rule)
	}
	update(t, nodes, true)
	if got := e.fake.SecurityGroupIngress(own); slices.Contains(got, rule) {
		t.Errorf("ingress of the removed node's group = %v, want no %s", got, rule)
	}
	if got := e.fake.SecurityGroupIngress(shared); !slices.Contains(got, rule) {
		t.Errorf("ingress of the nodes' group = %v, want %s", got, rule)
	}
}

// TestUpdateAdoptedNLB: an NLB the upstream provider made, still on its
// target group (not of the backend's names), is beyond the fast path: the
// Update runs the whole reconcile, which keeps the upstream group and
// registers the new node in it, creating nothing.
func TestUpdateAdoptedNLB(t *testing.T) {
	e := newEnv(t, noBudget)
	nodes := e.awsNodes(1, 3)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	upstreamNLB(t, e, svc, instanceID(1), instanceID(2))
	e.fake.ResetCalls()
	if err := e.cloud.lb.UpdateLoadBalancer(context.Background(), testCluster, svc, nodes); err != nil {
		t.Fatal(err)
	}
	if e.fake.Calls("DescribeListeners") == 0 || e.fake.Calls("CreateTargetGroup") != 0 || e.fake.Calls("CreateLoadBalancer") != 0 {
		t.Errorf("calls %v, want the whole reconcile, creating nothing", e.fake.CallCounts())
	}
	want := instanceID(1) + ":30080," + instanceID(2) + ":30080," + instanceID(3) + ":30080"
	if tg := e.targetGroups(t)["k8s-default-web-0a1b2c3d4e"]; strings.Join(tg.Targets, ",") != want {
		t.Errorf("upstream target group: targets %v, want %s", tg.Targets, want)
	}
}

// TestUpdateLeavesOthersGroupsAlone: a listener of the Service's NLB
// pointed by hand at someone else's target group makes the Update (without a
// verified view) fall back
// to the whole reconcile, which points the listener back at the Service's
// group and registers no target in (and deletes nothing of) the other
// group. An NLB with the Service's name not tagged as the cluster's is a
// LoadBalancerNameConflict, changed in nothing.
func TestUpdateLeavesOthersGroupsAlone(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, noBudget)
	nodes := e.awsNodes(1, 2)
	svc := newService("web")
	e.ensure(t, svc, nodes)
	lb := e.onlyLB(t)
	theirs, err := e.cloud.lb.elb.CreateTargetGroup(ctx, &elbv2.CreateTargetGroupInput{Name: awssdk.String("someone-elses"), Protocol: elbtypes.ProtocolEnumTcp,
		Port: awssdk.Int32(30080), VpcId: awssdk.String(testVPC), TargetType: elbtypes.TargetTypeEnumInstance})
	if err != nil {
		t.Fatal(err)
	}
	ls, err := e.cloud.lb.elb.DescribeListeners(ctx, &elbv2.DescribeListenersInput{LoadBalancerArn: awssdk.String(lb.ARN)})
	if err != nil || len(ls.Listeners) != 1 {
		t.Fatalf("DescribeListeners: %v", err)
	}
	if _, err := e.cloud.lb.elb.ModifyListener(ctx, &elbv2.ModifyListenerInput{ListenerArn: ls.Listeners[0].ListenerArn,
		DefaultActions: []elbtypes.Action{{Type: elbtypes.ActionTypeEnumForward, TargetGroupArn: theirs.TargetGroups[0].TargetGroupArn}}}); err != nil {
		t.Fatal(err)
	}
	nodes = append(nodes, e.awsNodes(3, 1)...)
	// A restarted backend: no verified view (with one, the node sync trusts
	// it and the repair pass finds the listener, TestVerifiedViewRepairedBehindOurBack).
	restarted := buildCloud(t, e.url, noBudget)
	if err := restarted.lb.UpdateLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
		t.Fatal(err)
	}
	tgName := namesFor(testCluster, svc).targetGroup(80, "TCP", targetInstance)
	tgs := e.targetGroups(t)
	if other, ok := tgs["someone-elses"]; !ok || len(other.Targets) != 0 {
		t.Errorf("the other target group: %+v, want it left as it was, without targets", other)
	}
	if len(tgs[tgName].Targets) != 3 || strings.Join(e.onlyLB(t).Listeners, ",") != "TCP:80->"+tgName {
		t.Errorf("targets %v, listeners %v; want the 3 nodes in %s and the listener back on it", tgs[tgName].Targets, e.onlyLB(t).Listeners, tgName)
	}

	foreign := newService("foreign")
	n := namesFor(testCluster, foreign)
	if _, err := e.cloud.lb.elb.CreateLoadBalancer(ctx, &elbv2.CreateLoadBalancerInput{Name: awssdk.String(n.lb), Type: elbtypes.LoadBalancerTypeEnumNetwork,
		Subnets: []string{"subnet-0a", "subnet-0b"}}); err != nil {
		t.Fatal(err)
	}
	e.fake.ResetCalls()
	err = e.cloud.lb.UpdateLoadBalancer(ctx, testCluster, foreign, nodes)
	if ue, ok := backends.AsUserError(err); !ok || ue.Reason != reasonNameConflict {
		t.Errorf("err = %v, want a %s user error", err, reasonNameConflict)
	}
	e.assertNoMutation(t, "Update of a Service whose NLB name is taken")
}
