package aws

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// Review probes (65) of the node sync handed a stale spec (d743519:
// "a node sync never deletes a port the Service's given spec lacks").
// Upstream's service controller (v0.37) takes its node sync's Services
// from its cache, so a node sync that listed a Service before an edit
// calls UpdateLoadBalancer with the old spec after the worker's Ensure of
// the new spec. The fix covers a port the old spec lacks; these probe the
// other edits a stale spec can be behind.

// TestReview65NodeSyncWithTheSpecBeforeAPortWasRemoved: the Service had
// ports 80 and 443; the user removed 443 and the worker's Ensure removed
// its listener and target group. A node sync listed before the edit
// (node 3 excluded) hands the old spec. The operator expects a node sync
// to change targets only ("A node sync changes only targets"): never to
// put back the listener of a port the Service no longer has (its NodePort
// is free and may be allocated to another Service: the NLB would forward
// 443 to it), which nothing but the next repair pass would take away.
func TestReview65NodeSyncWithTheSpecBeforeAPortWasRemoved(t *testing.T) {
	e := newEnv(t)
	nodes := e.awsNodes(1, 3)
	after := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	before := after.DeepCopy()
	withPort("tls", corev1.ProtocolTCP, 443, 30443)(before)
	e.ensure(t, before, nodes)
	if listenerTo(t, e, "443") == "" {
		t.Fatalf("setup: no listener on 443: %v", e.onlyLB(t).Listeners)
	}
	e.ensure(t, after, nodes) // the worker's Ensure of the new spec
	if got := listenerTo(t, e, "443"); got != "" {
		t.Fatalf("setup: the Ensure of the spec without 443 left its listener to %s", got)
	}
	lbi, _ := e.cloud.LoadBalancer()
	e.fake.ResetCalls()
	if err := lbi.UpdateLoadBalancer(context.Background(), testCluster, before, nodes[:2]); err != nil {
		t.Logf("node sync with the old spec: %v", err)
	}
	if got := listenerTo(t, e, "443"); got != "" {
		t.Errorf("the node sync with the spec from before port 443 was removed put its listener back (to %s); mutating calls %v; listeners now %v",
			got, e.fake.MutatingCalls(), e.onlyLB(t).Listeners)
	}
	if _, ok := e.targetGroups(t)[namesFor(testCluster, after).targetGroup(443, "TCP", targetInstance)]; ok {
		t.Errorf("the node sync with the old spec made a target group for the removed port 443")
	}
}

// TestReview65NodeSyncWithTheSpecBeforeANodePortChanged: the user (or
// the apiserver, after a Service type round trip) changed port 80's
// NodePort from 30080 to 31080 and the worker's Ensure moved the NLB's
// target group onto 31080. A node sync listed before the edit hands the
// old spec (NodePort 30080). The operator expects the NLB to keep
// forwarding to 31080: 30080 is no longer the Service's (kube-proxy stops
// serving it; another Service may get it), and a node sync must change
// targets only.
func TestReview65NodeSyncWithTheSpecBeforeANodePortChanged(t *testing.T) {
	e := newEnv(t)
	nodes := e.awsNodes(1, 3)
	before := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	e.ensure(t, before, nodes)
	after := before.DeepCopy()
	after.Spec.Ports[0].NodePort = 31080
	e.ensure(t, after, nodes)
	if got := review65Ports(t, e, listenerTo(t, e, "80")); !slices.Equal(got, []string{"31080"}) {
		t.Fatalf("setup: port 80's targets are on ports %v, want 31080", got)
	}
	lbi, _ := e.cloud.LoadBalancer()
	e.fake.ResetCalls()
	if err := lbi.UpdateLoadBalancer(context.Background(), testCluster, before, nodes[:2]); err != nil {
		t.Logf("node sync with the old spec: %v", err)
	}
	tgName := listenerTo(t, e, "80")
	if got := review65Ports(t, e, tgName); !slices.Equal(got, []string{"31080"}) {
		t.Errorf("after the node sync with the spec from before the NodePort change, port 80's targets (group %s) are on ports %v, want 31080 only; targets %v; mutating calls %v",
			tgName, got, e.targetGroups(t)[tgName].Targets, e.fake.MutatingCalls())
	}
}

