package aws

import (
	"context"
	"testing"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// TestEnsureReportsTheARN: EnsureLoadBalancer reports the NLB's ARN, which
// the router writes to multicloud-ccm.io/load-balancer-id.
func TestEnsureReportsTheARN(t *testing.T) {
	e := newEnv(t)
	lbi, _ := e.cloud.LoadBalancer()
	ctx, reported := backends.WithLoadBalancerIDReport(context.Background())
	if _, err := lbi.EnsureLoadBalancer(ctx, testCluster, newService("web"), e.awsNodes(1, 2)); err != nil {
		t.Fatal(err)
	}
	if got, want := reported(), e.onlyLB(t).ARN; got != want || want == "" {
		t.Errorf("reported %q, want the NLB's ARN %q", got, want)
	}
}
