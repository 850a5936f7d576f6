package aws

import (
	"context"
	"strings"
	"testing"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// TestDryRunReplacedUpstreamNLBDeletesItsGroupOnce: issue 43 (a random
// world with OpenStack drawn): an NLB cloud-provider-aws made, its scheme
// changed to internal, is replaced; the switch deletes upstream's target
// group once, with the NLB. The dry run listed that delete twice: the
// group it had "deleted" was still there to read afterwards. The plan
// lists what the switch then does.
func TestDryRunReplacedUpstreamNLBDeletesItsGroupOnce(t *testing.T) {
	e := newEnv(t)
	nodes := e.awsNodes(1, 2)
	svc := newService("web", withAnnotation(AnnotationScheme, "internal"))
	upstreamNLB(t, e, svc, instanceID(1), instanceID(2))
	lbi, _ := e.cloud.LoadBalancer()
	dctx, intents := backends.WithDryRun(context.Background())
	if _, err := lbi.EnsureLoadBalancer(dctx, testCluster, svc, nodes); err != nil {
		t.Fatal(err)
	}
	var planned []string
	for _, in := range intents() {
		if strings.HasSuffix(in.Call, "DeleteTargetGroup") {
			planned = append(planned, in.What)
		}
	}
	e.fake.ResetCalls()
	if _, err := lbi.EnsureLoadBalancer(context.Background(), testCluster, svc, nodes); err != nil {
		t.Fatal(err)
	}
	if made := e.fake.Calls("DeleteTargetGroup"); made != len(planned) || made != 1 {
		t.Errorf("the switch deleted %d target groups; the dry run listed %d: %q", made, len(planned), planned)
	}
}
