package aws

import (
	"context"
	"errors"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// Review probes of the verified view (lb_verified.go) where it meets the
// backend's other features. Each drives the backend's LoadBalancer as
// upstream's service controller calls it and checks what is in AWS after.

// listenerTo returns the target-group name the only NLB's listener on
// port forwards to ("" when none).
func listenerTo(t *testing.T, e *env, port string) string {
	t.Helper()
	for _, l := range e.onlyLB(t).Listeners {
		if p, tg, ok := strings.Cut(l, "->"); ok && strings.HasSuffix(p, ":"+port) {
			return tg
		}
	}
	return ""
}

// TestProbeViewDryRunUpdateNeitherUsesNorRecords: a plan of a node sync
// (backends.WithDryRun) of a Service with a verified view reads AWS (it
// shows what is there, not the view), changes nothing, and leaves no view
// that a real node sync would trust wrongly: the real one afterwards makes
// the targets right.
func TestProbeViewDryRunUpdateNeitherUsesNorRecords(t *testing.T) {
	e := newEnv(t)
	nodes := e.awsNodes(1, 3)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	e.ensure(t, svc, nodes)
	lbi, _ := e.cloud.LoadBalancer()
	tg := namesFor(testCluster, svc).targetGroup(80, "TCP", targetInstance)

	e.fake.ResetCalls()
	dctx, intents := backends.WithDryRun(context.Background())
	if err := lbi.UpdateLoadBalancer(dctx, testCluster, svc, nodes[:2]); err != nil {
		t.Fatalf("planned node sync: %v", err)
	}
	if m := e.fake.MutatingCalls(); len(m) != 0 {
		t.Errorf("a plan made mutating calls %v", m)
	}
	if r := reads(e); len(r) == 0 {
		t.Errorf("a plan read nothing: it used the verified view")
	}
	if len(intents()) == 0 {
		t.Errorf("a plan of a node excluded reports no intent")
	}
	if err := groupsHave(e, 3, tg)(); err != nil {
		t.Fatalf("after the plan: %v", err)
	}
	// The plan recorded nothing: a real node sync with the plan's nodes
	// deregisters the third node.
	if err := lbi.UpdateLoadBalancer(context.Background(), testCluster, svc, nodes[:2]); err != nil {
		t.Fatal(err)
	}
	if err := groupsHave(e, 2, tg)(); err != nil {
		t.Fatalf("after the real node sync: %v", err)
	}
	// And back: the view recorded by the real sync is right.
	if err := lbi.UpdateLoadBalancer(context.Background(), testCluster, svc, nodes); err != nil {
		t.Fatal(err)
	}
	if err := groupsHave(e, 3, tg)(); err != nil {
		t.Fatalf("after the node is back: %v", err)
	}
}

// TestProbeViewDropsOnErrorMidWrite: a two-port Service; a node sync from
// the view whose second target write fails (an error the SDK does not
// retry) returns the error and leaves no view: the next node sync with the
// same nodes reads AWS and finishes the change in both groups.
func TestProbeViewDropsOnErrorMidWrite(t *testing.T) {
	e := newEnv(t)
	nodes := e.awsNodes(1, 3)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance), withPort("tls", corev1.ProtocolTCP, 443, 30443))
	e.ensure(t, svc, nodes)
	lbi, _ := e.cloud.LoadBalancer()
	n := namesFor(testCluster, svc)
	groups := []string{n.targetGroup(80, "TCP", targetInstance), n.targetGroup(443, "TCP", targetInstance)}

	e.fake.ResetCalls()
	e.fake.FailMutationsAfter(1)
	err := lbi.UpdateLoadBalancer(context.Background(), testCluster, svc, nodes[:2])
	e.fake.ClearMutationFailures()
	if err == nil {
		t.Fatalf("node sync with its second write failing: no error (calls %v)", e.fake.CallCounts())
	}
	e.fake.ResetCalls()
	if err := lbi.UpdateLoadBalancer(context.Background(), testCluster, svc, nodes[:2]); err != nil {
		t.Fatal(err)
	}
	if r := reads(e); len(r) == 0 {
		t.Errorf("the node sync after a failed one read nothing: a view survived the error")
	}
	if err := groupsHave(e, 2, groups...)(); err != nil {
		t.Errorf("after the retry: %v", err)
	}
}