// review65Ports are the distinct ports the targets of group name are
// registered on (sorted).
func review65Ports(t *testing.T, e *env, name string) []string {
	t.Helper()
	var out []string
	for _, tg := range e.targetGroups(t)[name].Targets {
		id, _, _ := strings.Cut(tg, "@")
		if _, port, ok := strings.Cut(id, ":"); ok {
			out = append(out, port)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestReview65StaleNodeSyncLeavesAnExcludedNodeOnTheNewPort: the
// sequence of TestReview64NodeSyncWithTheSpecBeforeAPortWasAdded (the
// worker's Ensure made port 443 with nodes 1-3; the node sync, listed
// before the edit, hands the old spec with node 3 excluded), looked at
// from port 443. The node sync is the only call told that node 3 left
// (upstream records the nodes as synced once it succeeds; the worker's
// Ensure listed them before). The operator expects an excluded node (one
// being drained or deleted) out of every port of the Service's NLB; the
// fix updates port 80's group only, and port 443 keeps sending traffic to
// node 3 until the next repair pass.
func TestReview65StaleNodeSyncLeavesAnExcludedNodeOnTheNewPort(t *testing.T) {
	e := newEnv(t)
	nodes := e.awsNodes(1, 3)
	before := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	e.ensure(t, before, nodes)
	after := before.DeepCopy()
	withPort("tls", corev1.ProtocolTCP, 443, 30443)(after)
	e.ensure(t, after, nodes)
	lbi, _ := e.cloud.LoadBalancer()
	if err := lbi.UpdateLoadBalancer(context.Background(), testCluster, before, nodes[:2]); err != nil {
		t.Fatalf("node sync with the old spec: %v", err)
	}
	if got := listenerTo(t, e, "443"); got == "" {
		t.Fatalf("the stale node sync deleted port 443 (the review64 fix regressed)")
	}
	tg443 := namesFor(testCluster, after).targetGroup(443, "TCP", targetInstance)
	for _, tgt := range e.targetGroups(t)[tg443].Targets {
		if strings.HasPrefix(tgt, instanceID(3)+":") {
			t.Errorf("port 443's group %s still targets node 3 after the node sync that excluded it: targets %v", tg443, e.targetGroups(t)[tg443].Targets)
		}
	}
}

// TestReview65StaleNodeSyncOnAnAdoptedNLB: the review64 case on an NLB
// adopted from upstream cloud-provider-aws (docs/aws.md: adopted in
// place, its target group kept while it fits). The Service had port 80
// (upstream's group); the user added 443 and the worker's Ensure made
// the backend's group and listener for it beside upstream's. A node sync
// listed before the edit (node 3 excluded) hands the old spec. The
// operator expects port 443 kept, as on an NLB the backend made: a node
// sync changes only targets.
func TestReview65StaleNodeSyncOnAnAdoptedNLB(t *testing.T) {
	e := newEnv(t)
	nodes := e.awsNodes(1, 3)
	before := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	upstreamNLB(t, e, before, instanceID(1), instanceID(2), instanceID(3))
	after := before.DeepCopy()
	withPort("tls", corev1.ProtocolTCP, 443, 30443)(after)
	e.ensure(t, after, nodes) // the worker's Ensure of the new spec adopts the NLB
	if listenerTo(t, e, "443") == "" || listenerTo(t, e, "80") != "k8s-default-web-0a1b2c3d4e" {
		t.Fatalf("setup: listeners %v, want 80 on upstream's group and 443 on the backend's", e.onlyLB(t).Listeners)
	}
	lbi, _ := e.cloud.LoadBalancer()
	e.fake.ResetCalls()
	if err := lbi.UpdateLoadBalancer(context.Background(), testCluster, before, nodes[:2]); err != nil {
		t.Logf("node sync with the old spec: %v", err)
	}
	if got := listenerTo(t, e, "443"); got == "" {
		t.Errorf("the node sync with the spec from before port 443 was added deleted its listener on the adopted NLB (mutating calls %v); listeners now %v",
			e.fake.MutatingCalls(), e.onlyLB(t).Listeners)
	}
}
