package aws

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
)

// TestReview64MoveBetweenTwoVPCsOfOneRegion: two aws backends of one
// account and region, in two VPCs (the configuration docs/aws.md names
// for the shared budget: "two aws backends in the same account and region
// (two VPCs, say)"). A Service moved from one to the other (its
// multicloud-ccm.io/load-balancer-backend annotation changed, DESIGN.md
// §3.5: "created in the new backend and deleted from the old one, and
// nothing is left behind in either cloud") is ensured in the new backend
// while the old one still holds its NLB (the drain), then deleted from
// the old one. The operator expects an NLB in the new VPC serving the
// Service once the move is done. NLB names are unique per account and
// region, and the backend's name of a Service's NLB does not depend on
// the backend or its VPC.
func TestReview64MoveBetweenTwoVPCsOfOneRegion(t *testing.T) {
	e := newEnv(t)
	const vpcB = "vpc-0b2"
	e.fake.AddVPC(vpcB, "10.1.0.0/16")
	for i, z := range []string{"a", "b"} {
		e.fake.AddSubnet(awsfake.Subnet{ID: "subnet-2" + z, VPCID: vpcB, Zone: testRegion + z, ZoneID: fmt.Sprintf("euw1-az%d", i+1),
			CIDR: fmt.Sprintf("10.1.%d.0/24", i), Tags: map[string]string{tagRoleELB: "1", "Name": "public-b-" + z}})
	}
	other := buildCloud(t, e.url, func(s *Settings) { s.VPC = vpcB })
	nodes := otherNodes(2)
	svc := newService("web")
	ctx := context.Background()

	e.ensure(t, svc, nodes) // served by the first backend (VPC A)
	e.fake.ResetCalls()
	lbB, _ := other.LoadBalancer()
	if _, err := lbB.EnsureLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
		t.Errorf("Ensure in the second backend (VPC B) while the first still holds the NLB (the drain): %v", err)
	}
	t.Logf("the second backend's Ensure made %v", e.fake.MutatingCalls())
	lbA, _ := e.cloud.LoadBalancer()
	if err := lbA.EnsureLoadBalancerDeleted(ctx, testCluster, svc); err != nil {
		t.Fatalf("delete from the first backend at the drain's end: %v", err)
	}
	var inB []string
	for _, lb := range e.fake.LoadBalancers() {
		t.Logf("NLB %s in subnets %v", lb.Name, lb.Subnets)
		if len(lb.Subnets) > 0 && strings.HasPrefix(lb.Subnets[0], "subnet-2") {
			inB = append(inB, lb.Name)
		}
	}
	if len(inB) != 1 {
		t.Errorf("NLBs in VPC B after the move: %v, want the Service's one", inB)
	}
	if _, exists, err := lbB.GetLoadBalancer(ctx, testCluster, svc); err != nil || !exists {
		t.Errorf("the second backend's GetLoadBalancer after the move: exists %v, %v", exists, err)
	}
}
