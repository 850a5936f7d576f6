package openstack

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/extraroutes"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/routers"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// floatingNet is the floating network of the tests that still use the
// fake's Neutron (the repair and conformance tests).
const floatingNet = "5a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"

// TestRoutesNeedRouter: without routes.routerID the backend offers no
// routes (no Neutron call is involved).
func TestRoutesNeedRouter(t *testing.T) {
	f := NewFakeOpenStack(t)
	s := f.Settings(t)
	if _, ok := fakeCloud(t, s).Routes(); ok {
		t.Fatal("Routes offered without routes.routerID")
	}
	s.Routes.RouterID = f.router.ID
	if _, ok := fakeCloud(t, s).Routes(); !ok {
		t.Fatal("Routes not offered with routes.routerID set")
	}
}

// TestRoutes: pod CIDR routes become extra routes of a real Neutron router
// (Nova's servers from the fake), added and removed atomically, one call
// each; only routes via a server's address are reported; a next hop Neutron
// cannot reach through the router is Neutron's refusal, returned.
func TestRoutes(t *testing.T) {
	t.Parallel()
	s, nf := realNeutron(t)
	tp := nf.topology("routes")
	f := NewFakeOpenStack(t)
	f.AnyToken = true
	standardServers(f)
	f.AddServer(FakeNovaServer{ID: "4f3c7d8e-5061-4293-8e1f-4a5b6c7d8e9f", Name: "vm-far", Zone: "az-1", Flavor: "m1.small",
		Addresses: map[string][]string{"elsewhere": {"10.9.9.9"}}})
	s.Endpoints.Compute = f.ComputeURL()
	s.Routes.RouterID = tp.Router
	c := newRealCloud(t, s, "t"+randomID(t))
	rt, ok := c.Routes()
	if !ok {
		t.Fatal("Routes not offered with routes.routerID set")
	}
	ctx := context.Background()
	// Someone else's route, through the router's own subnet.
	if err := extraroutes.Add(ctx, nf.nc, tp.Router, extraroutes.Opts{Routes: &[]routers.Route{{DestinationCIDR: "192.168.0.0/16", NextHop: "10.0.0.254"}}}).Err; err != nil {
		t.Fatal(err)
	}

	_, w0 := apiCalls(t, c)
	for _, r := range []*cloudprovider.Route{
		{TargetNode: "vm-a", DestinationCIDR: "10.244.1.0/24"},
		{TargetNode: "vm-b", DestinationCIDR: "10.244.2.0/24"},
		{TargetNode: "vm-b", DestinationCIDR: "fd10:244:2::/64"},
	} {
		if err := rt.CreateRoute(ctx, "test", "hint", r); err != nil {
			t.Fatalf("CreateRoute %s: %v", r.DestinationCIDR, err)
		}
	}
	want := []string{"10.244.1.0/24 via 10.0.0.11", "10.244.2.0/24 via 10.0.0.12", "192.168.0.0/16 via 10.0.0.254", "fd10:244:2::/64 via fd00::12"}
	if got := sorted(nf.routes(tp)); !slices.Equal(got, want) {
		t.Fatalf("router routes %q, want %q", got, want)
	}
	if _, w := apiCalls(t, c); w-w0 != 3 {
		t.Errorf("%v writes for 3 routes, want 3 (one add_extraroutes each, atomic)", w-w0)
	}
	listed, err := rt.ListRoutes(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range listed {
		got = append(got, string(r.TargetNode)+" "+r.DestinationCIDR)
	}
	if want := []string{"vm-a 10.244.1.0/24", "vm-b 10.244.2.0/24", "vm-b fd10:244:2::/64"}; !slices.Equal(sorted(got), want) {
		t.Errorf("ListRoutes %q, want %q (not the route via an unknown hop)", got, want)
	}
	if err := rt.DeleteRoute(ctx, "test", &cloudprovider.Route{TargetNode: types.NodeName("vm-a"), DestinationCIDR: "10.244.1.0/24"}); err != nil {
		t.Fatal(err)
	}
	want = []string{"10.244.2.0/24 via 10.0.0.12", "192.168.0.0/16 via 10.0.0.254", "fd10:244:2::/64 via fd00::12"}
	if got := sorted(nf.routes(tp)); !slices.Equal(got, want) {
		t.Fatalf("after delete: router routes %q, want %q", got, want)
	}
	if err := rt.CreateRoute(ctx, "test", "hint", &cloudprovider.Route{TargetNode: "ghost", DestinationCIDR: "10.244.9.0/24"}); err == nil {
		t.Error("CreateRoute for a node with no server: nil error")
	}
	err = rt.CreateRoute(ctx, "test", "hint", &cloudprovider.Route{TargetNode: "vm-far", DestinationCIDR: "10.244.8.0/24"})
	if err == nil || !strings.Contains(err.Error(), tp.Router) || !strings.Contains(err.Error(), "10.9.9.9") {
		t.Errorf("CreateRoute via 10.9.9.9, on no subnet of the router: %v, want Neutron's refusal naming the router and the next hop", err)
	}
	if got := sorted(nf.routes(tp)); !slices.Equal(got, want) {
		t.Errorf("after the refused route: router routes %q, want %q", got, want)
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestFloatingIPs runs the floating-IP paths against the real Octavia and
// the real Neutron: allocate (the Service turning external), steady state,
// the same address re-associated after a disassociation behind the
// backend's back, internal by annotation releases it, kept on delete by
// annotation, a requested pre-allocated address is only associated and
// disassociated. The VIP ports are real Neutron ports (see onRealPort).
func TestFloatingIPs(t *testing.T) {
	t.Parallel()
	s, nf := realNeutron(t)
	tp := nf.topology("fip")
	s.LoadBalancer.FloatingNetworkID = tp.External
	c := newRealCloud(t, s, "t"+randomID(t))
	ctx := context.Background()
	nodes := []*corev1.Node{newNode("n1", withInternalIP("10.4.0.1"))}
	vip := nf.port(tp, "vip-fip")
	svc := newService("fip")
	onRealPort(t, c, svc, nodes, vip)

	st, _ := ensureConverged(t, c.lb, svc, nodes)
	fips := nf.floatingIPs(tp)
	if len(st.Ingress) != 1 || len(fips) != 1 {
		t.Fatalf("status %+v, floating IPs %+v: want one allocated floating IP", st, fips)
	}
	got := fips[st.Ingress[0].IP]
	if got.PortID != vip.ID || got.Description != c.lb.lbName(svc) || got.FixedIP != vip.FixedIPs[0].IPAddress || got.RouterID != tp.Router {
		t.Errorf("floating IP %+v: want it on VIP port %s at %s through router %s, described %s",
			got, vip.ID, vip.FixedIPs[0].IPAddress, tp.Router, c.lb.lbName(svc))
	}
	assertNoMutation(t, c, svc, nodes)

	// Disassociated behind the backend's back: the same address comes back.
	if _, err := floatingips.Update(ctx, nf.nc, got.ID, floatingips.UpdateOpts{PortID: new(string)}).Extract(); err != nil {
		t.Fatal(err)
	}
	st, _ = ensureConverged(t, c.lb, svc, nodes)
	if fips := nf.floatingIPs(tp); st.Ingress[0].IP != got.FloatingIP || len(fips) != 1 || fips[got.FloatingIP].PortID != vip.ID {
		t.Errorf("after a disassociation: status %+v, floating IPs %+v; want %s on port %s again, no other", st, fips, got.FloatingIP, vip.ID)
	}

	internal := newService("fip", withAnnotation(AnnotationInternal, "true"))
	st, _ = ensureConverged(t, c.lb, internal, nodes)
	if fips := nf.floatingIPs(tp); st.Ingress[0].IP != vip.FixedIPs[0].IPAddress || len(fips) != 0 {
		t.Errorf("internal: status %+v, floating IPs %+v: want the VIP %s and the floating IP released", st, fips, vip.FixedIPs[0].IPAddress)
	}

	kept := newService("fip", withAnnotation(AnnotationKeepFloatingIP, "true"))
	st, _ = ensureConverged(t, c.lb, kept, nodes)
	addr := st.Ingress[0].IP
	deleteConverged(t, c.lb, kept)
	if p, ok := nf.floatingIPs(tp)[addr]; !ok || p.PortID != "" || !strings.HasPrefix(p.Description, "kept by multicloud-ccm") {
		t.Errorf("kept floating IP after delete: %+v (present %v), want it disassociated and kept", p, ok)
	}
	if _, exists, err := c.lb.GetLoadBalancer(ctx, "kubernetes", kept); err != nil || exists {
		t.Errorf("GetLoadBalancer after delete with a kept floating IP: exists=%v err=%v, want false, nil", exists, err)
	}

	reserved := nf.floatingIP(tp, "172.24.4.250", "", "reserved by the user")
	vip2 := nf.port(tp, "vip-fip2")
	requested := newService("fip2", func(s *corev1.Service) { s.Spec.LoadBalancerIP = reserved.FloatingIP })
	onRealPort(t, c, requested, nodes, vip2)
	st, _ = ensureConverged(t, c.lb, requested, nodes)
	if p := nf.floatingIPs(tp)[reserved.FloatingIP]; st.Ingress[0].IP != reserved.FloatingIP || p.PortID != vip2.ID || p.ID != reserved.ID {
		t.Errorf("requested floating IP: status %+v, floating IP %+v; want %s (%s) on port %s", st, p, reserved.FloatingIP, reserved.ID, vip2.ID)
	}
	deleteConverged(t, c.lb, requested)
	if p, ok := nf.floatingIPs(tp)[reserved.FloatingIP]; !ok || p.PortID != "" || p.Description != "reserved by the user" {
		t.Errorf("the user's floating IP after delete: %+v (present %v), want it only disassociated", p, ok)
	}
}

// TestFloatingIPFromSubnet: the floating-subnet-id annotation makes Neutron
// allocate from that subnet of the floating network.
func TestFloatingIPFromSubnet(t *testing.T) {
	t.Parallel()
	s, nf := realNeutron(t)
	tp := nf.topology("fipsubnet")
	s.LoadBalancer.FloatingNetworkID = tp.External
	c := newRealCloud(t, s, "t"+randomID(t))
	nodes := []*corev1.Node{newNode("n1", withInternalIP("10.4.1.1"))}
	svc := newService("fipsub", withAnnotation(AnnotationFloatingSubnetID, tp.ExternalSubnet2))
	onRealPort(t, c, svc, nodes, nf.port(tp, "vip-sub"))
	st, _ := ensureConverged(t, c.lb, svc, nodes)
	t.Cleanup(func() { deleteConverged(t, c.lb, svc) })
	if fip, ok := nf.floatingIPs(tp)[st.Ingress[0].IP]; !ok || !strings.HasPrefix(fip.FloatingIP, "172.24.5.") {
		t.Errorf("status %+v, floating IP %+v: want one from subnet %s (%s)", st, fip, tp.ExternalSubnet2, externalCIDR2)
	}
}

// TestFloatingIPInUse: a requested floating IP already on another port is a
// user error naming it; the other port keeps it, also once the Service is
// deleted.
func TestFloatingIPInUse(t *testing.T) {
	t.Parallel()
	s, nf := realNeutron(t)
	tp := nf.topology("fipinuse")
	s.LoadBalancer.FloatingNetworkID = tp.External
	c := newRealCloud(t, s, "t"+randomID(t))
	nodes := []*corev1.Node{newNode("n1", withInternalIP("10.4.2.1"))}
	other := nf.port(tp, "someone-else")
	taken := nf.floatingIP(tp, "172.24.4.251", other.ID, "someone else's")
	svc := newService("inuse", func(s *corev1.Service) { s.Spec.LoadBalancerIP = taken.FloatingIP })
	onRealPort(t, c, svc, nodes, nf.port(tp, "vip-inuse"))

	err := ensureUntilDone(c.lb, svc, nodes)
	ue, ok := backends.AsUserError(err)
	if !ok || ue.Reason != "FloatingIPInUse" || !strings.Contains(err.Error(), taken.FloatingIP) || !strings.Contains(err.Error(), other.ID) {
		t.Errorf("Ensure with a floating IP in use: %v, want a FloatingIPInUse user error naming %s and port %s", err, taken.FloatingIP, other.ID)
	}
	deleteConverged(t, c.lb, svc)
	if p := nf.floatingIPs(tp)[taken.FloatingIP]; p.ID != taken.ID || p.PortID != other.ID || p.Description != "someone else's" {
		t.Errorf("the other port's floating IP after delete: %+v, want it untouched on port %s", p, other.ID)
	}
}

// ensureUntilDone calls EnsureLoadBalancer until it returns something other
// than a retry (or the stack's sqlite contention), and returns that error.
func ensureUntilDone(lb *LoadBalancer, svc *corev1.Service, nodes []*corev1.Node) error {
	deadline := time.Now().Add(90 * time.Second)
	for {
		_, err := lb.EnsureLoadBalancer(context.Background(), "kubernetes", svc, nodes)
		if err == nil || (!isRetry(err) && !sqliteLocked(err)) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(lb.retryDelay)
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
