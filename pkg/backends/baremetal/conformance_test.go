package baremetal

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

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
	// the CCM; the suite's Services are not in the API, so nothing is taken.
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	c.SetInformers(factory)
	factory.Start(t.Context().Done())
	t.Cleanup(factory.Shutdown)
	f := &conformanceFixture{cloud: c}
	return &backendtest.Fixture{
		Cloud:  c,
		Settle: time.Second,
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
			Parts: f.parts,
		},
	}
}

type conformanceFixture struct {
	cloud    *Cloud
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
func (f *conformanceFixture) service(*testing.T) *corev1.Service {
	f.services++
	return newService(fmt.Sprintf("conformance-%d", f.services), withFamilies(corev1.IPFamilyPolicyRequireDualStack, corev1.IPv4Protocol, corev1.IPv6Protocol))
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
