package wire

import (
	"context"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/netns"
)

const (
	metallbNS = "metallb-system"
	nodeName  = "metal-0"
	// EnvMetalLB names the folder holding MetalLB's speaker and CRDs
	// (default _output/metallb, where hack/metallb/build.sh puts them).
	EnvMetalLB = "METALLB_DIR"
)

var (
	pool4 = netip.MustParsePrefix("10.77.0.96/28")
	pool6 = netip.MustParsePrefix("fd77::100/124")
)

// ccmConfig is one bare-metal backend whose inventory is the node
// namespace and whose pool MetalLB's IPAddressPool mirrors.
var ccmConfig = fmt.Sprintf(`apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: e2e-wire
loadBalancer: {defaultBackend: metal}
backends:
- name: metal
  type: baremetal
  baremetal:
    inventory:
    - name: %s
      addresses: [{type: InternalIP, address: 10.77.0.2}, {type: InternalIP, address: "fd77::2"}]
    addressPools:
    - name: lan
      addresses: [%q, %q]
`, nodeName, pool4, pool6)

// metallbConfig is the pairing docs/baremetal.md describes: MetalLB's
// pool with the same addresses, autoAssign off (the CCM allocates), and
// a layer-2 advertisement for it.
var metallbConfig = fmt.Sprintf(`apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: lan, namespace: %[1]s}
spec:
  addresses: [%[2]q, %[3]q]
  autoAssign: false
---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata: {name: lan, namespace: %[1]s}
spec:
  ipAddressPools: [lan]
`, metallbNS, pool4, pool6)

// TestMetalLBSpeakerAnnouncesOurAddresses: a dual-stack Service gets one
// address per family from the CCM; before MetalLB's speaker runs, nobody
// answers for them; with the speaker running in the node namespace, the
// client resolves both to the node's MAC; once the Service is deleted, the
// speaker stops answering.
func TestMetalLBSpeakerAnnouncesOurAddresses(t *testing.T) {
	lan := netns.Require(t)
	speaker, crds := metallb(t)
	node, err := lan.AddHost("node", "10.77.0.2/24", "fd77::2/64")
	if err != nil {
		t.Fatal(err)
	}
	client, err := lan.AddHost("client", "10.77.0.3/24", "fd77::3/64")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	cp := startCluster(ctx, t, crds, metallbConfig, "--service-cluster-ip-range=10.96.0.0/16,fd00:10:96::/112")
	svc := framework.NewLoadBalancerService("default", "web", framework.WithPort("http", 80, corev1.ProtocolTCP))
	svc.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyRequireDualStack)
	svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	addrs := addressed(ctx, t, cp, svc, 2)

	for _, a := range addrs {
		if mac := resolve(t, client, a, 3*time.Second, func(string) bool { return false }); mac != "" {
			t.Fatalf("%s resolved to %s before any speaker ran", a, mac)
		}
	}

	startSpeaker(t, cp, node, speaker)
	for _, a := range addrs {
		want := node.MAC.String()
		if mac := resolve(t, client, a, 90*time.Second, func(m string) bool { return m == want }); mac != want {
			t.Errorf("%s resolves to %q, want the node's %s", a, mac, want)
		}
	}

	if err := cp.Client.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		deadline := time.Now().Add(60 * time.Second)
		for {
			if err := client.FlushNeighbour(a); err != nil {
				t.Fatal(err)
			}
			mac := resolve(t, client, a, 2*time.Second, func(m string) bool { return m != "" })
			if mac == "" {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%s still resolves to %s a minute after its Service was deleted", a, mac)
				break
			}
		}
	}
}

