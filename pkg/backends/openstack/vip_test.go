package openstack

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

const (
	vipSubnetAnno  = "d4000000-0000-4000-8000-000000000001"
	vipNetworkAnno = "d4000000-0000-4000-8000-000000000002"
	vipPortAnno    = "d4000000-0000-4000-8000-000000000003"
	memberSubnetA  = "d4000000-0000-4000-8000-000000000004"
	memberSubnetB  = "d4000000-0000-4000-8000-000000000005"
)

// memberSubnets lists the distinct subnets of a load balancer's members.
func memberSubnets(t *testing.T, c *Cloud, lbID string) (string, error) {
	t.Helper()
	sc, err := c.lb.clients(context.Background())
	if err != nil {
		return "", err
	}
	st, err := readState(context.Background(), sc.loadBalancer, lbID)
	if err != nil {
		return "", err
	}
	seen := map[string]bool{}
	for _, p := range st.pools {
		for _, m := range p.members {
			seen[m.SubnetID] = true
		}
	}
	var out []string
	for s := range seen {
		out = append(out, s)
	}
	sort.Strings(out)
	return strings.Join(out, ","), nil
}

// TestServiceControllerVIPAndMemberSubnets drives the upstream service
// controller on the real Octavia (noop network driver: any subnet, network
// ID is accepted): subnet-id and network-id place the VIP at creation (the
// network's own subnet, not the config's, with network-id alone); port-id
// reaches Octavia, whose refusal without Neutron is an event naming it;
// member-subnet-id is created, changed and removed on a live
// Service, the members following in place.
func TestServiceControllerVIPAndMemberSubnets(t *testing.T) {
	t.Parallel()
	e := newSvcEnv(t, nil, readyNode("n1", "10.29.0.1", nil))
	byVIP := map[string]struct {
		annos map[annotation.Name]string
		check func(subnet, network string) bool
	}{
		"vip-subnet":  {map[annotation.Name]string{AnnotationVIPSubnetID: vipSubnetAnno, AnnotationMemberSubnetID: memberSubnetA}, func(s, _ string) bool { return s == vipSubnetAnno }},
		"vip-network": {map[annotation.Name]string{AnnotationVIPNetworkID: vipNetworkAnno}, func(s, n string) bool { return n == vipNetworkAnno && s != VIPSubnetForTests }},
	}
	for name, tt := range byVIP {
		svc := newService(name)
		svc.Annotations = annotations(tt.annos)
		t.Cleanup(func() { deleteConverged(t, e.cloud.lb, newService(name)) })
		e.apply(t, svc)
	}
	for name, tt := range byVIP {
		lb := e.waitDetail(t, newService(name), "TCP/80 conn=-1 t=50000/5000/50000/0 xff= pool=TCP:ROUND_ROBIN monitor=TCP:5/3/1/3 members=n1", statusIP(corev1.LoadBalancerIPModeVIP))
		if !tt.check(lb.VipSubnetID, lb.VipNetworkID) {
			t.Errorf("%s: VIP subnet %s network %s, want the annotation's", name, lb.VipSubnetID, lb.VipNetworkID)
		}
	}

	// Octavia derives the VIP subnet from the port through Neutron, which
	// its noop network driver cannot: the create is refused, and the
	// event names port-id.
	port := newService("vip-port", withAnnotation(AnnotationPortID, vipPortAnno))
	t.Cleanup(func() { deleteConverged(t, e.cloud.lb, port) })
	e.apply(t, port)
	waitWarning(t, e, "vip-port", reasonOctaviaRefused, string(AnnotationPortID), "VIP port's subnet could not be determined")

	lb := theLB(t, e.cloud, newService("vip-subnet"))
	for _, step := range []struct {
		name  string
		annos map[annotation.Name]string
		want  string
	}{
		{"created", nil, memberSubnetA},
		{"changed", map[annotation.Name]string{AnnotationVIPSubnetID: vipSubnetAnno, AnnotationMemberSubnetID: memberSubnetB}, memberSubnetB},
		{"removed", map[annotation.Name]string{AnnotationVIPSubnetID: vipSubnetAnno}, vipSubnetAnno},
	} {
		if step.annos != nil {
			svc := newService("vip-subnet")
			svc.Annotations = annotations(step.annos)
			e.apply(t, svc)
		}
		eventuallyOn(t, 120*time.Second, "member subnet "+step.name, func() error {
			got, err := memberSubnets(t, e.cloud, lb.ID)
			if err != nil || got != step.want {
				return fmt.Errorf("member subnets %s (%w), want %s", got, err, step.want)
			}
			return nil
		})
	}
	if got := theLB(t, e.cloud, newService("vip-subnet")); got.ID != lb.ID || got.VipAddress != lb.VipAddress {
		t.Errorf("load balancer %s (VIP %s) after the member subnet changes, want %s (VIP %s)", got.ID, got.VipAddress, lb.ID, lb.VipAddress)
	}
}
