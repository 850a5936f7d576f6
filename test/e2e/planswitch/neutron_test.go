package planswitch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/external"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/routers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/plan"
)

// The Neutron side of a world with OpenStack (issue 43): the real Neutron
// hack/openstack/neutron-up.sh starts, with a piece of its own (an
// external network, an internal one whose subnet is the VIP subnet, a
// router between them), Octavia's API with the real network driver
// (OCTAVIA_NEUTRON_ENDPOINT: VIP ports are Neutron ports, so floating IPs
// can be associated with them), and the backend's floating network the
// external one: every Service on os gets a floating IP unless internal.
// Neutron is reached through neutronRecorder, which attributes every
// mutating floating-IP call to the Service whose load balancer it serves.
// Strangers: a floating IP made by hand, on no port, and one on a port
// made by hand; the switch must leave both as they are.

// osTopology is the world's piece of Neutron.
type osTopology struct {
	external, externalSubnet, internal, subnet, router string
	// strangers are the floating IPs made by hand, as they were made.
	strangers []floatingips.FloatingIP
}

// neutronClient is an admin client of the real Neutron at endpoint.
func neutronClient(p *gophercloud.ProviderClient, endpoint string) *gophercloud.ServiceClient {
	base := strings.TrimSuffix(endpoint, "/") + "/"
	return &gophercloud.ServiceClient{ProviderClient: p, Endpoint: base, ResourceBase: base + "v2.0/", Type: "network"}
}

// topology makes the world's piece of Neutron and its strangers; cleanups
// remove it (after the world's load balancers: registered first).
func (s *osStack) topology(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	tp := &osTopology{}
	netOf := func(suffix string, ext bool) string {
		n, err := networks.Create(ctx, s.network, external.CreateOptsExt{CreateOptsBuilder: networks.CreateOpts{Name: name + suffix}, External: &ext}).Extract()
		if err != nil {
			t.Fatalf("creating network %s%s: %v", name, suffix, err)
		}
		t.Cleanup(func() { s.deleteNetwork(t, n.ID) })
		return n.ID
	}
	subnetOf := func(network, suffix, cidr string) string {
		dhcp := false
		sn, err := subnets.Create(ctx, s.network, subnets.CreateOpts{NetworkID: network, Name: name + suffix, CIDR: cidr, IPVersion: gophercloud.IPv4, EnableDHCP: &dhcp}).Extract()
		if err != nil {
			t.Fatalf("creating subnet %s%s: %v", name, suffix, err)
		}
		return sn.ID
	}
	tp.external = netOf("-ext", true)
	tp.externalSubnet = subnetOf(tp.external, "-ext", "172.24.4.0/24")
	tp.internal = netOf("-int", false)
	tp.subnet = subnetOf(tp.internal, "-int", "10.0.0.0/24")
	r, err := routers.Create(ctx, s.network, routers.CreateOpts{Name: name, GatewayInfo: &routers.GatewayInfo{NetworkID: tp.external}}).Extract()
	if err != nil {
		t.Fatalf("creating router %s: %v", name, err)
	}
	tp.router = r.ID
	t.Cleanup(func() { s.deleteRouter(t, tp) })
	if _, err := routers.AddInterface(ctx, s.network, r.ID, routers.AddInterfaceOpts{SubnetID: tp.subnet}).Extract(); err != nil {
		t.Fatalf("adding subnet %s to router %s: %v", tp.subnet, name, err)
	}
	// Strangers: one on no port, one on a port made by hand.
	port, err := ports.Create(ctx, s.network, ports.CreateOpts{NetworkID: tp.internal, Name: name + "-by-hand", FixedIPs: []ports.IP{{SubnetID: tp.subnet}}}).Extract()
	if err != nil {
		t.Fatalf("creating port %s-by-hand: %v", name, err)
	}
	for _, on := range []string{"", port.ID} {
		fip, err := floatingips.Create(ctx, s.network, floatingips.CreateOpts{FloatingNetworkID: tp.external, PortID: on, Description: "made by hand"}).Extract()
		if err != nil {
			t.Fatalf("allocating a floating IP by hand: %v", err)
		}
		tp.strangers = append(tp.strangers, *fip)
	}
	s.tp = tp
}

