package baremetal

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/multicloud-ccm/multicloud-ccm/internal/backendtest"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// conformanceMachines is how many inventory entries a fixture has; each
// clause takes a few.
const conformanceMachines = 12

// conformanceSection is a backend with an inventory (machines cf-0 ...,
// InternalIP 10.20.0.1 ...) and a dual-stack pool.
func conformanceSection() string {
	var b strings.Builder
	b.WriteString("inventory:\n")
	for i := range conformanceMachines {
		fmt.Fprintf(&b, "- {name: cf-%d, zone: rack-a, region: dc-1, instanceType: r650, labels: {example.com/tier: gold}, addresses: [{type: InternalIP, address: 10.20.0.%d}, {type: Hostname, address: cf-%d}]}\n", i, i+1, i)
	}
	b.WriteString("addressPools: [{name: p, addresses: [192.0.2.0/24, \"2001:db8::/120\"]}]\n")
	return b.String()
}

// TestConformance runs the backend contract against the bare-metal backend.
// Its "cloud" is its configuration: the inventory for instances, the
// allocator for load balancers.
func TestConformance(t *testing.T) {
	backendtest.Run(t, newConformanceFixture)
}

func newConformanceFixture(t *testing.T) *backendtest.Fixture {
	c := newTestCloud(t, conformanceSection())
	// The allocator follows Service statuses through an informer, as in
	// the CCM; the suite's Services are not in the API, so nothing is
	// taken but the strangers the ownership clause creates there.
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	c.SetInformers(factory)
	factory.Start(t.Context().Done())
	t.Cleanup(factory.Shutdown)
	f := &conformanceFixture{cloud: c, client: client}
	return &backendtest.Fixture{
		Cloud:  c,
		Settle: time.Second,
		Type:   Type,
		Instances: &backendtest.InstanceHooks{
			Running: f.running,
			Gone:    f.gone,
			// Unreadable, PowerOff/PowerOn and Outage are nil: the
			// inventory is configuration, always loaded and always
			// readable, with no power state, and there is no cloud whose
			// outage could make an answer uncertain.
			Absent: func(*testing.T) string { return ProviderID("never-listed") },
			// Foreign is nil: baremetal://<name> names no site, region or
			// zone. Two bare-metal backends are told apart by the Node's
			// multicloud-ccm.io/backend label, which the router checks.
			Malformed: []string{
				"baremetal:///cf-0",     // an empty host and a path
				"baremetal://",          // no name
				"baremetal://CF-0",      // not a Node name
				"baremetal://cf-0/x",    // a path
				"baremetal://cf_0",      // not a DNS-1123 subdomain
				"baremetal://cf-0:6443", // a port
			},
			StrongMatch: f.strongMatch,
			WeakMatch:   f.weakMatch,
		},
		LoadBalancers: &backendtest.LoadBalancerHooks{
			Service: f.service,
			Nodes:   func(t *testing.T) []*corev1.Node { return []*corev1.Node{f.running(t)} },
			// Mutations counts the addresses the allocator takes and frees.
			Mutations: f.mutations,
			// FailMutationsAfter is nil: an assignment is one step under one
			// lock (all its addresses or none), and a crash loses only
			// memory, which the next start rebuilds from the Service
			// statuses (TestServiceControllerRestart).
			Parts:     f.parts,
			Strangers: f.strangers,
			Variants:  f.variants,
		},
	}
}

type conformanceFixture struct {
	cloud    *Cloud
	client   *fake.Clientset
	machines int
	services int
}

// running returns the Node of an inventory machine not handed out yet, as
// the cloud-node controller leaves it once initialised.
func (f *conformanceFixture) running(t *testing.T) *corev1.Node {
	t.Helper()
	if f.machines == conformanceMachines {
		t.Fatal("the fixture's inventory is used up; raise conformanceMachines")
	}
	name := fmt.Sprintf("cf-%d", f.machines)
	f.machines++
	e := f.cloud.instances.inventory[name]
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{
			corev1.LabelTopologyZone:       e.Zone,
			corev1.LabelTopologyRegion:     e.Region,
			corev1.LabelInstanceTypeStable: e.InstanceType,
			"example.com/tier":             "gold",
			string(annotation.NodeBackend): "metal",
		}},
		Spec:   corev1.NodeSpec{ProviderID: ProviderID(name)},
		Status: corev1.NodeStatus{Addresses: e.Addresses},
	}
}

