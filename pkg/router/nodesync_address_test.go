package router

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/process"
)

// nlbTargetType is the AWS backend's target-type annotation, which the
// AWS-like fake reads.
const nlbTargetType = "service.beta.kubernetes.io/aws-load-balancer-nlb-target-type"

// nlbCloud is an lbCloud that targets nodes as the AWS backend does: its
// own (aws://) nodes always, registered by instance ID unless the Service
// asks for ip targets; other nodes with an InternalIP by their address.
type nlbCloud struct{ *lbCloud }

var (
	_ backends.NodeTargeter    = nlbCloud{}
	_ backends.AddressTargeter = nlbCloud{}
)

func (c nlbCloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return c, true }

func (c nlbCloud) CanTarget(svc *corev1.Service, n *corev1.Node) bool {
	return isEC2(n) || (svc.Annotations[nlbTargetType] != "instance" && hasInternalIP(n))
}

func (c nlbCloud) TargetsByAddress(svc *corev1.Service, n *corev1.Node) bool {
	return !isEC2(n) || svc.Annotations[nlbTargetType] == "ip"
}

func isEC2(n *corev1.Node) bool { return strings.HasPrefix(n.Spec.ProviderID, "aws://") }

func hasInternalIP(n *corev1.Node) bool {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return true
		}
	}
	return false
}

// octaviaCloud is an lbCloud that, as the OpenStack backend, makes every
// node with an InternalIP a member, by that address.
type octaviaCloud struct{ *lbCloud }

var _ backends.AddressTargeter = octaviaCloud{}

func (c octaviaCloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return c, true }

func (c octaviaCloud) CanTarget(_ *corev1.Service, n *corev1.Node) bool { return hasInternalIP(n) }

func (c octaviaCloud) TargetsByAddress(*corev1.Service, *corev1.Node) bool { return true }

// nlbAndOctavia is a router over bare metal, the AWS-like "nlb" (owning
// aws:// nodes) and the OpenStack-like "octavia".
func nlbAndOctavia(t *testing.T) (*Router, nlbCloud, octaviaCloud) {
	t.Helper()
	nlb := nlbCloud{newLBCloud("nlb", "198.51.100.7")}
	oct := octaviaCloud{newLBCloud("octavia", "203.0.113.9")}
	r := metalRouter(t, "error",
		Backend{Name: "nlb", Type: "aws", Scheme: "aws", Cloud: nlb},
		Backend{Name: "octavia", Type: "openstack", Scheme: "openstack", Cloud: oct})
	return r, nlb, oct
}

// ensuredServices starts r's informers over nodes and svcs (each given an
// address in its status, as the service controller writes after a first
// ensure), ensures each Service's load balancer with the lister's stable
// nodes and waits until the lister shows them recorded.
func ensuredServices(t *testing.T, r *Router, nodes []*corev1.Node, svcs ...*corev1.Service) *fakeCluster {
	t.Helper()
	for _, s := range svcs {
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.99"}}
	}
	c := startCluster(t, r, append(objects(nodes), objects(svcs)...)...)
	c.run(t, func(context.Context) {})
	all, err := c.factory.Core().V1().Nodes().Lister().List(labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	var current []*corev1.Node // as upstream selects them
	for _, n := range all {
		if process.StableNode(n) {
			current = append(current, n)
		}
	}
	for _, s := range svcs {
		if _, err := r.EnsureLoadBalancer(context.Background(), cluster, s, current); err != nil {
			t.Fatal(err)
		}
	}
	lister := c.factory.Core().V1().Services().Lister()
	eventually(t, "every Service recorded in the lister", func() bool {
		for _, s := range svcs {
			if got, err := lister.Services(s.Namespace).Get(s.Name); err != nil || len(r.lb.EnsuredIn(got)) != 1 {
				return false
			}
		}
		return true
	})
	if got := r.staleQueued(); got != 0 {
		t.Fatalf("ensured with the lister's nodes, %d stale re-syncs queued, want 0", got)
	}
	return c
}

// setAddresses writes the node's addresses, as the cloud node controller's
// PatchNodeStatus does, and returns the node as written.
func (c *fakeCluster) setAddresses(t *testing.T, n *corev1.Node, addrs ...corev1.NodeAddress) *corev1.Node {
	t.Helper()
	n = n.DeepCopy()
	n.Status.Addresses = addrs
	n, err := c.client.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func internalIP(ip string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip}
}

func hostname(h string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: corev1.NodeHostName, Address: h}
}