// TestProbeViewThrottledNodeSync: throttling answers on the target writes
// (retried by the SDK) do not leave the view wrong: the node sync ends with
// the targets right, and the next node change from the view too.
func TestProbeViewThrottledNodeSync(t *testing.T) {
	e := newEnv(t)
	nodes := e.awsNodes(1, 3)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	e.ensure(t, svc, nodes)
	lbi, _ := e.cloud.LoadBalancer()
	tg := namesFor(testCluster, svc).targetGroup(80, "TCP", targetInstance)
	e.fake.Throttle(2)
	if err := lbi.UpdateLoadBalancer(context.Background(), testCluster, svc, nodes[:2]); err != nil {
		t.Logf("throttled node sync: %v", err)
	}
	if err := lbi.UpdateLoadBalancer(context.Background(), testCluster, svc, nodes[1:]); err != nil {
		t.Fatal(err)
	}
	got := e.targetGroups(t)[tg].Targets
	want := []string{instanceID(2) + ":30080", instanceID(3) + ":30080"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("targets %v, want %v", got, want)
	}
}

// TestProbeViewListenerDeletedBehindOurBack: our listener deleted by hand
// (its group left): node syncs from the view keep the group's targets
// right, and the repair pass puts the listener back.
func TestProbeViewListenerDeletedBehindOurBack(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	nodes := e.awsNodes(1, 3)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	e.ensure(t, svc, nodes)
	lbi, _ := e.cloud.LoadBalancer()
	tg := namesFor(testCluster, svc).targetGroup(80, "TCP", targetInstance)
	out, err := e.cloud.lb.elb.DescribeListeners(ctx, &elbv2.DescribeListenersInput{LoadBalancerArn: awssdk.String(e.onlyLB(t).ARN)})
	if err != nil {
		t.Fatal(err)
	}
	for _, ls := range out.Listeners {
		if _, err := e.cloud.lb.elb.DeleteListener(ctx, &elbv2.DeleteListenerInput{ListenerArn: ls.ListenerArn}); err != nil {
			t.Fatal(err)
		}
	}
	if err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, nodes[:2]); err != nil {
		t.Fatal(err)
	}
	if err := groupsHave(e, 2, tg)(); err != nil {
		t.Fatal(err)
	}
	pctx, end, err := e.cloud.lb.BeginRepairPass(ctx, testCluster)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lbi.EnsureLoadBalancer(pctx, testCluster, svc, nodes[:2]); err != nil {
		t.Fatal(err)
	}
	end()
	if got := listenerTo(t, e, "80"); got != tg {
		t.Errorf("after the repair pass the listener on 80 forwards to %q, want %s", got, tg)
	}
	if err := groupsHave(e, 2, tg)(); err != nil {
		t.Fatal(err)
	}
}

// TestProbeViewAfterPortAndTargetTypeChange: Ensures that change the port
// and then the target type drop the view; the node sync after each
// changes the group the listener uses now.
func TestProbeViewAfterPortAndTargetTypeChange(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	nodes := e.awsNodes(1, 3)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	e.ensure(t, svc, nodes)
	lbi, _ := e.cloud.LoadBalancer()
	n := namesFor(testCluster, svc)

	svc.Spec.Ports[0].Port = 8080
	e.ensure(t, svc, nodes)
	if err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, nodes[:2]); err != nil {
		t.Fatal(err)
	}
	tg := n.targetGroup(8080, "TCP", targetInstance)
	if got := listenerTo(t, e, "8080"); got != tg {
		t.Fatalf("listener on 8080 forwards to %q, want %s", got, tg)
	}
	if err := groupsHave(e, 2, tg)(); err != nil {
		t.Fatal(err)
	}

	svc.Annotations[string(AnnotationTargetType)] = targetIP
	e.ensure(t, svc, nodes[:2])
	if err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, nodes[:1]); err != nil {
		t.Fatal(err)
	}
	tgIP := n.targetGroup(8080, "TCP", targetIP)
	if got := listenerTo(t, e, "8080"); got != tgIP {
		t.Fatalf("listener on 8080 forwards to %q, want %s", got, tgIP)
	}
	if err := groupsHave(e, 1, tgIP)(); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.targetGroups(t)[tg]; ok {
		t.Errorf("the instance group %s is left behind", tg)
	}
}

