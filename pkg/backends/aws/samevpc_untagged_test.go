package aws

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"testing"
	"weak"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// An NLB the upstream provider made has no multicloud-ccm.io/backend tag.
// A backend alone in its VPC and region adopts it unchanged (a switch from
// upstream changes nothing: test/upstream-aws); once another backend of
// the VPC is live, the adopter tags it as its own (claim) on its next
// reconcile or node sync, and meanwhile the other backend finds it the
// adopter's (holderOf): it neither adopts nor deletes it.
// TestReview65cMoveOfAnAdoptedUpstreamNLBBetweenTwoBackendsOfOneVPC is the
// case where the second backend is live before the adoption.

// TestUntaggedUpstreamNLBAdoptedBeforeASecondBackendOfTheVPC: aws-1 adopts
// upstream's NLB alone, then aws-2 (same VPC and region) starts and is
// handed the Service: refused (LoadBalancerNameConflict, naming aws-1)
// with no change to AWS, its delete leaves the NLB, and aws-1's next node
// sync (from its verified view) tags the NLB as aws-1's.
func TestUntaggedUpstreamNLBAdoptedBeforeASecondBackendOfTheVPC(t *testing.T) {
	e := newEnv(t)
	nodes := e.awsNodes(1, 2)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	ctx := context.Background()
	dns := upstreamNLB(t, e, svc, instanceID(1), instanceID(2))
	e.ensure(t, svc, nodes) // aws-1, alone in its VPC, adopts it unchanged
	lbA, _ := e.cloud.LoadBalancer()
	if err := lbA.UpdateLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
		t.Fatalf("aws-1's node sync, alone: %v", err)
	}
	if got := e.onlyLB(t); got.DNSName != dns || got.Tags[tagBackend] != "" {
		t.Fatalf("setup: NLB %s tagged %s=%q, want the adopted %s untagged (a lone backend changes nothing)", got.DNSName, tagBackend, got.Tags[tagBackend], dns)
	}

	other := review65cBackend(t, "aws-2", e.url)
	lbB, _ := other.LoadBalancer()
	e.fake.ResetCalls()
	_, err := lbB.EnsureLoadBalancer(ctx, testCluster, svc, nodes)
	if ue, ok := backends.AsUserError(err); !ok || ue.Reason != reasonNameConflict || !strings.Contains(err.Error(), `"aws-1"`) {
		t.Errorf("aws-2's Ensure while aws-1 serves the untagged NLB it adopted: %v, want a %s user error naming aws-1", err, reasonNameConflict)
	}
	if err := lbB.UpdateLoadBalancer(ctx, testCluster, svc, nodes[:1]); err == nil {
		t.Errorf("aws-2's node sync of the Service succeeded on aws-1's NLB")
	}
	if _, exists, err := lbB.GetLoadBalancer(ctx, testCluster, svc); err != nil || exists {
		t.Errorf("aws-2's GetLoadBalancer: exists %v, %v; want aws-1's NLB not reported as its own", exists, err)
	}
	if err := lbB.EnsureLoadBalancerDeleted(ctx, testCluster, svc); err != nil {
		t.Errorf("aws-2's delete: %v", err)
	}
	e.assertNoMutation(t, "aws-2's Ensure, node sync and delete")
	if lbs := e.fake.LoadBalancers(); len(lbs) != 1 || lbs[0].DNSName != dns {
		t.Fatalf("after aws-2's refused move and its delete, NLBs %+v: want aws-1's adopted %s kept", lbs, dns)
	}

	if err := lbA.UpdateLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
		t.Fatalf("aws-1's node sync with aws-2 live: %v", err)
	}
	if got := e.onlyLB(t).Tags[tagBackend]; got != "aws-1" {
		t.Errorf("after aws-1's node sync with aws-2 live, the NLB's %s tag is %q, want aws-1", tagBackend, got)
	}
	if err := lbB.EnsureLoadBalancerDeleted(ctx, testCluster, svc); err != nil {
		t.Errorf("aws-2's delete of the tagged NLB: %v", err)
	}
	if lbs := e.fake.LoadBalancers(); len(lbs) != 1 || lbs[0].DNSName != dns {
		t.Errorf("after aws-2's delete of the NLB tagged as aws-1's, NLBs %+v: want %s kept", lbs, dns)
	}
	runtime.KeepAlive(other)
}