func (r *Router) addressQueued() int64 { return r.st.Resync.Load().AddressQueued.Load() }

// TestNodeAddressesRetargetOnlyByAddress is the churn loop at unit size
// for backends that target nodes (docs/scale.md, "The churn loop"): every
// node a churn registers is one address change (none -> its addresses).
// The AWS-like backend's instance targets are registered by instance ID,
// so its instance-targeted Services are not re-targeted (before: every one
// of them was, 1,004 re-targets and 9,038 AWS reads for a 10-node churn of
// 100 nodes with 1,000 Services); its ip-targeted Service and every
// Service of the OpenStack-like backend (members by InternalIP) are, once.
// A change of a Hostname entry or of the addresses' order re-targets
// nothing (before: every Service that can target the node).
func TestNodeAddressesRetargetOnlyByAddress(t *testing.T) {
	r, nlb, oct := nlbAndOctavia(t)
	ec2 := newNode("ec2-1", withProviderID("aws:///eu-west-1a/i-1"))
	other := newNode("ec2-2", withProviderID("aws:///eu-west-1a/i-2"), withInternalIP("10.0.0.2"))
	instance := []*corev1.Service{newService("nlb-a", withLBBackend("nlb")), newService("nlb-b", withLBBackend("nlb")),
		newService("nlb-instance", withLBBackend("nlb"), testutil.WithAnnotation(nlbTargetType, "instance"))}
	byAddress := []*corev1.Service{newService("nlb-ip", withLBBackend("nlb"), testutil.WithAnnotation(nlbTargetType, "ip")),
		newService("os-a", withLBBackend("octavia")), newService("os-b", withLBBackend("octavia"))}
	c := ensuredServices(t, r, []*corev1.Node{ec2, other}, append(slicesOf(instance), byAddress...)...)
	updates := func(svc *corev1.Service) int {
		if strings.HasPrefix(svc.Name, "os-") {
			return oct.updatesOf(svc)
		}
		return nlb.updatesOf(svc)
	}
	updated := func(n int) func() bool {
		return func() bool {
			for _, s := range byAddress {
				if updates(s) < n {
					return false
				}
			}
			return true
		}
	}
	defer func() {
		if t.Failed() {
			for _, s := range append(slicesOf(instance), byAddress...) {
				t.Logf("%s: %d updates", s.Name, updates(s))
			}
			t.Logf("queued after address changes: %d", r.addressQueued())
		}
	}()

	// The node controller's second write at a node's initialisation.
	ec2 = c.setAddresses(t, ec2, internalIP("10.0.0.1"), hostname("ip-10-0-0-1"))
	eventually(t, "each Service reaching ec2-1 by address re-targeted once", updated(1))
	if got := oct.targetsOf(byAddress[1]); got != "ec2-1=10.0.0.1,ec2-2=10.0.0.2" {
		t.Errorf("os-a's members %q, want ec2-1's address among them", got)
	}
	// Neither a Hostname entry nor the order is an address a load
	// balancer targets.
	ec2 = c.setAddresses(t, ec2, internalIP("10.0.0.1"), hostname("ec2-1.example.internal"))
	c.setAddresses(t, ec2, hostname("ec2-1.example.internal"), internalIP("10.0.0.1"))
	// A real change, after them: once it is seen, so were they.
	c.setAddresses(t, other, internalIP("10.0.0.22"))
	eventually(t, "each Service reaching ec2-2 by address re-targeted", updated(2))
	if got := r.addressQueued(); got != 6 {
		t.Errorf("%d Services queued after the address changes, want 6 (3 Services reaching a node by address, 2 real changes)", got)
	}
	for _, s := range instance {
		if got := updates(s); got != 0 {
			t.Errorf("instance-targeted %s re-targeted %d times after address changes, want 0", s.Name, got)
		}
	}
	for _, s := range byAddress {
		if got := updates(s); got != 2 {
			t.Errorf("%s re-targeted %d times, want 2 (the two address changes)", s.Name, got)
		}
	}
	if got := oct.targetsOf(byAddress[2]); got != "ec2-1=10.0.0.1,ec2-2=10.0.0.22" {
		t.Errorf("os-b's members %q, want ec2-2's new address", got)
	}
}