// gone removes the node's machine from the inventory. A machine is gone for
// this backend only when the operator removes it from the config and
// restarts the CCM (docs/baremetal.md); deleting the entry from the running
// backend is the state that restart leaves.
func (f *conformanceFixture) gone(t *testing.T, node *corev1.Node) {
	t.Helper()
	name, err := parseProviderID(node.Spec.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	delete(f.cloud.instances.inventory, name)
}

// strongMatch is a node with no providerID whose name is an inventory
// entry's: the only claim this backend makes.
func (f *conformanceFixture) strongMatch(t *testing.T) *corev1.Node {
	n := f.running(t)
	n.Spec.ProviderID = ""
	n.Labels = nil
	return n
}

// weakMatch is a node with no providerID whose name is in no inventory entry
// but whose address and hostname are an entry's: an address is not enough.
func (f *conformanceFixture) weakMatch(t *testing.T) *corev1.Node {
	n := f.running(t)
	n.Name = "not-" + n.Name
	n.Spec.ProviderID = ""
	n.Labels = nil
	return n
}

// service is a new dual-stack Service, so one load balancer has two parts.
// Its sharing key is its own name: no other suite Service shares with it,
// a stranger may (see strangers).
func (f *conformanceFixture) service(*testing.T) *corev1.Service {
	f.services++
	name := fmt.Sprintf("conformance-%d", f.services)
	return newService(name, withFamilies(corev1.IPFamilyPolicyRequireDualStack, corev1.IPv4Protocol, corev1.IPv6Protocol), withShared(name))
}

func (f *conformanceFixture) mutations() int {
	f.cloud.lb.mu.Lock()
	defer f.cloud.lb.mu.Unlock()
	return int(f.cloud.lb.alloc.changes) //nolint:gosec // G115: a test's count.
}

// parts counts the addresses the allocator holds for the Service; its load
// balancer exists while it holds any.
func (f *conformanceFixture) parts(_ *testing.T, svc *corev1.Service) (loadBalancers, parts int) {
	f.cloud.lb.mu.Lock()
	defer f.cloud.lb.mu.Unlock()
	h := f.cloud.lb.alloc.holdingOf(serviceKey(svc))
	if h == nil {
		return 0, 0
	}
	n := 0
	for _, l := range f.cloud.lb.alloc.leases {
		if l.holders[h.name] != nil {
			n++
		}
	}
	return 1, n
}

// stranger is a Service another party made, and the pool addresses it
// holds or asks for.
type stranger struct {
	svc *corev1.Service
	// status is what its status shows (nil: nothing yet).
	status []string
	// ips are the pool addresses it holds or requests; shared says the
	// suite's Service holds them too.
	ips    []string
	shared bool
}

// strangers puts into the API, beside the Service's addresses, Services
// that hold or request pool addresses the backend did not assign: one
// sharing the Service's IPv4 address through its allow-shared-ip key (on
// another port), one of MetalLB's class whose status shows addresses,
// one requesting an address with metallb.io/loadBalancerIPs, one with
// kube-vip.io/loadbalancerIPs, and one of another backend requesting one
// with multicloud-ccm.io/load-balancer-ips. Once the allocator has seen
// them all, it returns a fingerprint: each stranger as the API shows it,
// and for each of their addresses who holds and who reserves it (the
// suite's Service left out where it shares, marked where it does not).
func (f *conformanceFixture) strangers(t *testing.T, svc *corev1.Service) func(t *testing.T) string {
	t.Helper()
	own, _, err := f.cloud.lb.GetLoadBalancer(t.Context(), "kubernetes", svc)
	if err != nil || own == nil || len(own.Ingress) == 0 {
		t.Fatalf("the Service has no address to put strangers beside: %v, %v", own, err)
	}
	ownV4 := own.Ingress[0].IP
	metallbClass := func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr.To("metallb.io/metallb") }
	all := []stranger{
		{svc: newService("stranger-shared", withShared(svc.Annotations[string(annotation.AllowSharedIP)]), withPorts(9999)),
			status: []string{ownV4}, ips: []string{ownV4}, shared: true},
		{svc: newService("stranger-metallb-status", metallbClass), status: []string{"192.0.2.200", "2001:db8::c8"}, ips: []string{"192.0.2.200", "2001:db8::c8"}},
		{svc: newService("stranger-metallb-request", metallbClass, withAnnotation(metalLBLoadBalancerIPs, "192.0.2.201")), ips: []string{"192.0.2.201"}},
		{svc: newService("stranger-kube-vip", withAnnotation(kubeVIPLoadBalancerIPs, "192.0.2.202,2001:db8::ca"), func(s *corev1.Service) {
			s.Spec.LoadBalancerClass = ptr.To("kube-vip.io/kube-vip-class")
		}), ips: []string{"192.0.2.202", "2001:db8::ca"}},
		{svc: newService("stranger-other-backend", withIPs("192.0.2.203"), withAnnotation(string(annotation.LoadBalancerBackend), "elsewhere")),
			ips: []string{"192.0.2.203"}},
	}
	for _, s := range all {
		f.createStranger(t, s)
	}
	fingerprint := func(t *testing.T) string { return f.fingerprint(t, svc, all) }
	f.waitForStrangers(t, all)
	return fingerprint
}

