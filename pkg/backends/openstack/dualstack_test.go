package openstack

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// withFamilies makes the Service ask for these IP families, in order.
func withFamilies(fams ...corev1.IPFamily) serviceTweak {
	return func(s *corev1.Service) {
		s.Spec.IPFamilies = fams
		policy := corev1.IPFamilyPolicySingleStack
		if len(fams) == 2 {
			policy = corev1.IPFamilyPolicyRequireDualStack
		}
		s.Spec.IPFamilyPolicy = &policy
	}
}

var (
	v4v6 = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	v6v4 = []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}
)

func TestServiceAddresses(t *testing.T) {
	lb := &loadbalancers.LoadBalancer{VipAddress: "10.0.0.5", AdditionalVips: []loadbalancers.AdditionalVip{{SubnetID: "s6", IPAddress: "fd00::5"}}}
	for _, tt := range []struct {
		name string
		svc  *corev1.Service
		addr string
		want []string
	}{
		{"single-stack: the address alone", newService("a"), "10.0.0.5", []string{"10.0.0.5"}},
		{"single-stack IPv4 on a dual load balancer", newService("a", withFamilies(corev1.IPv4Protocol)), "10.0.0.5", []string{"10.0.0.5"}},
		{"dual: both VIPs", newService("a", withFamilies(v4v6...)), "10.0.0.5", []string{"10.0.0.5", "fd00::5"}},
		{"dual, IPv6 first: in the Service's order", newService("a", withFamilies(v6v4...)), "10.0.0.5", []string{"fd00::5", "10.0.0.5"}},
		{"dual with a floating IP: it replaces the IPv4 VIP", newService("a", withFamilies(v4v6...)), "172.24.4.9", []string{"172.24.4.9", "fd00::5"}},
		{"no address yet: none", newService("a", withFamilies(v4v6...)), "", nil},
	} {
		if got := serviceAddresses(tt.svc, lb, tt.addr); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
	single := &loadbalancers.LoadBalancer{VipAddress: "10.0.0.5", AdditionalVips: []loadbalancers.AdditionalVip{{SubnetID: "s6"}}}
	if got := serviceAddresses(newService("a", withFamilies(v4v6...)), single, "10.0.0.5"); !slices.Equal(got, []string{"10.0.0.5"}) {
		t.Errorf("dual on an additional VIP without an address: %v, want the primary alone", got)
	}
}

func TestMemberAndRequestedAddresses(t *testing.T) {
	n := newNode("n", withInternalIP("fd00:1::7"), withInternalIP("10.1.0.7"))
	for _, tt := range []struct {
		svc  *corev1.Service
		want string
	}{
		{newService("single"), "fd00:1::7"},
		{newService("v4v6", withFamilies(v4v6...)), "10.1.0.7"},
		{newService("v6v4", withFamilies(v6v4...)), "fd00:1::7"},
	} {
		if got := memberAddress(tt.svc, n); got != tt.want {
			t.Errorf("%s: member at %s, want %s", tt.svc.Name, got, tt.want)
		}
	}
	if got := memberAddress(newService("v4v6", withFamilies(v4v6...)), newNode("v6only", withInternalIP("fd00::1"))); got != "" {
		t.Errorf("a node without an address of the primary family is a member at %q", got)
	}
	svc := newService("r", withAnnotation(annotation.LoadBalancerIPs, "fd00::10, 10.0.0.10"))
	if v4, v6 := requestedIPOf(svc, corev1.IPv4Protocol), requestedIPOf(svc, corev1.IPv6Protocol); v4 != "10.0.0.10" || v6 != "fd00::10" {
		t.Errorf("requested %q and %q, want 10.0.0.10 and fd00::10", v4, v6)
	}
	if got := requestedFloatingIP(svc); got != "fd00::10" {
		t.Errorf("single-stack: floating IP %q requested, want the first address (as before)", got)
	}
	withFamilies(v6v4...)(svc)
	if got := requestedFloatingIP(svc); got != "10.0.0.10" {
		t.Errorf("dual-stack: floating IP %q requested, want the IPv4 address", got)
	}
}

// dualNode is a Ready node with an IPv4 and an IPv6 InternalIP.
func dualNode(name, v4, v6 string) *corev1.Node {
	n := readyNode(name, v4, nil)
	n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: v6})
	return n
}

