package aws

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// TestReview64MoveBetweenTwoVPCsOfOneRegion: two aws backends of one
// account and region, in two VPCs (the configuration docs/aws.md names
// for the shared budget: "two aws backends in the same account and region
// (two VPCs, say)"). A Service moved from one to the other (its
// multicloud-ccm.io/load-balancer-backend annotation changed, DESIGN.md
// §3.5: "created in the new backend and deleted from the old one, and
// nothing is left behind in either cloud") is ensured in the new backend
// while the old one still holds its NLB (the drain). NLB names are unique
// per account and region, and the backend's name of a Service's NLB does
// not depend on the backend or its VPC (upstream's neither; existing NLBs
// are not renamed), so the new backend cannot make its own NLB beside the
// old one's. It adopted the old VPC's NLB, and the old backend's delete
// at the drain's end left the Service with none. The operator expects the
// move to fail safely: the new backend's Ensure is a
// LoadBalancerNameConflict naming the backend, the other VPC's load
// balancer and the fix (the router's Warning on the Service carries it),
// changes nothing, and the new backend neither reports nor deletes the
// other VPC's NLB, which keeps serving the Service (make before break:
// the router retires the old backend only once the new one served).
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
	nlbA := e.onlyLB(t)
	e.fake.ResetCalls()
	lbB, _ := other.LoadBalancer()
	_, err := lbB.EnsureLoadBalancer(ctx, testCluster, svc, nodes)
	ue, ok := backends.AsUserError(err)
	if !ok || ue.Reason != reasonNameConflict {
		t.Fatalf("Ensure in the second backend (VPC B) while the first holds the NLB: %v, want a %s user error", err, reasonNameConflict)
	}
	for _, want := range []string{`"` + other.name + `"`, nlbA.Name, testVPC, vpcB, "unique per account and region", "keep the Service on the backend of that VPC"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the conflict %q does not name %q", err, want)
		}
	}
	if err := lbB.UpdateLoadBalancer(ctx, testCluster, svc, nodes[:1]); err == nil {
		t.Errorf("the second backend's node sync of the Service succeeded on the other VPC's NLB")
	}
	e.assertNoMutation(t, "Ensure and node sync in the second backend")
	if _, exists, err := lbB.GetLoadBalancer(ctx, testCluster, svc); err != nil || exists {
		t.Errorf("the second backend's GetLoadBalancer: exists %v, %v; want the other VPC's NLB not reported as its own", exists, err)
	}
	if err := lbB.EnsureLoadBalancerDeleted(ctx, testCluster, svc); err != nil {
		t.Fatalf("delete from the second backend: %v", err)
	}
	e.assertNoMutation(t, "delete from the second backend")
	lbA, _ := e.cloud.LoadBalancer()
	st, exists, err := lbA.GetLoadBalancer(ctx, testCluster, svc)
	if err != nil || !exists || len(st.Ingress) == 0 || st.Ingress[0].Hostname != nlbA.DNSName {
		t.Errorf("the first backend's GetLoadBalancer after the refused move: %+v, exists %v, %v; want its NLB %s serving", st, exists, err, nlbA.DNSName)
	}
	if got := e.fake.LoadBalancers(); len(got) != 1 || got[0].Name != nlbA.Name || !slices.Equal(got[0].Listeners, nlbA.Listeners) {
		t.Errorf("NLBs after the refused move: %+v, want the first backend's, as it was", got)
	}
}
