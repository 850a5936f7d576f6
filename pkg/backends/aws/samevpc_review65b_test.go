package aws

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// Review probes (65b) of 20e936d "never take or delete an NLB tagged as
// another live backend's" (liveOther: cloudapi.Budget.Sharers).

// review65bBackend builds an aws backend named name against the env's
// fake, in the env's VPC, with its credentials from the environment
// variables keyVar and secretVar.
func review65bBackend(t *testing.T, e *env, name, keyVar, secretVar string) *Cloud {
	t.Helper()
	t.Setenv(keyVar, "AKIDFAKE2")
	t.Setenv(secretVar, "fake-secret-2")
	raw := fmt.Sprintf(`{"region": %q, "vpc": %q, "endpoints": {"ec2": %q, "elbv2": %q, "sts": %q},
		"credentials": {"accessKeyID": {"env": %q}, "secretAccessKey": {"env": %q}},
		"retry": {"maxAttempts": 6, "maxBackoff": "5ms"}}`, testRegion, testVPC, e.url, e.url, e.url, keyVar, secretVar)
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

// TestReview65bMoveBetweenTwoBackendsOfOneVPCWithOwnCredentials: the
// move of TestReview65MoveBetweenTwoBackendsOfOneVPC, with the second
// backend configured with credentials of its own (another IAM user of the
// same account, least privilege per backend: nothing refuses it, and the
// NLB names still collide, as they depend on neither). budgetKey does not
// recognise them as one account ("two backends using different keys of
// one account are not recognised as one account"), so they share no
// budget and liveOther does not see aws-1: aws-2 adopts aws-1's NLB, and
// the old backend's delete at the drain's end leaves the Service with
// none, the defect 20e936d fixes. The operator expects the move refused
// (LoadBalancerNameConflict) whatever credentials each backend uses.
func TestReview65bMoveBetweenTwoBackendsOfOneVPCWithOwnCredentials(t *testing.T) {
	e := newEnv(t)
	other := review65bBackend(t, e, "aws-2", "TEST_AWS_KEY_2", "TEST_AWS_SECRET_2")
	t.Logf("aws-1's budget sharers %v, aws-2's %v", e.cloud.lb.budget.Sharers(), other.lb.budget.Sharers())
	nodes := e.awsNodes(1, 2)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	ctx := context.Background()
	e.ensure(t, svc, nodes) // served by aws-1
	nlbA := e.onlyLB(t)
	e.fake.ResetCalls()
	lbB, _ := other.LoadBalancer()
	_, err := lbB.EnsureLoadBalancer(ctx, testCluster, svc, nodes)
	if ue, ok := backends.AsUserError(err); !ok || ue.Reason != reasonNameConflict {
		t.Errorf("Ensure in aws-2 (own credentials, same account, region and VPC) while aws-1 holds the NLB: %v, want a %s user error; mutating calls %v",
			err, reasonNameConflict, e.fake.MutatingCalls())
	}
	if got := e.onlyLB(t).Tags[tagBackend]; got != "aws-1" {
		t.Errorf("aws-1's NLB %s is tagged as %q's now", nlbA.Name, got)
	}
	if err := lbB.EnsureLoadBalancerDeleted(ctx, testCluster, svc); err != nil {
		t.Fatalf("delete from aws-2: %v", err)
	}
	if got := e.fake.LoadBalancers(); len(got) != 1 {
		t.Errorf("aws-2's delete (the refused move undone) deleted aws-1's NLB: NLBs %+v", got)
	}
	runtime.KeepAlive(other)
}