// startCluster starts a control plane (with extra kube-apiserver
// arguments), installs MetalLB's CRDs, namespace, configuration and the
// speaker's Pod, creates the node namespace's Node, and starts the CCM
// with ccmConfig.
func startCluster(ctx context.Context, t *testing.T, crds, metallbConfig string, apiServerArgs ...string) *framework.ControlPlane {
	t.Helper()
	cp := framework.StartControlPlaneT(t, apiServerArgs...)
	kubectl(ctx, t, cp, nil, "apply", "--server-side", "-f", crds)
	kubectl(ctx, t, cp, nil, "wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
	kubectl(ctx, t, cp, nil, "create", "namespace", metallbNS)
	kubectl(ctx, t, cp, strings.NewReader(metallbConfig), "apply", "-f", "-")
	createSpeakerPod(ctx, t, cp)
	if _, err := framework.CreateNode(ctx, cp.Client, framework.NewNode(nodeName,
		framework.WithProviderID("baremetal://"+nodeName), framework.WithoutUninitializedTaint(),
		framework.WithReady(corev1.ConditionTrue),
		framework.WithAddresses(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.77.0.2"}))); err != nil {
		t.Fatal(err)
	}
	cp.StartCCMT(t, framework.CCMOptions{CloudConfig: ccmConfig})
	return cp
}

// addressed creates svc with a ready endpoint on the node and returns its
// addresses once the CCM has given it n from the pool.
func addressed(ctx context.Context, t *testing.T, cp *framework.ControlPlane, svc *corev1.Service, n int) []string {
	t.Helper()
	if _, err := framework.CreateService(ctx, cp.Client, svc); err != nil {
		t.Fatal(err)
	}
	createReadyEndpoint(ctx, t, cp, svc.Name)
	var addrs []string
	framework.Eventually(t, time.Minute, fmt.Sprintf("%d addresses from the pool", n), func(ctx context.Context) (bool, string, error) {
		s, err := cp.Client.CoreV1().Services(svc.Namespace).Get(ctx, svc.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		addrs = framework.IngressIPs(s)
		return len(addrs) == n && !slices.ContainsFunc(addrs, func(a string) bool { return !inPool(a) }), fmt.Sprintf("ingress %v", addrs), nil
	})
	return addrs
}

func inPool(a string) bool {
	ip, err := netip.ParseAddr(a)
	return err == nil && (pool4.Contains(ip) || pool6.Contains(ip))
}

// metallb returns the speaker binary and the CRD folder, skipping (failing
// in CI) when hack/metallb/build.sh has not run.
func metallb(t *testing.T) (speaker, crds string) {
	t.Helper()
	p := framework.OutputFiles(t, EnvMetalLB, "metallb", "metallb", "speaker", "crds/metallb.io_ipaddresspools.yaml")
	return p[0], filepath.Dir(p[1])
}

func kubectl(ctx context.Context, t *testing.T, cp *framework.ControlPlane, stdin *strings.Reader, args ...string) {
	t.Helper()
	var err error
	var out string
	if stdin != nil {
		out, err = cp.KubectlWith(ctx, cp.AdminKubeconfig, stdin, args...)
	} else {
		out, err = cp.Kubectl(ctx, args...)
	}
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// createSpeakerPod creates the speaker's own Pod, unscheduled: v0.16's
// speaker reads it at start (for owner references) and fails without it.
// No controller manager runs here to create the namespace's default
// ServiceAccount, which admission requires.
func createSpeakerPod(ctx context.Context, t *testing.T, cp *framework.ControlPlane) {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: metallbNS}}
	if _, err := cp.Client.CoreV1().ServiceAccounts(metallbNS).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "speaker", Namespace: metallbNS},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "speaker", Image: "quay.io/metallb/speaker:v0.16.2"}}},
	}
	if _, err := cp.Client.CoreV1().Pods(metallbNS).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// createReadyEndpoint publishes one ready endpoint on the node for the
// Service (no kube-controller-manager runs here): MetalLB's speaker
// announces only Services with an endpoint that can serve.
func createReadyEndpoint(ctx context.Context, t *testing.T, cp *framework.ControlPlane, service string) {
	t.Helper()
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: service + "-1", Namespace: "default",
			Labels: map[string]string{discoveryv1.LabelServiceName: service},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{"10.244.0.5"},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true)},
			NodeName:   ptr.To(nodeName),
		}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	if _, err := cp.Client.DiscoveryV1().EndpointSlices("default").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// startSpeaker runs MetalLB's speaker in the node namespace as its
// DaemonSet would (memberlist off: one speaker), reaching the API server
// through a relay on the same loopback address inside the namespace.
func startSpeaker(t *testing.T, cp *framework.ControlPlane, node *netns.Host, speaker string) {
	t.Helper()
	u, err := url.Parse(cp.URL)
	if err != nil {
		t.Fatal(err)
	}
	fwdCtx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	if err := node.Forward(fwdCtx, u.Host); err != nil {
		t.Fatal(err)
	}
	path, args := node.Command(speaker, "--port=0", "--log-level=debug")
	p, err := framework.StartProcess(framework.ProcessOptions{
		Name: "metallb-speaker", Path: path, Args: args,
		Env: append(os.Environ(), "KUBECONFIG="+cp.AdminKubeconfig, "METALLB_NODE_NAME="+nodeName,
			"METALLB_POD_NAME=speaker", "METALLB_NAMESPACE="+metallbNS),
		LogPath: filepath.Join(cp.Dir, "metallb-speaker.log"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Stop(10 * time.Second)
		if t.Failed() {
			t.Log(p.LogTail(framework.LogLines))
		}
	})
}

// resolve pokes addr from h every 250ms until h's kernel holds a
// link-layer address for it that done accepts, or timeout passes; it
// returns the last address seen ("" for none).
func resolve(t *testing.T, h *netns.Host, addr string, timeout time.Duration, done func(mac string) bool) string {
	t.Helper()
	var mac string
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); {
		if err := h.Poke(addr); err != nil {
			t.Fatal(err)
		}
		time.Sleep(250 * time.Millisecond)
		var err error
		if mac, err = h.Neighbour(addr); err != nil {
			t.Fatal(err)
		}
		if done(mac) {
			return mac
		}
	}
	return mac
}
