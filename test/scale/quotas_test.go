package scale

import (
	"testing"

	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

// TestServiceTweaksFitAWSQuotas: the AWS cells' Services stay within the
// quotas the fake enforces as AWS does: a target subset above 1,000 nodes
// (targets per target group), and no rules in the nodes' security group
// for more than 1,000 instance-target Services (rules per security group,
// set to its maximum); IP targets add no such rules.
func TestServiceTweaksFitAWSQuotas(t *testing.T) {
	for _, tc := range []struct {
		cell                    cell
		subset, backendRulesOff bool
	}{
		{cell: cell{cloud: "aws", nodes: 100, services: 1000}},
		{cell: cell{cloud: "aws", nodes: 100, services: 5000}, backendRulesOff: true},
		{cell: cell{cloud: "aws", nodes: 5000, services: 1000}, subset: true},
		{cell: cell{cloud: "aws", nodes: 100, services: 5000, ipTargets: true}},
		{cell: cell{cloud: "baremetal", nodes: 5000, services: 5000}},
	} {
		t.Run(tc.cell.String(), func(t *testing.T) {
			cl := &cluster{cell: tc.cell}
			svc := framework.NewLoadBalancerService("default", "s", cl.serviceTweaks()...)
			_, subset := svc.Annotations["service.beta.kubernetes.io/aws-load-balancer-target-node-labels"]
			rules, set := svc.Annotations[awsBackendRules]
			if subset != tc.subset || (rules == "false") != tc.backendRulesOff || (set && rules != "false") {
				t.Errorf("annotations %v; want target subset %v, backend rules off %v", svc.Annotations, tc.subset, tc.backendRulesOff)
			}
		})
	}
}