// TestProbeViewRecreatedService: a Service deleted and created again under
// the same name (a new UID) gets a view of its own: the node sync of the
// new one changes the new NLB's group.
func TestProbeViewRecreatedService(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	nodes := e.awsNodes(1, 3)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	e.ensure(t, svc, nodes)
	lbi, _ := e.cloud.LoadBalancer()
	if err := lbi.EnsureLoadBalancerDeleted(ctx, testCluster, svc); err != nil {
		t.Fatal(err)
	}
	again := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	again.UID = types.UID("uid-web-2")
	e.ensure(t, again, nodes)
	if err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, nodes[:1]); err != nil {
		t.Fatalf("node sync of the deleted Service: %v", err)
	}
	if err := lbi.UpdateLoadBalancer(ctx, testCluster, again, nodes[:2]); err != nil {
		t.Fatal(err)
	}
	tg := namesFor(testCluster, again).targetGroup(80, "TCP", targetInstance)
	if err := groupsHave(e, 2, tg)(); err != nil {
		t.Fatal(err)
	}
	if got := len(e.fake.LoadBalancers()); got != 1 {
		t.Errorf("%d load balancers, want 1", got)
	}
}

// TestProbeViewAdoptedNLB: an adopted upstream NLB whose upstream group is
// kept: the node sync from the view changes the group the listener
// forwards to.
func TestProbeViewAdoptedNLB(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	nodes := e.awsNodes(1, 3)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	upstreamNLB(t, e, svc, instanceID(1))
	e.ensure(t, svc, nodes)
	lbi, _ := e.cloud.LoadBalancer()
	used := listenerTo(t, e, "80")
	if err := groupsHave(e, 3, used)(); err != nil {
		t.Fatalf("after the Ensure: %v", err)
	}
	e.fake.ResetCalls()
	if err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, nodes[:2]); err != nil {
		t.Fatal(err)
	}
	if got := listenerTo(t, e, "80"); got != used {
		t.Fatalf("listener moved from %s to %s by a node sync", used, got)
	}
	if err := groupsHave(e, 2, used)(); err != nil {
		t.Errorf("after the node sync (calls %v): %v", e.fake.CallCounts(), err)
	}
}