// memberAddrs lists a load balancer's members as sorted "address@subnet".
func memberAddrs(t *testing.T, c *Cloud, lbID string) string {
	t.Helper()
	sc, err := c.lb.clients(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	st, err := readState(context.Background(), sc.loadBalancer, lbID)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range st.pools {
		for _, m := range p.members {
			out = append(out, m.Address+"@"+m.SubnetID)
		}
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// ingressIPs is the status's addresses, in order.
func ingressIPs(st corev1.LoadBalancerStatus) []string {
	var out []string
	for _, in := range st.Ingress {
		out = append(out, in.IP)
	}
	return out
}

// statusIPs checks the status holds exactly these addresses, in order.
func statusIPs(want ...string) func(corev1.LoadBalancerStatus) error {
	return func(st corev1.LoadBalancerStatus) error {
		if got := ingressIPs(st); !slices.Equal(got, want) {
			return fmt.Errorf("status %v, want %v", got, want)
		}
		return nil
	}
}

// setFamilies changes a live Service's IP families, as the API server
// does when its ipFamilyPolicy changes.
func (e *svcEnv) setFamilies(t *testing.T, name string, fams ...corev1.IPFamily) {
	t.Helper()
	svc := e.service(t, name)
	withFamilies(fams...)(svc)
	if _, err := e.client.CoreV1().Services(svc.Namespace).Update(e.ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestServiceControllerDualStack drives the upstream service controller on
// the real Octavia, with the VIP subnets looked up in the real Neutron: a
// dual-stack Service gets one load balancer with an additional VIP of its
// second family (primary VIP of spec.ipFamilies[0], whichever family the
// configured subnet has), both addresses in its status in the Service's
// order, members at the nodes' primary-family addresses; a VIP network
// without a subnet of the second family is a Warning event and a
// single-stack Service. Converged, a sync makes no write; single→dual and
// dual→single on a live Service are Warning events changing nothing; a
// Service sharing a dual-stack load balancer gets both its addresses;
// deleted, nothing is left.
func TestServiceControllerDualStack(t *testing.T) {
	t.Parallel()
	_, f := realNeutron(t)
	name := "mccm-test-dual-" + randomID(t)
	dualNet, v4OnlyNet := f.network(name, false), f.network(name+"-v4only", false)
	sub4 := f.subnet(dualNet, name+"-v4", "10.0.0.0/24", gophercloud.IPv4)
	sub6 := f.subnet(dualNet, name+"-v6", "fd00::/64", gophercloud.IPv6)
	only4 := f.subnet(v4OnlyNet, name+"-only4", "10.9.0.0/24", gophercloud.IPv4)
	e := newSvcEnv(t, func(s *Settings) { s.Endpoints.Network = os.Getenv("NEUTRON_ENDPOINT") },
		dualNode("n1", "10.32.0.1", "fd00:32::1"), dualNode("n2", "10.32.0.2", "fd00:32::2"))
	const want = "TCP/80 conn=-1 t=50000/5000/50000/0 xff= pool=TCP:ROUND_ROBIN monitor=TCP:5/3/1/3 members=n1,n2"
	internalWith := func(ips string) serviceTweak {
		return func(s *corev1.Service) {
			s.Annotations[string(AnnotationInternal)] = "true"
			s.Annotations[string(annotation.LoadBalancerIPs)] = ips
		}
	}
	svcs := map[string]*corev1.Service{
		"dual4":  newService("dual4", withFamilies(v4v6...), withAnnotation(AnnotationVIPSubnetID, sub4), internalWith("10.0.0.10,fd00::10")),
		"dual6":  newService("dual6", withFamilies(v6v4...), withAnnotation(AnnotationVIPSubnetID, sub4), internalWith("10.0.0.11,fd00::11")),
		"nov6":   newService("nov6", withFamilies(v4v6...), withAnnotation(AnnotationVIPSubnetID, only4), internalWith("10.9.0.12,fd00::12")),
		"single": newService("single", withFamilies(corev1.IPv4Protocol), withAnnotation(AnnotationVIPSubnetID, sub4), internalWith("10.0.0.13")),
	}
	for _, svc := range svcs {
		t.Cleanup(func() { deleteConverged(t, e.cloud.lb, svc) })
		e.apply(t, svc)
	}
	lbs := map[string]*loadbalancers.LoadBalancer{}
	for name, check := range map[string]func(corev1.LoadBalancerStatus) error{
		"dual4": statusIPs("10.0.0.10", "fd00::10"), "dual6": statusIPs("fd00::11", "10.0.0.11"),
		"nov6": statusIPs("10.9.0.12"), "single": statusIPs("10.0.0.13"),
	} {
		lbs[name] = e.waitDetail(t, svcs[name], want, check)
	}
	for name, tt := range map[string]struct{ vipSubnet, additional, members string }{
		"dual4":  {sub4, sub6 + "=fd00::10", "10.32.0.1@" + sub4 + ",10.32.0.2@" + sub4},
		"dual6":  {sub6, sub4 + "=10.0.0.11", "fd00:32::1@" + sub6 + ",fd00:32::2@" + sub6},
		"nov6":   {only4, "", "10.32.0.1@" + only4 + ",10.32.0.2@" + only4},
		"single": {sub4, "", "10.32.0.1@" + sub4 + ",10.32.0.2@" + sub4},
	} {
		lb := lbs[name]
		var add []string
		for _, v := range lb.AdditionalVips {
			add = append(add, v.SubnetID+"="+v.IPAddress)
		}
		if lb.VipSubnetID != tt.vipSubnet || strings.Join(add, ",") != tt.additional {
			t.Errorf("%s: VIP subnet %s, additional VIPs %v; want %s and %q", name, lb.VipSubnetID, add, tt.vipSubnet, tt.additional)
		}
		if got := memberAddrs(t, e.cloud, lb.ID); got != tt.members {
			t.Errorf("%s: members %s, want %s", name, got, tt.members)
		}
	}
	waitWarning(t, e, "nov6", reasonSingleStack, "the VIP network "+v4OnlyNet+" has no IPv6 subnet", "served single-stack")
	for _, name := range []string{"dual4", "dual6", "single"} {
		for _, w := range e.warnings(t, name) {
			if strings.HasPrefix(w, reasonSingleStack) || strings.HasPrefix(w, reasonExtraVIP) {
				t.Errorf("%s: warning %q", name, w)
			}
		}
	}

	// Converged: a sync of each changes nothing.
	nodes := []*corev1.Node{dualNode("n1", "10.32.0.1", "fd00:32::1"), dualNode("n2", "10.32.0.2", "fd00:32::2")}
	before := len(e.octavia.Writes())
	for name := range svcs {
		st, calls := ensureConverged(t, e.cloud.lb, e.service(t, name), nodes)
		if calls != 1 || !slices.Equal(ingressIPs(*st), ingressIPs(e.service(t, name).Status.LoadBalancer)) {
			t.Errorf("%s: a converged sync took %d calls and returned %v", name, calls, ingressIPs(*st))
		}
	}
	if w := e.octavia.Writes()[before:]; len(w) != 0 {
		t.Errorf("converged syncs wrote %q", w)
	}

	// Families changed on live Services: events, nothing changed.
	e.setFamilies(t, "single", v4v6...)
	e.setFamilies(t, "dual4", corev1.IPv4Protocol)
	waitWarning(t, e, "single", reasonSingleStack, lbs["single"].ID, "cannot add", "delete and re-create")
	waitWarning(t, e, "dual4", reasonExtraVIP, lbs["dual4"].ID, "fd00::10", "delete and re-create")
	e.waitDetail(t, svcs["dual4"], want, statusIPs("10.0.0.10"))
	e.waitDetail(t, svcs["single"], want, statusIPs("10.0.0.13"))
	if w := e.octavia.Writes()[before:]; len(w) != 0 {
		t.Errorf("changed families wrote %q", w)
	}

	// A dual-stack Service sharing dual6's load balancer gets its addresses.
	sharer := portService("sharer", 8080, 30081, withFamilies(v4v6...), withAnnotation(AnnotationLoadBalancerID, lbs["dual6"].ID))
	t.Cleanup(func() { deleteConverged(t, e.cloud.lb, sharer) })
	e.apply(t, sharer)
	eventuallyOn(t, 120*time.Second, "the sharer on dual6's load balancer", func() error {
		if got, err := listenersOn(t, e.cloud, lbs["dual6"].ID); err != nil || got != "TCP/80,TCP/8080" {
			return fmt.Errorf("listeners %s (%w); warnings %q", got, err, e.warnings(t, "sharer"))
		}
		return statusIPs("10.0.0.11", "fd00::11")(e.service(t, "sharer").Status.LoadBalancer)
	})
	// It leaves (directly: the service controller's backoff on a shared
	// load balancer's delete steps takes minutes), dual6 keeps its port.
	deleteConverged(t, e.cloud.lb, e.service(t, "sharer"))
	if got, err := listenersOn(t, e.cloud, lbs["dual6"].ID); err != nil || got != "TCP/80" {
		t.Errorf("dual6's listeners after the sharer left: %s (%v), want TCP/80", got, err)
	}

	for name := range svcs {
		e.markDeleted(t, name)
	}
	eventuallyOn(t, 120*time.Second, "every load balancer deleted", func() error {
		for _, name := range slices.Sorted(maps.Keys(svcs)) {
			if s := e.service(t, name); len(s.Finalizers) != 0 {
				return fmt.Errorf("%s still has its finalizer", name)
			}
		}
		for name, lb := range lbs {
			sc, err := e.cloud.lb.clients(context.Background())
			if err != nil {
				return err
			}
			if got, err := e.cloud.lb.byID(context.Background(), sc, lb.ID); err != nil || got != nil && got.ProvisioningStatus != "DELETED" {
				return fmt.Errorf("%s: load balancer %s still there (%w)", name, lb.ID, err)
			}
		}
		return nil
	})
}

// apiCallsTo is apiCalls for one OpenStack service (load-balancer,
// network, ...).
func apiCallsTo(t testing.TB, c *Cloud, service string) (reads, writes float64) {
	t.Helper()
	return apiCallsMatching(t, map[string]string{"backend": c.name, "service": service})
}

// TestDualStackReads: on the real Octavia and Neutron, choosing a
// dual-stack Service's VIP subnets costs 2 Neutron reads (the configured
// subnet, the network's subnets), none again within the cache's minute;
// a converged dual-stack Ensure costs what a single-stack one does with
// Neutron configured: 4 Octavia reads (TestConvergedEnsureReads), 2
// Neutron reads (the floating-IP checks), no write.
func TestDualStackReads(t *testing.T) {
	t.Parallel()
	s, f := realNeutron(t)
	name := "mccm-test-dualreads-" + randomID(t)
	network := f.network(name, false)
	sub4 := f.subnet(network, name+"-v4", "10.0.0.0/24", gophercloud.IPv4)
	sub6 := f.subnet(network, name+"-v6", "fd00::/64", gophercloud.IPv6)
	c := newRealCloud(t, s, "t"+randomID(t))
	svc := newService("dualreads", withFamilies(v6v4...), withAnnotation(AnnotationVIPSubnetID, sub4))
	t.Cleanup(func() { deleteConverged(t, c.lb, svc) })
	ctx := context.Background()
	sc, err := c.lb.clients(ctx)
	if err != nil {
		t.Fatal(err)
	}
	o, err := parseOptions(svc, &s.LoadBalancer)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []float64{2, 0} {
		r0, _ := apiCallsTo(t, c, "network")
		primary, second, why, err := c.lb.dualStackSubnets(ctx, sc, svc, o)
		r1, _ := apiCallsTo(t, c, "network")
		if err != nil || primary != sub6 || second != sub4 || why != "" {
			t.Fatalf("subnets %s, %s (%q, %v); want %s then %s", primary, second, why, err, sub6, sub4)
		}
		if r1-r0 != want {
			t.Errorf("choice %d: %v Neutron reads, want %v", i+1, r1-r0, want)
		}
	}

	nodes := []*corev1.Node{dualNode("n1", "10.33.0.1", "fd00:33::1")}
	ensureConverged(t, c.lb, svc, nodes)
	lbR0, lbW0 := apiCallsTo(t, c, "load-balancer")
	nR0, nW0 := apiCallsTo(t, c, "network")
	if _, err := c.lb.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatal(err)
	}
	lbR1, lbW1 := apiCallsTo(t, c, "load-balancer")
	nR1, nW1 := apiCallsTo(t, c, "network")
	if lbR1-lbR0 != 4 || nR1-nR0 != 2 || lbW1 != lbW0 || nW1 != nW0 {
		t.Errorf("converged dual-stack Ensure: %v Octavia and %v Neutron reads, %v writes; want 4, 2 and 0", lbR1-lbR0, nR1-nR0, lbW1-lbW0+nW1-nW0)
	}
}

// TestServiceControllerDualStackFloatingIP drives the upstream service
// controller on the real Octavia with Neutron on the fake (floating IPs on
// the noop driver's VIP ports): a dual-stack Service that is not internal
// gets its two VIPs, IPv6 primary from an IPv4 configured subnet, and a
// floating IP on the VIP port, members at the nodes' IPv6 addresses. The
// noop network driver reports the primary VIP as 198.51.100.1 whatever its
// subnet and no address for an additional VIP it was not given one for, so
// the status holds the floating IP alone (TestServiceAddresses has the
// floating IP beside an IPv6 VIP).
func TestServiceControllerDualStackFloatingIP(t *testing.T) {
	t.Parallel()
	f := NewFakeOpenStack(t)
	f.AnyToken = true
	const (
		vipNet = "d5000000-0000-4000-8000-000000000001"
		sub4   = "d5000000-0000-4000-8000-000000000004"
		sub6   = "d5000000-0000-4000-8000-000000000006"
	)
	f.AddSubnet(FakeSubnet{ID: sub4, Name: "vip-v4", NetworkID: vipNet, Prefix: "10.40.0."})
	f.AddSubnet(FakeSubnet{ID: sub6, Name: "vip-v6", NetworkID: vipNet, Prefix: "fd00:40::", IPVersion: 6})
	e := newSvcEnv(t, func(s *Settings) {
		s.Endpoints.Network = f.NetworkURL()
		s.LoadBalancer.FloatingNetworkID = floatingNet
		s.LoadBalancer.VIPSubnetID = sub4
	}, dualNode("n1", "10.34.0.1", "fd00:34::1"))
	svc := newService("dualfip", withFamilies(v6v4...))
	t.Cleanup(func() { deleteConverged(t, e.cloud.lb, svc) })
	e.apply(t, svc)
	lb := e.waitDetail(t, svc, "TCP/80 conn=-1 t=50000/5000/50000/0 xff= pool=TCP:ROUND_ROBIN monitor=TCP:5/3/1/3 members=n1", func(st corev1.LoadBalancerStatus) error {
		if len(st.Ingress) != 1 || !strings.HasPrefix(st.Ingress[0].IP, "172.24.4.") {
			return fmt.Errorf("status %v: want the floating IP alone", ingressIPs(st))
		}
		return nil
	})
	if len(lb.AdditionalVips) != 1 || lb.VipSubnetID != sub6 || lb.AdditionalVips[0].SubnetID != sub4 {
		t.Errorf("VIP subnet %s, additional VIPs %+v; want %s and one on %s", lb.VipSubnetID, lb.AdditionalVips, sub6, sub4)
	}
	addr := e.service(t, "dualfip").Status.LoadBalancer.Ingress[0].IP
	if p := f.FloatingIPs()[addr]; p.PortID != lb.VipPortID {
		t.Errorf("floating IP %s on port %s, want the VIP port %s", addr, p.PortID, lb.VipPortID)
	}
	if got := memberAddrs(t, e.cloud, lb.ID); got != "fd00:34::1@"+sub6 {
		t.Errorf("members %s, want the node's IPv6 address on the primary subnet", got)
	}
}

// TestFamiliesKeyPerUID: a Service re-created under its name is another
// Service to the IP-family warnings, so it is told again.
func TestFamiliesKeyPerUID(t *testing.T) {
	old, renewed := newService("web"), newService("web")
	old.UID, renewed.UID = "uid-1", "uid-2"
	if familiesKey(old) == familiesKey(renewed) {
		t.Errorf("familiesKey(%s) is the same for both UIDs", familiesKey(old))
	}
	var e events
	e.warnOnce(context.Background(), old, familiesKey(old), reasonSingleStack, "no IPv6 subnet")
	if _, told := e.told.Load(familiesKey(renewed)); told {
		t.Error("the re-created Service counts as told")
	}
}
