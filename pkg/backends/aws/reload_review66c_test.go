package aws

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"weak"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// TestReview66cOldObjectsInFlightAdoptionAfterTheCopy: a reload rebuilds
// aws-1 (the new object copies the old one's holds at register) while
// the old object still serves an in-flight Ensure of api, whose NLB is
// upstream's: the old object, alone in the VPC (the new aws-1 is not
// "another backend"), adopts it untagged and holds it. The same reload
// then adds aws-2 in the VPC; the old object is collected. The operator
// expects the rebuild to change nothing about who holds api's NLB: aws-2's
// Ensure of api refused (as before the collection), the NLB not tagged
// aws-2.
func TestReview66cOldObjectsInFlightAdoptionAfterTheCopy(t *testing.T) {
	e := newEnv(t)
	review66bIsolate(t)
	nodes := e.awsNodes(1, 2)
	api := newService("api", withAnnotation(AnnotationTargetType, targetInstance))
	dns := review66bUpstreamNLB(t, e, api, "k8s-default-api-0a1b2c3d4e", instanceID(1), instanceID(2))
	var rebuilt *Cloud
	oldA := func() weak.Pointer[LoadBalancer] {
		old := review66bBackend(t, "aws-1", e.url)
		rebuilt = review66bBackend(t, "aws-1", e.url) // the reload's new aws-1: copies what old holds (nothing yet)
		lbi, _ := old.LoadBalancer()
		if _, err := lbi.EnsureLoadBalancer(context.Background(), testCluster, api, nodes); err != nil { // in flight on the old object
			t.Fatalf("the old aws-1's in-flight Ensure of api: %v", err)
		}
		return weak.Make(old.lb)
	}()
	other := review66bBackend(t, "aws-2", e.url)
	lbB, _ := other.LoadBalancer()
	if !collected(oldA) {
		t.Skip("the old aws-1 object was not collected")
	}
	e.fake.ResetCalls()
	_, err := lbB.EnsureLoadBalancer(context.Background(), testCluster, api, nodes)
	if ue, ok := backends.AsUserError(err); !ok || ue.Reason != reasonNameConflict {
		t.Errorf("aws-2's Ensure of api, which the old aws-1 adopted after the new one copied its holds: %v, want a %s user error; mutating calls %v",
			err, reasonNameConflict, e.fake.MutatingCalls())
	}
	if lb, _ := review66bLB(e, dns); lb.Tags[tagBackend] == "aws-2" {
		t.Errorf("api's NLB, which aws-1 serves, is now tagged %s=aws-2", tagBackend)
	}
	runtime.KeepAlive(rebuilt)
	runtime.KeepAlive(other)
}

// TestReview66cTwoRebuildsAfterAnInFlightEnsure: aws-1 (o1) ensured web
// with port 443; a reload builds o2 (copies that version); o1, still
// serving, ensures web without 443 (the listener removed); a second
// reload builds o3 while o1 and o2 are both still live. o3 is built after
// the removal and its predecessor o1 knows it: the operator expects o3's
// node sync handed the stale Service (with 443) to keep the listener
// removed (TestRebuiltBackendKeepsTheVersionsItsPredecessorBegan).
func TestReview66cTwoRebuildsAfterAnInFlightEnsure(t *testing.T) {
	e := newEnv(t)
	review66bIsolate(t, e.cloud)
	nodes := e.awsNodes(1, 3)
	after := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	before := after.DeepCopy()
	withPort("tls", corev1.ProtocolTCP, 443, 30443)(before)
	e.ensure(t, before, nodes)
	o2 := review65cBackend(t, "aws-1", e.url)
	e.ensure(t, after, nodes) // o1's in-flight Ensure, after o2 copied
	o3 := review65cBackend(t, "aws-1", e.url)
	lbi, _ := o3.LoadBalancer()
	if err := lbi.UpdateLoadBalancer(context.Background(), testCluster, before, nodes[:2]); err != nil {
		t.Logf("o3's node sync with the old spec: %v", err)
	}
	if got := listenerTo(t, e, "443"); got != "" {
		t.Errorf("o3 (built after o1 removed port 443) put the 443 listener back (to %s) on a node sync handed the stale Service: it took o2's stale copy over o1's version", got)
	}
	runtime.KeepAlive(o2)
	runtime.KeepAlive(e.cloud)
}