// TestProbeViewStrangerOnNewPort: a hand-made listener on 8443 forwards
// to the Service's port-80 group; the Service's port moves 80 -> 8443. The
// Ensure ends in LoadBalancerListenerNotOurs and leaves the stranger as it
// was; node syncs meanwhile neither touch it nor fail otherwise; once the
// stranger is deleted, the Ensure makes the listener with the right targets.
// (What becomes of the port-80 group then: TestProbeKeptServiceGroupGoesWithTheStranger.)
func TestProbeViewStrangerOnNewPort(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	nodes := e.awsNodes(1, 3)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	e.ensure(t, svc, nodes)
	lbi, _ := e.cloud.LoadBalancer()
	n := namesFor(testCluster, svc)
	tg80 := n.targetGroup(80, "TCP", targetInstance)
	arn80 := e.targetGroups(t)[tg80].ARN
	hand, err := e.cloud.lb.elb.CreateListener(ctx, &elbv2.CreateListenerInput{LoadBalancerArn: awssdk.String(e.onlyLB(t).ARN), Port: awssdk.Int32(8443),
		Protocol: elbtypes.ProtocolEnumTcp, DefaultActions: []elbtypes.Action{{Type: elbtypes.ActionTypeEnumForward, TargetGroupArn: awssdk.String(arn80)}}})
	if err != nil {
		t.Fatal(err)
	}
	handARN := awssdk.ToString(hand.Listeners[0].ListenerArn)

	svc.Spec.Ports[0].Port = 8443
	_, err = lbi.EnsureLoadBalancer(ctx, testCluster, svc, nodes)
	var ue *backends.UserError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "8443") {
		t.Fatalf("Ensure with a stranger on the new port: %v, want the user error %s", err, reasonListenerNotOurs)
	}
	for _, nn := range [][]*corev1.Node{nodes[:2], nodes[:2], nodes} {
		err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, nn)
		if err != nil && !errors.As(err, &ue) {
			t.Fatalf("node sync: %v", err)
		}
	}
	if got := listenerTo(t, e, "8443"); got != tg80 {
		t.Fatalf("the stranger on 8443 forwards to %q, want %s as made by hand", got, tg80)
	}
	if _, err := e.cloud.lb.elb.DeleteListener(ctx, &elbv2.DeleteListenerInput{ListenerArn: awssdk.String(handARN)}); err != nil {
		t.Fatal(err)
	}
	e.ensure(t, svc, nodes[:2])
	tg := n.targetGroup(8443, "TCP", targetInstance)
	if got, want := strings.Join(e.onlyLB(t).Listeners, ","), "TCP:8443->"+tg; got != want {
		t.Errorf("listeners %s, want %s", got, want)
	}
	if err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, nodes[:1]); err != nil {
		t.Fatal(err)
	}
	if err := groupsHave(e, 1, tg)(); err != nil {
		t.Fatal(err)
	}
}

// TestProbeViewTargetNodeLabels: with the target-node-labels annotation,
// a node losing the label leaves both groups through a node sync from the
// view, and one gaining it joins.
func TestProbeViewTargetNodeLabels(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	nodes := e.awsNodes(1, 3)
	for _, nd := range nodes {
		nd.Labels["pool"] = "lb"
	}
	nodes[2].Labels["pool"] = "other"
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance), withAnnotation(AnnotationTargetNodeLabels, "pool=lb"),
		withPort("tls", corev1.ProtocolTCP, 443, 30443))
	e.ensure(t, svc, nodes)
	lbi, _ := e.cloud.LoadBalancer()
	n := namesFor(testCluster, svc)
	groups := []string{n.targetGroup(80, "TCP", targetInstance), n.targetGroup(443, "TCP", targetInstance)}
	if err := groupsHave(e, 2, groups...)(); err != nil {
		t.Fatal(err)
	}
	next := []*corev1.Node{nodes[0].DeepCopy(), nodes[1].DeepCopy(), nodes[2].DeepCopy()}
	next[0].Labels["pool"] = "other"
	next[2].Labels["pool"] = "lb"
	if err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, next); err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		got := e.targetGroups(t)[g].Targets
		if len(got) != 2 || strings.Contains(strings.Join(got, ","), instanceID(1)) || !strings.Contains(strings.Join(got, ","), instanceID(3)) {
			t.Errorf("targets of %s: %v, want instances 2 and 3", g, got)
		}
	}
	// The annotation changed (an Ensure drops the view), then a node sync.
	svc.Annotations[string(AnnotationTargetNodeLabels)] = "pool=other"
	e.ensure(t, svc, next)
	if err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, next[:2]); err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		if got := e.targetGroups(t)[g].Targets; len(got) != 1 || !strings.HasPrefix(got[0], instanceID(1)+":") {
			t.Errorf("targets of %s: %v, want instance 1 only", g, got)
		}
	}
}

