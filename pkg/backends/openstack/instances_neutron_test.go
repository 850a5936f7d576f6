package openstack

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/flavors"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// novaFixture is an admin client of the real Nova that
// hack/openstack/nova-up.sh starts (the fake virt driver), to boot, stop and
// delete the servers a test needs.
type novaFixture struct {
	t        testing.TB
	cc       *gophercloud.ServiceClient
	image    string
	flavorID string
}

// realNova returns settings for the real stack with the real Nova as
// endpoints.compute and the real Neutron as endpoints.network, and fixture
// clients of both. Without the stack's environment the test is skipped, or
// fails when CI is set.
func realNova(t testing.TB) (*Settings, *novaFixture, *neutronFixture) {
	t.Helper()
	url, image, flavor := os.Getenv("NOVA_ENDPOINT"), os.Getenv("NOVA_IMAGE_ID"), os.Getenv("NOVA_FLAVOR")
	if url == "" || image == "" || flavor == "" || os.Getenv("NOVA_E2E") == "" {
		testutil.Unavailable(t, `no real Nova: run eval "$(hack/openstack/up.sh)" first (sets NOVA_ENDPOINT, NOVA_IMAGE_ID, NOVA_FLAVOR, NOVA_E2E)`)
	}
	s, nf := realNeutron(t)
	s.Endpoints.Compute = url
	base := strings.TrimSuffix(url, "/") + "/"
	cc := &gophercloud.ServiceClient{ProviderClient: nf.nc.ProviderClient, Endpoint: base, ResourceBase: base, Type: "compute", Microversion: computeMicroversion}
	pages, err := flavors.ListDetail(cc, flavors.ListOpts{}).AllPages(context.Background())
	if err != nil {
		t.Fatalf("listing Nova's flavors: %v", err)
	}
	all, err := flavors.ExtractFlavors(pages)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(all, func(f flavors.Flavor) bool { return f.Name == flavor })
	if i < 0 {
		t.Fatalf("Nova has no flavor %s (NOVA_FLAVOR)", flavor)
	}
	return s, &novaFixture{t: t, cc: cc, image: image, flavorID: all[i].ID}, nf
}

// boot creates a server named name on port and waits until it is ACTIVE;
// a cleanup deletes it and waits until it is gone (its port is then free).
// A build that fails inside Nova (novaInfraFault: its scheduler or compute
// host, not our request) is retried once with a fresh server on the same
// port, and said in the test's log; any other failure fails the test.
func (f *novaFixture) boot(name string, port ports.Port) *servers.Server {
	t := f.t
	t.Helper()
	ctx := context.Background()
	for attempt := 1; ; attempt++ {
		srv, err := servers.Create(ctx, f.cc, servers.CreateOpts{Name: name, ImageRef: f.image, FlavorRef: f.flavorID,
			Networks: []servers.Network{{Port: port.ID}}}, nil).Extract()
		if err != nil {
			t.Fatalf("booting server %s: %v", name, err)
		}
		t.Cleanup(func() { f.delete(srv.ID) })
		got := f.waitStatusOrError(srv.ID, "ACTIVE")
		if got.Status == "ACTIVE" {
			return got
		}
		if attempt == 1 && novaInfraFault(got.Fault) {
			t.Logf("server %s (%s) failed inside Nova, not on our request (fault %d %q); deleting it and booting a fresh one",
				name, srv.ID, got.Fault.Code, got.Fault.Message)
			f.delete(srv.ID)
			continue
		}
		t.Fatalf("server %s (%s) is %s (fault %+v), want ACTIVE", name, srv.ID, got.Status, got.Fault)
	}
}

// novaInfraFaults name Nova's own internals in a build fault: the build
// failed in Nova's scheduler, conductor or compute host (every host tried,
// its database or message bus), not because of what the request asked.
var novaInfraFaults = []string{"MaxRetriesExceeded", "Exhausted all hosts", "RescheduledException",
	"database is locked", "DBDeadlock", "DBConnectionError", "MessagingTimeout"}

// novaInfraFault reports whether a server's fault is Nova's own: a 500
// whose message or details name one of novaInfraFaults. A fault our request
// caused (an image, flavor or port Nova refuses) is a 4xx or names none.
func novaInfraFault(f servers.Fault) bool {
	if f.Code != 500 {
		return false
	}
	return slices.ContainsFunc(novaInfraFaults, func(s string) bool {
		return strings.Contains(f.Message, s) || strings.Contains(f.Details, s)
	})
}

