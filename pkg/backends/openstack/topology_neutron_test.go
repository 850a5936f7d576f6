package openstack

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
	gcopenstack "github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/external"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/routers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"
	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// neutronFixture is an admin client of the real Neutron that
// hack/openstack/neutron-up.sh starts, for the objects a test needs around
// the backend (networks, subnets, a router, ports, floating IPs). Its
// requests are not counted in the backend's metrics.
type neutronFixture struct {
	t  testing.TB
	nc *gophercloud.ServiceClient
}

// realNeutron returns settings for the real Keystone + Octavia with the real
// Neutron as endpoints.network, and an admin fixture client. Without the
// stack's environment the test is skipped, or fails when CI is set.
func realNeutron(t testing.TB) (*Settings, *neutronFixture) {
	t.Helper()
	url := os.Getenv("NEUTRON_ENDPOINT")
	if url == "" || os.Getenv("NEUTRON_E2E") == "" {
		testutil.Unavailable(t, `no real Neutron: run eval "$(hack/openstack/up.sh)" first (sets NEUTRON_ENDPOINT, NEUTRON_E2E)`)
	}
	s := realOctavia(t)
	s.Endpoints.Network = url
	pw, err := s.Auth.Password.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	pc, err := gcopenstack.AuthenticatedClient(context.Background(), gophercloud.AuthOptions{
		IdentityEndpoint: s.Auth.AuthURL, Username: s.Auth.Username, Password: pw, DomainName: "Default",
		Scope: &gophercloud.AuthScope{ProjectName: s.Auth.ProjectName, DomainName: "Default"},
	})
	if err != nil {
		t.Fatalf("logging in to Keystone for the Neutron fixtures: %v", err)
	}
	base := strings.TrimSuffix(url, "/") + "/"
	return s, &neutronFixture{t: t, nc: &gophercloud.ServiceClient{ProviderClient: pc, Endpoint: base, ResourceBase: base + "v2.0/", Type: "network"}}
}

// topology is a test's own piece of Neutron: an external network with two
// subnets, an internal network with an IPv4 and an IPv6 subnet, and a
// router with its gateway on the external network and an interface on each
// internal subnet. Addresses overlap between tests; the objects do not.
type topology struct {
	External, ExternalSubnet, ExternalSubnet2 string
	Internal, SubnetV4, SubnetV6              string
	Router                                    string
}

// Topology CIDRs (the fake Nova's standardServers have addresses in the
// internal ones).
const (
	externalCIDR  = "172.24.4.0/24"
	externalCIDR2 = "172.24.5.0/24"
	internalCIDR4 = "10.0.0.0/24"
	internalCIDR6 = "fd00::/64"
)

// topology creates a topology named after the test; cleanups remove it,
// with every floating IP on its external network and port on its networks.
func (f *neutronFixture) topology(name string) *topology {
	t := f.t
	t.Helper()
	name = "mccm-test-" + name + "-" + randomID(t)
	tp := &topology{}
	tp.External = f.network(name+"-ext", true)
	// Neutron gives the router's gateway and every floating IP allocated
	// without an address a random one of the pool; tests that request an
	// address by hand take it above the pool (.200 and up), where nothing
	// random lands first.
	tp.ExternalSubnet = f.subnet(tp.External, name+"-ext", externalCIDR, gophercloud.IPv4, randomPool(externalCIDR)...)
	tp.ExternalSubnet2 = f.subnet(tp.External, name+"-ext2", externalCIDR2, gophercloud.IPv4, randomPool(externalCIDR2)...)
	tp.Internal = f.network(name+"-int", false)
	tp.SubnetV4 = f.subnet(tp.Internal, name+"-v4", internalCIDR4, gophercloud.IPv4)
	tp.SubnetV6 = f.subnet(tp.Internal, name+"-v6", internalCIDR6, gophercloud.IPv6)

	ctx := context.Background()
	r, err := routers.Create(ctx, f.nc, routers.CreateOpts{Name: name, GatewayInfo: &routers.GatewayInfo{NetworkID: tp.External}}).Extract()
	if err != nil {
		t.Fatalf("creating router %s: %v", name, err)
	}
	tp.Router = r.ID
	t.Cleanup(func() { f.deleteRouter(tp) })
	for _, sub := range []string{tp.SubnetV4, tp.SubnetV6} {
		if _, err := routers.AddInterface(ctx, f.nc, r.ID, routers.AddInterfaceOpts{SubnetID: sub}).Extract(); err != nil {
			t.Fatalf("adding subnet %s to router %s: %v", sub, name, err)
		}
	}
	return tp
}