// TestProbeViewIPv6AddressChange: an IPv6-primary Service (IP targets of
// the nodes' IPv6 addresses) whose node changes its IPv6 address: the node
// sync from the view moves the target to the new address.
func TestProbeViewIPv6AddressChange(t *testing.T) {
	e := newEnv(t)
	dualStackSubnets(e)
	ctx := context.Background()
	nodes := []*corev1.Node{e.dualNode(1, true), e.dualNode(2, true)}
	svc := newService("web", ipv6Primary, withAnnotation(AnnotationIPAddressType, "dualstack"))
	e.ensure(t, svc, nodes)
	lbi, _ := e.cloud.LoadBalancer()
	tg := namesFor(testCluster, svc).targetGroupOf(80, "TCP", targetIP, familyIPv6)
	if err := forwardsToGroup("dualstack", tg, familyIPv6, ipv6Of(1)+":30080", ipv6Of(2)+":30080")(e); err != nil {
		t.Fatal(err)
	}
	moved := nodes[1].DeepCopy()
	newAddr := "2001:db8:0:10::abc"
	for i, a := range moved.Status.Addresses {
		if a.Type == corev1.NodeInternalIP && strings.Contains(a.Address, ":") {
			moved.Status.Addresses[i].Address = newAddr
		}
	}
	if err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, []*corev1.Node{nodes[0], moved}); err != nil {
		t.Fatal(err)
	}
	if err := forwardsToGroup("dualstack", tg, familyIPv6, ipv6Of(1)+":30080", newAddr+":30080")(e); err != nil {
		t.Error(err)
	}
}

// TestProbeViewDeregisterOfTargetGoneBehindOurBack: a target deregistered
// by hand, then its node leaves: the node sync from the view deregisters a
// target AWS no longer has. It must not fail (a Warning and a retry for
// nothing) and must leave the group right.
func TestProbeViewDeregisterOfTargetGoneBehindOurBack(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	nodes := e.awsNodes(1, 3)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	e.ensure(t, svc, nodes)
	lbi, _ := e.cloud.LoadBalancer()
	tg := namesFor(testCluster, svc).targetGroup(80, "TCP", targetInstance)
	arn := e.targetGroups(t)[tg].ARN
	if _, err := e.cloud.lb.elb.DeregisterTargets(ctx, &elbv2.DeregisterTargetsInput{TargetGroupArn: awssdk.String(arn),
		Targets: []elbtypes.TargetDescription{{Id: awssdk.String(instanceID(3)), Port: awssdk.Int32(30080)}}}); err != nil {
		t.Fatal(err)
	}
	if err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, nodes[:2]); err != nil {
		t.Errorf("node sync removing a node whose target was deregistered by hand: %v", err)
	}
	if err := groupsHave(e, 2, tg)(); err != nil {
		t.Fatal(err)
	}
}

// TestProbeViewStrangeTargetRemovedByRepairPass: a target registered by
// hand in the Service's group survives node syncs from the view (they
// write only differences against the view) but not the repair pass, and
// not an Update run under a repair pass.
func TestProbeViewStrangeTargetRemovedByRepairPass(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	nodes := e.awsNodes(1, 3)
	extra := e.addInstance(9)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	e.ensure(t, svc, nodes)
	lbi, _ := e.cloud.LoadBalancer()
	tg := namesFor(testCluster, svc).targetGroup(80, "TCP", targetInstance)
	arn := e.targetGroups(t)[tg].ARN
	if _, err := e.cloud.lb.elb.RegisterTargets(ctx, &elbv2.RegisterTargetsInput{TargetGroupArn: awssdk.String(arn),
		Targets: []elbtypes.TargetDescription{{Id: awssdk.String(extra.ID), Port: awssdk.Int32(30080)}}}); err != nil {
		t.Fatal(err)
	}
	if err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, nodes[:2]); err != nil {
		t.Fatal(err)
	}
	pctx, end, err := e.cloud.lb.BeginRepairPass(ctx, testCluster)
	if err != nil {
		t.Fatal(err)
	}
	if err := lbi.UpdateLoadBalancer(pctx, testCluster, svc, nodes[:2]); err != nil {
		t.Fatal(err)
	}
	end()
	if got := e.targetGroups(t)[tg].Targets; len(got) != 2 || strings.Contains(strings.Join(got, ","), extra.ID) {
		t.Errorf("after an Update under a repair pass, targets %v, want instances 1 and 2 only", got)
	}
}

