// Package e2e holds end-to-end scenarios of single backends: the built
// multicloud-ccm binary against a real kube-apiserver and etcd, with the
// backend's cloud simulated inside the test process.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/vim25/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"

	_ "github.com/vmware/govmomi/vapi/simulator" // the simulator's tagging endpoints
)

var suite framework.Shared

func TestMain(m *testing.M) { os.Exit(suite.Run(m)) }

const (
	vcUser     = "ccm@vsphere.local"
	vcPassword = "e2e-secret"
	settle     = 30 * time.Second
)

// vsphereConfig is a cloud-config with one vsphere backend; %s is the
// simulator's host:port. Credentials come from the environment.
const vsphereConfig = `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: e2e
backends:
- name: onprem
  type: vsphere
  vsphere:
    vcenters:
    - server: http://%s/sdk
      datacenters: [DC0]
      username: {env: E2E_VSPHERE_USER}
      password: {env: E2E_VSPHERE_PASSWORD}
    zoneCategory: k8s-zone
    regionCategory: k8s-region
    refreshInterval: 2s
    requestTimeout: 10s
`

// vcsim is a vCenter simulator: one datacenter, clusters DC0_C0 (zone-a)
// and DC0_C1 (zone-b) in region-1, three VMs per cluster with guest
// addresses 10.1.0.<i+1> and DNS names equal to their lower-case VM names.
type vcsim struct {
	server *simulator.Server
	client *govmomi.Client
	vms    []simVM
}

type simVM struct {
	obj  *object.VirtualMachine
	name string
	uuid string
	ip   string
}

func startVCSim(t *testing.T) *vcsim {
	t.Helper()
	m := simulator.VPX()
	m.Datacenter, m.Cluster, m.ClusterHost, m.Host, m.Machine = 1, 2, 1, 0, 3
	if err := m.Create(); err != nil {
		t.Fatal(err)
	}
	m.Service.Listen = &url.URL{User: url.UserPassword(vcUser, vcPassword)}
	m.Service.RegisterEndpoints = true
	s := &vcsim{server: m.Service.NewServer()}
	t.Cleanup(func() {
		s.server.Close()
		m.Remove()
	})
	ctx := context.Background()
	u := *s.server.URL
	u.User = url.UserPassword(vcUser, vcPassword)
	c, err := govmomi.NewClient(ctx, &u, true)
	if err != nil {
		t.Fatal(err)
	}
	s.client = c
	s.loadVMs(t)
	for i := range s.vms {
		s.vms[i].ip = fmt.Sprintf("10.1.0.%d", i+1)
		s.setGuest(t, s.vms[i], s.vms[i].ip, strings.ToLower(s.vms[i].name))
	}
	rc := rest.NewClient(c.Client)
	if err := rc.Login(ctx, u.User); err != nil {
		t.Fatal(err)
	}
	s.tag(t, rc, "k8s-region", "region-1", "/DC0")
	s.tag(t, rc, "k8s-zone", "zone-a", "/DC0/host/DC0_C0")
	s.tag(t, rc, "k8s-zone", "zone-b", "/DC0/host/DC0_C1")
	return s
}

func (s *vcsim) loadVMs(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	f := find.NewFinder(s.client.Client, true)
	list, err := f.VirtualMachineList(ctx, "/DC0/vm/*")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range list {
		s.vms = append(s.vms, simVM{obj: o, name: o.Name(), uuid: strings.ToLower(o.UUID(ctx))})
	}
}

func (s *vcsim) setGuest(t *testing.T, v simVM, ip, hostname string) {
	t.Helper()
	spec := types.VirtualMachineConfigSpec{ExtraConfig: []types.BaseOptionValue{
		&types.OptionValue{Key: "SET.guest.ipAddress", Value: ip},
		&types.OptionValue{Key: "SET.guest.hostName", Value: hostname},
	}}
	wait(t, "reconfigure "+v.name)(v.obj.Reconfigure(context.Background(), spec))
}

