package vsphere

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multicloud-ccm/multicloud-ccm/internal/backendtest"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// TestConformance runs the backend contract against govmomi's simulator,
// one simulator per clause. vSphere has no load balancers.
func TestConformance(t *testing.T) {
	backendtest.Run(t, newConformanceFixture)
}

// conformance is one clause's simulator and the VMs its hooks created,
// by providerID.
type conformance struct {
	s     *sim
	cloud *Cloud
	base  vm

	mu  sync.Mutex
	n   int
	vms map[string]vm
}

func newConformanceFixture(t *testing.T) *backendtest.Fixture {
	// Each clause (a subtest of backendtest.Run, which calls this first)
	// has a simulator and a backend of its own; the clauses run side by
	// side, most of their time waiting (the outage clause on its request
	// timeouts, the others on the inventory's refresh), 80 s one after
	// the other under -race.
	t.Parallel()
	s := startSim(t)
	c := &conformance{s: s, base: s.vms(t, "DC0")[0], vms: map[string]vm{}}
	c.cloud = newCloud(t, []*sim{s}, fastRefresh)
	return &backendtest.Fixture{
		Cloud:  c.cloud,
		Settle: 5 * time.Second,
		Type:   Type,
		Instances: &backendtest.InstanceHooks{
			Running:    func(t *testing.T) *corev1.Node { return c.node(c.running(t)) },
			Gone:       func(t *testing.T, n *corev1.Node) { s.destroy(t, c.vm(t, n)) },
			Unreadable: func(t *testing.T, n *corev1.Node) { s.makeUnreadable(t, c.vm(t, n)) },
			PowerOff:   func(t *testing.T, n *corev1.Node) { s.powerOff(t, c.vm(t, n)) },
			PowerOn:    func(t *testing.T, n *corev1.Node) { s.powerOn(t, c.vm(t, n)) },
			Outage: func(*testing.T) func() {
				s.down.Store(true)
				return func() { s.down.Store(false) }
			},
			// vCenter's answers to a busy client and to a refused one,
			// to every SOAP call.
			Throttle: func(t *testing.T) func() {
				rule := s.throttleNext(t, 1<<30, &throttleRule{Status: http.StatusTooManyRequests, RetryAfter: "0"})
				return func() { s.throttle.CompareAndSwap(rule, nil) }
			},
			Refuse: func(t *testing.T) func() {
				rule := s.throttleNext(t, 1<<30, &throttleRule{Status: http.StatusUnauthorized})
				return func() { s.throttle.CompareAndSwap(rule, nil) }
			},
			Absent: func(t *testing.T) string { return ProviderIDPrefix + randomUUID(t) },
			// vsphere://<bios-uuid> names no vCenter or datacenter; nodes
			// record theirs in labels.
			ForeignNodes: c.foreignNodes,
			Malformed: []string{
				"vsphere://vm-17",
				"vsphere:///4237c7d5-3b7e-4c26-9a0e-8f3c1a2b3c4d",
				"vsphere://4237c7d5-3b7e-4c26-9a0e-8f3c1a2b3c4d/",
				"vsphere://4237c7d5-3b7e-4c26-9a0e-8f3c1a2b3c4",
				"vsphere://",
			},
			StrongMatch: c.strongMatch,
			WeakMatch:   c.weakMatch,
		},
	}
}

// running clones a new powered-on VM with a guest address and DNS name, as
// VMware Tools reports them.
func (c *conformance) running(t *testing.T) (vm, string) {
	c.mu.Lock()
	c.n++
	i := c.n
	c.mu.Unlock()
	name := fmt.Sprintf("conformance-vm-%d", i)
	v := cloneVM(t, c.s, c.base, name)
	if st, err := v.obj.PowerState(context.Background()); err != nil || st != types.VirtualMachinePowerStatePoweredOn {
		c.s.powerOn(t, v) // the simulator's clone ignores PowerOn
	}
	ip := fmt.Sprintf("10.9.0.%d", i)
	c.s.setGuest(t, v, ip, name+".example.com")
	c.mu.Lock()
	c.vms[ProviderIDPrefix+v.uuid] = v
	c.mu.Unlock()
	return v, ip
}

// node is the VM's Node as the cloud-node controller leaves it: providerID,
// addresses, the labels InstanceMetadata adds and the router's backend
// label.
func (c *conformance) node(v vm, ip string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:              v.name,
			CreationTimestamp: metav1.Now(),
			Labels: map[string]string{
				string(annotation.NodeBackend): "onprem",
				LabelServer:                    c.cloud.vcenters[0].record,
				LabelDatacenter:                "DC0",
			},
		},
		Spec: corev1.NodeSpec{ProviderID: ProviderIDPrefix + v.uuid},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: ip},
			{Type: corev1.NodeHostName, Address: v.name + ".example.com"},
		}},
	}
}

func (c *conformance) vm(t *testing.T, n *corev1.Node) vm {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.vms[n.Spec.ProviderID]
	if !ok {
		t.Fatalf("node %s: no VM of providerID %q was created", n.Name, n.Spec.ProviderID)
	}
	return v
}

// foreignNodes are nodes of VMs found nowhere whose labels record a
// vCenter, or a datacenter of the configured vCenter, that the config no
// longer lists.
func (c *conformance) foreignNodes(t *testing.T) []*corev1.Node {
	var out []*corev1.Node
	for i, where := range [][2]string{{"vc-removed.example.com", "DC0"}, {c.cloud.vcenters[0].record, "DC-removed"}} {
		n := c.node(vm{name: fmt.Sprintf("foreign-%d", i), uuid: randomUUID(t)}, "10.9.255.1")
		n.Labels[LabelServer], n.Labels[LabelDatacenter] = where[0], where[1]
		out = append(out, n)
	}
	return out
}

// strongMatch is a kubelet's node without providerID reporting the VM's
// BIOS UUID as its system UUID.
func (c *conformance) strongMatch(t *testing.T) *corev1.Node {
	v, _ := c.running(t)
	return kubeletNode("strong", withSystemUUID(v.uuid))
}

// weakMatch is a node without providerID whose name only begins like a
// VM's DNS name (not at a label boundary), with no system UUID or address
// of any VM: it must not be claimed.
func (c *conformance) weakMatch(t *testing.T) *corev1.Node {
	v, _ := c.running(t)
	name := v.name[:strings.LastIndex(v.name, "-")] // conformance-vm, of conformance-vm-<i>.example.com
	return kubeletNode(name, withAddress(corev1.NodeInternalIP, "192.0.2.1"))
}

func (s *sim) powerOn(t testing.TB, v vm) {
	t.Helper()
	ctx := context.Background()
	task, err := v.obj.PowerOn(ctx)
	if err == nil {
		err = task.Wait(ctx)
	}
	if err != nil {
		t.Fatalf("powering on %s: %v", v.name, err)
	}
}
