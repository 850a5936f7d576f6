package aws

import (
	"context"
	"maps"
	"runtime"
	"slices"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// review65Backend builds a second aws backend, named name, against the
// env's fake, in the env's VPC (buildCloud always names it aws-1).
func review65Backend(t *testing.T, e *env, name string) *Cloud {
	t.Helper()
	return namedCloud(t, name, e.url)
}

// TestReview65MoveBetweenTwoBackendsOfOneVPC: fff8ece makes a move
// between two aws backends of one region in two VPCs fail safely (the new
// backend never takes the old one's NLB, which the old backend's delete
// at the drain's end would take away). Two aws backends of one account,
// region and VPC (nothing in the config refuses them) name a Service's
// NLB alike too. The router moves the Service (DESIGN.md §3.5: created
// in the new backend and deleted from the old one): the new backend's
// Ensure, then, at the drain's end, the old backend's delete. Before, the
// new backend adopted the old one's NLB (tagged as the cluster's and the
// Service's) and the old backend's delete left the Service with none. The
// operator expects the move to be refused as between two VPCs: the new
// backend's Ensure is a LoadBalancerNameConflict naming both backends and
// the fix, changes nothing, and the new backend neither reports nor
// deletes the old one's NLB, which keeps serving the Service (make before
// break: the router retires the old backend only once the new one
// served).
func TestReview65MoveBetweenTwoBackendsOfOneVPC(t *testing.T) {
	e := newEnv(t)
	other := review65Backend(t, e, "aws-2")
	nodes := e.awsNodes(1, 2)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	ctx := context.Background()
	e.ensure(t, svc, nodes) // served by aws-1
	nlbA := e.onlyLB(t)
	tgsA := e.targetGroups(t)
	e.fake.ResetCalls()
	lbB, _ := other.LoadBalancer()
	_, err := lbB.EnsureLoadBalancer(ctx, testCluster, svc, nodes)
	ue, ok := backends.AsUserError(err)
	if !ok || ue.Reason != reasonNameConflict {
		t.Fatalf("Ensure in aws-2 while aws-1 holds the NLB: %v, want a %s user error", err, reasonNameConflict)
	}
	for _, want := range []string{`"aws-2"`, `"aws-1"`, nlbA.Name, "unique per account and region", "cannot move between two aws backends", "route the Service back", "delete the Service and create it again"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the conflict %q does not name %q", err, want)
		}
	}
	if err := lbB.UpdateLoadBalancer(ctx, testCluster, svc, nodes[:1]); err == nil {
		t.Errorf("aws-2's node sync of the Service succeeded on aws-1's NLB")
	}
	e.assertNoMutation(t, "Ensure and node sync in aws-2")
	if _, exists, err := lbB.GetLoadBalancer(ctx, testCluster, svc); err != nil || exists {
		t.Errorf("aws-2's GetLoadBalancer: exists %v, %v; want aws-1's NLB not reported as its own", exists, err)
	}
	if err := lbB.EnsureLoadBalancerDeleted(ctx, testCluster, svc); err != nil {
		t.Fatalf("delete from aws-2: %v", err)
	}
	e.assertNoMutation(t, "delete from aws-2")
	lbA, _ := e.cloud.LoadBalancer()
	st, exists, err := lbA.GetLoadBalancer(ctx, testCluster, svc)
	if err != nil || !exists || len(st.Ingress) == 0 || st.Ingress[0].Hostname != nlbA.DNSName {
		t.Errorf("aws-1's GetLoadBalancer after the refused move: %+v, exists %v, %v; want its NLB %s serving", st, exists, err, nlbA.DNSName)
	}
	if got := e.fake.LoadBalancers(); len(got) != 1 || got[0].Name != nlbA.Name || !slices.Equal(got[0].Listeners, nlbA.Listeners) || got[0].Tags[tagBackend] != "aws-1" {
		t.Errorf("NLBs after the refused move: %+v, want aws-1's, as it was", got)
	}
	if got := e.targetGroups(t); !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(tgsA))) {
		t.Errorf("target groups after the refused move: %v, want aws-1's %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(tgsA)))
	}
	runtime.KeepAlive(other)
}