// TestProbeViewNLBDeletedBehindOurBack: the NLB deleted by hand (its
// groups left): node syncs from the view write to the groups; the repair
// pass makes the NLB again with its listener and the targets.
func TestProbeViewNLBDeletedBehindOurBack(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	nodes := e.awsNodes(1, 3)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	e.ensure(t, svc, nodes)
	lbi, _ := e.cloud.LoadBalancer()
	tg := namesFor(testCluster, svc).targetGroup(80, "TCP", targetInstance)
	if _, err := e.cloud.lb.elb.DeleteLoadBalancer(ctx, &elbv2.DeleteLoadBalancerInput{LoadBalancerArn: awssdk.String(e.onlyLB(t).ARN)}); err != nil {
		t.Fatal(err)
	}
	if err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, nodes[:2]); err != nil {
		t.Logf("node sync with the NLB gone: %v", err)
	}
	pctx, end, err := e.cloud.lb.BeginRepairPass(ctx, testCluster)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lbi.EnsureLoadBalancer(pctx, testCluster, svc, nodes[:2]); err != nil {
		t.Fatal(err)
	}
	end()
	if got := listenerTo(t, e, "80"); got != tg {
		t.Errorf("after the repair pass the listener on 80 forwards to %q, want %s", got, tg)
	}
	if err := groupsHave(e, 2, tg)(); err != nil {
		t.Error(err)
	}
}

// TestProbeViewConcurrentEnsureAndNodeSync: Ensures moving the port and
// node syncs of the same Service, concurrently (ServiceLocks serialise
// them; -race watches the view), then one last node sync with the final
// Service: the NLB ends as the final Service and nodes ask.
func TestProbeViewConcurrentEnsureAndNodeSync(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	nodes := e.awsNodes(1, 3)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	e.ensure(t, svc, nodes)
	lbi, _ := e.cloud.LoadBalancer()
	done := make(chan error, 16)
	for i := range 8 {
		s := svc.DeepCopy()
		s.Spec.Ports[0].Port = int32(8000 + i%2)
		go func() {
			_, err := lbi.EnsureLoadBalancer(ctx, testCluster, s, nodes[:2+i%2])
			done <- err
		}()
		go func() { done <- lbi.UpdateLoadBalancer(ctx, testCluster, s, nodes[:1+i%3]) }()
	}
	for range 16 {
		if err := <-done; err != nil {
			t.Logf("concurrent call: %v", err)
		}
	}
	final := svc.DeepCopy()
	final.Spec.Ports[0].Port = 8001
	e.ensure(t, final, nodes)
	if err := lbi.UpdateLoadBalancer(ctx, testCluster, final, nodes[:2]); err != nil {
		t.Fatal(err)
	}
	tg := namesFor(testCluster, svc).targetGroup(8001, "TCP", targetInstance)
	if got, want := strings.Join(e.onlyLB(t).Listeners, ","), "TCP:8001->"+tg; got != want {
		t.Errorf("listeners %s, want %s", got, want)
	}
	if err := groupsHave(e, 2, tg)(); err != nil {
		t.Error(err)
	}
	if n := len(e.fake.TargetGroups()); n != 1 {
		t.Errorf("%d target groups, want 1", n)
	}
}

// TestProbeViewAdoptedPortChange: an adopted upstream NLB (its tagged
// listener, its group kept); a node sync from the view; then the port
// changes (the upstream listener is the Service's and moves); the node
// sync after changes the group the new listener forwards to.
func TestProbeViewAdoptedPortChange(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	nodes := e.awsNodes(1, 3)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	upstreamNLB(t, e, svc, instanceID(1))
	e.ensure(t, svc, nodes)
	lbi, _ := e.cloud.LoadBalancer()
	if err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, nodes[:2]); err != nil {
		t.Fatal(err)
	}
	svc.Spec.Ports[0].Port = 8080
	e.ensure(t, svc, nodes[:2])
	if err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, nodes[:1]); err != nil {
		t.Fatal(err)
	}
	lb := e.onlyLB(t)
	if len(lb.Listeners) != 1 {
		t.Fatalf("listeners %v, want one on 8080", lb.Listeners)
	}
	used := listenerTo(t, e, "8080")
	if used == "" {
		t.Fatalf("listeners %v, want one on 8080", lb.Listeners)
	}
	if err := groupsHave(e, 1, used)(); err != nil {
		t.Error(err)
	}
}

