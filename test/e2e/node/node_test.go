// Package node runs the Helm chart on a real node: kubelet v1.37.1 (built
// by hack/kubelet/build.sh), Debian's containerd and runc, with
// kube-scheduler and kube-controller-manager beside the e2e control plane.
// The image `make image` built is imported into containerd, the chart is
// installed with helm, and the CCM pod must become Ready, initialise the
// node it runs on, give a LoadBalancer Service an address, and survive its
// own deletion. Pods use the host's network (no CNI or kube-proxy), so the
// chart's apiServer value points the CCM at the API server.
package node

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

const (
	nodeName  = "mccm-node"
	release   = "mccm"
	namespace = "kube-system"
	leaseName = "cloud-controller-manager"
	// pool is the bare-metal backend's address pool.
	pool = "192.0.2.0/28"
)

// values installs the chart as an operator of a new cluster would: on the
// host network, pointed at the API server itself, with one bare-metal site
// listing this node.
const values = `hostNetwork: true
apiServer:
  host: 127.0.0.1
  port: %[1]s
securePort: %[2]s
image:
  repository: %[3]s
  tag: %[4]s
  pullPolicy: Never
config:
  apiVersion: multicloud-ccm.io/v1alpha1
  kind: CloudConfig
  clusterID: node-e2e
  loadBalancer:
    defaultBackend: metal
  backends:
    - name: metal
      type: baremetal
      baremetal:
        inventory:
          - name: ` + nodeName + `
            addresses: [{type: InternalIP, address: 127.0.0.1}]
        addressPools:
          - name: public
            addresses: ["` + pool + `"]
`

func TestChartOnRealNode(t *testing.T) {
	b := requireNode(t)
	cp := framework.StartControlPlaneT(t)
	startControllers(t, b, cp)
	sock := startContainerd(t, b, cp.Dir)
	startKubelet(t, b, cp, sock, nodeName)
	framework.Eventually(t, 2*time.Minute, "the kubelet registers "+nodeName, framework.NodeMatches(cp.Client, nodeName,
		func(*corev1.Node) (bool, string) { return true, "" }))

	helmInstall(t, b, cp)
	first := readyPod(t, cp, "")
	framework.Eventually(t, 2*time.Minute, nodeName+" initialised by the CCM pod", framework.NodeMatches(cp.Client, nodeName,
		func(n *corev1.Node) (bool, string) {
			return n.Spec.ProviderID == "baremetal://"+nodeName && !framework.HasTaint(n, framework.UninitializedTaint) &&
				n.Labels["multicloud-ccm.io/backend"] == "metal", fmt.Sprintf("providerID %q, taints %v", n.Spec.ProviderID, n.Spec.Taints)
		}))
	web1 := serviceAddress(t, cp, "web-1")
	holder := leaseHolder(t, cp, "")

	// The Deployment brings the CCM back; the new pod takes the lease and
	// goes on: it keeps web-1's address and gives web-2 another one.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cp.Client.CoreV1().Pods(namespace).Delete(ctx, first.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	second := readyPod(t, cp, first.Name)
	leaseHolder(t, cp, holder)
	web2 := serviceAddress(t, cp, "web-2")
	if web2 == web1 {
		t.Errorf("web-2 got %s, which web-1 holds", web2)
	}
	svc, err := cp.Client.CoreV1().Services("default").Get(ctx, "web-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ips := framework.IngressIPs(svc); len(ips) != 1 || ips[0] != web1 {
		t.Errorf("web-1's address changed across the restart: %v, was %s", ips, web1)
	}
	t.Logf("pod %s replaced by %s; web-1 %s, web-2 %s", first.Name, second.Name, web1, web2)
}

