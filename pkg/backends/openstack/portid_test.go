package openstack

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// octaviaWithNeutron returns the endpoint of the test stack's second
// Octavia API, whose network driver is the real one against the real
// Neutron (hack/openstack/neutron-up.sh), or skips (fails under CI).
func octaviaWithNeutron(t *testing.T) string {
	t.Helper()
	u := os.Getenv("OCTAVIA_NEUTRON_ENDPOINT")
	if u == "" {
		testutil.Unavailable(t, `no Octavia API with the Neutron network driver: run eval "$(hack/openstack/up.sh)" (sets OCTAVIA_NEUTRON_ENDPOINT)`)
	}
	return u
}

// TestServiceControllerPortID drives the upstream service controller on
// the real Octavia, through its API with the real network driver, and the
// real Neutron: loadbalancer.openstack.org/port-id makes a user's Neutron
// port the VIP port (the VIP is the port's fixed IP, in the status; the
// members on the port's subnet, not the configured VIP subnet);
// deleting the Service deletes the load balancer and leaves the port, which
// is the user's.
func TestServiceControllerPortID(t *testing.T) {
	t.Parallel()
	_, f := realNeutron(t)
	endpoint := octaviaWithNeutron(t)
	name := "mccm-test-portid-" + randomID(t)
	network := f.network(name, false)
	subnet := f.subnet(network, name, "10.0.0.0/24", gophercloud.IPv4)
	port, err := ports.Create(context.Background(), f.nc, ports.CreateOpts{NetworkID: network, Name: name, FixedIPs: []ports.IP{{SubnetID: subnet}}}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	addr := port.FixedIPs[0].IPAddress
	e := newSvcEnv(t, func(s *Settings) {
		s.Endpoints.Network = os.Getenv("NEUTRON_ENDPOINT")
		s.Endpoints.LoadBalancer = endpoint
	}, readyNode("n1", "10.35.0.1", nil))
	svc := newService("vip-port", withAnnotation(AnnotationPortID, port.ID))
	t.Cleanup(func() { deleteConverged(t, e.cloud.lb, svc) })
	e.apply(t, svc)
	lb := e.waitDetail(t, svc, "TCP/80 conn=-1 t=50000/5000/50000/0 xff= pool=TCP:ROUND_ROBIN monitor=TCP:5/3/1/3 members=n1", statusIPs(addr))
	if lb.VipPortID != port.ID || lb.VipAddress != addr || lb.VipSubnetID != subnet {
		t.Errorf("VIP %s on port %s subnet %s, want %s on %s subnet %s", lb.VipAddress, lb.VipPortID, lb.VipSubnetID, addr, port.ID, subnet)
	}
	if got := memberAddrs(t, e.cloud, lb.ID); got != "10.35.0.1@"+subnet {
		t.Errorf("members %s, want on the port's subnet %s (not the configured VIP subnet)", got, subnet)
	}

	e.markDeleted(t, "vip-port")
	eventuallyOn(t, 120*time.Second, "the load balancer deleted, the port kept", func() error {
		if len(e.service(t, "vip-port").Finalizers) != 0 {
			return fmt.Errorf("finalizer still there")
		}
		sc, err := e.cloud.lb.clients(context.Background())
		if err != nil {
			return err
		}
		if got, err := e.cloud.lb.byID(context.Background(), sc, lb.ID); err != nil || got != nil && got.ProvisioningStatus != "DELETED" {
			return fmt.Errorf("load balancer %s still there (%w)", lb.ID, err)
		}
		return nil
	})
	if p, err := ports.Get(context.Background(), f.nc, port.ID).Extract(); err != nil || len(p.FixedIPs) != 1 || p.FixedIPs[0].IPAddress != addr {
		t.Errorf("the user's port after the delete: %+v (%v), want it kept with %s", p, err, addr)
	}
}

// TestServiceControllerDualStackNeutronVIPs drives the upstream service
// controller on the real Octavia's API with the real network driver: a
// dual-stack Service that is not internal gets a VIP port in Neutron with
// an address of each family, and both addresses, allocated by Neutron, in
// its status (the noop driver reports none for an additional VIP).
func TestServiceControllerDualStackNeutronVIPs(t *testing.T) {
	t.Parallel()
	_, f := realNeutron(t)
	endpoint := octaviaWithNeutron(t)
	name := "mccm-test-dualvips-" + randomID(t)
	network := f.network(name, false)
	sub4 := f.subnet(network, name+"-v4", "10.0.0.0/24", gophercloud.IPv4)
	sub6 := f.subnet(network, name+"-v6", "fd00::/64", gophercloud.IPv6)
	e := newSvcEnv(t, func(s *Settings) {
		s.Endpoints.Network = os.Getenv("NEUTRON_ENDPOINT")
		s.Endpoints.LoadBalancer = endpoint
		s.LoadBalancer.VIPSubnetID = sub4
	}, dualNode("n1", "10.36.0.1", "fd00:36::1"))
	svc := newService("dualvips", withFamilies(v6v4...))
	t.Cleanup(func() { deleteConverged(t, e.cloud.lb, svc) })
	e.apply(t, svc)
	lb := e.waitDetail(t, svc, "TCP/80 conn=-1 t=50000/5000/50000/0 xff= pool=TCP:ROUND_ROBIN monitor=TCP:5/3/1/3 members=n1", func(st corev1.LoadBalancerStatus) error {
		if got := ingressIPs(st); len(got) != 2 || familyOf(got[0]) != corev1.IPv6Protocol || familyOf(got[1]) != corev1.IPv4Protocol {
			return fmt.Errorf("status %v: want an IPv6 then an IPv4 address", got)
		}
		return nil
	})
	port, err := ports.Get(context.Background(), f.nc, lb.VipPortID).Extract()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]string{}
	for _, ip := range port.FixedIPs {
		have[ip.SubnetID] = ip.IPAddress
	}
	want := []string{have[sub6], have[sub4]}
	if got := ingressIPs(e.service(t, "dualvips").Status.LoadBalancer); !slices.Equal(got, want) {
		t.Errorf("status %v, want the VIP port's addresses %v (fixed IPs %+v)", got, want, port.FixedIPs)
	}
}
