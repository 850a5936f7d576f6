package aws

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/cloudapi"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router"
)

// retuneConfig is a config of one aws backend for the fake at url, with
// the given rateLimits line ("" for the default budget).
func retuneConfig(t *testing.T, url, rateLimits, cluster string) *config.CloudConfig {
	t.Helper()
	raw := fmt.Sprintf(`apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: %[4]s
loadBalancer: {defaultBackend: aws-1}
backends:
- name: aws-1
  type: aws
  aws:
    region: %[2]s
    vpc: %[3]s
    endpoints: {ec2: %[1]q, elbv2: %[1]q, sts: %[1]q}
    credentials:
      accessKeyID: {env: TEST_AWS_KEY}
      secretAccessKey: {env: TEST_AWS_SECRET}
    retry: {maxAttempts: 6, maxBackoff: 5ms}
%[5]s`, url, testRegion, testVPC, cluster, rateLimits)
	cfg, err := config.Parse([]byte(raw), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestRateLimitsReloadRetunesInPlace: a live reload that changes only the
// backend's rateLimits keeps the backend (Changes.Retuned, not Rebuilt:
// no Service is re-synced for it), with what it last verified of each
// NLB, so the next node sync still makes its one DeregisterTargets and no
// read; and the new budget applies at once: with the budget off no ELBv2
// read is refused for its deadline, retuned to the default (AWS's bucket of
// 40 reads less one) one from the 40th on is. The reads' deadlines are each
// read's own (CI's stop 49 failed a total deadline of 50 ms for 25 reads
// on a loaded machine). Any other change (here the cluster ID) still rebuilds it.
// Before, every change of rateLimits rebuilt the backend, which lost its
// views, and the controller re-synced every Service of it.
func TestRateLimitsReloadRetunesInPlace(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	off := "    rateLimits: {elbv2: {qps: -1, qpsWrite: -1}, ec2: {qps: -1, qpsWrite: -1}}\n"
	rl, err := router.NewReloadable(ctx, retuneConfig(t, e.url, off, testCluster))
	if err != nil {
		t.Fatal(err)
	}
	first := rl.Current().ByName["aws-1"].Cloud.(*Cloud) //nolint:forcetypeassert // the aws backend.
	nodes := e.awsNodes(1, 3)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	lbi, _ := first.LoadBalancer()
	if _, err := lbi.EnsureLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
		t.Fatal(err)
	}
	// refusedAt sends up to n reads, each with a deadline of 50 ms (half
	// the default bucket's refill interval of 100 ms), and returns the
	// number of the first the budget refused for its deadline (0: none).
	// A read's own timeout on a loaded machine is not a refusal: only
	// ErrPastDeadline, which Wait returns before sending, counts.
	refusedAt := func(n int) int {
		for i := range n {
			rctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			_, err := first.lb.elb.DescribeLoadBalancers(rctx, nil)
			cancel()
			if errors.Is(err, cloudapi.ErrPastDeadline) {
				return i + 1
			}
		}
		return 0
	}
	if at := refusedAt(100); at != 0 {
		t.Fatalf("with the budget off, read %d was refused by the budget", at)
	}

	ch, err := rl.Apply(ctx, retuneConfig(t, e.url, "", testCluster))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(ch.Retuned, ",") != "aws-1" || len(ch.Rebuilt)+len(ch.Reconfigured)+len(ch.Added)+len(ch.Removed) != 0 {
		t.Fatalf("changes %+v, want aws-1 retuned and nothing else", ch)
	}
	if now := rl.Current().ByName["aws-1"].Cloud; now != first {
		t.Fatal("the retuned backend is another instance: it lost its caches and verified views")
	}
	// The default bucket holds 39 reads (AWS's 40 less a token of margin):
	// the first 39 pass at once,
	// and a later one is refused; how much later depends on how long the
	// reads took (10 tokens a second come back meanwhile), so the bound is
	// loose.
	if at := refusedAt(100); at < 40 || at > 90 {
		t.Errorf("after the retune to the default budget (a bucket of 39 reads, 10 a second), the first read refused for its deadline was %d, want one from the 40th on (and before the 91st)", at)
	}

	e.fake.ResetCalls()
	if err := lbi.UpdateLoadBalancer(ctx, testCluster, svc, nodes[:2]); err != nil {
		t.Fatal(err)
	}
	if got, m := e.fake.Calls("DeregisterTargets"), e.fake.MutatingCalls(); got != 1 || len(m) != 1 {
		t.Errorf("node sync after the retune: DeregisterTargets %d, mutating calls %v, want the one DeregisterTargets", got, m)
	}
	if r := reads(e); len(r) != 0 {
		t.Errorf("node sync after the retune read %v, want no read (the verified view kept)", r)
	}

	ch, err = rl.Apply(ctx, retuneConfig(t, e.url, "", "other-cluster"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(ch.Rebuilt, ",") != "aws-1" || len(ch.Retuned) != 0 {
		t.Errorf("changes after a new cluster ID %+v, want aws-1 rebuilt", ch)
	}
}