// TestReview66cNodeSyncAfterAFailedClaim: aws-1 adopted upstream's NLB
// alone; aws-2 is added; aws-1's node sync claims (AddTags) and AWS
// refuses the AddTags once. The operator expects the next node sync to
// claim again (the NLB tagged aws-1), not to take the fast path.
func TestReview66cNodeSyncAfterAFailedClaim(t *testing.T) {
	e := newEnv(t)
	review66bIsolate(t, e.cloud)
	nodes := e.awsNodes(1, 2)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	upstreamNLB(t, e, svc, instanceID(1), instanceID(2))
	e.ensure(t, svc, nodes)
	other := review66bBackend(t, "aws-2", e.url)
	lbA, _ := e.cloud.LoadBalancer()
	e.fake.FailNext("AddTags", "AccessDenied")
	if err := lbA.UpdateLoadBalancer(context.Background(), testCluster, svc, nodes); err == nil {
		t.Logf("the node sync whose AddTags failed returned no error")
	}
	if err := lbA.UpdateLoadBalancer(context.Background(), testCluster, svc, nodes); err != nil {
		t.Errorf("the next node sync: %v", err)
	}
	if got := e.onlyLB(t).Tags[tagBackend]; got != "aws-1" {
		t.Errorf("after a failed claim and another node sync the NLB is tagged %s=%q, want aws-1", tagBackend, got)
	}
	runtime.KeepAlive(other)
}

// TestReview66cConcurrentCallsWhileAReloadRebuilds: aws-1 and aws-2 (one
// VPC) ensure and node-sync Services whose NLBs are upstream's while a
// reload builds a new aws-1 (register copies the old one's holds and
// versions). The operator expects no data race (run with -race) and each
// Service served by exactly one backend.
func TestReview66cConcurrentCallsWhileAReloadRebuilds(t *testing.T) {
	e := newEnv(t)
	review66bIsolate(t, e.cloud)
	other := review66bBackend(t, "aws-2", e.url)
	nodes := e.awsNodes(1, 2)
	lbA, _ := e.cloud.LoadBalancer()
	lbB, _ := other.LoadBalancer()
	ctx := context.Background()
	var rebuilt []*Cloud
	for i := range 4 {
		svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
		svc.Name = "web" + string(rune('a'+i))
		svc.UID += types.UID("-" + svc.Name[3:])
		review66bUpstreamNLB(t, e, svc, "k8s-default-"+svc.Name+"-0a1b2c3d4e", instanceID(1), instanceID(2))
		var wg sync.WaitGroup
		var errA, errB error
		wg.Add(3)
		go func() {
			defer wg.Done()
			if _, errA = lbA.EnsureLoadBalancer(ctx, testCluster, svc.DeepCopy(), nodes); errA == nil {
				errA = lbA.UpdateLoadBalancer(ctx, testCluster, svc.DeepCopy(), nodes)
			}
		}()
		go func() {
			defer wg.Done()
			if _, errB = lbB.EnsureLoadBalancer(ctx, testCluster, svc.DeepCopy(), nodes); errB == nil {
				errB = lbB.UpdateLoadBalancer(ctx, testCluster, svc.DeepCopy(), nodes)
			}
		}()
		var c *Cloud
		go func() { defer wg.Done(); c = review66bBackend(t, "aws-1", e.url) }()
		wg.Wait()
		rebuilt = append(rebuilt, c)
		if (errA == nil) == (errB == nil) {
			t.Errorf("%s: aws-1 %v; aws-2 %v; want exactly one to serve it", svc.Name, errA, errB)
		}
	}
	runtime.KeepAlive(rebuilt)
	runtime.KeepAlive(other)
}
