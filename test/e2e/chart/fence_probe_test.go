package chart

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

// probeCloudConfig is a baremetal backend that serves the probe's node and
// Service.
const probeCloudConfig = `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: e2e
loadBalancer: {defaultBackend: metal}
backends:
- name: metal
  type: baremetal
  baremetal:
    inventory:
    - {name: fence-probe-0, addresses: [{type: InternalIP, address: 10.0.0.40}]}
    addressPools: [{name: lan, addresses: ["10.211.0.0/24"]}]
`

// TestProbeChartDefaultsWithFence: the committed rendering of the chart's
// defaults (deploy/multicloud-ccm.yaml: --leader-elect=true, the default
// lease kube-system/cloud-controller-manager, --use-service-account-credentials=true,
// so the controllers' clients come from upstream's dynamic client builder
// with service-account tokens, now wrapped by the fence) runs as the
// chart's ServiceAccount with the chart's RBAC, and the leader initialises
// a Node and gives a Service an address, refusing nothing. Needs no helm.
func TestProbeChartDefaultsWithFence(t *testing.T) {
	cp := suite.ControlPlane(t)
	ctx := ctxFor(t)
	data, err := os.ReadFile("../../../deploy/multicloud-ccm.yaml")
	if err != nil {
		t.Fatal(err)
	}
	manifest := string(data)
	objs := installRBAC(t, cp, manifest)
	saNS, saName := chartServiceAccount(t, objs)
	kubeconfig, err := cp.ServiceAccountKubeconfig(ctx, saNS, saName)
	if err != nil {
		t.Fatal(err)
	}
	args := ccmArgs(t, parse(t, manifest))
	for _, want := range []string{"--leader-elect=true", "--use-service-account-credentials=true"} {
		found := false
		for _, a := range args {
			found = found || a == want
		}
		if !found {
			t.Fatalf("the chart's defaults no longer pass %s: %v", want, args)
		}
	}
	c, err := cp.StartCCM(ctx, framework.CCMOptions{Name: "fence-probe", CloudConfig: probeCloudConfig, Kubeconfig: kubeconfig, ExtraArgs: args})
	if c != nil && c.Process != nil {
		t.Cleanup(func() {
			_ = c.Stop(15 * time.Second)
			if t.Failed() {
				t.Log(c.Logs(framework.LogLines))
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := framework.CreateNode(ctx, cp.Client, framework.NewNode("fence-probe-0", framework.WithProviderID("baremetal://fence-probe-0"))); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, settle, "fence-probe-0 initialised", framework.NodeMatches(cp.Client, "fence-probe-0", func(n *corev1.Node) (bool, string) {
		return !framework.HasTaint(n, framework.UninitializedTaint), fmt.Sprintf("taints %v", n.Spec.Taints)
	}))
	if _, err := framework.CreateService(ctx, cp.Client, framework.NewLoadBalancerService("default", "fence-probe", framework.WithPort("http", 80, corev1.ProtocolTCP))); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, settle, "fence-probe has an address", framework.ServiceMatches(cp.Client, "default", "fence-probe", framework.HasIngress))
	log, _ := os.ReadFile(c.LogPath())
	if n := strings.Count(string(log), "Refused a write"); n > 0 {
		t.Errorf("the chart's leader logged %d refused writes", n)
	}
}