// TestUntaggedUpstreamNLBClaimPlannedAsMade: with another backend of the
// VPC live, a plan (dry run) of aws-1's adoption lists the AddTags that
// tags the NLB as aws-1's, and the mutating calls the Ensure then makes
// are the plan's, one for one (as test/e2e/planswitch compares them).
func TestUntaggedUpstreamNLBClaimPlannedAsMade(t *testing.T) {
	e := newEnv(t)
	other := review65cBackend(t, "aws-2", e.url)
	nodes := e.awsNodes(1, 2)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	upstreamNLB(t, e, svc, instanceID(1), instanceID(2))
	lbA, _ := e.cloud.LoadBalancer()
	dctx, intents := backends.WithDryRun(context.Background())
	if _, err := lbA.EnsureLoadBalancer(dctx, testCluster, svc, nodes); err != nil {
		t.Fatalf("the plan's Ensure: %v", err)
	}
	var planned []string
	for _, in := range intents() {
		planned = append(planned, in.Call[strings.Index(in.Call, ":")+1:])
	}
	if got := e.onlyLB(t).Tags[tagBackend]; got != "" {
		t.Fatalf("the plan tagged the NLB %s=%q", tagBackend, got)
	}
	e.fake.ResetCalls()
	e.ensure(t, svc, nodes)
	made := e.fake.MutatingCalls()
	if !slices.Contains(planned, "AddTags") || !slices.Equal(slices.Sorted(slices.Values(planned)), slices.Sorted(slices.Values(made))) {
		t.Errorf("the plan listed %v, the Ensure made %v: want the same calls, the claim's AddTags among them", planned, made)
	}
	if got := e.onlyLB(t).Tags[tagBackend]; got != "aws-1" {
		t.Errorf("after aws-1's adoption with aws-2 live, the NLB's %s tag is %q, want aws-1", tagBackend, got)
	}
	runtime.KeepAlive(other)
}

// unregisterWhenDone takes c out of the live registry when the test ends:
// a later test's backend, alone in the same (test) VPC, would otherwise
// find it live (sharesVPC) until the garbage collector takes it, and tag
// an upstream NLB it adopts. Only a weak pointer is kept, so that c can
// still be collected during the test (TestReview65cRenamedBackendLetGoIsNotLive).
func unregisterWhenDone(t testing.TB, c *Cloud) {
	w := weak.Make(c.lb)
	t.Cleanup(func() {
		live.mu.Lock()
		defer live.mu.Unlock()
		live.lbs = slices.DeleteFunc(live.lbs, func(p weak.Pointer[LoadBalancer]) bool { return p == w })
	})
}

// TestDryRunOfASecondBackendClaimsNoUntaggedNLB: a dry run (a plan, or
// the router's look at a backend before a move) of aws-2 that finds
// upstream's untagged NLB before aws-1 has served it records nothing: aws-1
// then adopts and serves it as before, and aws-2's own Ensure is the one
// refused.
func TestDryRunOfASecondBackendClaimsNoUntaggedNLB(t *testing.T) {
	e := newEnv(t)
	other := review65cBackend(t, "aws-2", e.url)
	nodes := e.awsNodes(1, 2)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	dns := upstreamNLB(t, e, svc, instanceID(1), instanceID(2))
	lbB, _ := other.LoadBalancer()
	dctx, _ := backends.WithDryRun(context.Background())
	if _, err := lbB.EnsureLoadBalancer(dctx, testCluster, svc, nodes); err != nil {
		t.Fatalf("aws-2's dry run, nobody serving the NLB yet: %v", err)
	}
	e.ensure(t, svc, nodes) // aws-1 adopts it: not refused for aws-2's dry run
	if got := e.onlyLB(t); got.DNSName != dns || got.Tags[tagBackend] != "aws-1" {
		t.Errorf("after aws-2's dry run and aws-1's Ensure: NLB %s tagged %s=%q, want %s tagged aws-1", got.DNSName, tagBackend, got.Tags[tagBackend], dns)
	}
	_, err := lbB.EnsureLoadBalancer(context.Background(), testCluster, svc, nodes)
	if ue, ok := backends.AsUserError(err); !ok || ue.Reason != reasonNameConflict {
		t.Errorf("aws-2's Ensure after aws-1 adopted the NLB: %v, want a %s user error", err, reasonNameConflict)
	}
	runtime.KeepAlive(other)
}

// TestRebuiltBackendKeepsTheVersionsItsPredecessorBegan: a reload rebuilds
// aws-1 (a new object of the same name, VPC, region and endpoints) right
// after its Ensure removed port 443; upstream's node sync, listed before
// the edit, hands the new object the Service from before it. The new
// object uses the version its predecessor last began to reconcile (as the
// old object would have: TestReview65NodeSyncWithTheSpecBeforeAPortWasRemoved),
// so the listener stays removed.
func TestRebuiltBackendKeepsTheVersionsItsPredecessorBegan(t *testing.T) {
	e := newEnv(t)
	nodes := e.awsNodes(1, 3)
	after := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	before := after.DeepCopy()
	withPort("tls", corev1.ProtocolTCP, 443, 30443)(before)
	e.ensure(t, before, nodes)
	e.ensure(t, after, nodes)
	rebuilt := review65cBackend(t, "aws-1", e.url)
	lbi, _ := rebuilt.LoadBalancer()
	if err := lbi.UpdateLoadBalancer(context.Background(), testCluster, before, nodes[:2]); err != nil {
		t.Logf("the rebuilt backend's node sync with the old spec: %v", err)
	}
	if got := listenerTo(t, e, "443"); got != "" {
		t.Errorf("the rebuilt backend's node sync with the spec from before port 443 was removed put its listener back (to %s)", got)
	}
	runtime.KeepAlive(e.cloud)
}