// helmInstall installs the chart with the image `make image` built.
func helmInstall(t *testing.T, b nodeBinaries, cp *framework.ControlPlane) {
	t.Helper()
	repo, tag := imageName(t, b.image)
	u, err := url.Parse(cp.URL)
	if err != nil {
		t.Fatal(err)
	}
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	vf := filepath.Join(cp.Dir, "values.yaml")
	write(t, vf, fmt.Sprintf(values, u.Port(), fmt.Sprint(port), repo, tag))
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.helm, "install", release, filepath.Join(root, "charts", "multicloud-ccm"), //nolint:gosec // The test's own helm.
		"--kubeconfig", cp.AdminKubeconfig, "--namespace", namespace, "-f", vf)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
}

// imageName reads the repository and tag of the docker-archive.
func imageName(t *testing.T, path string) (string, string) {
	t.Helper()
	f, err := os.Open(path) //nolint:gosec // The built image.
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("%s has no manifest.json", path)
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name != "manifest.json" {
			continue
		}
		var m []struct{ RepoTags []string }
		b, err := io.ReadAll(tr)
		if err == nil {
			err = json.Unmarshal(b, &m)
		}
		if err != nil || len(m) != 1 || len(m[0].RepoTags) != 1 {
			t.Fatalf("%s: manifest.json %s (%v)", path, b, err)
		}
		i := strings.LastIndex(m[0].RepoTags[0], ":")
		return m[0].RepoTags[0][:i], m[0].RepoTags[0][i+1:]
	}
}

// readyPod waits for a Ready CCM pod other than not, and returns it.
func readyPod(t *testing.T, cp *framework.ControlPlane, not string) corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	framework.Eventually(t, 4*time.Minute, "a Ready CCM pod (not "+not+")", func(ctx context.Context) (bool, string, error) {
		pods, err := cp.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release})
		if err != nil {
			return false, "", nil //nolint:nilerr // Retried; the pods seen last say more.
		}
		var seen []string
		for _, p := range pods.Items {
			seen = append(seen, describePod(p))
			if p.Name != not && p.DeletionTimestamp == nil && podReady(p) {
				pod = p
				return true, "", nil
			}
		}
		return false, strings.Join(seen, "; "), nil
	})
	return pod
}

func podReady(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func describePod(p corev1.Pod) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s node=%q", p.Name, p.Status.Phase, p.Spec.NodeName)
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			fmt.Fprintf(&b, " %s=%s(%s)", c.Type, c.Status, c.Message)
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			fmt.Fprintf(&b, " waiting %s: %s", w.Reason, w.Message)
		}
		if cs.RestartCount > 0 {
			fmt.Fprintf(&b, " restarts=%d", cs.RestartCount)
		}
	}
	return b.String()
}

// serviceAddress creates a LoadBalancer Service and returns the pool
// address it gets.
func serviceAddress(t *testing.T, cp *framework.ControlPlane, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := framework.CreateService(ctx, cp.Client, framework.NewLoadBalancerService("default", name)); err != nil {
		t.Fatal(err)
	}
	prefix := netip.MustParsePrefix(pool)
	var ip string
	framework.Eventually(t, 2*time.Minute, name+" gets an address of the pool", framework.ServiceMatches(cp.Client, "default", name,
		func(s *corev1.Service) (bool, string) {
			ips := framework.IngressIPs(s)
			if len(ips) != 1 {
				return false, "ingress " + strings.Join(ips, ",")
			}
			a, err := netip.ParseAddr(ips[0])
			ip = ips[0]
			return err == nil && prefix.Contains(a), "ingress " + ips[0]
		}))
	return ip
}

// leaseHolder waits until the CCM's lease has a holder other than not, and
// returns it.
func leaseHolder(t *testing.T, cp *framework.ControlPlane, not string) string {
	t.Helper()
	var holder string
	framework.Eventually(t, 2*time.Minute, "the lease held by a CCM other than "+not, func(ctx context.Context) (bool, string, error) {
		l, err := cp.Client.CoordinationV1().Leases(namespace).Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" || *l.Spec.HolderIdentity == not {
			return false, fmt.Sprintf("holder %v", l.Spec.HolderIdentity), nil
		}
		holder = *l.Spec.HolderIdentity
		return true, "", nil
	})
	return holder
}