// TestReview65NeverDeletesAnotherLiveBackendsNLB: the delete path of the
// case above, from the other side: an NLB with the Service's name tagged
// as aws-2's (live in the process for the account and region) is never
// deleted by aws-1, nor its target groups or security group.
func TestReview65NeverDeletesAnotherLiveBackendsNLB(t *testing.T) {
	e := newEnv(t)
	other := review65Backend(t, e, "aws-2")
	nodes := e.awsNodes(1, 2)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	ctx := context.Background()
	lbB, _ := other.LoadBalancer()
	if _, err := lbB.EnsureLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
		t.Fatalf("Ensure in aws-2: %v", err)
	}
	nlbB := e.onlyLB(t)
	e.fake.ResetCalls()
	lbA, _ := e.cloud.LoadBalancer()
	if err := lbA.EnsureLoadBalancerDeleted(ctx, testCluster, svc); err != nil {
		t.Fatalf("aws-1's delete: %v", err)
	}
	e.assertNoMutation(t, "aws-1's delete of aws-2's NLB")
	if got := e.fake.LoadBalancers(); len(got) != 1 || got[0].ARN != nlbB.ARN {
		t.Errorf("NLBs after aws-1's delete: %+v, want aws-2's", got)
	}
	runtime.KeepAlive(other)
}

// TestReview65AdoptsTheNLBOfABackendNotLive: an NLB tagged as a backend
// that is not live (renamed, or removed from the config) is adopted as
// before: the Ensure keeps it and changes nothing but the NLB's backend
// tag, now its own (see
// TestReview65bAdoptedNLBTurnsForeignWhenItsOldTagComesBack), and the
// node sync and GetLoadBalancer take it as the Service's.
func TestReview65AdoptsTheNLBOfABackendNotLive(t *testing.T) {
	e := newEnv(t)
	nodes := e.awsNodes(1, 2)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	ctx := context.Background()
	e.ensure(t, svc, nodes)
	nlb := e.onlyLB(t)
	if _, err := e.cloud.lb.elb.AddTags(ctx, &elbv2.AddTagsInput{ResourceArns: []string{nlb.ARN},
		Tags: []elbtypes.Tag{{Key: awssdk.String(tagBackend), Value: awssdk.String("aws-renamed")}}}); err != nil {
		t.Fatal(err)
	}
	restarted := buildCloud(t, e.url) // no view: it reads the tag
	e.fake.ResetCalls()
	if _, err := restarted.lb.EnsureLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
		t.Fatalf("Ensure of an NLB tagged as a backend not live: %v", err)
	}
	if got := e.fake.MutatingCalls(); !slices.Equal(got, []string{"AddTags"}) {
		t.Errorf("Ensure of an NLB tagged as a backend not live made mutating calls %v, want only the NLB's retagging (AddTags)", got)
	}
	if got := e.onlyLB(t).Tags[tagBackend]; got != restarted.name {
		t.Errorf("the adopted NLB's backend tag is %q, want %q", got, restarted.name)
	}
	if err := restarted.lb.UpdateLoadBalancer(ctx, testCluster, svc, nodes[:1]); err != nil {
		t.Fatalf("node sync: %v", err)
	}
	if _, exists, err := restarted.lb.GetLoadBalancer(ctx, testCluster, svc); err != nil || !exists {
		t.Errorf("GetLoadBalancer: exists %v, %v; want the NLB", exists, err)
	}
	if got := e.onlyLB(t); got.ARN != nlb.ARN {
		t.Errorf("NLB %s after the Ensure, want %s kept", got.ARN, nlb.ARN)
	}
}
