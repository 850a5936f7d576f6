package aws

import (
	"context"
	"runtime"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// Review probes (65c) of 8b51025's live-backend registry (live.go,
// liveOther, unlessOtherBackends): an NLB tagged as another aws backend
// live in the same VPC and region is never taken.

// review65cBackend builds an aws backend named name on the env's fake, in
// the env's VPC and region, with its endpoints at url (the same fake,
// spelled as given).
func review65cBackend(t *testing.T, name, url string) *Cloud {
	t.Helper()
	return namedCloud(t, name, url)
}

// TestReview65cMoveOfAnAdoptedUpstreamNLBBetweenTwoBackendsOfOneVPC: the
// move of TestReview65MoveBetweenTwoBackendsOfOneVPC for a Service whose
// NLB aws-1 adopted from cloud-provider-aws (named "a"+UID, which does
// not depend on the backend either). The adoption leaves the NLB without
// a multicloud-ccm.io/backend tag (missingTags adds it only when another
// backend's tag is there: d.retagBackend), so liveOther never sees aws-1
// in it: aws-2 adopts it too, and aws-1's delete at the drain's end
// deletes the NLB aws-2 now serves the Service with. The operator expects
// the move refused (LoadBalancerNameConflict) as for an NLB aws-1 made,
// and the NLB left with aws-1 when the refused move is undone (the router
// retires aws-1 only once aws-2 served).
func TestReview65cMoveOfAnAdoptedUpstreamNLBBetweenTwoBackendsOfOneVPC(t *testing.T) {
	e := newEnv(t)
	other := review65cBackend(t, "aws-2", e.url)
	nodes := e.awsNodes(1, 2)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	ctx := context.Background()
	dns := upstreamNLB(t, e, svc, instanceID(1), instanceID(2))
	e.ensure(t, svc, nodes) // aws-1 adopts upstream's NLB
	if got := e.onlyLB(t); got.DNSName != dns {
		t.Fatalf("setup: aws-1 serves %s, want the adopted %s", got.DNSName, dns)
	}
	t.Logf("the adopted NLB's backend tag: %q", e.onlyLB(t).Tags[tagBackend])
	lbB, _ := other.LoadBalancer()
	_, err := lbB.EnsureLoadBalancer(ctx, testCluster, svc, nodes)
	if ue, ok := backends.AsUserError(err); !ok || ue.Reason != reasonNameConflict {
		t.Errorf("aws-2's Ensure while aws-1 serves the Service from the NLB it adopted: %v, want a %s user error", err, reasonNameConflict)
	}
	// The router retires aws-1 only once aws-2 served; refused, the move
	// is undone: aws-2's delete must leave aws-1's NLB.
	if err := lbB.EnsureLoadBalancerDeleted(ctx, testCluster, svc); err != nil {
		t.Logf("aws-2's delete: %v", err)
	}
	if lbs := e.fake.LoadBalancers(); len(lbs) != 1 || lbs[0].DNSName != dns || lbs[0].Tags[tagBackend] != "aws-1" {
		t.Errorf("after aws-2's Ensure (%v) and its delete (the move undone), NLBs %+v: want aws-1's adopted NLB kept, tagged as aws-1's", err, lbs)
	}
	runtime.KeepAlive(other)
}

// TestReview65cSameVPCBackendWithItsEndpointSpelledOtherwise: two aws
// backends of one account, region and VPC whose ELBv2 endpoint is spelled
// differently (one without endpoints, the other through an explicit
// regional or PrivateLink endpoint: here 127.0.0.1 and localhost of the
// same fake) reach the same NLBs. liveOther compares the endpoint
// strings, so aws-2 does not see aws-1: the move is not refused, aws-2
// adopts and re-tags aws-1's NLB, and aws-1 then finds it tagged as a
// backend it does not see either and deletes it at the drain's end. The
// operator expects LoadBalancerNameConflict as in
// TestReview65MoveBetweenTwoBackendsOfOneVPC, and the NLB kept when the
// refused move is undone.
func TestReview65cSameVPCBackendWithItsEndpointSpelledOtherwise(t *testing.T) {
	e := newEnv(t)
	if !strings.HasPrefix(e.url, "http://127.0.0.1:") {
		t.Fatalf("setup: the fake's URL %s is not on 127.0.0.1", e.url)
	}
	other := review65cBackend(t, "aws-2", strings.Replace(e.url, "127.0.0.1", "localhost", 1))
	nodes := e.awsNodes(1, 2)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	ctx := context.Background()
	e.ensure(t, svc, nodes) // served by aws-1
	nlb := e.onlyLB(t)
	lbB, _ := other.LoadBalancer()
	_, err := lbB.EnsureLoadBalancer(ctx, testCluster, svc, nodes)
	if ue, ok := backends.AsUserError(err); !ok || ue.Reason != reasonNameConflict {
		t.Errorf("aws-2's Ensure (same VPC and region, endpoint spelled otherwise) while aws-1 holds the NLB: %v, want a %s user error; NLB's backend tag now %q",
			err, reasonNameConflict, e.onlyLB(t).Tags[tagBackend])
	}
	if err := lbB.EnsureLoadBalancerDeleted(ctx, testCluster, svc); err != nil {
		t.Logf("aws-2's delete: %v", err)
	}
	if lbs := e.fake.LoadBalancers(); len(lbs) != 1 || lbs[0].ARN != nlb.ARN || lbs[0].Tags[tagBackend] != "aws-1" {
		t.Errorf("after aws-2's Ensure and its delete (the move undone), NLBs %+v, want %s kept, tagged as aws-1's", lbs, nlb.ARN)
	}
	runtime.KeepAlive(other)
}

// review65cRetired builds backend name on e's fake, ensures svc through it
// and lets go of it, as a reload that renamed or removed the backend does
// once its last call returned.
func review65cRetired(t *testing.T, e *env, name string, svc *corev1.Service, nodes []*corev1.Node) {
	t.Helper()
	old := review65cBackend(t, name, e.url)
	lbi, _ := old.LoadBalancer()
	if _, err := lbi.EnsureLoadBalancer(context.Background(), testCluster, svc, nodes); err != nil {
		t.Fatalf("Ensure in %s: %v", name, err)
	}
}

// TestReview65cRenamedBackendLetGoIsNotLive: the registry holds weak
// pointers, so a backend a reload renamed stops counting as live once the
// process lets go of it (docs/aws.md: "the garbage collector, within
// about two minutes"). Nothing else of the backend (its clients, budget,
// caches) may keep its LoadBalancer reachable: the Service would then be
// refused (LoadBalancerNameConflict) by the renamed backend for as long as
// the process runs. After a collection, the renamed backend (aws-1)
// adopts and re-tags the NLB aws-old made. Passes when nothing holds it.
func TestReview65cRenamedBackendLetGoIsNotLive(t *testing.T) {
	e := newEnv(t)
	nodes := e.awsNodes(1, 2)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	review65cRetired(t, e, "aws-old", svc, nodes)
	if got := e.onlyLB(t).Tags[tagBackend]; got != "aws-old" {
		t.Fatalf("setup: the NLB's backend tag is %q, want aws-old", got)
	}
	runtime.GC()
	runtime.GC()
	lbi, _ := e.cloud.LoadBalancer()
	if _, err := lbi.EnsureLoadBalancer(context.Background(), testCluster, svc, nodes); err != nil {
		t.Fatalf("the renamed backend's Ensure after the old one was let go and collected: %v", err)
	}
	if got := e.onlyLB(t).Tags[tagBackend]; got != e.cloud.name {
		t.Errorf("the NLB's backend tag is %q after the adoption, want %q", got, e.cloud.name)
	}
}