// floatingIPs lists the floating IPs on the world's external network, by
// address.
func (s *osStack) floatingIPs(ctx context.Context) (map[string]floatingips.FloatingIP, error) {
	pages, err := floatingips.List(s.network, floatingips.ListOpts{FloatingNetworkID: s.tp.external}).AllPages(ctx)
	if err != nil {
		return nil, err
	}
	all, err := floatingips.ExtractFloatingIPs(pages)
	if err != nil {
		return nil, err
	}
	out := map[string]floatingips.FloatingIP{}
	for _, f := range all {
		out[f.FloatingIP] = f
	}
	return out, nil
}

// deleteRouter releases the floating IPs on the external network, removes
// the interface and deletes the router.
func (s *osStack) deleteRouter(t *testing.T, tp *osTopology) {
	ctx := context.Background()
	fips, err := s.floatingIPs(ctx)
	if err != nil {
		t.Logf("listing the world's floating IPs: %v", err)
	}
	for _, f := range fips {
		if err := floatingips.Delete(ctx, s.network, f.ID).ExtractErr(); err != nil && !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
			t.Logf("releasing floating IP %s: %v", f.FloatingIP, err)
		}
	}
	if _, err := routers.RemoveInterface(ctx, s.network, tp.router, routers.RemoveInterfaceOpts{SubnetID: tp.subnet}).Extract(); err != nil {
		t.Logf("removing subnet %s from router %s: %v", tp.subnet, tp.router, err)
	}
	if err := routers.Delete(ctx, s.network, tp.router).ExtractErr(); err != nil {
		t.Logf("deleting router %s: %v", tp.router, err)
	}
}

// deleteNetwork deletes the ports left on a network (VIP ports: the
// stack's Octavia worker does not), then the network.
func (s *osStack) deleteNetwork(t *testing.T, id string) {
	ctx := context.Background()
	pages, err := ports.List(s.network, ports.ListOpts{NetworkID: id}).AllPages(ctx)
	if err != nil {
		t.Logf("listing the ports of network %s: %v", id, err)
		return
	}
	left, _ := ports.ExtractPorts(pages)
	for _, p := range left {
		if err := ports.Delete(ctx, s.network, p.ID).ExtractErr(); err != nil && !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
			t.Logf("deleting port %s: %v", p.ID, err)
		}
	}
	if err := networks.Delete(ctx, s.network, id).ExtractErr(); err != nil {
		t.Logf("deleting network %s: %v", id, err)
	}
}

// neutronRecorder forwards to Neutron and records every mutating call on
// floating IPs ("POST floatingips", "PUT floatingips", "DELETE
// floatingips"), its Service resolved before the call is forwarded: by
// the floating IP's description (the load balancer's name, or "kept by
// multicloud-ccm after" it) or its port (the VIP port of a load balancer
// tagged for the Service). Other calls are forwarded unrecorded.
type neutronRecorder struct {
	upstream *url.URL
	proxy    *httputil.ReverseProxy
	url      string
	// lbClient reads Octavia (a VIP port's load balancer); prefix is the
	// load balancers' name prefix, "mccm_<clusterID>_".
	lbClient *gophercloud.ServiceClient
	prefix   string
	mu       sync.Mutex
	calls    []osCall
}

func (r *neutronRecorder) ServeHTTP(rw http.ResponseWriter, req *http.Request) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	if req.Method == http.MethodGet || req.Method == http.MethodHead {
		r.proxy.ServeHTTP(rw, req)
		return
	}
	i := slices.Index(parts, "floatingips")
	if i < 0 {
		// Any other write (none expected): recorded, naming no Service.
		collection := ""
		for _, p := range parts {
			if p != "v2.0" && !uuidRE.MatchString(p) {
				collection = p
			}
		}
		r.mu.Lock()
		r.calls = append(r.calls, osCall{label: req.Method + " " + collection})
		r.mu.Unlock()
		r.proxy.ServeHTTP(rw, req)
		return
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	var fip struct {
		Floating struct {
			PortID      string `json:"port_id"`
			Description string `json:"description"`
		} `json:"floatingip"`
	}
	if i+1 < len(parts) {
		// PUT and DELETE: the floating IP as it is.
		r.read(req.Context(), req.Header.Get("X-Auth-Token"), "floatingips/"+parts[i+1], &fip)
	} else {
		_ = json.Unmarshal(body, &fip)
	}
	c := osCall{label: req.Method + " floatingips", service: r.serviceOf(req.Context(), fip.Floating.Description, fip.Floating.PortID)}
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
	r.proxy.ServeHTTP(rw, req)
}

