package vsphere

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// controllers runs the upstream cloud-node and cloud-node-lifecycle
// controllers against a backend, with a fake clientset holding nodes.
type controllers struct {
	client *fake.Clientset
}

func runControllers(t *testing.T, c *Cloud, nodes ...*corev1.Node) *controllers {
	t.Helper()
	return &controllers{client: testutil.RunNodeControllers(t, c, 300*time.Millisecond, nodes...)}
}

// kubeletNode is a node as a kubelet with --cloud-provider=external
// registers it: tainted uninitialized, NotReady, with its system UUID.
func kubeletNode(name string, tweaks ...nodeTweak) *corev1.Node {
	base := []nodeTweak{func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}
	}}
	return newNode(name, append(base, tweaks...)...)
}

func (k *controllers) node(t *testing.T, name string) (*corev1.Node, bool) {
	t.Helper()
	return testutil.GetNode(t, k.client, name)
}

// eventually polls cond for up to 20 s.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	testutil.Eventually(t, 20*time.Second, what, cond)
}

func initialised(n *corev1.Node) error {
	for _, tn := range n.Spec.Taints {
		if tn.Key == cloudproviderapi.TaintExternalCloudProvider {
			return fmt.Errorf("node %s still tainted uninitialized", n.Name)
		}
	}
	return nil
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, tn := range n.Spec.Taints {
		if tn.Key == key {
			return true
		}
	}
	return false
}

func fastRefresh(sj *settingsJSON) { sj.RefreshInterval = "1s" }

func TestControllersInitialiseNodes(t *testing.T) {
	s, vms := zonedSim(t)
	c := newCloud(t, []*sim{s}, withZones(), fastRefresh)
	noTools := cloneVM(t, s, vms[0], "no-tools")
	k := runControllers(t, c,
		kubeletNode("by-uuid", withSystemUUID(vms[0].uuid)),
		kubeletNode(strings.ToLower(vms[3].name)),
		kubeletNode("no-tools", withSystemUUID(noTools.uuid)),
	)
	host, cluster := hostOf(t, vms[0])
	wantZone := map[string]string{"DC0_C0": "zone-a", "DC0_C1": "zone-b"}[cluster]
	if host == "DC0_C1_H0" {
		wantZone = "zone-c"
	}
	eventually(t, "node by-uuid initialised", func() error {
		n, _ := k.node(t, "by-uuid")
		if err := initialised(n); err != nil {
			return err
		}
		if n.Spec.ProviderID != ProviderIDPrefix+vms[0].uuid {
			return fmt.Errorf("providerID %q", n.Spec.ProviderID)
		}
		if n.Labels[corev1.LabelTopologyZone] != wantZone || n.Labels[corev1.LabelTopologyRegion] != "region-1" {
			return fmt.Errorf("labels %v, want zone %s region region-1", n.Labels, wantZone)
		}
		if !strings.HasPrefix(n.Labels[corev1.LabelInstanceTypeStable], "vsphere-vm.cpu-") {
			return fmt.Errorf("instance type label %q", n.Labels[corev1.LabelInstanceTypeStable])
		}
		if len(n.Status.Addresses) == 0 || n.Status.Addresses[0].Address != "10.1.0.1" {
			return fmt.Errorf("addresses %v", n.Status.Addresses)
		}
		return nil
	})
	eventually(t, "node found by DNS name initialised", func() error {
		n, _ := k.node(t, strings.ToLower(vms[3].name))
		if err := initialised(n); err != nil {
			return err
		}
		if n.Spec.ProviderID != ProviderIDPrefix+vms[3].uuid {
			return fmt.Errorf("providerID %q", n.Spec.ProviderID)
		}
		return nil
	})
	// Give the VM without guest info a few rounds: it stays tainted and
	// is not deleted.
	time.Sleep(2 * time.Second)
	n, ok := k.node(t, "no-tools")
	if !ok {
		t.Fatal("node of a VM without VMware Tools was deleted")
	}
	if initialised(n) == nil {
		t.Errorf("node of a VM without guest info was initialised: %v", n.Status.Addresses)
	}
}