// waitStatus waits until the server has status, failing on ERROR.
func (f *novaFixture) waitStatus(id, status string) *servers.Server {
	f.t.Helper()
	srv := f.waitStatusOrError(id, status)
	if srv.Status != status {
		f.t.Fatalf("server %s is %s (fault %+v), want %s", id, srv.Status, srv.Fault, status)
	}
	return srv
}

// waitStatusOrError waits until the server has status or is in ERROR, and
// returns it; it fails the test after two minutes.
func (f *novaFixture) waitStatusOrError(id, status string) *servers.Server {
	t := f.t
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		srv, err := servers.Get(context.Background(), f.cc, id).Extract()
		if err != nil {
			t.Fatalf("reading server %s: %v", id, err)
		}
		if srv.Status == status || srv.Status == "ERROR" {
			return srv
		}
		if time.Now().After(deadline) {
			t.Fatalf("server %s is %s (fault %+v), want %s", id, srv.Status, srv.Fault, status)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// stop powers the server off and waits until it is SHUTOFF.
func (f *novaFixture) stop(id string) {
	f.t.Helper()
	if err := servers.Stop(context.Background(), f.cc, id).ExtractErr(); err != nil {
		f.t.Fatalf("stopping server %s: %v", id, err)
	}
	f.waitStatus(id, statusShutoff)
}

// delete deletes the server and waits until Nova answers 404 for it.
func (f *novaFixture) delete(id string) {
	ctx := context.Background()
	err := servers.Delete(ctx, f.cc, id).ExtractErr()
	for deadline := time.Now().Add(2 * time.Minute); err == nil && time.Now().Before(deadline); {
		time.Sleep(500 * time.Millisecond)
		_, err = servers.Get(ctx, f.cc, id).Extract()
	}
	if !gophercloud.ResponseCodeIs(err, 404) {
		f.t.Errorf("deleting server %s: %v (want it gone)", id, err)
	}
}

// TestInstancesRealNova runs the node lifecycle against the real Nova, its
// servers on real Neutron ports (bound by the openvswitch mechanism
// driver): a node's metadata by providerID and by name (the port's fixed
// addresses, the flavor's name, Nova's zone; a floating IP on the port as an
// ExternalIP), a pod CIDR route via the
// server's address on the real router, a stopped server is shut down, a
// deleted one and an unknown name no longer exist, two servers with the
// node's name are an error.
func TestInstancesRealNova(t *testing.T) {
	t.Parallel()
	s, nova, nf := realNova(t)
	tp := nf.topology("nova")
	name := "mccm-" + randomID(t)
	port := nf.port(tp, name)
	running := nova.boot(name, port)
	stopped := nova.boot(name+"-off", nf.port(tp, name+"-off"))
	nova.stop(stopped.ID)
	s.Routes.RouterID = tp.Router
	c := newRealCloud(t, s, "t"+randomID(t))
	inst, ctx := c.instances, context.Background()

	if len(port.FixedIPs) != 1 {
		t.Fatalf("port %s has fixed IPs %+v, want one (from %s)", port.ID, port.FixedIPs, tp.SubnetV4)
	}
	wantAddrs := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: port.FixedIPs[0].IPAddress}}
	want := cloudprovider.InstanceMetadata{ProviderID: "openstack:///" + running.ID, InstanceType: os.Getenv("NOVA_FLAVOR"),
		Zone: "nova", Region: s.Region, NodeAddresses: wantAddrs}
	for _, node := range []*corev1.Node{newNode(name, withProviderID("openstack:///"+running.ID)), newNode(name)} {
		md, err := inst.InstanceMetadata(ctx, node)
		if err != nil {
			t.Fatalf("InstanceMetadata %s (providerID %q): %v", node.Name, node.Spec.ProviderID, err)
		}
		if md.ProviderID != want.ProviderID || md.InstanceType != want.InstanceType || md.Zone != want.Zone ||
			md.Region != want.Region || !slices.Equal(md.NodeAddresses, want.NodeAddresses) {
			t.Errorf("InstanceMetadata %s (providerID %q) = %+v, want %+v", node.Name, node.Spec.ProviderID, *md, want)
		}
	}
	rt, _ := c.Routes()
	if err := rt.CreateRoute(ctx, "test", "hint", &cloudprovider.Route{TargetNode: types.NodeName(name), DestinationCIDR: "10.244.7.0/24"}); err != nil {
		t.Fatalf("CreateRoute via %s: %v", name, err)
	}
	if got, want := nf.routes(tp), []string{"10.244.7.0/24 via " + port.FixedIPs[0].IPAddress}; !slices.Equal(got, want) {
		t.Errorf("router routes %q, want %q", got, want)
	}
	if listed, err := rt.ListRoutes(ctx, "test"); err != nil || len(listed) != 1 || string(listed[0].TargetNode) != name {
		t.Errorf("ListRoutes = %+v, %v; want the route to %s", listed, err, name)
	}

	// A floating IP on the server's port: Nova shows it (once nova-compute
	// refreshed the server's network info) and it becomes an ExternalIP.
	fip := nf.floatingIP(tp, "", port.ID, "node "+name)
	wantAddrs = append(wantAddrs, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: fip.FloatingIP})
	deadline := time.Now().Add(90 * time.Second)
	for {
		md, err := newRealCloud(t, s, "t"+randomID(t)).instances.InstanceMetadata(ctx, newNode(name))
		if err != nil {
			t.Fatalf("InstanceMetadata %s: %v", name, err)
		}
		if slices.Equal(md.NodeAddresses, wantAddrs) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("InstanceMetadata %s: addresses %v, want %v", name, md.NodeAddresses, wantAddrs)
		}
		time.Sleep(time.Second)
	}

	checkShutdown := func(node *corev1.Node, want bool) {
		t.Helper()
		if got, err := inst.InstanceShutdown(ctx, node); err != nil || got != want {
			t.Errorf("InstanceShutdown %s = %v, %v; want %v", node.Name, got, err, want)
		}
	}
	checkShutdown(newNode(name), false)
	checkShutdown(newNode(name+"-off", withProviderID("openstack:///"+stopped.ID)), true)

	nova.delete(stopped.ID)
	// The server cache keeps a deleted server up to its TTL (the safe
	// direction: a node is deleted late, never early): a fresh one sees
	// Nova's answer.
	inst = newRealCloud(t, s, "t"+randomID(t)).instances
	gone := newNode(name+"-off", withProviderID("openstack:///"+stopped.ID))
	if ok, err := inst.InstanceExists(ctx, gone); err != nil || ok {
		t.Errorf("InstanceExists for a deleted server = %v, %v; want false, nil", ok, err)
	}
	if _, err := inst.InstanceMetadata(ctx, gone); !errors.Is(err, cloudprovider.InstanceNotFound) {
		t.Errorf("InstanceMetadata for a deleted server: %v, want InstanceNotFound", err)
	}
	if ok, err := inst.InstanceExists(ctx, newNode("mccm-nobody-"+randomID(t))); err != nil || ok {
		t.Errorf("InstanceExists for a name no server has = %v, %v; want false, nil", ok, err)
	}
	if ok, err := inst.InstanceExists(ctx, newNode(name)); err != nil || !ok {
		t.Errorf("InstanceExists %s = %v, %v; want true, nil", name, ok, err)
	}

	nova.boot(name, nf.port(tp, name+"-twin"))
	c = newRealCloud(t, s, "t"+randomID(t)) // A fresh server cache.
	if _, err := c.instances.InstanceMetadata(ctx, newNode(name)); err == nil || !strings.Contains(err.Error(), "2 servers are named") {
		t.Errorf("InstanceMetadata with two servers named %s: %v, want an error saying so", name, err)
	}
}

// TestNovaInfraFault: the fault of a build Nova itself failed (#23's CI
// failure: every host exhausted after nova-compute's database was locked)
// is retried; faults our request caused are not.
func TestNovaInfraFault(t *testing.T) {
	for _, c := range []struct {
		fault servers.Fault
		want  bool
	}{
		{servers.Fault{Code: 500, Message: "Exceeded maximum number of retries. Exhausted all hosts available for retrying build failures for instance 1f0c.",
			Details: "Traceback ...\nnova.exception.MaxRetriesExceeded: Exceeded maximum number of retries."}, true},
		{servers.Fault{Code: 500, Message: "(sqlite3.OperationalError) database is locked"}, true},
		{servers.Fault{Code: 400, Message: "Image 5e1b could not be found."}, false},
		{servers.Fault{Code: 500, Message: "Build of instance 1f0c aborted: Invalid input received: port 9a2d is in use"}, false},
		{servers.Fault{}, false},
	} {
		if got := novaInfraFault(c.fault); got != c.want {
			t.Errorf("novaInfraFault(%+v) = %v, want %v", c.fault, got, c.want)
		}
	}
}