// TestProbeViewStrangerAsThePortAsks: our listener on 80 replaced by hand
// with an untagged one forwarding to the same group (a stranger already as
// the port asks: it "simply serves it"). The Ensure succeeds and leaves it;
// node syncs keep the group's targets right.
func TestProbeViewStrangerAsThePortAsks(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	nodes := e.awsNodes(1, 3)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	e.ensure(t, svc, nodes)
	lbi, _ := e.cloud.LoadBalancer()
	tg := namesFor(testCluster, svc).targetGroup(80, "TCP", targetInstance)
	arn := e.targetGroups(t)[tg].ARN
	out, err := e.cloud.lb.elb.DescribeListeners(ctx, &elbv2.DescribeListenersInput{LoadBalancerArn: awssdk.String(e.onlyLB(t).ARN)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.cloud.lb.elb.DeleteListener(ctx, &elbv2.DeleteListenerInput{ListenerArn: out.Listeners[0].ListenerArn}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cloud.lb.elb.CreateListener(ctx, &elbv2.CreateListenerInput{LoadBalancerArn: awssdk.String(e.onlyLB(t).ARN), Port: awssdk.Int32(80),
		Protocol: elbtypes.ProtocolEnumTcp, DefaultActions: []elbtypes.Action{{Type: elbtypes.ActionTypeEnumForward, TargetGroupArn: awssdk.String(arn)}}}); err != nil {
		t.Fatal(err)
	}
	e.ensure(t, svc, nodes)
	if err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, nodes[:2]); err != nil {
		t.Fatal(err)
	}
	if err := groupsHave(e, 2, tg)(); err != nil {
		t.Fatal(err)
	}
	if err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
		t.Fatal(err)
	}
	if err := groupsHave(e, 3, tg)(); err != nil {
		t.Fatal(err)
	}
	if got := listenerTo(t, e, "80"); got != tg {
		t.Errorf("listener on 80 forwards to %q, want %s", got, tg)
	}
}

// cancelAfterDeregister is the backend's ELBv2 client cancelling the
// node sync's context once its first DeregisterTargets has been made, as
// a shutdown or a deadline would mid-write.
type cancelAfterDeregister struct {
	ELBAPI
	cancel context.CancelFunc
}

func (c cancelAfterDeregister) DeregisterTargets(ctx context.Context, in *elbv2.DeregisterTargetsInput, opts ...func(*elbv2.Options)) (*elbv2.DeregisterTargetsOutput, error) {
	out, err := c.ELBAPI.DeregisterTargets(ctx, in, opts...)
	c.cancel()
	return out, err
}

// TestProbeViewDropsOnCancelMidWrite: a two-port node sync from the view
// whose context ends after the first group's write: the second group is
// not changed, and the next node sync with the same nodes (a fresh
// context) changes it: no view claiming it was changed survives.
func TestProbeViewDropsOnCancelMidWrite(t *testing.T) {
	e := newEnv(t)
	nodes := e.awsNodes(1, 3)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance), withPort("tls", corev1.ProtocolTCP, 443, 30443))
	e.ensure(t, svc, nodes)
	lbi, _ := e.cloud.LoadBalancer()
	n := namesFor(testCluster, svc)
	groups := []string{n.targetGroup(80, "TCP", targetInstance), n.targetGroup(443, "TCP", targetInstance)}
	orig := e.cloud.lb.elb
	ctx, cancel := context.WithCancel(context.Background())
	e.cloud.lb.elb = cancelAfterDeregister{ELBAPI: orig, cancel: cancel}
	err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, nodes[:2])
	e.cloud.lb.elb = orig
	t.Logf("node sync cancelled mid-write: %v", err)
	if err := lbi.UpdateLoadBalancer(context.Background(), testCluster, svc, nodes[:2]); err != nil {
		t.Fatal(err)
	}
	if err := groupsHave(e, 2, groups...)(); err != nil {
		t.Errorf("after the next node sync: %v", err)
	}
}