func (f *neutronFixture) network(name string, externalNet bool) string {
	t := f.t
	t.Helper()
	n, err := networks.Create(context.Background(), f.nc, external.CreateOptsExt{
		CreateOptsBuilder: networks.CreateOpts{Name: name}, External: &externalNet,
	}).Extract()
	if err != nil {
		t.Fatalf("creating network %s: %v", name, err)
	}
	t.Cleanup(func() { f.deleteNetwork(n.ID) })
	return n.ID
}

// randomPool is the allocation pool of an external /24: .2 to .199.
func randomPool(cidr string) []subnets.AllocationPool {
	base := strings.TrimSuffix(cidr, "0/24")
	return []subnets.AllocationPool{{Start: base + "2", End: base + "199"}}
}

func (f *neutronFixture) subnet(network, name, cidr string, v gophercloud.IPVersion, pool ...subnets.AllocationPool) string {
	t := f.t
	t.Helper()
	dhcp := false
	s, err := subnets.Create(context.Background(), f.nc, subnets.CreateOpts{NetworkID: network, Name: name, CIDR: cidr, IPVersion: v, EnableDHCP: &dhcp, AllocationPools: pool}).Extract()
	if err != nil {
		t.Fatalf("creating subnet %s (%s): %v", name, cidr, err)
	}
	return s.ID
}

// port creates a port on the topology's internal network (a load balancer's
// VIP port, as a user pre-creates it for the port-id annotation).
func (f *neutronFixture) port(tp *topology, name string) ports.Port {
	t := f.t
	t.Helper()
	p, err := ports.Create(context.Background(), f.nc, ports.CreateOpts{NetworkID: tp.Internal, Name: name,
		FixedIPs: []ports.IP{{SubnetID: tp.SubnetV4}}}).Extract()
	if err != nil {
		t.Fatalf("creating port %s: %v", name, err)
	}
	return *p
}

// floatingIP allocates a floating IP on the topology's external network, as
// a user does before requesting it: at addr, on port (if not empty).
func (f *neutronFixture) floatingIP(tp *topology, addr, port, description string) floatingips.FloatingIP {
	t := f.t
	t.Helper()
	fip, err := floatingips.Create(context.Background(), f.nc, floatingips.CreateOpts{
		FloatingNetworkID: tp.External, FloatingIP: addr, PortID: port, Description: description,
	}).Extract()
	if err != nil {
		t.Fatalf("allocating floating IP %s: %v", addr, err)
	}
	return *fip
}

// floatingIPs lists the floating IPs on the topology's external network, by
// address.
func (f *neutronFixture) floatingIPs(tp *topology) map[string]floatingips.FloatingIP {
	t := f.t
	t.Helper()
	pages, err := floatingips.List(f.nc, floatingips.ListOpts{FloatingNetworkID: tp.External}).AllPages(context.Background())
	if err != nil {
		t.Fatalf("listing floating IPs: %v", err)
	}
	all, err := floatingips.ExtractFloatingIPs(pages)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]floatingips.FloatingIP{}
	for _, fip := range all {
		out[fip.FloatingIP] = fip
	}
	return out
}