func TestControllersDeleteAndShutdown(t *testing.T) {
	s := startSim(t)
	vms := guestAll(t, s, 1)
	c := newCloud(t, []*sim{s}, fastRefresh)
	k := runControllers(t, c,
		kubeletNode("gone", withVM(vms[0])),
		kubeletNode("off", withVM(vms[1])),
		kubeletNode("fine", withVM(vms[2])),
	)
	eventually(t, "nodes initialised", func() error {
		for _, name := range []string{"gone", "off", "fine"} {
			n, _ := k.node(t, name)
			if err := initialised(n); err != nil {
				return err
			}
		}
		return nil
	})
	s.destroy(t, vms[0])
	s.powerOff(t, vms[1])
	eventually(t, "node of the destroyed VM deleted", func() error {
		if _, ok := k.node(t, "gone"); ok {
			return fmt.Errorf("node gone still exists")
		}
		return nil
	})
	eventually(t, "node of the powered-off VM tainted shutdown", func() error {
		n, _ := k.node(t, "off")
		if !hasTaint(n, cloudproviderapi.TaintNodeShutdown) {
			return fmt.Errorf("taints %v", n.Spec.Taints)
		}
		return nil
	})
	n, ok := k.node(t, "fine")
	if !ok || hasTaint(n, cloudproviderapi.TaintNodeShutdown) {
		t.Errorf("node fine: present %v, taints %v", ok, n)
	}
}

func TestControllersOutage(t *testing.T) {
	s := startSim(t)
	vms := guestAll(t, s, 1)
	c := newCloud(t, []*sim{s}, fastRefresh)
	names := []string{"n0", "n1", "n2"}
	k := runControllers(t, c,
		kubeletNode("n0", withVM(vms[0])),
		kubeletNode("n1", withVM(vms[1])),
		kubeletNode("n2", withVM(vms[2])),
	)
	eventually(t, "nodes initialised", func() error {
		for _, name := range names {
			if n, _ := k.node(t, name); initialised(n) != nil {
				return initialised(n)
			}
		}
		return nil
	})
	s.down.Store(true)
	s.destroy(t, vms[0]) // through the simulator's own client, not the proxy
	// Many lifecycle rounds and cache expiries while vCenter is unreachable.
	time.Sleep(3 * time.Second)
	for _, name := range names {
		if _, ok := k.node(t, name); !ok {
			t.Fatalf("node %s deleted during a vCenter outage", name)
		}
	}
	s.down.Store(false)
	eventually(t, "after recovery the destroyed VM's node is deleted", func() error {
		if _, ok := k.node(t, "n0"); ok {
			return fmt.Errorf("n0 still exists")
		}
		return nil
	})
	for _, name := range names[1:] {
		if _, ok := k.node(t, name); !ok {
			t.Errorf("node %s deleted after recovery", name)
		}
	}
}

func TestControllersOneVCenterDown(t *testing.T) {
	a, b := startSim(t), startSim(t)
	randomizeUUIDs(t, b)
	avms, bvms := guestAll(t, a, 1), guestAll(t, b, 2)
	c := newCloud(t, []*sim{a, b}, fastRefresh)
	b.down.Store(true)
	k := runControllers(t, c,
		kubeletNode("healthy", withSystemUUID(avms[0].uuid)),
		kubeletNode("unreachable", withSystemUUID(bvms[0].uuid)),
	)
	eventually(t, "the node in the healthy vCenter initialised", func() error {
		n, _ := k.node(t, "healthy")
		return initialised(n)
	})
	n, ok := k.node(t, "unreachable")
	if !ok {
		t.Fatal("node of the unreachable vCenter deleted")
	}
	if initialised(n) == nil {
		t.Fatal("node of the unreachable vCenter initialised")
	}
	b.down.Store(false)
	eventually(t, "the other node initialised once its vCenter returns", func() error {
		n, _ := k.node(t, "unreachable")
		if err := initialised(n); err != nil {
			return err
		}
		if n.Spec.ProviderID != ProviderIDPrefix+bvms[0].uuid {
			return fmt.Errorf("providerID %q", n.Spec.ProviderID)
		}
		return nil
	})
}