// TestProbeViewTargetTypeChosenByNodes: no target type annotated: EC2
// nodes only give instance targets; a node of another cloud joining makes
// every target an IP target (a node sync: the view no longer fits, the
// groups are replaced); the node leaving keeps the IP targets, and a node
// sync from the view then deregisters its address.
func TestProbeViewTargetTypeChosenByNodes(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	nodes := e.awsNodes(1, 2)
	vm := otherNodes(1)
	svc := newService("web")
	e.ensure(t, svc, nodes)
	lbi, _ := e.cloud.LoadBalancer()
	n := namesFor(testCluster, svc)
	if err := groupsHave(e, 2, n.targetGroup(80, "TCP", targetInstance))(); err != nil {
		t.Fatal(err)
	}
	if err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, append(append([]*corev1.Node{}, nodes...), vm...)); err != nil {
		t.Fatal(err)
	}
	tgIP := n.targetGroup(80, "TCP", targetIP)
	if got := listenerTo(t, e, "80"); got != tgIP {
		t.Fatalf("with a vSphere node the listener forwards to %q, want %s", got, tgIP)
	}
	if err := groupsHave(e, 3, tgIP)(); err != nil {
		t.Fatal(err)
	}
	e.fake.ResetCalls()
	if err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
		t.Fatal(err)
	}
	if got := listenerTo(t, e, "80"); got != tgIP {
		t.Fatalf("after the vSphere node left the listener forwards to %q, want %s (IP targets kept)", got, tgIP)
	}
	if err := groupsHave(e, 2, tgIP)(); err != nil {
		t.Error(err)
	}
	if m := e.fake.MutatingCalls(); strings.Join(m, ",") != "DeregisterTargets" {
		t.Logf("mutating calls %v", m)
	}
}

// TestProbeKeptServiceGroupGoesWithTheStranger: docs/aws.md (Listeners:
// one rule) keeps a target group of the Service's that a hand-made
// listener forwards to "(not deleted when the Service drops that port)
// while it does". Once the stranger is deleted, the next Ensure (and a
// repair pass) must delete the group the Service no longer has: nothing
// else ever will until the Service is deleted.
func TestProbeKeptServiceGroupGoesWithTheStranger(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	nodes := e.awsNodes(1, 2)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance), withPort("tls", corev1.ProtocolTCP, 443, 30443))
	e.ensure(t, svc, nodes)
	lbi, _ := e.cloud.LoadBalancer()
	n := namesFor(testCluster, svc)
	tg80 := n.targetGroup(80, "TCP", targetInstance)
	arn80 := e.targetGroups(t)[tg80].ARN
	hand, err := e.cloud.lb.elb.CreateListener(ctx, &elbv2.CreateListenerInput{LoadBalancerArn: awssdk.String(e.onlyLB(t).ARN), Port: awssdk.Int32(9000),
		Protocol: elbtypes.ProtocolEnumTcp, DefaultActions: []elbtypes.Action{{Type: elbtypes.ActionTypeEnumForward, TargetGroupArn: awssdk.String(arn80)}}})
	if err != nil {
		t.Fatal(err)
	}
	svc.Spec.Ports = svc.Spec.Ports[1:] // the Service drops port 80
	e.ensure(t, svc, nodes)
	if _, ok := e.targetGroups(t)[tg80]; !ok {
		t.Fatalf("the port-80 group was deleted while the stranger forwards to it")
	}
	if err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, nodes[:1]); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cloud.lb.elb.DeleteListener(ctx, &elbv2.DeleteListenerInput{ListenerArn: hand.Listeners[0].ListenerArn}); err != nil {
		t.Fatal(err)
	}
	e.ensure(t, svc, nodes)
	pctx, end, err := e.cloud.lb.BeginRepairPass(ctx, testCluster)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lbi.EnsureLoadBalancer(pctx, testCluster, svc, nodes); err != nil {
		t.Fatal(err)
	}
	end()
	if tg, ok := e.targetGroups(t)[tg80]; ok {
		t.Errorf("the Service's port-80 group %s (targets %v) is left behind after the stranger that kept it was deleted, an Ensure and a repair pass", tg80, tg.Targets)
	}
}
