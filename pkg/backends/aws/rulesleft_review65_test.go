package aws

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// TestReview65StaleNodeSyncLeavesANewInstanceGroupWithoutRules: d743519
// makes a node sync handed a stale spec (one port fewer than the NLB has)
// update only the given ports' targets, and leave the instances'
// security-group rules "to the next Ensure or repair pass". The node that
// sync registers is in a security group no target was in before (a new
// node group). The operator expects a node the NLB targets to be
// reachable from it: its instance group allows the NodePorts from the
// NLB's group. Nothing else comes to add the rule: upstream runs no
// Ensure for an unchanged Service, and the next node sync, with the
// current spec, finds the targets as wanted (rulesMove compares the
// instances registered and wanted, now the same) and changes nothing; the
// node stays registered but blocked until a repair pass (never with
// --load-balancer-resync-period=0).
func TestReview65StaleNodeSyncLeavesANewInstanceGroupWithoutRules(t *testing.T) {
	e := newEnv(t)
	sgA, sgB := userSG(t, e, "nodes-a"), userSG(t, e, "nodes-b")
	var nodes []*corev1.Node
	for i := 1; i <= 4; i++ {
		sg := sgA
		if i == 4 {
			sg = sgB
		}
		in := e.addInstance(i, func(in *awsfake.Instance) { in.SecurityGroups = []string{sg} })
		nodes = append(nodes, newNode(in.PrivateDNSName, testutil.WithProviderID(providerID(in.Zone, in.ID)), testutil.WithInternalIP(in.PrivateIPs[0])))
	}
	before := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	e.ensure(t, before, nodes[:3])
	after := before.DeepCopy()
	withPort("tls", corev1.ProtocolTCP, 443, 30443)(after)
	e.ensure(t, after, nodes[:3])
	if r := review65Rules(e, sgA, "30080"); r == "" {
		t.Fatalf("setup: the nodes' group %s has no rule for 30080: %v", sgA, e.fake.SecurityGroupIngress(sgA))
	}
	lbi, _ := e.cloud.LoadBalancer()
	ctx := context.Background()
	// Node 4 (group B) joins; the node sync listed web before 443 was
	// added.
	if err := lbi.UpdateLoadBalancer(ctx, testCluster, before, nodes); err != nil {
		t.Fatalf("node sync with the old spec: %v", err)
	}
	if got := listenerTo(t, e, "443"); got == "" {
		t.Fatalf("the stale node sync deleted port 443 (the review64 fix regressed)")
	}
	// The next node sync, with the current spec.
	if err := lbi.UpdateLoadBalancer(ctx, testCluster, after, nodes); err != nil {
		t.Fatalf("node sync with the current spec: %v", err)
	}
	for _, port := range []string{"30080", "30443"} {
		if review65Rules(e, sgB, port) == "" {
			t.Errorf("node 4 is a target, but its instance group %s allows no NodePort %s from the NLB after the node syncs: rules %v (group A's %v)",
				sgB, port, e.fake.SecurityGroupIngress(sgB), e.fake.SecurityGroupIngress(sgA))
		}
	}
	if got := e.targetGroups(t)[namesFor(testCluster, after).targetGroup(443, "TCP", targetInstance)].Targets; len(got) != 4 {
		t.Errorf("port 443's targets %v, want the 4 nodes", got)
	}
}

// review65Rules returns the first ingress rule of group sg on port ("" if
// none).
func review65Rules(e *env, sg, port string) string {
	for _, r := range e.fake.SecurityGroupIngress(sg) {
		if strings.Contains(r, ":"+port+"-"+port+":") {
			return r
		}
	}
	return ""
}

// TestReview65NodeSyncAddsANewInstanceGroupsRulesControl: the same node
// sync with the current spec adds group B's rules (the probe above fails
// for the stale spec's path, not the fake).
func TestReview65NodeSyncAddsANewInstanceGroupsRulesControl(t *testing.T) {
	e := newEnv(t)
	sgA, sgB := userSG(t, e, "nodes-a"), userSG(t, e, "nodes-b")
	var nodes []*corev1.Node
	for i := 1; i <= 4; i++ {
		sg := sgA
		if i == 4 {
			sg = sgB
		}
		in := e.addInstance(i, func(in *awsfake.Instance) { in.SecurityGroups = []string{sg} })
		nodes = append(nodes, newNode(in.PrivateDNSName, testutil.WithProviderID(providerID(in.Zone, in.ID)), testutil.WithInternalIP(in.PrivateIPs[0])))
	}
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance), withPort("tls", corev1.ProtocolTCP, 443, 30443))
	e.ensure(t, svc, nodes[:3])
	lbi, _ := e.cloud.LoadBalancer()
	if err := lbi.UpdateLoadBalancer(context.Background(), testCluster, svc, nodes); err != nil {
		t.Fatal(err)
	}
	for _, port := range []string{"30080", "30443"} {
		if review65Rules(e, sgB, port) == "" {
			t.Errorf("group %s allows no NodePort %s: %v", sgB, port, e.fake.SecurityGroupIngress(sgB))
		}
	}
}