// createStranger creates the stranger's Service and writes its status.
func (f *conformanceFixture) createStranger(t *testing.T, s stranger) {
	t.Helper()
	svcs := f.client.CoreV1().Services(s.svc.Namespace)
	created, err := svcs.Create(t.Context(), s.svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.status) == 0 {
		return
	}
	for _, ip := range s.status {
		created.Status.LoadBalancer.Ingress = append(created.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
	}
	if _, err := svcs.UpdateStatus(t.Context(), created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitForStrangers waits until the allocator holds or reserves every
// stranger's addresses for it, as the informer reports them.
func (f *conformanceFixture) waitForStrangers(t *testing.T, all []stranger) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		f.cloud.lb.mu.Lock()
		defer f.cloud.lb.mu.Unlock()
		for _, s := range all {
			for _, ip := range s.ips {
				a := netip.MustParseAddr(ip)
				l, name := f.cloud.lb.alloc.leases[a], serviceKey(s.svc)
				if (l == nil || l.holders[name] == nil) && !f.cloud.lb.alloc.reserved[a][name] {
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the allocator never saw the strangers: %v", err)
	}
}

// fingerprint is each stranger as the API shows it (annotations, class,
// status) and, for each of its addresses, who holds and reserves it.
func (f *conformanceFixture) fingerprint(t *testing.T, svc *corev1.Service, all []stranger) string {
	t.Helper()
	var b strings.Builder
	for _, s := range all {
		got, err := f.client.CoreV1().Services(s.svc.Namespace).Get(t.Context(), s.svc.Name, metav1.GetOptions{})
		if err != nil {
			fmt.Fprintf(&b, "%s: %v; ", s.svc.Name, err)
			continue
		}
		fmt.Fprintf(&b, "%s: annotations %v class %v status %q; ", got.Name, got.Annotations, ptr.Deref(got.Spec.LoadBalancerClass, ""), ingressIPs(&got.Status.LoadBalancer))
		for _, ip := range s.ips {
			fmt.Fprintf(&b, "%s %s; ", ip, f.holdersOf(netip.MustParseAddr(ip), serviceKey(svc), s.shared))
		}
	}
	return b.String()
}

// holdersOf says who holds and reserves ip; ours is the suite's Service,
// left out when it shares ip with the stranger, named otherwise.
func (f *conformanceFixture) holdersOf(ip netip.Addr, ours string, shared bool) string {
	f.cloud.lb.mu.Lock()
	defer f.cloud.lb.mu.Unlock()
	var held, reserved []string
	if l := f.cloud.lb.alloc.leases[ip]; l != nil {
		for _, name := range sortedHolders(l) {
			if name != ours || !shared {
				held = append(held, name)
			}
		}
	}
	for name := range f.cloud.lb.alloc.reserved[ip] {
		reserved = append(reserved, name)
	}
	slices.Sort(reserved)
	return fmt.Sprintf("held by %v, reserved by %v", held, reserved)
}

// variants are the edits a user makes that the backend honours: request
// addresses, drop the request (the Service keeps them), name the pool,
// change the sharing key, go single-stack, and back to dual-stack.
func (f *conformanceFixture) variants(_ *testing.T, svc *corev1.Service) []*corev1.Service {
	edit := func(from *corev1.Service, tweaks ...svcTweak) *corev1.Service {
		s := from.DeepCopy()
		for _, tw := range tweaks {
			tw(s)
		}
		return s
	}
	requested := edit(svc, withIPs("192.0.2.100,2001:db8::64"))
	unrequested := edit(requested, func(s *corev1.Service) { delete(s.Annotations, string(annotation.LoadBalancerIPs)) })
	pooled := edit(unrequested, withPool("p"))
	rekeyed := edit(pooled, withShared("another-key"))
	single := edit(rekeyed, withFamilies(corev1.IPFamilyPolicySingleStack, corev1.IPv4Protocol))
	dual := edit(single, withFamilies(corev1.IPFamilyPolicyRequireDualStack, corev1.IPv4Protocol, corev1.IPv6Protocol))
	return []*corev1.Service{requested, unrequested, pooled, rekeyed, single, dual}
}
