package aws

import (
	"context"
	"runtime"
	"slices"
	"testing"
	"weak"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// Review probes (66b) of the untagged-NLB claim (heldUntagged, holderOf,
// claim; c3a84f6 and 2c0951b) where it meets the node sync's budget,
// plans, reloads, restarts, other VPCs and regions, and concurrency.

// review66bBackend builds an aws backend named name on the fake at url,
// in the env's VPC and region unless a tweak says otherwise, and takes it
// out of the live registry when the test ends (unregisterWhenDone).
func review66bBackend(t *testing.T, name, url string, tweaks ...func(*Settings)) *Cloud {
	t.Helper()
	return namedCloud(t, name, url, tweaks...)
}

// review66bIsolate empties the live registry but for keep for the rest of
// the test: the fake's ARNs are the same in every test (.../net/auidweb/
// 0000000000000001), and a backend an earlier test built with buildCloud
// stays registered (and may hold that ARN, heldUntagged) until the garbage
// collector takes it, which would make holderOf answer for it here.
func review66bIsolate(t testing.TB, keep ...*Cloud) {
	live.mu.Lock()
	defer live.mu.Unlock()
	saved := live.lbs
	live.lbs = nil
	for _, p := range saved {
		if o := p.Value(); o != nil && slices.ContainsFunc(keep, func(c *Cloud) bool { return c.lb == o }) {
			live.lbs = append(live.lbs, p)
		}
	}
	t.Cleanup(func() {
		live.mu.Lock()
		defer live.mu.Unlock()
		live.lbs = append(slices.DeleteFunc(slices.Clone(saved), func(p weak.Pointer[LoadBalancer]) bool { return slices.Contains(live.lbs, p) }), live.lbs...)
	})
}

// TestReview66bNodeSyncFastPathAfterTheClaim: aws-1, alone in its VPC,
// adopted upstream's NLB unchanged; its node syncs take the verified fast
// path (no call at all with the same nodes). A reload adds aws-2 in the
// same VPC; the reload's re-sync (a node sync) tags the NLB as aws-1's
// (claim). The operator expects the claim to cost that one node sync (its
// reads and one AddTags) and nothing after: from the next node sync on,
// the NLB is tagged like any NLB aws-1 made, and the node sync is as cheap
// as before (docs/aws.md's API budget; at thousands of adopted Services a
// second full read per Service is a second re-sync's worth of calls).
func TestReview66bNodeSyncFastPathAfterTheClaim(t *testing.T) {
	e := newEnv(t)
	review66bIsolate(t, e.cloud)
	nodes := e.awsNodes(1, 2)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	ctx := context.Background()
	upstreamNLB(t, e, svc, instanceID(1), instanceID(2))
	e.ensure(t, svc, nodes) // aws-1, alone, adopts it unchanged
	lbA, _ := e.cloud.LoadBalancer()
	e.fake.ResetCalls()
	if err := lbA.UpdateLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
		t.Fatalf("aws-1's node sync, alone: %v", err)
	}
	lone := e.fake.TotalCalls()
	t.Logf("aws-1 alone, node sync with the same nodes: %d calls %v", lone, e.fake.CallCounts())

	other := review66bBackend(t, "aws-2", e.url) // a reload adds aws-2
	e.fake.ResetCalls()
	if err := lbA.UpdateLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
		t.Fatalf("aws-1's node sync with aws-2 live (the claim): %v", err)
	}
	t.Logf("the claiming node sync: %d calls %v", e.fake.TotalCalls(), e.fake.CallCounts())
	if got := e.onlyLB(t).Tags[tagBackend]; got != "aws-1" {
		t.Fatalf("setup: after aws-1's node sync with aws-2 live the NLB's %s tag is %q, want aws-1", tagBackend, got)
	}
	for i := 1; i <= 2; i++ {
		e.fake.ResetCalls()
		if err := lbA.UpdateLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
			t.Fatalf("aws-1's node sync %d after the claim: %v", i, err)
		}
		if got := e.fake.TotalCalls(); got != lone {
			t.Errorf("aws-1's node sync %d after the claim (the NLB tagged aws-1, same nodes) made %d calls %v, want %d as before the claim (the verified fast path)",
				i, got, e.fake.CallCounts(), lone)
		}
	}
	runtime.KeepAlive(other)
}

// TestReview66bPlanOfAServiceOnTwoBackendsOfOneVPC: a Service annotated
// multicloud-ccm.io/load-balancer-backend: aws-1,aws-2 (several backends
// at once; the router ensures each in turn, a plan under one dry run),
// with upstream's NLB, both backends in one VPC. The switch: aws-1 adopts
// and tags the NLB, aws-2 is refused (LoadBalancerNameConflict). The
// operator runs `plan` first and expects it to show the same: aws-2
// refused, none of its calls planned (plan calls equal the switch's one
// for one). A dry run records no hold (2c0951b) and makes no tag, so
// aws-2's dry run finds the NLB untagged and unheld and plans adopting
// and tagging it.
func TestReview66bPlanOfAServiceOnTwoBackendsOfOneVPC(t *testing.T) {
	e := newEnv(t)
	review66bIsolate(t, e.cloud)
	other := review66bBackend(t, "aws-2", e.url)
	nodes := e.awsNodes(1, 2)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	upstreamNLB(t, e, svc, instanceID(1), instanceID(2))
	lbA, _ := e.cloud.LoadBalancer()
	lbB, _ := other.LoadBalancer()

	dctx, intents := backends.WithDryRun(context.Background())
	if _, err := lbA.EnsureLoadBalancer(dctx, testCluster, svc, nodes); err != nil {
		t.Fatalf("the plan's Ensure in aws-1: %v", err)
	}
	n := len(intents())
	_, planErr := lbB.EnsureLoadBalancer(dctx, testCluster, svc, nodes)
	var plannedB []string
	for _, in := range intents()[n:] {
		plannedB = append(plannedB, in.Call)
	}

	e.fake.ResetCalls()
	e.ensure(t, svc, nodes)
	e.fake.ResetCalls()
	_, switchErr := lbB.EnsureLoadBalancer(context.Background(), testCluster, svc, nodes)
	madeB := e.fake.MutatingCalls()
	_, planRefused := backends.AsUserError(planErr)
	_, switchRefused := backends.AsUserError(switchErr)
	if planRefused != switchRefused || len(plannedB) != len(madeB) {
		t.Errorf("aws-2 in the plan: %v, planned %v; in the switch: %v, made %v; want the plan to show what the switch does (refused, nothing planned)",
			planErr, plannedB, switchErr, madeB)
	}
	runtime.KeepAlive(other)
}
