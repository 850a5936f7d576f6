package aws

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// Review probes (65b) of 20e936d "never take or delete an NLB tagged as
// another live backend's" (liveOther).

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
	unregisterWhenDone(t, c.(*Cloud))
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

// TestReview65bAdoptedNLBTurnsForeignWhenItsOldTagComesBack: aws-1
// adopts an NLB tagged as backend "aws-old", which is not live (renamed
// to aws-1 by a reload: TestReview65AdoptsTheNLBOfABackendNotLive). The
// adoption leaves the tag naming "aws-old". Later the operator configures
// a new backend called "aws-old" in the same account and region (another
// VPC's, or the name reused). The operator expects aws-1 to keep managing
// the NLB it serves the Service with: its node syncs change its targets,
// GetLoadBalancer reports it, and deleting the Service deletes it. With
// the stale tag, liveOther now calls it the other backend's: every Ensure
// and node sync fails with LoadBalancerNameConflict, and the delete
// deletes nothing and reports success, so the router drops aws-1 from the
// record and the NLB leaks.
func TestReview65bAdoptedNLBTurnsForeignWhenItsOldTagComesBack(t *testing.T) {
	e := newEnv(t)
	nodes := e.awsNodes(1, 3)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	ctx := context.Background()
	e.ensure(t, svc, nodes)
	nlb := e.onlyLB(t)
	if _, err := e.cloud.lb.elb.AddTags(ctx, &elbv2.AddTagsInput{ResourceArns: []string{nlb.ARN},
		Tags: []elbtypes.Tag{{Key: awssdk.String(tagBackend), Value: awssdk.String("aws-old")}}}); err != nil {
		t.Fatal(err)
	}
	restarted := buildCloud(t, e.url) // aws-1 after the reload that renamed aws-old: no view
	if _, err := restarted.lb.EnsureLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
		t.Fatalf("the Ensure adopting the NLB of the backend no longer live: %v", err)
	}
	t.Logf("the NLB's backend tag after the adoption: %q", e.onlyLB(t).Tags[tagBackend])
	// A later reload adds a backend named aws-old, of the same account
	// and region (it shares aws-1's budget).
	newcomer := review65Backend(t, e, "aws-old")
	if err := restarted.lb.UpdateLoadBalancer(ctx, testCluster, svc, nodes[:2]); err != nil {
		t.Errorf("aws-1's node sync of the NLB it adopted, once a backend named as its old tag is configured: %v", err)
	}
	if _, exists, err := restarted.lb.GetLoadBalancer(ctx, testCluster, svc); err != nil || !exists {
		t.Errorf("aws-1's GetLoadBalancer: exists %v, %v; want the NLB it serves the Service with", exists, err)
	}
	if err := restarted.lb.EnsureLoadBalancerDeleted(ctx, testCluster, svc); err != nil {
		t.Fatalf("aws-1's delete: %v", err)
	}
	if got := e.fake.LoadBalancers(); len(got) != 0 {
		t.Errorf("aws-1's delete of the Service succeeded and left its NLB %s (tagged %q): leaked", got[0].Name, got[0].Tags[tagBackend])
	}
	runtime.KeepAlive(newcomer)
}