func (s *vcsim) tag(t *testing.T, rc *rest.Client, category, tag, path string) {
	t.Helper()
	ctx := context.Background()
	m := tags.NewManager(rc)
	catID := category
	if c, err := m.GetCategory(ctx, category); err == nil {
		catID = c.ID
	} else if catID, err = m.CreateCategory(ctx, &tags.Category{Name: category, Cardinality: "SINGLE"}); err != nil {
		t.Fatal(err)
	}
	tagID, err := m.CreateTag(ctx, &tags.Tag{Name: tag, CategoryID: catID})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := object.NewSearchIndex(s.client.Client).FindByInventoryPath(ctx, path)
	if err != nil || ref == nil {
		t.Fatalf("finding %s: %v", path, err)
	}
	if err := m.AttachTag(ctx, tagID, ref); err != nil {
		t.Fatal(err)
	}
}

// cloneWithoutGuest clones v; the clone's guest reports nothing, as a VM
// whose VMware Tools are not running.
func (s *vcsim) cloneWithoutGuest(t *testing.T, v simVM, name string) simVM {
	t.Helper()
	ctx := context.Background()
	dc, err := find.NewFinder(s.client.Client, true).Datacenter(ctx, "DC0")
	if err != nil {
		t.Fatal(err)
	}
	folders, err := dc.Folders(ctx)
	if err != nil {
		t.Fatal(err)
	}
	task, err := v.obj.Clone(ctx, folders.VmFolder, name, types.VirtualMachineCloneSpec{PowerOn: true})
	if err != nil {
		t.Fatal(err)
	}
	info, err := task.WaitForResult(ctx)
	if err != nil {
		t.Fatal(err)
	}
	obj := object.NewVirtualMachine(s.client.Client, info.Result.(types.ManagedObjectReference))
	return simVM{obj: obj, name: name, uuid: strings.ToLower(obj.UUID(ctx))}
}

