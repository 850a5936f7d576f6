// Package vsphere is the end-to-end suite of the vSphere backend: the built
// multicloud-ccm binary against a real kube-apiserver and etcd, with two
// vCenter simulators (test/e2e/sims/vcsim) started inside the test process
// as one backend's two vCenters. Nodes are created as kubelets started with
// --cloud-provider=external create them (tainted, no providerID, the BIOS
// UUID in status.nodeInfo.systemUUID), and the tests assert on the Node
// objects the CCM leaves behind.
package vsphere

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/sims/vcsim"
)

var suite framework.Shared

func TestMain(m *testing.M) { os.Exit(suite.Run(m)) }

// settle bounds every wait for the CCM (its controllers run every second
// or few, the backend refreshes its inventory every 2 s).
const settle = 45 * time.Second

const shutdownTaint = "node.cloudprovider.kubernetes.io/shutdown"

// env is the two simulators and the CCM serving them.
type env struct {
	a, b *vcsim.Simulator
	c    kubernetes.Interface
}

// start starts two simulators (vCenter a: 6 VMs in zone-a and zone-b;
// vCenter b: 2 VMs in zone-c), the control plane and a CCM whose one vsphere
// backend has both vCenters.
func start(t *testing.T) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, err := vcsim.Start(ctx, vcsim.Options{VMs: 6})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	b, err := vcsim.Start(ctx, vcsim.Options{VMs: 2, Zones: []string{"zone-c"}, NamePrefix: "vmb-", Subnet: "10.30.0.0/16"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	backend := vcsim.NewBackend("onprem", a, b)
	cfg := "apiVersion: multicloud-ccm.io/v1alpha1\nkind: CloudConfig\nclusterID: e2e\nbackends:\n" + backend.YAML()
	cp := suite.ControlPlane(t)
	cp.StartCCMT(t, framework.CCMOptions{CloudConfig: cfg, Env: backend.Env()})
	return &env{a: a, b: b, c: cp.Client}
}

// kubeletNode creates a node as a kubelet would, then reports its system
// UUID (if any) in status.nodeInfo.
func (e *env) kubeletNode(ctx context.Context, t *testing.T, name, systemUUID string, tweaks ...framework.NodeTweak) {
	t.Helper()
	n := framework.NewNode(name, tweaks...)
	n.Status.NodeInfo.SystemUUID = systemUUID
	if _, err := framework.CreateNode(ctx, e.c, n); err != nil {
		t.Fatal(err)
	}
	if systemUUID == "" {
		return
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"nodeInfo": map[string]any{"systemUUID": systemUUID}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.CoreV1().Nodes().Patch(ctx, name, k8stypes.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
}

// initialisedAs holds once the node is initialised as VM v: taint gone,
// providerID, zone, region, instance type, backend label and addresses
// exactly as the simulator set them.
func initialisedAs(v vcsim.VM) framework.NodeCondition {
	want := fmt.Sprint([]corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: v.IP},
		{Type: corev1.NodeExternalIP, Address: v.IP},
		{Type: corev1.NodeHostName, Address: v.HostName},
	})
	return func(n *corev1.Node) (bool, string) {
		ok := !framework.HasTaint(n, framework.UninitializedTaint) &&
			n.Spec.ProviderID == v.ProviderID() &&
			n.Labels[corev1.LabelTopologyZone] == v.Zone &&
			n.Labels[corev1.LabelTopologyRegion] == v.Region &&
			n.Labels[corev1.LabelInstanceTypeStable] == "vsphere-vm.cpu-2.mem-4gb.os-ubuntu" &&
			n.Labels[string(annotation.NodeBackend)] == "onprem" &&
			fmt.Sprint(n.Status.Addresses) == want
		return ok, fmt.Sprintf("taints %v providerID %q labels %v addresses %v; want %s in %s/%s with %s",
			n.Spec.Taints, n.Spec.ProviderID, n.Labels, n.Status.Addresses, v.ProviderID(), v.Region, v.Zone, want)
	}
}

// swapped is the UUID as SMBIOS before 2.6 (older VM hardware) reports
// it: the first three fields byte-swapped, upper case as Linux prints it.
func swapped(uuid string) string {
	rev := func(h string) string {
		var b strings.Builder
		for i := len(h) - 2; i >= 0; i -= 2 {
			b.WriteString(h[i : i+2])
		}
		return b.String()
	}
	return strings.ToUpper(rev(uuid[0:8]) + "-" + rev(uuid[9:13]) + "-" + rev(uuid[14:18]) + uuid[18:])
}

func TestVSphereNodes(t *testing.T) {
	e := start(t)
	// Cancelled when the parallel subtests are done, not when this
	// function returns (before they run).
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	a, b := e.a.VMs, e.b.VMs

	t.Run("found by system UUID", func(t *testing.T) {
		t.Parallel()
		e.kubeletNode(ctx, t, "k-uuid", strings.ToUpper(a[0].UUID))
		framework.Eventually(t, settle, "k-uuid initialised as "+a[0].Name, framework.NodeMatches(e.c, "k-uuid", initialisedAs(a[0])))
	})
	t.Run("found by byte-swapped system UUID", func(t *testing.T) {
		t.Parallel()
		e.kubeletNode(ctx, t, "k-swapped", swapped(a[1].UUID))
		framework.Eventually(t, settle, "k-swapped initialised as "+a[1].Name, framework.NodeMatches(e.c, "k-swapped", initialisedAs(a[1])))
	})
	t.Run("found by guest DNS name", func(t *testing.T) {
		t.Parallel()
		e.kubeletNode(ctx, t, a[2].HostName, "")
		framework.Eventually(t, settle, a[2].HostName+" initialised", framework.NodeMatches(e.c, a[2].HostName, initialisedAs(a[2])))
	})
	t.Run("found by address", func(t *testing.T) {
		t.Parallel()
		e.kubeletNode(ctx, t, "k-ip", "", framework.WithAddresses(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a[3].IP}))
		framework.Eventually(t, settle, "k-ip initialised as "+a[3].Name, framework.NodeMatches(e.c, "k-ip", initialisedAs(a[3])))
	})
	t.Run("providerID from the kubelet", func(t *testing.T) {
		t.Parallel()
		e.kubeletNode(ctx, t, "k-pid", "", framework.WithProviderID(a[4].ProviderID()))
		framework.Eventually(t, settle, "k-pid initialised as "+a[4].Name, framework.NodeMatches(e.c, "k-pid", initialisedAs(a[4])))
	})
	t.Run("second vCenter", func(t *testing.T) {
		t.Parallel()
		e.kubeletNode(ctx, t, "k-second", strings.ToUpper(b[0].UUID))
		framework.Eventually(t, settle, "k-second initialised as "+b[0].Name, framework.NodeMatches(e.c, "k-second", initialisedAs(b[0])))
	})
	t.Run("no guest info stays tainted with a warning", func(t *testing.T) {
		t.Parallel()
		v, err := e.a.AddVM(ctx, "no-tools", 0, false)
		if err != nil {
			t.Fatal(err)
		}
		e.kubeletNode(ctx, t, "k-no-tools", strings.ToUpper(v.UUID))
		framework.Eventually(t, settle, "a VSphereGuestInfoMissing warning on k-no-tools",
			framework.EventSeen(e.c, "Node", "", "k-no-tools", corev1.EventTypeWarning, "VSphereGuestInfoMissing"))
		framework.Consistently(t, 5*time.Second, "k-no-tools stays tainted and without addresses", framework.NodeMatches(e.c, "k-no-tools", func(n *corev1.Node) (bool, string) {
			return framework.HasTaint(n, framework.UninitializedTaint) && len(n.Status.Addresses) == 0 && n.Spec.ProviderID == "",
				fmt.Sprintf("taints %v providerID %q addresses %v", n.Spec.Taints, n.Spec.ProviderID, n.Status.Addresses)
		}))
	})
	t.Run("powered off is tainted shutdown, destroyed is deleted", func(t *testing.T) {
		t.Parallel()
		off, gone := a[5], b[1]
		e.kubeletNode(ctx, t, "k-off", strings.ToUpper(off.UUID), framework.WithReady(corev1.ConditionFalse))
		e.kubeletNode(ctx, t, "k-gone", strings.ToUpper(gone.UUID), framework.WithReady(corev1.ConditionFalse))
		framework.Eventually(t, settle, "k-off initialised", framework.NodeMatches(e.c, "k-off", initialisedAs(off)))
		framework.Eventually(t, settle, "k-gone initialised", framework.NodeMatches(e.c, "k-gone", initialisedAs(gone)))
		if err := e.a.PowerOff(ctx, off.Name); err != nil {
			t.Fatal(err)
		}
		if err := e.b.Destroy(ctx, gone.Name); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, settle, "k-gone deleted", framework.NodeGone(e.c, "k-gone"))
		framework.Eventually(t, settle, "k-off tainted shutdown", framework.NodeMatches(e.c, "k-off", func(n *corev1.Node) (bool, string) {
			return framework.HasTaint(n, shutdownTaint), fmt.Sprintf("taints %v", n.Spec.Taints)
		}))
		if _, err := e.c.CoreV1().Nodes().Get(ctx, "k-off", metav1.GetOptions{}); err != nil {
			t.Errorf("k-off: %v (a powered-off VM's node must stay)", err)
		}
	})
}