// routes returns the router's extra routes as "destination via nexthop".
func (f *neutronFixture) routes(tp *topology) []string {
	t := f.t
	t.Helper()
	r, err := routers.Get(context.Background(), f.nc, tp.Router).Extract()
	if err != nil {
		t.Fatalf("reading router %s: %v", tp.Router, err)
	}
	var out []string
	for _, rt := range r.Routes {
		out = append(out, rt.DestinationCIDR+" via "+rt.NextHop)
	}
	return out
}

// deleteRouter clears the router's routes (an interface a route goes
// through cannot be removed), releases the floating IPs on the external
// network, removes the interfaces and deletes the router.
func (f *neutronFixture) deleteRouter(tp *topology) {
	ctx := context.Background()
	if _, err := routers.Update(ctx, f.nc, tp.Router, routers.UpdateOpts{Routes: &[]routers.Route{}}).Extract(); err != nil {
		f.t.Errorf("clearing the routes of router %s: %v", tp.Router, err)
	}
	for _, fip := range f.floatingIPs(tp) {
		if err := floatingips.Delete(ctx, f.nc, fip.ID).ExtractErr(); err != nil {
			f.t.Errorf("releasing floating IP %s: %v", fip.FloatingIP, err)
		}
	}
	for _, sub := range []string{tp.SubnetV4, tp.SubnetV6} {
		if _, err := routers.RemoveInterface(ctx, f.nc, tp.Router, routers.RemoveInterfaceOpts{SubnetID: sub}).Extract(); err != nil {
			f.t.Errorf("removing subnet %s from router %s: %v", sub, tp.Router, err)
		}
	}
	if err := routers.Delete(ctx, f.nc, tp.Router).ExtractErr(); err != nil {
		f.t.Errorf("deleting router %s: %v", tp.Router, err)
	}
}

// deleteNetwork deletes the ports left on a network, then the network
// (Neutron deletes its subnets with it).
func (f *neutronFixture) deleteNetwork(id string) {
	ctx := context.Background()
	pages, err := ports.List(f.nc, ports.ListOpts{NetworkID: id}).AllPages(ctx)
	if err != nil {
		f.t.Errorf("listing the ports of network %s: %v", id, err)
		return
	}
	left, err := ports.ExtractPorts(pages)
	if err != nil {
		f.t.Error(err)
	}
	for _, p := range left {
		if err := ports.Delete(ctx, f.nc, p.ID).ExtractErr(); err != nil && !gophercloud.ResponseCodeIs(err, 404) {
			f.t.Errorf("deleting port %s: %v", p.ID, err)
		}
	}
	if err := networks.Delete(ctx, f.nc, id).ExtractErr(); err != nil {
		f.t.Errorf("deleting network %s: %v", id, err)
	}
}

// onRealPort converges svc as an internal Service (no floating IP yet), then
// moves its load balancer's VIP onto port in Octavia's database, as
// Octavia's Neutron network driver would have allocated it. The stack's
// Octavia runs the noop network driver, whose VIP ports Neutron does not
// know (and which rejects the port-id annotation: its ports have no fixed
// IPs), so without this no floating IP could be associated.
func onRealPort(t *testing.T, c *Cloud, svc *corev1.Service, nodes []*corev1.Node, port ports.Port) {
	t.Helper()
	internal := svc.DeepCopy()
	internal.Annotations[string(AnnotationInternal)] = "true"
	internal.Spec.LoadBalancerIP = ""
	ensureConverged(t, c.lb, internal, nodes)
	lb := theLB(t, c, internal)
	ip := port.FixedIPs[0]
	q := fmt.Sprintf("UPDATE vip SET port_id='%s', ip_address='%s', subnet_id='%s', network_id='%s' WHERE load_balancer_id='%s';",
		port.ID, ip.IPAddress, ip.SubnetID, port.NetworkID, lb.ID)
	octaviaSQL(t, q)
	if got := theLB(t, c, internal); got.VipPortID != port.ID || got.VipAddress != ip.IPAddress {
		t.Fatalf("load balancer %s: VIP %s on port %s, want %s on %s", lb.ID, got.VipAddress, got.VipPortID, ip.IPAddress, port.ID)
	}
}
