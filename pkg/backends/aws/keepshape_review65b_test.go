package aws

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// Review probes (65b) of dcd974d "a node sync never changes the NLB's
// shape" (retargetKeepingShape, fittingGroups, commonPort,
// nodesSwitchType).

// review65bTargets returns the targets of group name, "<id>:<port>",
// sorted.
func review65bTargets(t *testing.T, e *env, name string) []string {
	t.Helper()
	var out []string
	for _, tg := range e.targetGroups(t)[name].Targets {
		id, _, _ := strings.Cut(tg, "@")
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// TestReview65bNodeSyncAfterAHalfDoneNodePortChange: the user changed
// port 80's NodePort from 30080 to 31080; the worker's Ensure registered
// the nodes on 31080 and failed before deregistering them from 30080 (a
// DeregisterTargets refused). The group holds every node on both ports,
// a tie that commonPort breaks towards the lower, old, port. A node sync
// now comes with the CURRENT spec (31080): node 3 is excluded (being
// drained) and node 4 joins. The operator expects node 3 out of the port
// the Service serves on (31080) and node 4 registered on it: before the
// fix, a node sync with the current spec made the group exactly its
// targets on 31080. The fix takes the group's "shape" from the old port's
// targets: node 3 stays on 31080, node 4 is registered on 30080 only (a
// port kube-proxy no longer serves for the Service), and node syncs never
// converge.
func TestReview65bNodeSyncAfterAHalfDoneNodePortChange(t *testing.T) {
	e := newEnv(t)
	nodes := e.awsNodes(1, 4)
	before := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	e.ensure(t, before, nodes[:3])
	after := before.DeepCopy()
	after.Spec.Ports[0].NodePort = 31080
	lbi, _ := e.cloud.LoadBalancer()
	ctx := context.Background()
	e.fake.FailNext("DeregisterTargets", "AccessDenied")
	if _, err := lbi.EnsureLoadBalancer(ctx, testCluster, after, nodes[:3]); err == nil {
		t.Fatalf("setup: the Ensure of the NodePort change succeeded despite the DeregisterTargets refused")
	}
	tg := listenerTo(t, e, "80")
	t.Logf("after the half-done Ensure, group %s: %v", tg, review65bTargets(t, e, tg))
	// The node sync (current spec): node 3 excluded, node 4 joins.
	current := []*corev1.Node{nodes[0], nodes[1], nodes[3]}
	for i := range 2 {
		if err := lbi.UpdateLoadBalancer(ctx, testCluster, after, current); err != nil {
			t.Fatalf("node sync %d with the current spec: %v", i+1, err)
		}
	}
	got := review65bTargets(t, e, tg)
	for _, want := range []string{instanceID(1) + ":31080", instanceID(2) + ":31080", instanceID(4) + ":31080"} {
		if !slices.Contains(got, want) {
			t.Errorf("after two node syncs with the current spec (NodePort 31080), group %s lacks %s: targets %v", tg, want, got)
		}
	}
	if slices.Contains(got, instanceID(3)+":31080") {
		t.Errorf("after two node syncs with the current spec excluding node 3, node 3 is still a target on the Service's NodePort 31080: targets %v", got)
	}
}

// review65bOwnSG is the ID of the backend's own security group.
func review65bOwnSG(t *testing.T, e *env) string {
	t.Helper()
	for _, sg := range e.fake.SecurityGroups() {
		if sg.Tags[tagService] != "" && slices.Contains(e.onlyLB(t).SecurityGroups, sg.ID) {
			return sg.ID
		}
	}
	t.Fatalf("no own security group on the NLB: %+v", e.fake.SecurityGroups())
	return ""
}

// TestReview65bStaleNodeSyncFallbackRevertsSourceRanges: rule 1 of the
// fix, "a node sync never changes the NLB's shape (its listeners, target
// groups, attributes, rules revoked)". The user restricted the Service to
// 203.0.113.0/24 (loadBalancerSourceRanges) and the worker's Ensure
// narrowed the NLB's security group. A node sync listed before the edit
// hands the old spec (no source ranges) with a node of a new instance
// security group joining (rulesMove). fittingGroups compares only ports,
// groups and NodePorts, so the stale spec counts as "the NLB's shape" and
// the whole reconcile runs with it: the NLB is open to 0.0.0.0/0 again,
// until the next repair pass (never with resync 0), against what the user
// asked for.
func TestReview65bStaleNodeSyncFallbackRevertsSourceRanges(t *testing.T) {
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
	after.Spec.LoadBalancerSourceRanges = []string{"203.0.113.0/24"}
	e.ensure(t, after, nodes[:3])
	own := review65bOwnSG(t, e)
	want := "tcp:80-80:203.0.113.0/24"
	if got := strings.Join(e.fake.SecurityGroupIngress(own), ","); got != want {
		t.Fatalf("setup: the NLB's group allows %s, want %s", got, want)
	}
	lbi, _ := e.cloud.LoadBalancer()
	e.fake.ResetCalls()
	if err := lbi.UpdateLoadBalancer(context.Background(), testCluster, before, nodes); err != nil {
		t.Fatalf("node sync with the old spec: %v", err)
	}
	if got := strings.Join(e.fake.SecurityGroupIngress(own), ","); got != want {
		t.Errorf("the node sync with the spec from before the source ranges were narrowed changed the NLB's security group to %s (want %s); mutating calls %v",
			got, want, e.fake.MutatingCalls())
	}
}

// TestReview65bStaleNodeSyncTypeSwitchRevertsSourceRanges: the same
// through nodesSwitchType's door: no annotation sets the target type, a
// node outside the VPC's instances joins (IP targets) while the node sync
// hands the spec from before the source ranges were narrowed. The whole
// reconcile runs with the stale spec: the NLB's group is opened to
// 0.0.0.0/0 again.
func TestReview65bStaleNodeSyncTypeSwitchRevertsSourceRanges(t *testing.T) {
	e := newEnv(t)
	nodes := e.awsNodes(1, 2)
	before := newService("web")
	e.ensure(t, before, nodes)
	after := before.DeepCopy()
	after.Spec.LoadBalancerSourceRanges = []string{"203.0.113.0/24"}
	e.ensure(t, after, nodes)
	own := review65bOwnSG(t, e)
	want := "tcp:80-80:203.0.113.0/24"
	if got := strings.Join(e.fake.SecurityGroupIngress(own), ","); got != want {
		t.Fatalf("setup: the NLB's group allows %s, want %s", got, want)
	}
	lbi, _ := e.cloud.LoadBalancer()
	e.fake.ResetCalls()
	if err := lbi.UpdateLoadBalancer(context.Background(), testCluster, before, append(slices.Clone(nodes), otherNodes(1)...)); err != nil {
		t.Fatalf("node sync with the old spec: %v", err)
	}
	if got := strings.Join(e.fake.SecurityGroupIngress(own), ","); got != want {
		t.Errorf("the node sync (target type switched by the node set) with the spec from before the source ranges were narrowed changed the NLB's security group to %s (want %s); mutating calls %v",
			got, want, e.fake.MutatingCalls())
	}
}

// TestReview65bStaleNodeSyncIntoAnEmptyGroupAfterANodePortChange: every
// node of the Service's NLB was excluded (its group is empty); the user
// changed port 80's NodePort from 30080 to 31080 and the worker's Ensure
// (no node) kept the group (its own port stays 30080) and made the
// instances' rules for 31080. A node sync listed before the edit hands the
// old spec (30080) as nodes come back. The operator expects no node
// registered on 30080, which kube-proxy no longer serves for the Service.
// Nothing the node sync is handed tells 31080 (the group's own port is
// still 30080), so it may leave the group empty for the next Ensure or
// repair pass, or register the nodes on 31080, never on 30080 (the first
// fix took the stale spec's NodePort; with a version of the Service known
// stale the group is left empty).
func TestReview65bStaleNodeSyncIntoAnEmptyGroupAfterANodePortChange(t *testing.T) {
	e := newEnv(t)
	nodes := e.awsNodes(1, 2)
	before := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	e.ensure(t, before, nodes)
	lbi, _ := e.cloud.LoadBalancer()
	ctx := context.Background()
	if err := lbi.UpdateLoadBalancer(ctx, testCluster, before, nil); err != nil {
		t.Fatalf("node sync excluding every node: %v", err)
	}
	tg := listenerTo(t, e, "80")
	if got := review65bTargets(t, e, tg); len(got) != 0 {
		t.Fatalf("setup: group %s keeps targets %v with no node", tg, got)
	}
	after := before.DeepCopy()
	after.Spec.Ports[0].NodePort = 31080
	e.ensure(t, after, nil)
	if got := listenerTo(t, e, "80"); got != tg {
		t.Logf("the Ensure of the NodePort change replaced group %s by %s", tg, got)
		tg = got
	}
	if err := lbi.UpdateLoadBalancer(ctx, testCluster, before, nodes); err != nil {
		t.Fatalf("node sync with the old spec: %v", err)
	}
	want := []string{instanceID(1) + ":31080", instanceID(2) + ":31080"}
	if got := review65bTargets(t, e, tg); len(got) != 0 && !slices.Equal(got, want) {
		t.Errorf("after the stale node sync into the empty group, targets %v, want none (left for the next Ensure) or %v (the Service's NodePort now)", got, want)
	}
}

// TestReview65bRepairPassConvergesAfterAStaleNodeSync: after a node sync
// handed the spec from before a NodePort change (kept shape, no view), the
// next repair pass converges: the group's targets are the nodes on the
// new NodePort only, and it records a view the next node sync uses (one
// write, no read). (A passing probe: the repair pass is the fix's stated
// way back.)
func TestReview65bRepairPassConvergesAfterAStaleNodeSync(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	nodes := e.awsNodes(1, 3)
	before := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	e.ensure(t, before, nodes)
	after := before.DeepCopy()
	after.Spec.Ports[0].NodePort = 31080
	e.ensure(t, after, nodes)
	lbi, _ := e.cloud.LoadBalancer()
	if err := lbi.UpdateLoadBalancer(ctx, testCluster, before, nodes[:2]); err != nil {
		t.Fatalf("stale node sync: %v", err)
	}
	tg := listenerTo(t, e, "80")
	pctx, end, err := e.cloud.lb.BeginRepairPass(ctx, testCluster)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lbi.EnsureLoadBalancer(pctx, testCluster, after, nodes[:2]); err != nil {
		t.Fatal(err)
	}
	end()
	want := []string{instanceID(1) + ":31080", instanceID(2) + ":31080"}
	if got := review65bTargets(t, e, tg); !slices.Equal(got, want) {
		t.Errorf("after the repair pass, targets %v, want %v", got, want)
	}
	e.fake.ResetCalls()
	if err := lbi.UpdateLoadBalancer(ctx, testCluster, after, nodes); err != nil {
		t.Fatal(err)
	}
	if m, r := e.fake.MutatingCalls(), reads(e); strings.Join(m, ",") != "RegisterTargets" || len(r) != 0 {
		t.Errorf("the node sync after the pass: mutating calls %v, reads %v; want one RegisterTargets from the view, no read", m, r)
	}
	want = append(want, instanceID(3)+":31080")
	if got := review65bTargets(t, e, tg); !slices.Equal(got, want) {
		t.Errorf("after the node sync, targets %v, want %v", got, want)
	}
}