// wait waits for a task, failing the test on error.
func wait(t *testing.T, what string) func(*object.Task, error) {
	return func(task *object.Task, err error) {
		t.Helper()
		if err == nil {
			err = task.Wait(context.Background())
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
}

// requireVSphereBinary skips (fails with CI set) when the CCM binary was
// built without the vsphere backend: its config validation then rejects
// the type.
func requireVSphereBinary(t *testing.T, cfg string) {
	t.Helper()
	bins, err := framework.FindBinaries()
	if err == nil {
		err = bins.Check([]string{bins.CCM})
	}
	if err != nil {
		framework.MissingBinaries(t, err)
	}
	path := filepath.Join(t.TempDir(), "cloud-config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bins.CCM, "config", "validate", "--cloud-config", path).CombinedOutput() // #nosec G204 -- the binary under test.
	if err == nil {
		return
	}
	msg := fmt.Sprintf("%s does not accept a vsphere backend (pkg/router/backends.go must import pkg/backends/vsphere): %s", bins.CCM, out)
	if framework.InCI() {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// patchNodeInfo writes status.nodeInfo.systemUUID, as a kubelet does.
func patchNodeInfo(ctx context.Context, t *testing.T, c kubernetes.Interface, name, uuid string) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"nodeInfo": map[string]any{"systemUUID": uuid}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Nodes().Patch(ctx, name, k8stypes.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
}

func initialisedWith(providerID, zone string) framework.NodeCondition {
	return func(n *corev1.Node) (bool, string) {
		ok := !framework.HasTaint(n, framework.UninitializedTaint) &&
			n.Spec.ProviderID == providerID &&
			n.Labels[corev1.LabelTopologyZone] == zone &&
			n.Labels[corev1.LabelTopologyRegion] == "region-1" &&
			strings.HasPrefix(n.Labels[corev1.LabelInstanceTypeStable], "vsphere-vm.cpu-") &&
			n.Labels[annotation.NodeBackend] == "onprem" &&
			len(n.Status.Addresses) > 0
		return ok, fmt.Sprintf("taints %v providerID %q labels %v addresses %v", n.Spec.Taints, n.Spec.ProviderID, n.Labels, n.Status.Addresses)
	}
}

func zoneOf(v simVM) string {
	if strings.HasPrefix(v.name, "DC0_C0") {
		return "zone-a"
	}
	return "zone-b"
}

func TestVSphereNodes(t *testing.T) {
	sim := startVCSim(t)
	cfg := fmt.Sprintf(vsphereConfig, sim.server.URL.Host)
	requireVSphereBinary(t, cfg)
	cp := suite.ControlPlane(t)
	cp.StartCCMT(t, framework.CCMOptions{
		CloudConfig: cfg,
		Env:         []string{"E2E_VSPHERE_USER=" + vcUser, "E2E_VSPHERE_PASSWORD=" + vcPassword},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := cp.Client

	t.Run("by providerID", func(t *testing.T) {
		v := sim.vms[0]
		if _, err := framework.CreateNode(ctx, c, framework.NewNode("vs-pid", framework.WithProviderID("vsphere://"+v.uuid))); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, settle, "vs-pid initialised", framework.NodeMatches(c, "vs-pid", initialisedWith("vsphere://"+v.uuid, zoneOf(v))))
		framework.Eventually(t, settle, "vs-pid addresses", framework.NodeMatches(c, "vs-pid", func(n *corev1.Node) (bool, string) {
			want := []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: v.ip},
				{Type: corev1.NodeExternalIP, Address: v.ip},
				{Type: corev1.NodeHostName, Address: strings.ToLower(v.name)},
			}
			return fmt.Sprint(n.Status.Addresses) == fmt.Sprint(want), fmt.Sprintf("addresses %v", n.Status.Addresses)
		}))
	})
	t.Run("by system UUID", func(t *testing.T) {
		v := sim.vms[4]
		if _, err := framework.CreateNode(ctx, c, framework.NewNode("vs-uuid")); err != nil {
			t.Fatal(err)
		}
		patchNodeInfo(ctx, t, c, "vs-uuid", strings.ToUpper(v.uuid))
		framework.Eventually(t, settle, "vs-uuid initialised", framework.NodeMatches(c, "vs-uuid", initialisedWith("vsphere://"+v.uuid, zoneOf(v))))
	})
	t.Run("by guest DNS name", func(t *testing.T) {
		v := sim.vms[2]
		name := strings.ToLower(v.name)
		if _, err := framework.CreateNode(ctx, c, framework.NewNode(name)); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, settle, name+" initialised", framework.NodeMatches(c, name, initialisedWith("vsphere://"+v.uuid, zoneOf(v))))
	})
	t.Run("no guest info stays tainted with a warning", func(t *testing.T) {
		v := sim.cloneWithoutGuest(t, sim.vms[1], "no-tools")
		if _, err := framework.CreateNode(ctx, c, framework.NewNode("vs-no-tools", framework.WithProviderID("vsphere://"+v.uuid))); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, settle, "a VSphereGuestInfoMissing warning", framework.EventSeen(c, "Node", "", "vs-no-tools", corev1.EventTypeWarning, "VSphereGuestInfoMissing"))
		framework.Consistently(t, 5*time.Second, "vs-no-tools stays tainted", framework.NodeMatches(c, "vs-no-tools", func(n *corev1.Node) (bool, string) {
			return framework.HasTaint(n, framework.UninitializedTaint), fmt.Sprintf("taints %v", n.Spec.Taints)
		}))
	})
	t.Run("powered-off VM tainted shutdown, destroyed VM's node deleted", func(t *testing.T) {
		off, gone := sim.vms[3], sim.vms[5]
		for name, v := range map[string]simVM{"vs-off": off, "vs-gone": gone} {
			if _, err := framework.CreateNode(ctx, c, framework.NewNode(name, framework.WithProviderID("vsphere://"+v.uuid), framework.WithReady(corev1.ConditionFalse))); err != nil {
				t.Fatal(err)
			}
			framework.Eventually(t, settle, name+" initialised", framework.NodeMatches(c, name, initialisedWith("vsphere://"+v.uuid, zoneOf(v))))
		}
		wait(t, "power off")(off.obj.PowerOff(ctx))
		wait(t, "power off")(gone.obj.PowerOff(ctx))
		wait(t, "destroy")(gone.obj.Destroy(ctx))
		framework.Eventually(t, settle, "vs-gone deleted", framework.NodeGone(c, "vs-gone"))
		framework.Eventually(t, settle, "vs-off tainted shutdown", framework.NodeMatches(c, "vs-off", func(n *corev1.Node) (bool, string) {
			return framework.HasTaint(n, "node.cloudprovider.kubernetes.io/shutdown"), fmt.Sprintf("taints %v", n.Spec.Taints)
		}))
	})
}