// serviceOf is the Service ("ns/name") of a floating IP described desc on
// port.
func (r *neutronRecorder) serviceOf(ctx context.Context, desc, port string) string {
	desc = strings.TrimPrefix(desc, "kept by multicloud-ccm after ")
	if rest, ok := strings.CutPrefix(desc, r.prefix); ok {
		if namespace, name, ok := strings.Cut(rest, "_"); ok {
			return namespace + "/" + name
		}
	}
	if port == "" {
		return ""
	}
	pages, err := loadbalancers.List(r.lbClient, loadbalancers.ListOpts{VipPortID: port}).AllPages(ctx)
	if err != nil {
		return ""
	}
	lbs, _ := loadbalancers.ExtractLoadBalancers(pages)
	for _, lb := range lbs {
		for _, t := range lb.Tags {
			if s, ok := strings.CutPrefix(t, "mccm-service="); ok {
				return s
			}
		}
	}
	return ""
}

func (r *neutronRecorder) read(ctx context.Context, token, path string, into any) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.upstream.JoinPath("v2.0", path).String(), nil)
	if err != nil {
		return
	}
	req.Header.Set("X-Auth-Token", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode == http.StatusOK {
		_ = json.NewDecoder(resp.Body).Decode(into)
	}
}

// Calls returns the calls recorded since the last Reset.
func (r *neutronRecorder) Calls() []osCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// Reset forgets the recorded calls.
func (r *neutronRecorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = nil
}

// newNeutronRecorder serves a recorder of the Neutron at endpoint.
func newNeutronRecorder(t *testing.T, endpoint string, lbClient *gophercloud.ServiceClient, clusterID string) *neutronRecorder {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	r := &neutronRecorder{upstream: u, proxy: httputil.NewSingleHostReverseProxy(u), lbClient: lbClient, prefix: fmt.Sprintf("mccm_%s_", clusterID)}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

// strangersKept checks that the floating IPs made by hand are as they
// were: the same address, port and description.
func (w *world) strangersKept() {
	w.t.Helper()
	if w.os == nil {
		return
	}
	now, err := w.os.floatingIPs(w.ctx)
	if err != nil {
		w.t.Error(err)
		return
	}
	for _, was := range w.os.tp.strangers {
		got, ok := now[was.FloatingIP]
		if !ok || got.ID != was.ID || got.PortID != was.PortID || got.Description != was.Description {
			w.t.Errorf("floating IP %s made by hand (port %q, %q): the switch left %+v (present %v)", was.FloatingIP, was.PortID, was.Description, got, ok)
		}
	}
}

// osFloatingIPs lists the floating IPs of the world's external network by
// address (none in a world without OpenStack).
func (w *world) osFloatingIPs() map[string]floatingips.FloatingIP {
	w.t.Helper()
	if w.os == nil {
		return nil
	}
	fips, err := w.os.floatingIPs(w.ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	return fips
}

// floatingIPsAsPlanned checks where the floating IPs the plan releases
// end: one it deletes is gone from Neutron, one it disassociates (kept, or
// not the Service's) is there on no port. before is the external network's
// floating IPs as the switch began: Neutron may hand a released address
// to the next floating IP the switch allocates (another Service's), so a
// deleted one is found by its ID, not by its address.
func (w *world) floatingIPsAsPlanned(rep *plan.Report, before map[string]floatingips.FloatingIP) {
	w.t.Helper()
	if w.os == nil {
		return
	}
	now, err := w.os.floatingIPs(w.ctx)
	if err != nil {
		w.t.Error(err)
		return
	}
	for _, s := range rep.Services {
		for _, in := range s.Changes {
			addr, _, _ := strings.Cut(strings.TrimPrefix(inBackend.ReplaceAllString(in.What, ""), "floating IP "), " ")
			got, ok := now[addr]
			switch in.Call {
			case "openstack: DELETE floating IP":
				if was, known := before[addr]; ok && (!known || got.ID == was.ID) {
					w.t.Errorf("%s/%s: the plan releases floating IP %s (%s); the switch left it: %+v", s.Namespace, s.Name, addr, in.What, got)
				}
			case "openstack: PUT floating IP":
				if strings.Contains(in.What, " disassociated") && (!ok || got.PortID != "") {
					w.t.Errorf("%s/%s: the plan disassociates floating IP %s (%s); the switch left %+v (present %v)", s.Namespace, s.Name, addr, in.What, got, ok)
				}
			}
		}
	}
}
