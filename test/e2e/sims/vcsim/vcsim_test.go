package vcsim_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/sims/vcsim"

	_ "github.com/multicloud-ccm/multicloud-ccm/pkg/backends/vsphere" // the vsphere type
)

// TestSimulatorThroughBackend starts a simulator, renders its backend
// config, and checks that the vsphere backend built from that config finds
// every VM with the zone, region and address the simulator says it has.
func TestSimulatorThroughBackend(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sim, err := vcsim.Start(ctx, vcsim.Options{VMs: 5})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	if len(sim.VMs) != 5 {
		t.Fatalf("%d VMs, want 5", len(sim.VMs))
	}
	zones := map[string]int{}
	for i, v := range sim.VMs {
		if v.Name != fmt.Sprintf("vm-%d", i) || v.IP != fmt.Sprintf("10.20.0.%d", i+1) || v.HostName != v.Name {
			t.Errorf("VM %d: %+v", i, v)
		}
		zones[v.Zone]++
	}
	if zones["zone-a"] != 3 || zones["zone-b"] != 2 {
		t.Errorf("zones %v, want 3 in zone-a and 2 in zone-b", zones)
	}
	for _, pin := range []bool{false, true} {
		t.Run(fmt.Sprintf("thumbprint=%v", pin), func(t *testing.T) {
			b := sim.Backend("onprem")
			b.PinThumbprint = pin
			i2 := newInstances(ctx, t, b)
			for _, v := range sim.VMs {
				node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: v.Name}}
				node.Status.NodeInfo.SystemUUID = strings.ToUpper(v.UUID)
				md, err := i2.InstanceMetadata(ctx, node)
				if err != nil {
					t.Fatalf("%s: %v", v.Name, err)
				}
				if md.ProviderID != v.ProviderID() || md.Zone != v.Zone || md.Region != "region-1" ||
					len(md.NodeAddresses) == 0 || md.NodeAddresses[0].Address != v.IP {
					t.Errorf("%s: metadata %+v, want %s in %s with %s", v.Name, md, v.ProviderID(), v.Zone, v.IP)
				}
			}
		})
	}
	checkChanges(ctx, t, sim, newInstances(ctx, t, sim.Backend("onprem")))
}

// newInstances builds the vsphere backend from b's rendered config and
// environment, as the CCM would.
func newInstances(ctx context.Context, t *testing.T, b vcsim.Backend) cloudprovider.InstancesV2 {
	t.Helper()
	for _, kv := range b.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	i2, ok := newBackend(ctx, t, b).InstancesV2()
	if !ok {
		t.Fatal("no InstancesV2")
	}
	return i2
}

func newBackend(ctx context.Context, t *testing.T, b vcsim.Backend) cloudprovider.Interface {
	t.Helper()
	doc := "apiVersion: multicloud-ccm.io/v1alpha1\nkind: CloudConfig\nclusterID: test\nbackends:\n" + b.YAML()
	cfg, err := config.Parse([]byte(doc), t.TempDir())
	if err != nil {
		t.Fatalf("parsing the rendered config: %v\n%s", err, doc)
	}
	if strings.Contains(doc, "insecure") || (!strings.Contains(doc, "thumbprint:") && !strings.Contains(doc, "caFile:")) {
		t.Errorf("rendered config does not verify the certificate:\n%s", doc)
	}
	reg, _ := backends.Lookup("vsphere")
	bc := cfg.Backends[0]
	c, err := reg.New(ctx, backends.Options{Name: bc.Name, ClusterID: cfg.ClusterID, Settings: bc.Settings})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// checkChanges powers a VM off, destroys another and adds one without guest
// info, and checks the backend sees each change.
func checkChanges(ctx context.Context, t *testing.T, sim *vcsim.Simulator, i2 cloudprovider.InstancesV2) {
	t.Helper()
	off, gone := sim.VMs[0], sim.VMs[1]
	if err := sim.PowerOff(ctx, off.Name); err != nil {
		t.Fatal(err)
	}
	if err := sim.Destroy(ctx, gone.Name); err != nil {
		t.Fatal(err)
	}
	bare, err := sim.AddVM(ctx, "no-tools", 0, false)
	if err != nil {
		t.Fatal(err)
	}
	if bare.IP != "" || bare.Zone != "zone-a" {
		t.Errorf("VM without guest info: %+v", bare)
	}
	if _, ok := sim.VM(gone.Name); ok || len(sim.VMs) != 5 {
		t.Errorf("after destroying %s and adding no-tools: %d VMs", gone.Name, len(sim.VMs))
	}
	node := func(v vcsim.VM) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: v.Name}, Spec: corev1.NodeSpec{ProviderID: v.ProviderID()}}
	}
	// The backend's cache is younger than its refresh interval (2 s): the
	// changes show once it is refreshed.
	deadline := time.Now().Add(15 * time.Second)
	for {
		exists, eerr := i2.InstanceExists(ctx, node(gone))
		shut, serr := i2.InstanceShutdown(ctx, node(off))
		if eerr == nil && !exists && serr == nil && shut {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("destroyed VM: exists %v, %v; powered-off VM: shutdown %v, %v", exists, eerr, shut, serr)
		}
		time.Sleep(200 * time.Millisecond)
	}
	_, err = i2.InstanceMetadata(ctx, node(bare))
	if ue, ok := backends.AsUserError(err); !ok || ue.Reason != "VSphereGuestInfoMissing" {
		t.Errorf("VM without guest info: %v", err)
	}
}

// TestVMsHeldByACallerNeverChange: AddVM and Destroy replace sim.VMs. The
// vSphere e2e suite's parallel subtests hold the slice while one adds a VM;
// sorting it in place once made vm-1 read as vm-0 in another subtest.
func TestVMsHeldByACallerNeverChange(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sim, err := vcsim.Start(ctx, vcsim.Options{VMs: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	held := sim.VMs
	before := fmt.Sprint(held)
	if _, err := sim.AddVM(ctx, "a-first", 0, true); err != nil {
		t.Fatal(err)
	}
	if err := sim.Destroy(ctx, "vm-1"); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(held); got != before {
		t.Errorf("a held VMs slice changed:\nbefore %s\nafter  %s", before, got)
	}
	var names []string
	for _, v := range sim.VMs {
		names = append(names, v.Name)
	}
	if got := strings.Join(names, ","); got != "a-first,vm-0,vm-2" {
		t.Errorf("sim.VMs = %s, want a-first,vm-0,vm-2", got)
	}
}
