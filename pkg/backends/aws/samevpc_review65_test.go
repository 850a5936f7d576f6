package aws

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// review65Backend builds a second aws backend, named name, against the
// env's fake, in the env's VPC (buildCloud always names it aws-1).
func review65Backend(t *testing.T, e *env, name string) *Cloud {
	t.Helper()
	t.Setenv("TEST_AWS_KEY", "AKIDFAKE")
	t.Setenv("TEST_AWS_SECRET", "fake-secret")
	raw := fmt.Sprintf(`{"region": %q, "vpc": %q, "endpoints": {"ec2": %q, "elbv2": %q, "sts": %q},
		"credentials": {"accessKeyID": {"env": "TEST_AWS_KEY"}, "secretAccessKey": {"env": "TEST_AWS_SECRET"}},
		"retry": {"maxAttempts": 6, "maxBackoff": "5ms"}}`, testRegion, testVPC, e.url, e.url, e.url)
	settings, errs := ParseSection([]byte(raw), field.NewPath("aws"), t.TempDir())
	if len(errs) > 0 {
		t.Fatalf("settings: %v", errs.ToAggregate())
	}
	s := settings.(*Settings)
	testBudget(s)
	c, err := New(context.Background(), backends.Options{Name: name, ClusterID: testCluster, Settings: s})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c.(*Cloud)
}

// TestReview65MoveBetweenTwoBackendsOfOneVPC: fff8ece makes a move
// between two aws backends of one region in two VPCs fail safely (the new
// backend never takes the old one's NLB, which the old backend's delete
// at the drain's end would take away). Two aws backends of one account,
// region and VPC (nothing in the config refuses them) name a Service's
// NLB alike too. The router moves the Service (DESIGN.md §3.5: created
// in the new backend and deleted from the old one): the new backend's
// Ensure, then, at the drain's end, the old backend's delete. The
// operator expects the Service to keep an NLB after the move (or the
// move to be refused as between two VPCs): not to be left with none.
func TestReview65MoveBetweenTwoBackendsOfOneVPC(t *testing.T) {
	e := newEnv(t)
	other := review65Backend(t, e, "aws-2")
	nodes := e.awsNodes(1, 2)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	ctx := context.Background()
	e.ensure(t, svc, nodes) // served by aws-1
	lbB, _ := other.LoadBalancer()
	_, err := lbB.EnsureLoadBalancer(ctx, testCluster, svc, nodes)
	if ue, ok := backends.AsUserError(err); ok {
		t.Logf("the move is refused (as between two VPCs): %v", ue)
	} else if err != nil {
		t.Fatalf("Ensure in aws-2: %v", err)
	}
	refused := err != nil
	// The drain's end: aws-1 deletes what it holds for the Service.
	lbA, _ := e.cloud.LoadBalancer()
	if err := lbA.EnsureLoadBalancerDeleted(ctx, testCluster, svc); err != nil {
		t.Fatalf("aws-1's delete: %v", err)
	}
	if refused {
		return // the old backend was never retired by the router; nothing lost
	}
	if n := len(e.fake.LoadBalancers()); n != 1 {
		t.Errorf("after the move from aws-1 to aws-2 (aws-2 ensured, then aws-1's delete at the drain's end) %d NLBs are left, want aws-2's", n)
	}
	if _, exists, err := lbB.GetLoadBalancer(ctx, testCluster, svc); err != nil || !exists {
		t.Errorf("aws-2's GetLoadBalancer after the move: exists %v, %v; want its NLB", exists, err)
	}
}