// slicesOf copies svcs, so appending to it leaves the original alone.
func slicesOf(svcs []*corev1.Service) []*corev1.Service {
	return append([]*corev1.Service(nil), svcs...)
}

// initialised returns n as the cloud node controller leaves it: the
// backend label and the instance labels written, the uninitialized taint
// removed, the providerID set if it had none.
func initialised(n *corev1.Node, backend, providerID string, addrs ...corev1.NodeAddress) *corev1.Node {
	n = n.DeepCopy()
	n.Labels[string(annotation.NodeBackend)] = backend
	n.Labels[corev1.LabelInstanceTypeStable] = "m5.large"
	n.Labels[corev1.LabelTopologyZone] = "zone-a"
	n.Spec.Taints = nil
	if n.Spec.ProviderID == "" {
		n.Spec.ProviderID = providerID
	}
	n.Status.Addresses = addrs
	return n
}

// TestStaleCheckComparesWhatTheBackendUses: after an EnsureLoadBalancer the
// router compares what the backend uses of the nodes it was handed with
// the lister's (requeueIfStale). A node initialised in between (labels and
// taint written, a providerID the backend does not use, a Hostname entry,
// the addresses of an instance target) re-syncs nothing; a node added,
// removed or excluded does, and so does an address changed that the
// backend targets (before, the check compared node names only: that load
// balancer kept the old address until the next node-set change).
func TestStaleCheckComparesWhatTheBackendUses(t *testing.T) {
	pre := newNode("new-1", withProviderID("aws:///eu-west-1a/i-1"), uninitialized)
	// An OpenStack node, registered by a kubelet that set its InternalIP.
	preOS := newNode("os-1", uninitialized, withInternalIP("10.1.0.1"), func(n *corev1.Node) {
		n.Status.Addresses = append(n.Status.Addresses, hostname("os-1"))
	})
	old := newNode("ec2-2", withProviderID("aws:///eu-west-1a/i-2"), withInternalIP("10.0.0.2"))
	lister := []*corev1.Node{
		initialised(pre, "nlb", "", internalIP("10.0.0.1"), hostname("ip-10-0-0-1")),
		initialised(preOS, "octavia", "openstack:///7a1c", hostname("os-1.novalocal"), internalIP("10.1.0.1")),
		newNode("ec2-2", withProviderID("aws:///eu-west-1a/i-2"), withInternalIP("10.0.0.22")),
	}
	excluded := lister[2].DeepCopy()
	excluded.Labels[corev1.LabelNodeExcludeBalancers] = "true"
	nlbA := func() *corev1.Service { return newService("nlb-a", withLBBackend("nlb")) }
	nlbIP := func() *corev1.Service {
		return newService("nlb-ip", withLBBackend("nlb"), testutil.WithAnnotation(nlbTargetType, "ip"))
	}
	osA := func() *corev1.Service { return newService("os-a", withLBBackend("octavia")) }
	cases := []struct {
		name   string
		svc    func() *corev1.Service
		handed []*corev1.Node
		lister []*corev1.Node
		want   int64
	}{
		{"instance targets: initialisations and an address", nlbA, []*corev1.Node{pre, preOS, old}, lister, 0},
		{"members: an initialisation with the same address", osA, []*corev1.Node{lister[0], preOS, lister[2]}, lister, 0},
		{"members: an address changed", osA, []*corev1.Node{lister[0], preOS, old}, lister, 1},
		{"ip targets: an address changed", nlbIP, []*corev1.Node{lister[0], lister[1], old}, lister, 1},
		{"a node added", nlbA, lister[:2], lister, 1},
		{"a node removed", nlbA, lister, lister[:2], 1},
		{"a node excluded", nlbA, lister, []*corev1.Node{lister[0], lister[1], excluded}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, _, _ := nlbAndOctavia(t)
			svc := tc.svc()
			ensuredServices(t, r, tc.lister, svc)
			if _, err := r.EnsureLoadBalancer(context.Background(), cluster, svc, tc.handed); err != nil {
				t.Fatal(err)
			}
			if got := r.staleQueued(); got != tc.want {
				t.Errorf("stale re-syncs queued = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestStaleAddressIsRetargeted: an EnsureLoadBalancer handed a node with
// its old address (listed before the address changed, run after the
// address re-sync had updated the load balancer) is followed by an update
// with the current address, for a backend that reaches the node by it.
func TestStaleAddressIsRetargeted(t *testing.T) {
	r, _, oct := nlbAndOctavia(t)
	svc := newService("db", withLBBackend("octavia"))
	current := newNode("os-1", withProviderID("openstack:///7a1c"), withInternalIP("10.1.0.11"))
	ensuredServices(t, r, []*corev1.Node{current}, svc)
	stale := newNode("os-1", withProviderID("openstack:///7a1c"), withInternalIP("10.1.0.1"))
	if _, err := r.EnsureLoadBalancer(context.Background(), cluster, svc, []*corev1.Node{stale}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the member at the current address", func() bool { return oct.targetsOf(svc) == "os-1=10.1.0.11" })
	if got := r.staleQueued(); got != 1 {
		t.Errorf("stale re-syncs queued = %d, want 1", got)
	}
}

// TestAddressChurnIsOneRetargetPerBatch: a churn registers many nodes
// within a second, each one address change (none -> its addresses). The
// Services reaching them by address are re-targeted once for the whole
// burst, with every new member, not once per node (before: one update per
// address change a worker took, up to one per node and Service).
func TestAddressChurnIsOneRetargetPerBatch(t *testing.T) {
	// A quiet period long enough that a loaded machine delivering the
	// burst's node events slowly still sees one burst.
	quiet, maxWait := process.AddressBatchQuiet, process.AddressBatchMax
	process.AddressBatchQuiet, process.AddressBatchMax = 3*time.Second, time.Minute
	t.Cleanup(func() { process.AddressBatchQuiet, process.AddressBatchMax = quiet, maxWait })
	r, _, oct := nlbAndOctavia(t)
	var nodes []*corev1.Node
	for i := range 10 {
		nodes = append(nodes, newNode(fmt.Sprintf("os-%d", i), withProviderID(fmt.Sprintf("openstack:///vm-%d", i))))
	}
	svcs := []*corev1.Service{newService("os-a", withLBBackend("octavia")), newService("os-b", withLBBackend("octavia")), newService("os-c", withLBBackend("octavia"))}
	c := ensuredServices(t, r, nodes, svcs...)
	updated := func(n int) func() bool {
		return func() bool {
			for _, s := range svcs {
				if oct.updatesOf(s) < n {
					return false
				}
			}
			return true
		}
	}
	defer func() {
		if t.Failed() {
			for _, s := range svcs {
				t.Logf("%s: %d updates, members %s", s.Name, oct.updatesOf(s), oct.targetsOf(s))
			}
		}
	}()
	for i, n := range nodes {
		nodes[i] = c.setAddresses(t, n, internalIP(fmt.Sprintf("10.0.1.%d", i+1)))
	}
	eventually(t, "each Service re-targeted after the burst", updated(1))
	// A change after the batch: once it is seen, the burst's batch was
	// flushed and taken.
	c.setAddresses(t, nodes[0], internalIP("10.0.1.100"))
	eventually(t, "each Service re-targeted after the later change", updated(2))
	for _, s := range svcs {
		if got := oct.updatesOf(s); got != 2 {
			t.Errorf("%s re-targeted %d times, want 2 (one for the burst of 10 nodes, one for the later change)", s.Name, got)
		}
	}
	want := "os-0=10.0.1.100"
	for i := 1; i < 10; i++ {
		want += fmt.Sprintf(",os-%d=10.0.1.%d", i, i+1)
	}
	if got := oct.targetsOf(svcs[0]); got != want {
		t.Errorf("os-a's members %q, want %q", got, want)
	}
}
