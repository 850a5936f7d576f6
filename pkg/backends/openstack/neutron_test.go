package openstack

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
)

// TestRoutes: pod CIDR routes become extra routes of the configured
// Neutron router, added and removed atomically; only routes via a server's
// address are reported; without a router the backend offers no routes.
func TestRoutes(t *testing.T) {
	f := NewFakeOpenStack(t)
	standardServers(f)
	s := f.Settings(t)
	if _, ok := fakeCloud(t, s).Routes(); ok {
		t.Fatal("Routes offered without routes.routerID")
	}
	s.Routes.RouterID = f.router.ID
	c := fakeCloud(t, s)
	rt, ok := c.Routes()
	if !ok {
		t.Fatal("Routes not offered with routes.routerID set")
	}
	ctx := context.Background()
	f.router.Routes = append(f.router.Routes, [2]string{"0.0.0.0/0", "192.0.2.254"}) // Someone else's route.

	for _, r := range []*cloudprovider.Route{
		{TargetNode: "vm-a", DestinationCIDR: "10.244.1.0/24"},
		{TargetNode: "vm-b", DestinationCIDR: "10.244.2.0/24"},
		{TargetNode: "vm-b", DestinationCIDR: "fd10:244:2::/64"},
	} {
		if err := rt.CreateRoute(ctx, "test", "hint", r); err != nil {
			t.Fatalf("CreateRoute %s: %v", r.DestinationCIDR, err)
		}
	}
	want := []string{"0.0.0.0/0 via 192.0.2.254", "10.244.1.0/24 via 10.0.0.11", "10.244.2.0/24 via 10.0.0.12", "fd10:244:2::/64 via fd00::12"}
	if got := f.Routes(); !slices.Equal(got, want) {
		t.Fatalf("router routes %q, want %q", got, want)
	}
	if n := f.CallCount("PUT /network/v2.0/routers/" + f.router.ID + "/add_extraroutes"); n != 3 {
		t.Errorf("%d add_extraroutes calls, want 3 (one per route, atomic)", n)
	}
	listed, err := rt.ListRoutes(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range listed {
		got = append(got, string(r.TargetNode)+" "+r.DestinationCIDR)
	}
	slices.Sort(got)
	if want := []string{"vm-a 10.244.1.0/24", "vm-b 10.244.2.0/24", "vm-b fd10:244:2::/64"}; !slices.Equal(got, want) {
		t.Errorf("ListRoutes %q, want %q (not the route via an unknown hop)", got, want)
	}
	if err := rt.DeleteRoute(ctx, "test", &cloudprovider.Route{TargetNode: types.NodeName("vm-a"), DestinationCIDR: "10.244.1.0/24"}); err != nil {
		t.Fatal(err)
	}
	want = []string{"0.0.0.0/0 via 192.0.2.254", "10.244.2.0/24 via 10.0.0.12", "fd10:244:2::/64 via fd00::12"}
	if got := f.Routes(); !slices.Equal(got, want) {
		t.Fatalf("after delete: router routes %q, want %q", got, want)
	}
	if err := rt.CreateRoute(ctx, "test", "hint", &cloudprovider.Route{TargetNode: "ghost", DestinationCIDR: "10.244.9.0/24"}); err == nil {
		t.Error("CreateRoute for a node with no server: nil error")
	}
}

const floatingNet = "5a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"

// TestFloatingIPs runs the floating-IP paths against the real Octavia with
// Neutron on the testhelper mux: allocate, steady state, internal by
// annotation releases it, kept on delete by annotation, a requested
// pre-allocated address is only associated and disassociated.
func TestFloatingIPs(t *testing.T) {
	s := realOctavia(t)
	f := NewFakeOpenStack(t)
	f.AnyToken = true
	s.Endpoints.Network = f.NetworkURL()
	s.LoadBalancer.FloatingNetworkID = floatingNet
	c := newRealCloud(t, s, "t"+randomID(t))
	ctx := context.Background()
	nodes := []*corev1.Node{newNode("n1", withInternalIP("10.4.0.1"))}
	svc := newService("fip")

	st, _ := ensureConverged(t, c.lb, svc, nodes)
	lb := theLB(t, c, svc)
	fips := f.FloatingIPs()
	if len(st.Ingress) != 1 || len(fips) != 1 {
		t.Fatalf("status %+v, floating IPs %+v: want one allocated floating IP", st, fips)
	}
	got := fips[st.Ingress[0].IP]
	if got.PortID != lb.VipPortID || got.NetworkID != floatingNet || got.Description != c.lb.lbName(svc) {
		t.Errorf("floating IP %+v: want it on VIP port %s, from %s, described %s", got, lb.VipPortID, floatingNet, c.lb.lbName(svc))
	}
	assertNoMutation(t, c, svc, nodes)

	internal := newService("fip", withAnnotation(AnnotationInternal, "true"))
	st, _ = ensureConverged(t, c.lb, internal, nodes)
	if st.Ingress[0].IP != lb.VipAddress || len(f.FloatingIPs()) != 0 {
		t.Errorf("internal: status %+v (VIP %s), floating IPs %+v: want the VIP and the floating IP released", st, lb.VipAddress, f.FloatingIPs())
	}

	kept := newService("fip", withAnnotation(AnnotationKeepFloatingIP, "true"))
	st, _ = ensureConverged(t, c.lb, kept, nodes)
	addr := st.Ingress[0].IP
	deleteConverged(t, c.lb, kept)
	if p, ok := f.FloatingIPs()[addr]; !ok || p.PortID != "" || !strings.HasPrefix(p.Description, "kept by multicloud-ccm") {
		t.Errorf("kept floating IP after delete: %+v (present %v), want it disassociated and kept", p, ok)
	}
	if _, exists, err := c.lb.GetLoadBalancer(ctx, "kubernetes", kept); err != nil || exists {
		t.Errorf("GetLoadBalancer after delete with a kept floating IP: exists=%v err=%v, want false, nil", exists, err)
	}

	f.AddFloatingIP("172.24.4.250", floatingNet)
	requested := newService("fip2", func(s *corev1.Service) { s.Spec.LoadBalancerIP = "172.24.4.250" })
	st, _ = ensureConverged(t, c.lb, requested, nodes)
	if st.Ingress[0].IP != "172.24.4.250" || f.FloatingIPs()["172.24.4.250"].PortID != theLB(t, c, requested).VipPortID {
		t.Errorf("requested floating IP: status %+v, floating IPs %+v", st, f.FloatingIPs())
	}
	deleteConverged(t, c.lb, requested)
	if p, ok := f.FloatingIPs()["172.24.4.250"]; !ok || p.PortID != "" || p.Description != "reserved by the user" {
		t.Errorf("the user's floating IP after delete: %+v (present %v), want it only disassociated", p, ok)
	}
}

func theLB(t *testing.T, c *Cloud, svc *corev1.Service) *loadbalancers.LoadBalancer {
	t.Helper()
	ctx := context.Background()
	sc, err := c.lb.clients(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found, err := c.lb.find(ctx, sc, svc)
	if err != nil || len(found) != 1 {
		t.Fatalf("load balancers of %s: %d, %v; want exactly one", svc.Name, len(found), err)
	}
	return &found[0]
}
